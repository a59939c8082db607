"""What a training run is: its configuration (TrainConfig, as `nmt train` and YAML give it; TrainFlags, the
options given), the accumulation it resolves to, and the model's shape. No torch here: `nmt`'s commands read
the option table at start."""


from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

from nmt.errors import UsageError
from nmt.model.config import PRESETS, ModelConfig
from nmt.training.schedule import DECAYS

log = logging.getLogger("nmt")


@dataclass(frozen=True)
class TrainConfig:
    out: str
    data: str | None = None  # embedded corpora, comma-separated; "tatoeba*2" repeats one
    src_file: str | None = None
    tgt_file: str | None = None
    hf_dataset: str | None = None
    hf_config: str | None = None
    prepared: str | None = None  # a folder `nmt prepare` made, in place of the data options: offline
    streaming: bool = False
    augment: bool = False  # nmt.data.augment's variants of the training pairs
    augment_swap: float | None = None  # the share of pairs with a shared name or number given a swapped variant
    register_tags: bool = False  # the English sides tagged with the register of the French (--formality)
    valid_src: str | None = None
    valid_tgt: str | None = None
    preset: str = "small"
    # The preset's dimensions, each replaced where given (a deep encoder and a shallow decoder, say)
    d_model: int | None = None
    n_heads: int | None = None
    d_ff: int | None = None
    encoder_layers: int | None = None
    decoder_layers: int | None = None
    pre_norm: bool = False
    dropout: float = 0.1
    max_positions: int = 512
    vocab_size: int = 8000
    spm: str | None = None
    spm_sample: int = 1_000_000  # sentences sentencepiece trains on, sampled from the whole corpus
    prepare_workers: int | None = None  # processes that tokenize the corpus; default one per core
    cache_dir: str | None = None  # where prepared corpora go; default $NMT_CACHE_DIR, ~/.cache/nmt/prepared
    max_tokens: int = 4096
    update_freq: int | None = None  # batches accumulated per update on each rank; default 1
    tokens_per_update: int | None = None  # padded tokens an update takes over all ranks: sets update_freq
    lr: float | None = None  # peak; default the paper's (d_model * warmup) ** -0.5 (7.0e-4 for base)
    warmup: int | None = None  # default: a tenth of the planned steps, at most 4000
    decay: str | None = None  # after warmup: "inverse-sqrt" (the paper's, the default) or "linear" to zero
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    precision: str | None = None  # default: bf16 on CUDA (fp16 where it lacks bf16), fp32 on a CPU
    max_steps: int | None = None
    max_epochs: int | None = None
    max_minutes: float | None = None
    valid_every: int = 1000
    save_every: int | None = None  # last.pt every N steps, besides at each validation
    checkpoint_every: int | None = None  # step*.pt (for averaging) every N steps too, not only at validations
    reset_schedule: bool = False  # on resume, take --lr and --warmup as given instead of the stored ones
    valid_bleu_lines: int | None = None  # validate on the first N pairs only
    patience: int = 0  # validations without a better BLEU before stopping; 0: never
    keep_last: int = 5
    seed: int = 1
    threads: int | None = None
    dist_timeout: float = 30  # minutes a collective waits for the other ranks
    dist_backend: str | None = None  # default: nccl on CUDA, gloo on a CPU
    join_timeout: float = 360  # minutes a rank waits for the others to join (a cold node-local cache)
    init_from: str | None = None
    ema: float | None = None  # decay of a moving average of the weights, validated and saved beside them
    compile: bool = False  # the encoder and decoder through torch.compile (nmt.model.loss.TranslationLoss)
    static_shapes: bool = False  # batches of a few shapes (nmt.data.batching.static_collate); compiled on CUDA,
    # the step is captured in CUDA graphs
    max_len: int = 250  # filter: subword tokens per side
    max_ratio: float = 3.0
    log_every: int = 100

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise UsageError(f"unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}")
        if self.decay is not None and self.decay not in DECAYS:
            raise UsageError(f"--decay must be {' or '.join(DECAYS)}, not {self.decay!r}")
        if self.decay == "linear" and not (self.max_steps or self.max_epochs or self.max_minutes):
            raise UsageError("--decay linear needs --max-steps, --max-epochs or --max-minutes: where the rate "
                             "reaches zero")
        if self.prepared and (self.data or self.src_file or self.tgt_file or self.hf_dataset or self.augment
                              or self.register_tags):
            raise UsageError("--prepared is a whole training input: give it without --data, --src-file/--tgt-file, "
                             "--hf-dataset, --augment or --register-tags (those made the folder)")
        if self.dist_backend not in (None, "nccl", "gloo"):
            raise UsageError(f"--dist-backend must be nccl or gloo, not {self.dist_backend!r}")
        if self.precision not in (None, "fp32", "bf16", "fp16", "auto"):
            raise UsageError(f"--precision must be fp32, bf16, fp16 or auto, not {self.precision!r}")
        if not (self.max_steps or self.max_epochs or self.max_minutes):
            raise UsageError("give a budget: --max-steps, --max-epochs or --max-minutes")
        if self.update_freq is not None and self.tokens_per_update is not None:
            raise UsageError("give --update-freq or --tokens-per-update, not both: the second sets the first")
        for name in ("valid_every", "update_freq", "tokens_per_update", "max_tokens", "log_every", "save_every",
                     "checkpoint_every", "warmup", "max_len",
                     "d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise UsageError(f"--{name.replace('_', '-')} must be a whole number of at least 1, not {value!r}")
        for name in ("dist_timeout", "join_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise UsageError(f"--{name.replace('_', '-')} must be a positive number of minutes, not {value!r}")
        if self.ema is not None and (not isinstance(self.ema, int | float) or isinstance(self.ema, bool)
                                     or not 0 < self.ema < 1):
            raise UsageError(f"--ema must be a decay between 0 and 1 (0.9999, say), not {self.ema!r}")
        for name in ("lr", "dropout", "label_smoothing", "clip_norm", "max_ratio"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value < 0
                                      or (name == "lr" and value == 0)):
                kind = "positive" if name == "lr" else "non-negative"
                raise UsageError(f"--{name.replace('_', '-')} must be a {kind} number, not {value!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def merged(cls, out: str, flags: TrainFlags, file_values: dict | None = None, file_name: str = "the config file"
               ) -> TrainConfig:
        """The run's configuration from the flags given (`nmt train`'s) over a YAML file's values (`--config`) over
        the defaults. A --prepared folder replaces the data options the file gives (they made it); a number YAML
        1.1 read as a string ("1e-3") is read as a number; an option TrainConfig does not have is a UsageError
        naming the file."""
        given = flags.given()
        values = dict(file_values or {})
        if "prepared" in given:
            for name in PREPARED_REPLACES:
                values.pop(name, None)
        values.update(given)
        known = cls.__dataclass_fields__
        unknown = set(values) - set(known)
        if unknown:
            raise UsageError(f"unknown training options in {file_name}: {', '.join(sorted(unknown))}")
        for name, value in values.items():
            if isinstance(value, str) and "float" in str(known[name].type):
                try:
                    values[name] = float(value)
                except ValueError:
                    raise UsageError(f"{name} in {file_name} must be a number, not {value!r}") from None
        return cls(**{**values, "out": str(out)})


def _given(flags) -> dict:
    """The flags given, by name (those not None)."""
    return {field.name: getattr(flags, field.name) for field in dataclasses.fields(flags)
            if getattr(flags, field.name) is not None}


# `nmt train`'s options as given on the command line: TrainConfig's fields but `out`, each None where not given
# (then a --config file's value, else TrainConfig's default, applies): TrainFlags(max_steps=5).given()
TrainFlags = dataclasses.make_dataclass(
    "TrainFlags", [(field.name, f"{field.type} | None", dataclasses.field(default=None))
                   for field in dataclasses.fields(TrainConfig) if field.name != "out"],
    namespace={"given": _given, "__module__": __name__}, frozen=True)


# The data options a --prepared folder stands for (a config file's are dropped when the flag names a folder)
PREPARED_REPLACES = ("data", "src_file", "tgt_file", "hf_dataset", "hf_config", "streaming", "augment",
                     "augment_swap", "register_tags")


TOKENS_PER_UPDATE_SLACK = 0.25  # how far the padded tokens an update may miss --tokens-per-update


def batches_per_update(config: TrainConfig, world_size: int) -> int:
    """Batches each rank accumulates into an update: --update-freq, else enough that world_size x it x
    --max-tokens comes nearest --tokens-per-update (at least 1), else 1. Where even the nearest misses
    --tokens-per-update by more than a quarter (16 GPUs at --max-tokens 4096 take 65,536 tokens an update
    at the least), the run is refused with the --max-tokens that fits: another batch an update is another
    recipe (its learning rate was tuned for the asked size)."""
    if config.tokens_per_update is None:
        return config.update_freq or 1
    per_batch = config.max_tokens * world_size
    freq = max(1, round(config.tokens_per_update / per_batch))
    if abs(freq * per_batch - config.tokens_per_update) > TOKENS_PER_UPDATE_SLACK * config.tokens_per_update:
        fits = max(1, config.tokens_per_update // world_size)
        # one batch a rank is too many tokens already, or one is too few and two too many
        nearest = "at the least" if per_batch > config.tokens_per_update else f"or {2 * per_batch:,}"
        raise UsageError(f"{world_size} ranks x --max-tokens {config.max_tokens} take {per_batch:,} padded tokens an "
                         f"update {nearest}, not the {config.tokens_per_update:,} of --tokens-per-update: give "
                         f"--max-tokens {fits} (or fewer, accumulated), or change --tokens-per-update")
    return freq


def steps_in_epoch(batches: int, world_size: int, update_freq: int) -> int:
    """Updates an epoch of `batches` makes: each rank takes batches // world_size of them (the rest wait for
    the next epoch), `update_freq` an update, the last update of the epoch with fewer."""
    return math.ceil(batches // world_size / update_freq)


def model_config(config: TrainConfig, vocab_size: int) -> ModelConfig:
    """The model a run builds: its preset, with the dimensions given in `config` in place of the preset's."""
    shape = {"d_model": config.d_model, "n_heads": config.n_heads, "d_ff": config.d_ff,
             "n_encoder_layers": config.encoder_layers, "n_decoder_layers": config.decoder_layers}
    try:
        return ModelConfig.preset(config.preset, vocab_size=vocab_size, dropout=config.dropout,
                                  pre_norm=config.pre_norm, max_positions=config.max_positions,
                                  **{name: value for name, value in shape.items() if value is not None})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
