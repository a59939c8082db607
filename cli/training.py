"""The commands that train and follow training: train, prepare, average, grow, tune, shortlist, plot."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from types import SimpleNamespace

import typer

from nmt.errors import UsageError
from nmt.training.config import TrainConfig, TrainFlags
from nmt_cli.common import configure_logging, read_yaml
from nmt_cli.train_options import DATA_OPTIONS, PREPARATION_OPTIONS, train_options


@train_options()
def train(
    out: Path = typer.Option(..., "--out", help="Output folder: last.pt, best.pt, config.yaml, metrics.jsonl."),
    config_file: Path = typer.Option(None, "--config", help="YAML file of training options (flags override it)."),
    flags: TrainFlags = None,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Train a Transformer; rerunning the same command resumes from OUT/last.pt."""
    configure_logging(quiet, progress=True)
    from nmt.training.train import train as run_training

    run_training(TrainConfig.merged(str(out), flags, read_yaml(config_file) if config_file else None,
                                    str(config_file)))


@train_options(DATA_OPTIONS + PREPARATION_OPTIONS + ("seed", "prepare_workers", "cache_dir"), overrides={
    "seed": typer.Option(None, "--seed", help="Sentencepiece sample and held-out validation pairs. Default 1."),
    "prepare_workers": typer.Option(None, "--workers", help="Tokenizing processes. Default one per CPU core.")})
def prepare(flags: TrainFlags = None) -> None:
    """Tokenize a training corpus once into a memory-mapped cache that `nmt train` (with the same data options)
    then opens in seconds, on every start, resume and rank. Prints the cache folder."""
    configure_logging(False, progress=True)
    from nmt.data.prepare import prepare_training_data

    spm_model = None
    if flags.spm:
        try:
            spm_model = Path(flags.spm).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read the sentencepiece model {flags.spm}: {exc.strerror}") from None
    # nmt train's options where given, else its defaults: both make one cache
    defaults = {field.name: field.default for field in fields(TrainConfig)}
    options = SimpleNamespace(**{**defaults, **flags.given()})
    typer.echo(str(prepare_training_data(options, spm_model).folder))


def average(
    checkpoints: list[Path] = typer.Argument(..., help="Checkpoints of one model to average."),
    out: Path = typer.Option(..., "--output", "-o", help="Where to write the averaged checkpoint."),
    valid: str = typer.Option(None, "--valid", help="Average the latest k checkpoints for the k (1 to all) with the "
                              "best greedy BLEU on these sets (CORPUS:SPLIT, comma-separated), instead of all."),
    limit: int = typer.Option(None, "--limit", help="With --valid: the first N pairs of each set only."),
    ema: bool = typer.Option(False, "--ema", help="Average the moving averages that `nmt train --ema` kept in the "
                             "checkpoints instead of their weights (one checkpoint: its moving average alone)."),
) -> None:
    """Average the weights of several checkpoints (e.g. OUT/step*.pt of one run)."""
    from nmt.training.averaging import average_checkpoints

    if valid is None:
        average_checkpoints(checkpoints, out, ema)
        typer.echo(f"averaged {len(checkpoints)} checkpoints into {out}")
        return
    configure_logging(False)
    from nmt.model.checkpoint import save_checkpoint
    from nmt.training.tune import choose_average

    pairs = _validation_pairs(valid, limit)
    averaged, table = choose_average(checkpoints, pairs, ema)
    for count, bleu in table:
        typer.echo(f"the latest {count} averaged: greedy BLEU {bleu:.2f} on {valid} ({len(pairs.source)} pairs)")
    save_checkpoint(out, averaged)
    typer.echo(f"averaged the latest {averaged.training['summary']['averaged']} of {len(checkpoints)} checkpoints "
               f"into {out}")


