"""`nmt`: each command parses its options and calls one library function.

Results go to stdout, progress and warnings to stderr. `main()` is the one place where known errors
become a one-line `error: ...` and an exit code: 2 for bad usage or input, 1 for runtime failures.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click
import typer

from nmt import __version__
from nmt.errors import NmtError, UsageError

app = typer.Typer(
    help="English-to-French neural machine translation with the Transformer.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

LENPEN_HELP = "Length penalty: hypotheses are ranked by log_prob / length**lenpen, length counting EOS."


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nmt {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """English-to-French neural machine translation with the Transformer."""


def find_model(model: Path | None) -> Path:
    """--model, then $NMT_MODEL, then the shipped model."""
    if model is not None:
        return model
    if os.environ.get("NMT_MODEL"):
        return Path(os.environ["NMT_MODEL"])
    from nmt.corpus import data_dir

    shipped = data_dir() / "models" / "en-fr.pt"
    if shipped.is_file():
        return shipped
    raise UsageError("no model: pass --model PATH or set NMT_MODEL (no shipped model is installed)")


def search_options(checkpoint, beam, lenpen, max_len_a, max_len_b, min_len, nbest, no_cache):
    """Command-line decoding options over the checkpoint's tuned defaults over the library's."""
    from nmt.search import SearchOptions

    given = dict(beam_size=beam, lenpen=lenpen, max_len_a=max_len_a, max_len_b=max_len_b, min_len=min_len)
    stored = {key: value for key, value in checkpoint.decoding.items() if key in given}
    chosen = {**stored, **{key: value for key, value in given.items() if value is not None}}
    try:
        return SearchOptions(**chosen, nbest=nbest, use_cache=not no_cache)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


@app.command()
def translate(
    model: Path = typer.Option(None, "--model", "-m", help="Checkpoint; default $NMT_MODEL, then the shipped model."),
    input: Path = typer.Option(None, "--input", "-i", help="Read this file instead of stdin."),
    output: Path = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
    beam: int = typer.Option(None, "--beam", "-b", help="Beam size, 1 = greedy. Default: the model's, else 4."),
    nbest: int = typer.Option(1, "--nbest", help="Hypotheses per line (with --format jsonl only)."),
    lenpen: float = typer.Option(None, "--lenpen", help=LENPEN_HELP + " Default: the model's, else 1.0."),
    max_len_a: float = typer.Option(None, "--max-len-a", help="Target length cap: a * source + b tokens. Default 1.5."),
    max_len_b: int = typer.Option(None, "--max-len-b", help="See --max-len-a. Default 10."),
    min_len: int = typer.Option(None, "--min-len", help="Fewest target tokens before EOS. Default 0."),
    max_tokens: int = typer.Option(4096, "--max-tokens", help="Batch by this many padded source tokens."),
    batch_size: int = typer.Option(None, "--batch-size", help="Batch by sentence count instead of --max-tokens."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    threads: int = typer.Option(None, "--threads", help="CPU threads for torch."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Recompute the decoder prefix every step (slow; checks)."),
    output_format: str = typer.Option("text", "--format", help="text (one line per input) or jsonl."),
    interactive: bool = typer.Option(False, "--interactive", help="Answer each line as soon as it is read."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or warnings on stderr."),
) -> None:
    """Translate English lines from stdin (or --input) to French on stdout, one line per line."""
    if output_format not in ("text", "jsonl"):
        raise UsageError(f"--format must be text or jsonl, not {output_format!r}")
    if nbest > 1 and output_format != "jsonl":
        raise UsageError("--nbest above 1 needs --format jsonl (the text format keeps one line per input)")
    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--device must be auto, cpu or cuda, not {device!r}")
    _configure_logging(quiet)
    import torch

    from nmt.checkpoint import load_checkpoint
    from nmt.translate import Translator, resolve_device, translate_stream

    if threads:
        torch.set_num_threads(threads)
    checkpoint = load_checkpoint(find_model(model))
    options = search_options(checkpoint, beam, lenpen, max_len_a, max_len_b, min_len, nbest, no_cache)
    translator = Translator(checkpoint, options, resolve_device(device), max_tokens, batch_size)
    source = _open_input(input)
    sink = open(output, "w", encoding="utf-8") if output else sys.stdout
    window = 1 if interactive or (input is None and sys.stdin.isatty()) else 1000
    try:
        translate_stream(translator, source, sink, window=window, as_json=output_format == "jsonl", quiet=quiet)
    finally:
        if output:
            sink.close()


@app.command()
def info(checkpoint_path: Path = typer.Argument(..., metavar="CHECKPOINT", help="A checkpoint file.")) -> None:
    """Show a checkpoint's model config, vocabulary, parameter count and training summary."""
    from nmt.checkpoint import load_checkpoint

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


def _open_input(path: Path | None):
    if path is None:
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _configure_logging(quiet: bool) -> None:
    logging.basicConfig(level=logging.ERROR if quiet else logging.INFO, format="%(levelname)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("nmt").setLevel(logging.ERROR if quiet else logging.INFO)


def main() -> None:
    try:
        app(standalone_mode=False)
    except NmtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`nmt translate | head -1`): end quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


if __name__ == "__main__":
    main()
