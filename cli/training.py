"""The commands that train and follow training: train, prepare, average, tune, shortlist, plot."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Literal

import typer

from nmt.errors import UsageError
from nmt_cli.common import configure_logging, read_yaml

# Where training pairs come from: `nmt train` and `nmt prepare` take the same options (the same data, the same
# prepared cache).
DATA_OPTIONS = {
    "data": typer.Option(None, "--data", help="Embedded corpora: multi30k, tatoeba, news-commentary, news, "
                         "software-ui, software-ui-extra, python-docs; comma-separated to mix, NAME*K repeats one."),
    "src_file": typer.Option(None, "--src-file", help="English side of a local parallel corpus (.gz ok); with "
                             "--data, added to the embedded corpora."),
    "tgt_file": typer.Option(None, "--tgt-file", help="French side of a local parallel corpus."),
    "hf_dataset": typer.Option(None, "--hf-dataset", help="Hub dataset (e.g. wmt/wmt14), save_to_disk folder, "
                               "folder of train-*.parquet files as a hub download leaves them, or json/jsonl/parquet "
                               "files or globs, in the translation schema."),
    "hf_config": typer.Option(None, "--hf-config", help="Hub dataset config, e.g. fr-en."),
    "streaming": typer.Option(None, "--streaming", help="Read --hf-dataset as a stream while preparing it (no "
                              "local Arrow copy of a hub dataset)."),
    "valid_src": typer.Option(None, "--valid-src", help="Validation English file."),
    "valid_tgt": typer.Option(None, "--valid-tgt", help="Validation French file."),
    "augment": typer.Option(None, "--augment/--no-augment", help="Add variants of the training pairs that teach "
                            "numbers, links, codes, names, emoji, capitals and long sentences (nmt.data.augment). "
                            "Default off."),
    "augment_swap": typer.Option(None, "--augment-swap", help="With --augment: the share of the pairs that share a "
                                 "name or number with their translation that get a variant with it replaced by an "
                                 "entity. Default 1 (all); lower on a large corpus, where such pairs are common."),
    "register_tags": typer.Option(None, "--register-tags/--no-register-tags", help="Tag each English side with the "
                                  "register of its French (vous or tu), so that the model learns `nmt translate "
                                  "--formality` (nmt.data.register). Default off."),
}


# How `nmt prepare` and `nmt train` tokenize a corpus, declared once so that both make the same cache; None
# where not given: nmt.training.config.TrainConfig's defaults apply to both
PREPARATION_OPTIONS = {
    "vocab_size": typer.Option(None, "--vocab-size", help="Sentencepiece pieces. Default 8000."),
    "spm": typer.Option(None, "--spm", help="Use this sentencepiece model instead of training one."),
    "spm_sample": typer.Option(None, "--spm-sample", help="Sentences sentencepiece trains on, sampled uniformly "
                               "from the whole corpus. Default 1000000."),
    "max_len": typer.Option(None, "--max-len", help="Drop pairs with a side longer than this many tokens. "
                            "Default 250."),
    "max_ratio": typer.Option(None, "--max-ratio", help="Drop pairs whose longer side is over this many times "
                              "the shorter (+5 tokens). Default 3."),
    "cache_dir": typer.Option(None, "--cache-dir", help="Prepared corpora. Default $NMT_CACHE_DIR, else "
                              "~/.cache/nmt/prepared."),
}


def train(
    context: typer.Context,
    out: Path = typer.Option(..., "--out", help="Output folder: last.pt, best.pt, config.yaml, metrics.jsonl."),
    config_file: Path = typer.Option(None, "--config", help="YAML file of training options (flags override it)."),
    data: str = DATA_OPTIONS["data"],
    src_file: str = DATA_OPTIONS["src_file"],
    tgt_file: str = DATA_OPTIONS["tgt_file"],
    hf_dataset: str = DATA_OPTIONS["hf_dataset"],
    hf_config: str = DATA_OPTIONS["hf_config"],
    streaming: bool = DATA_OPTIONS["streaming"],
    valid_src: str = DATA_OPTIONS["valid_src"],
    valid_tgt: str = DATA_OPTIONS["valid_tgt"],
    augment: bool = DATA_OPTIONS["augment"],
    augment_swap: float = DATA_OPTIONS["augment_swap"],
    register_tags: bool = DATA_OPTIONS["register_tags"],
    prepared: str = typer.Option(None, "--prepared", help="A folder `nmt prepare` printed, in place of the data "
                                 "options: its tokens, sentencepiece model and validation pairs, read offline."),
    preset: Literal["tiny", "small", "base", "big"] = typer.Option(None, "--preset",
                               help="Model dimensions. Default small."),
    d_model: int = typer.Option(None, "--d-model", help="Model width, in place of the preset's."),
    n_heads: int = typer.Option(None, "--heads", help="Attention heads, in place of the preset's."),
    d_ff: int = typer.Option(None, "--d-ff", help="Feed-forward width, in place of the preset's."),
    encoder_layers: int = typer.Option(None, "--encoder-layers", help="Encoder layers, in place of the preset's."),
    decoder_layers: int = typer.Option(None, "--decoder-layers", help="Decoder layers, in place of the preset's "
                                       "(decoding time grows with them; the encoder runs once a sentence)."),
    pre_norm: bool = typer.Option(None, "--pre-norm/--post-norm", help="LayerNorm placement. Default post-norm."),
    dropout: float = typer.Option(None, "--dropout", help="Default 0.1."),
    vocab_size: int = PREPARATION_OPTIONS["vocab_size"],
    spm: str = PREPARATION_OPTIONS["spm"],
    spm_sample: int = PREPARATION_OPTIONS["spm_sample"],
    prepare_workers: int = typer.Option(None, "--prepare-workers", help="Processes that tokenize the corpus "
                                        "(once: see `nmt prepare`). Default one per CPU core."),
    cache_dir: str = PREPARATION_OPTIONS["cache_dir"],
    max_len: int = PREPARATION_OPTIONS["max_len"],
    max_ratio: float = PREPARATION_OPTIONS["max_ratio"],
    max_positions: int = typer.Option(None, "--max-positions", help="Longest sequence the model's positions cover. "
                                      "Default 512."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Padded tokens per batch. Default 4096."),
    update_freq: int = typer.Option(None, "--update-freq", help="Batches accumulated per update on each rank. "
                                    "Default 1."),
    tokens_per_update: int = typer.Option(None, "--tokens-per-update", help="Padded tokens an update takes over "
                                          "all ranks, counted on a pair's longer side as --max-tokens is (the "
                                          "paper: about 25,000 source and 25,000 target tokens): sets --update-freq "
                                          "from the number of ranks and --max-tokens; refused where no whole "
                                          "number of batches comes within 25% of it."),
    lr: float = typer.Option(None, "--lr", help="Peak learning rate. Default the paper's (d_model * warmup)^-0.5 "
                             "(7.0e-4 for base at warmup 4000). Stored in the run: a resume keeps it."),
    warmup: int = typer.Option(None, "--warmup", help="Warmup steps. Default a tenth of the planned steps, at most "
                               "4000. Stored in the run: a resume keeps it."),
    decay: Literal["inverse-sqrt", "linear"] = typer.Option(None, "--decay",
                              help="After warmup: inverse-sqrt (the paper's) or linear (to zero at "
                              "--max-steps or --max-epochs' end). Default inverse-sqrt. Stored in the run."),
    reset_schedule: bool = typer.Option(False, "--reset-schedule", help="On resume, take --lr, --warmup and --decay "
                                        "as given instead of the run's own."),
    label_smoothing: float = typer.Option(None, "--label-smoothing", help="Default 0.1."),
    clip_norm: float = typer.Option(None, "--clip-norm", help="Gradient norm clip, 0 = off. Default 1.0."),
    precision: Literal["fp32", "bf16", "fp16", "auto"] = typer.Option(None, "--precision",
                                  help="fp32, bf16 (CPU/GPU), fp16 (CUDA) or auto (bf16 where "
                             "the CPU or GPU computes in it, else fp32 on a CPU, fp16 on CUDA). Default auto on CUDA, "
                             "fp32 on a CPU."),
    max_steps: int = typer.Option(None, "--max-steps", help="Stop after this many updates."),
    max_epochs: int = typer.Option(None, "--max-epochs", help="Stop after this many epochs."),
    max_minutes: float = typer.Option(None, "--max-minutes", help="Stop after this much training time."),
    valid_every: int = typer.Option(None, "--valid-every", help="Validate and save every N steps. Default 1000."),
    save_every: int = typer.Option(None, "--save-every", help="Also write last.pt (to resume from) every N steps."),
    checkpoint_every: int = typer.Option(None, "--checkpoint-every", help="Also write stepN.pt (the --keep-last "
                                         "kept, for nmt average) every N steps, as the paper averages checkpoints "
                                         "written at a fixed interval. Default: at validations only."),
    patience: int = typer.Option(None, "--patience", help="Stop after N validations without a better BLEU."),
    valid_bleu_lines: int = typer.Option(None, "--valid-bleu-lines", help="Validate on the first N validation pairs "
                                         "only. Default all."),
    keep_last: int = typer.Option(None, "--keep-last", help="step*.pt checkpoints kept for averaging. Default 5."),
    seed: int = typer.Option(None, "--seed", help="Default 1."),
    threads: int = typer.Option(None, "--threads", help="CPU threads."),
    dist_timeout: float = typer.Option(None, "--dist-timeout", help="Minutes a rank waits for the others at a "
                                       "collective (their validation and checkpoints). Default 30."),
    join_timeout: float = typer.Option(None, "--join-timeout", help="Minutes a rank waits for the others to join "
                                       "(their data preparation, on a machine with a cold cache). Default 360."),
    dist_backend: Literal["nccl", "gloo"] = typer.Option(None, "--dist-backend", help="How the ranks of torchrun "
                                                         "talk: nccl (default on CUDA, a GPU per process) or gloo "
                                                         "(the default on CPUs; on CUDA it lets ranks share a GPU)."),
    init_from: str = typer.Option(None, "--init-from", help="Start from this checkpoint's weights (fine-tuning)."),
    compile: bool = typer.Option(None, "--compile/--no-compile", help="The encoder and decoder through "
                                 "torch.compile: fused kernels, a minute or more of compiling at start. Default off."),
    ema: float = typer.Option(None, "--ema", help="Keep a moving average of the weights with this decay (0.9999, "
                              "say): validation scores it and every checkpoint holds it (`nmt average --ema`)."),
    log_every: int = typer.Option(None, "--log-every", help="Progress line every N steps. Default 100."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors on stderr."),
) -> None:
    """Train a Transformer; rerunning the same command resumes from OUT/last.pt."""
    configure_logging(quiet, progress=True)
    from nmt.training.config import TrainConfig
    from nmt.training.train import train as run_training

    flags = {name: value for name, value in context.params.items() if name not in ("config_file", "quiet", "out")}
    run_training(TrainConfig.merged(str(out), flags, read_yaml(config_file) if config_file else None,
                                    str(config_file)))


def prepare(
    data: str = DATA_OPTIONS["data"],
    src_file: str = DATA_OPTIONS["src_file"],
    tgt_file: str = DATA_OPTIONS["tgt_file"],
    hf_dataset: str = DATA_OPTIONS["hf_dataset"],
    hf_config: str = DATA_OPTIONS["hf_config"],
    streaming: bool = DATA_OPTIONS["streaming"],
    valid_src: str = DATA_OPTIONS["valid_src"],
    valid_tgt: str = DATA_OPTIONS["valid_tgt"],
    augment: bool = DATA_OPTIONS["augment"],
    augment_swap: float = DATA_OPTIONS["augment_swap"],
    register_tags: bool = DATA_OPTIONS["register_tags"],
    vocab_size: int = PREPARATION_OPTIONS["vocab_size"],
    spm: str = PREPARATION_OPTIONS["spm"],
    spm_sample: int = PREPARATION_OPTIONS["spm_sample"],
    max_len: int = PREPARATION_OPTIONS["max_len"],
    max_ratio: float = PREPARATION_OPTIONS["max_ratio"],
    seed: int = typer.Option(None, "--seed", help="Sentencepiece sample and held-out validation pairs. Default 1."),
    workers: int = typer.Option(None, "--workers", help="Tokenizing processes. Default one per CPU core."),
    cache_dir: str = PREPARATION_OPTIONS["cache_dir"],
) -> None:
    """Tokenize a training corpus once into a memory-mapped cache that `nmt train` (with the same data options)
    then opens in seconds, on every start, resume and rank. Prints the cache folder."""
    configure_logging(False, progress=True)
    from nmt.data.prepare import prepare_training_data

    spm_model = None
    if spm:
        try:
            spm_model = Path(spm).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read the sentencepiece model {spm}: {exc.strerror}") from None
    from nmt.training.config import TrainConfig

    # the names of `nmt train`'s options (TrainConfig) and, where not given, its defaults: both make one cache
    given = dict(data=data, src_file=src_file, tgt_file=tgt_file, hf_dataset=hf_dataset, hf_config=hf_config,
                 streaming=streaming, valid_src=valid_src, valid_tgt=valid_tgt, augment=augment,
                 augment_swap=augment_swap, register_tags=register_tags, seed=seed, vocab_size=vocab_size,
                 spm_sample=spm_sample, max_len=max_len, max_ratio=max_ratio, prepare_workers=workers,
                 cache_dir=cache_dir)
    defaults = {field.name: field.default for field in fields(TrainConfig)}
    options = SimpleNamespace(**{name: defaults[name] if value is None else value for name, value in given.items()})
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