def grow(
    model: Path = typer.Option(..., "--model", "-m", help="The trained checkpoint to grow."),
    out: Path = typer.Option(..., "--output", "-o", help="Where to write the grown checkpoint."),
    encoder_layers: int = typer.Option(None, "--encoder-layers", help="Encoder layers: copies of the trained ones "
                                       "stacked on top (3 -> 6: layers 0, 1, 2, 0, 1, 2)."),
    d_ff: int = typer.Option(None, "--d-ff", help="Feed-forward width: the trained units and new ones that start "
                             "silent (the grown model translates as the trained one does)."),
) -> None:
    """Make a trained model larger to train on with `nmt train --init-from`: a deeper encoder, a wider
    feed-forward layer."""
    from nmt.model.checkpoint import load_checkpoint, save_checkpoint
    from nmt.training.grow import grown_checkpoint

    grown = grown_checkpoint(load_checkpoint(model), encoder_layers, d_ff)
    save_checkpoint(out, grown)
    config = grown.config
    typer.echo(f"grown into {out}: {config.n_encoder_layers}+{config.n_decoder_layers} layers, d_ff {config.d_ff}, "
               f"{sum(t.numel() for t in grown.weights.values()) / 1e6:.2f}M parameters")


def _validation_pairs(valid: str, limit: int | None):
    """The pairs of comma-separated CORPUS:SPLIT sets, the first `limit` of each."""
    from nmt.data.corpus import ParallelText, parse_test_set

    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    pairs = ParallelText([], [])
    for name in valid.split(","):
        each = parse_test_set(name.strip())
        pairs.source.extend(each.source[:limit])
        pairs.target.extend(each.target[:limit])
    return pairs


def tune(
    model: Path = typer.Option(..., "--model", "-m", help="Checkpoint to tune."),
    valid: str = typer.Option("multi30k:valid", "--valid", help="Validation set (CORPUS:SPLIT), or several "
                              "comma-separated, tuned on together (europarl:dev,tatoeba:dev)."),
    beams: str = typer.Option("1,4,5", "--beams", help="Beam sizes to try, comma-separated."),
    lenpens: str = typer.Option("0.6,0.8,1.0,1.2", "--lenpens", help="Length penalties to try."),
    out: Path = typer.Option(..., "--output", "-o", help="Write the checkpoint with the best decoding defaults here."),
    half: bool = typer.Option(False, "--half", help="Store the weights in fp16 (half the size)."),
    limit: int = typer.Option(None, "--limit", help="Tune on the first N pairs of each set only."),
    no_repeat_ngram: int = typer.Option(0, "--no-repeat-ngram", help="Tune with repeated n-grams of N tokens "
                                        "blocked, and store N among the defaults (0: none)."),
    clause_split: int = typer.Option(None, "--clause-split", help="Store N as the model's --clause-split default."),
    protect_names: bool = typer.Option(False, "--protect-names", help="Store --protect-names as the model's default."),
) -> None:
    """Pick beam size and length penalty by validation BLEU and store them in the checkpoint. Each setting is
    decoded as `nmt eval` decodes by default on this machine (its precision; the model's shortlist, so run
    `nmt shortlist` first where the model is to have one)."""
    configure_logging(False)
    from nmt.decoding.configuration import DecodingFlags
    from nmt.model.checkpoint import load_checkpoint
    from nmt.training.tune import tune_decoding, write_release

    try:
        beam_list = [int(b) for b in beams.split(",")]
        lenpen_list = [float(x) for x in lenpens.split(",")]
    except ValueError:
        raise UsageError("--beams and --lenpens take comma-separated numbers") from None
    checkpoint = load_checkpoint(model)
    pairs = _validation_pairs(valid, limit)
    if no_repeat_ngram < 0:
        raise UsageError("--no-repeat-ngram must not be negative")
    if clause_split is not None and clause_split < 1:
        raise UsageError("--clause-split must be at least 1")
    flags = DecodingFlags(no_repeat_ngram=no_repeat_ngram, clause_split=clause_split,
                          protect_names=protect_names or None)
    best, table = tune_decoding(checkpoint, pairs, beam_list, lenpen_list, flags)
    for beam, lenpen, bleu in table:
        typer.echo(f"beam {beam} lenpen {lenpen:.2f}: BLEU {bleu:.2f} on {valid} ({len(pairs.source)} pairs)")
    if half:
        from nmt.training.tune import half_precision_bleu

        full = max(bleu for _, _, bleu in table)  # the best setting's
        rounded = half_precision_bleu(checkpoint, pairs, replace(flags, beam=best["beam_size"], lenpen=best["lenpen"]))
        delta = rounded - full
        typer.echo(f"fp16 weights change BLEU on {valid} by {delta:+.2f}")
    stored = {**best, **({"max_piece_tokens": clause_split} if clause_split else {}),
              **({"protect_names": True} if protect_names else {})}
    write_release(checkpoint, stored, str(out), half)
    typer.echo(f"best on {valid}: beam {best['beam_size']}, lenpen {best['lenpen']}; written to {out}")


