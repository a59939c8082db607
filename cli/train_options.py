"""`nmt train`'s options, declared once: a table of name -> (type, typer option), every default None ("not
given"), gathered into one TrainFlags (nmt.training.config) that TrainConfig.merged lays over a --config file and
the defaults. `nmt prepare` takes the data and preparation options of the same table, so that both make the
same cache.

    @train_options(TRAIN_OPTIONS)
    def train(out: Path = ..., flags: TrainFlags = None) -> None:
        config = TrainConfig.merged(str(out), flags)
"""

from __future__ import annotations

from typing import Literal

import typer

from nmt.training.config import TrainFlags
from nmt_cli.options import option_group

# in the order `nmt train --help` lists them
TRAIN_OPTIONS = {
    "data": (str, typer.Option(None, "--data", help="Embedded corpora: multi30k, tatoeba, news-commentary, news, "
        "software-ui, software-ui-extra, python-docs; comma-separated to mix, NAME*K repeats one.")),
    "src_file": (str, typer.Option(None, "--src-file", help="English side of a local parallel corpus (.gz ok); with "
        "--data, added to the embedded corpora.")),
    "tgt_file": (str, typer.Option(None, "--tgt-file", help="French side of a local parallel corpus.")),
    "hf_dataset": (str, typer.Option(None, "--hf-dataset", help="Hub dataset (e.g. wmt/wmt14), save_to_disk folder, "
        "folder of train-*.parquet files as a hub download leaves them, or json/jsonl/parquet files or globs, in the "
        "translation schema.")),
    "hf_config": (str, typer.Option(None, "--hf-config", help="Hub dataset config, e.g. fr-en.")),
    "streaming": (bool, typer.Option(None, "--streaming", help="Read --hf-dataset as a stream while preparing it (no "
        "local Arrow copy of a hub dataset).")),
    "valid_src": (str, typer.Option(None, "--valid-src", help="Validation English file.")),
    "valid_tgt": (str, typer.Option(None, "--valid-tgt", help="Validation French file.")),
    "augment": (bool, typer.Option(None, "--augment/--no-augment", help="Add variants of the training pairs that "
        "teach numbers, links, codes, names, emoji, capitals and long sentences (nmt.data.augment). Default off.")),
    "augment_swap": (float, typer.Option(None, "--augment-swap", help="With --augment: the share of the pairs that "
        "share a name or number with their translation that get a variant with it replaced by an entity. Default 1 "
        "(all); lower on a large corpus, where such pairs are common.")),
    "register_tags": (bool, typer.Option(None, "--register-tags/--no-register-tags", help="Tag each English side "
        "with the register of its French (vous or tu), so that the model learns `nmt translate --formality` "
        "(nmt.data.register). Default off.")),
    "prepared": (str, typer.Option(None, "--prepared", help="A folder `nmt prepare` printed, in place of the data "
        "options: its tokens, sentencepiece model and validation pairs, read offline.")),
    "preset": (Literal["tiny", "small", "base", "big"], typer.Option(None, "--preset", help="Model dimensions. "
        "Default small.")),
    "d_model": (int, typer.Option(None, "--d-model", help="Model width, in place of the preset's.")),
    "n_heads": (int, typer.Option(None, "--heads", help="Attention heads, in place of the preset's.")),
    "d_ff": (int, typer.Option(None, "--d-ff", help="Feed-forward width, in place of the preset's.")),
    "encoder_layers": (int, typer.Option(None, "--encoder-layers", help="Encoder layers, in place of the preset's.")),
    "decoder_layers": (int, typer.Option(None, "--decoder-layers", help="Decoder layers, in place of the preset's "
        "(decoding time grows with them; the encoder runs once a sentence).")),
    "pre_norm": (bool, typer.Option(None, "--pre-norm/--post-norm", help="LayerNorm placement. Default post-norm.")),
    "dropout": (float, typer.Option(None, "--dropout", help="Default 0.1.")),
    "vocab_size": (int, typer.Option(None, "--vocab-size", help="Sentencepiece pieces. Default 8000.")),
    "spm": (str, typer.Option(None, "--spm", help="Use this sentencepiece model instead of training one.")),
    "spm_sample": (int, typer.Option(None, "--spm-sample", help="Sentences sentencepiece trains on, sampled "
        "uniformly from the whole corpus. Default 1000000.")),
    "prepare_workers": (int, typer.Option(None, "--prepare-workers", help="Processes that tokenize the corpus (once: "
        "see `nmt prepare`). Default one per CPU core.")),
    "cache_dir": (str, typer.Option(None, "--cache-dir", help="Prepared corpora. Default $NMT_CACHE_DIR, else "
        "~/.cache/nmt/prepared.")),
    "max_len": (int, typer.Option(None, "--max-len", help="Drop pairs with a side longer than this many tokens. "
        "Default 250.")),
    "max_ratio": (float, typer.Option(None, "--max-ratio", help="Drop pairs whose longer side is over this many "
        "times the shorter (+5 tokens). Default 3.")),
    "max_positions": (int, typer.Option(None, "--max-positions", help="Longest sequence the model's positions cover. "
        "Default 512.")),
    "max_tokens": (int, typer.Option(None, "--max-tokens", help="Padded tokens per batch. Default 4096.")),
    "update_freq": (int, typer.Option(None, "--update-freq", help="Batches accumulated per update on each rank. "
        "Default 1.")),
    "tokens_per_update": (int, typer.Option(None, "--tokens-per-update", help="Padded tokens an update takes over "
        "all ranks, counted on a pair's longer side as --max-tokens is (the paper: about 25,000 source and 25,000 "
        "target tokens): sets --update-freq from the number of ranks and --max-tokens; refused where no whole number "
        "of batches comes within 25% of it.")),
    "lr": (float, typer.Option(None, "--lr", help="Peak learning rate. Default the paper's (d_model * warmup)^-0.5 "
        "(7.0e-4 for base at warmup 4000). Stored in the run: a resume keeps it.")),
    "warmup": (int, typer.Option(None, "--warmup", help="Warmup steps. Default a tenth of the planned steps, at most "
        "4000. Stored in the run: a resume keeps it.")),
    "decay": (Literal["inverse-sqrt", "linear"], typer.Option(None, "--decay", help="After warmup: inverse-sqrt (the "
        "paper's) or linear (to zero at --max-steps or --max-epochs' end). Default inverse-sqrt. Stored in the run.")),
    "reset_schedule": (bool, typer.Option(False, "--reset-schedule", help="On resume, take --lr, --warmup and "
        "--decay as given instead of the run's own.")),
    "label_smoothing": (float, typer.Option(None, "--label-smoothing", help="Default 0.1.")),
    "clip_norm": (float, typer.Option(None, "--clip-norm", help="Gradient norm clip, 0 = off. Default 1.0.")),
    "precision": (Literal["fp32", "bf16", "fp16", "auto"], typer.Option(None, "--precision", help="fp32, bf16 "
        "(CPU/GPU), fp16 (CUDA) or auto (bf16 where the CPU or GPU computes in it, else fp32 on a CPU, fp16 on "
        "CUDA). Default auto on CUDA, fp32 on a CPU.")),
    "max_steps": (int, typer.Option(None, "--max-steps", help="Stop after this many updates.")),
    "max_epochs": (int, typer.Option(None, "--max-epochs", help="Stop after this many epochs.")),
    "max_minutes": (float, typer.Option(None, "--max-minutes", help="Stop after this much training time.")),
    "valid_every": (int, typer.Option(None, "--valid-every", help="Validate and save every N steps. Default 1000.")),
    "save_every": (int, typer.Option(None, "--save-every", help="Also write last.pt (to resume from) every N steps.")),
    "checkpoint_every": (int, typer.Option(None, "--checkpoint-every", help="Also write stepN.pt (the --keep-last "
        "kept, for nmt average) every N steps, as the paper averages checkpoints written at a fixed interval. "
        "Default: at validations only.")),
    "patience": (int, typer.Option(None, "--patience", help="Stop after N validations without a better BLEU.")),
    "valid_bleu_lines": (int, typer.Option(None, "--valid-bleu-lines", help="Validate on the first N validation "
        "pairs only. Default all.")),
    "keep_last": (int, typer.Option(None, "--keep-last", help="step*.pt checkpoints kept for averaging. Default 5.")),
    "seed": (int, typer.Option(None, "--seed", help="Default 1.")),
    "threads": (int, typer.Option(None, "--threads", help="CPU threads.")),
    "dist_timeout": (float, typer.Option(None, "--dist-timeout", help="Minutes a rank waits for the others at a "
        "collective (their validation and checkpoints). Default 30.")),
    "join_timeout": (float, typer.Option(None, "--join-timeout", help="Minutes a rank waits for the others to join "
        "(their data preparation, on a machine with a cold cache). Default 360.")),
    "dist_backend": (Literal["nccl", "gloo"], typer.Option(None, "--dist-backend", help="How the ranks of torchrun "
        "talk: nccl (default on CUDA, a GPU per process) or gloo (the default on CPUs; on CUDA it lets ranks share a "
        "GPU).")),
    "init_from": (str, typer.Option(None, "--init-from", help="Start from this checkpoint's weights (fine-tuning).")),
    "compile": (bool, typer.Option(None, "--compile/--no-compile", help="The encoder and decoder through "
        "torch.compile: fused kernels, a minute or more of compiling at start. Default off.")),
    "static_shapes": (bool, typer.Option(None, "--static-shapes/--no-static-shapes", help="Pad every batch to one of "
        "a few shapes (lengths in buckets, rows to --max-tokens); with --compile on CUDA the step is replayed from "
        "CUDA graphs, one a shape. Default off.")),
    "ema": (float, typer.Option(None, "--ema", help="Keep a moving average of the weights with this decay (0.9999, "
        "say): validation scores it and every checkpoint holds it (`nmt average --ema`).")),
    "log_every": (int, typer.Option(None, "--log-every", help="Progress line every N steps. Default 100.")),
}

# Where training pairs come from, and how they are tokenized: what makes a prepared cache (`nmt prepare`)
DATA_OPTIONS = ("data", "src_file", "tgt_file", "hf_dataset", "hf_config", "streaming", "valid_src", "valid_tgt",
                "augment", "augment_swap", "register_tags")
PREPARATION_OPTIONS = ("vocab_size", "spm", "spm_sample", "max_len", "max_ratio")


def train_options(names=tuple(TRAIN_OPTIONS), overrides: dict | None = None):
    """Give a command these options of TRAIN_OPTIONS (`overrides`: name -> typer option, the same field under
    another flag or help) as `flags: TrainFlags`, in place of its `flags` parameter."""
    table = {name: (TRAIN_OPTIONS[name][0], (overrides or {}).get(name, TRAIN_OPTIONS[name][1])) for name in names}
    return option_group("flags", table, TrainFlags)
