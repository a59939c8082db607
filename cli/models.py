"""The commands about models: models, info, export."""

from __future__ import annotations

from pathlib import Path

import typer

from nmt.errors import UsageError
from nmt_cli.common import MODEL_HELP, find_model


def models() -> None:
    """List the shipped models: name, domain, size and scores; the default is marked *."""
    from nmt.apps.shipped import default_model_name, shipped_models

    listed = shipped_models()
    if not listed:
        typer.echo("no shipped models are installed: train one (`make model-general`) and pass --model PATH")
        return
    default = default_model_name()
    for name, entry in listed.items():
        size = f"{entry['path'].stat().st_size / 2**20:.0f} MB" if entry["installed"] else "not installed"
        typer.echo(f"{'*' if name == default else ' '} {name}: {entry['domain']} ({entry['file']}, {size})")
        scores = ", ".join(f"{test} {bleu}" for test, bleu in entry.get("bleu", {}).items())
        if scores:
            typer.echo(f"    BLEU: {scores}")


def info(checkpoint_path: Path = typer.Argument(None, metavar="[CHECKPOINT]", help="A checkpoint file, or a "
                                                 "shipped model's name (`nmt models`); default the default model.")
         ) -> None:
    """Show a checkpoint's model config, vocabulary, parameter count and training summary."""
    from nmt.model.checkpoint import load_checkpoint

    checkpoint_path = find_model(checkpoint_path)
    checkpoint = load_checkpoint(checkpoint_path)
    n_parameters = sum(t.numel() for name, t in checkpoint.weights.items())
    typer.echo(f"checkpoint: {checkpoint_path}")
    typer.echo(f"parameters: {n_parameters:,}")
    typer.echo(f"vocabulary: {checkpoint.tokenizer().vocab_size} sentencepiece pieces")
    typer.echo("model config:")
    for key, value in checkpoint.config.to_dict().items():
        typer.echo(f"  {key}: {value}")
    if checkpoint.decoding:
        typer.echo("decoding defaults: " + ", ".join(f"{k}={v}" for k, v in checkpoint.decoding.items()))
    summary = checkpoint.training.get("summary", {})
    if summary:
        typer.echo("training: " + ", ".join(f"{k}={v}" for k, v in summary.items()))


def export(
    model: Path = typer.Option(None, "--model", "-m", help=MODEL_HELP),
    output_format: str = typer.Option("ctranslate2", "--format", help="ctranslate2 (the only one so far)."),
    out: Path = typer.Option(..., "--out", help="Model directory to write."),
    quantization: str = typer.Option(None, "--quantization", help="CTranslate2 weight type, e.g. int8, float16."),
) -> None:
    """Export a model to CTranslate2 (with its sentencepiece model beside it)."""
    from nmt.apps.export import export_ctranslate2
    from nmt.model.checkpoint import load_checkpoint

    if output_format != "ctranslate2":
        raise UsageError(f"--format must be ctranslate2, not {output_format!r}")
    written = export_ctranslate2(load_checkpoint(find_model(model)), out, quantization)
    typer.echo(f"CTranslate2 model written to {written}")