def build_shortlist(
    model: Path = typer.Option(..., "--model", "-m", help="Checkpoint to add the shortlist to."),
    out: Path = typer.Option(..., "--output", "-o", help="Where to write the checkpoint with its shortlist."),
    data: str = typer.Option(None, "--data", help="Embedded training corpora, as for nmt train (e.g. "
                             "multi30k,tatoeba)."),
    src_file: str = typer.Option(None, "--src-file", help="English side of a local parallel corpus (.gz ok)."),
    tgt_file: str = typer.Option(None, "--tgt-file", help="French side of a local parallel corpus."),
    prepared: str = typer.Option(None, "--prepared", help="A folder `nmt prepare` made with the model's "
                                 "sentencepiece model: its token ids are counted, nothing is tokenized again; the "
                                 "counts are kept there, for lists of other sizes."),
    per_token: int = typer.Option(300, "--per-token", help="Target tokens each source token adds (those met most "
                                  "often with it, beyond the frequent ones)."),
    frequent: int = typer.Option(3000, "--frequent", help="Most frequent target tokens, which every sentence keeps."),
) -> None:
    """Count which target tokens go with each source token in training pairs, and store the lexical
    shortlist this gives in a checkpoint, for `nmt translate --shortlist`."""
    configure_logging(False)
    import dataclasses

    from nmt.data.sources import DataSpec, parse_names, training_pairs
    from nmt.model.checkpoint import load_checkpoint, save_checkpoint
    from nmt.model.shortlist import count_prepared, shortlist_from_text

    if per_token < 1 or frequent < 0:
        raise UsageError("--per-token must be at least 1 and --frequent not negative")
    checkpoint = load_checkpoint(model)
    if prepared:
        from nmt.data.prepare import TokenCorpus, open_prepared

        if data or src_file or tgt_file:
            raise UsageError("give --prepared or the data options, not both")
        folder = open_prepared(prepared)
        if folder.tokenizer.model_bytes != checkpoint.spm_model:
            raise UsageError(f"{prepared} was tokenized with another sentencepiece model than {model}'s")
        count = len(TokenCorpus(folder.folder))
        shortlist = count_prepared(folder.folder, checkpoint.config.vocab_size).shortlist(per_token, frequent)
    else:
        spec = DataSpec(names=parse_names(data) if data else (), src_file=src_file, tgt_file=tgt_file)
        pairs = training_pairs(spec)
        count = len(pairs)
        shortlist = shortlist_from_text(checkpoint.tokenizer(), pairs.source, pairs.target,
                                        checkpoint.config.vocab_size, per_token, frequent)
    save_checkpoint(out, dataclasses.replace(checkpoint, shortlist=shortlist))
    typer.echo(f"shortlist of {per_token} target tokens per source token and the {frequent} most frequent, from "
               f"{count} pairs, written with the model to {out}")


def plot(
    runs: list[str] = typer.Argument(..., help="`nmt train --out` folders (or their metrics.jsonl files); "
                                     "A,B for a run B that continued A (--init-from), drawn as one line."),
    out: Path = typer.Option(None, "--output", "-o", help="PNG to write. Default the first run's folder/curves.png."),
    x: str = typer.Option("steps", "--x", help="steps, or minutes of training time."),
) -> None:
    """Draw runs' loss and validation BLEU curves to one PNG."""
    from nmt.training.plot import plot_runs

    typer.echo(f"written to {plot_runs(runs, out, x)}")
