"""Training as in the paper: Adam(0.9, 0.98, 1e-9), inverse-square-root schedule with warmup (or a linear decay
to zero at the end of a planned run), label smoothing 0.1, dropout; with token-budget batches, accumulation,
bf16/fp16, validation BLEU, best/last checkpoints, early stopping, exact resume (Ctrl-C included), and
DistributedDataParallel under torchrun.

    train(TrainConfig(data="multi30k", preset="small", out="runs/m30k"))

The output folder holds `last.pt` (with the training state), `best.pt` (best validation BLEU),
`step*.pt` (the last few validations, for `nmt average`), `config.yaml` and `metrics.jsonl`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.data.batching import collate, token_batches
from nmt.data.corpus import ParallelText
from nmt.data.prepare import Prepared, TokenCorpus, open_prepared, prepare_training_data
from nmt.data.sources import DataSpec, validation_pairs
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator  # at start, not at the first validation: code changed mid-run stays out
from nmt.errors import DataError, Interrupted, NmtError, UsageError, signal_name, stop_signals_handled_by
from nmt.model.backend import machine
from nmt.model.checkpoint import Checkpoint, cast_weights, load_checkpoint, model_weights, save_checkpoint
from nmt.model.config import PRESETS, ModelConfig
from nmt.model.loss import TranslationLoss
from nmt.model.native import library
from nmt.model.transformer import Transformer
from nmt.text.metrics import score
from nmt.text.tokenizer import Tokenizer
from nmt.training.allocator import keep_freed_memory

log = logging.getLogger("nmt")

MAX_SKIPPED_IN_A_ROW = 50  # updates skipped for a loss or gradients that are not finite, before giving up
COMPILED_LENGTH_MULTIPLE = 8  # --compile: lengths padded to it, so no length recompiles the step for alignment
PREFETCH_UPDATES = 2  # updates whose batches a thread reads and collates ahead of the step
VALID_MAX_TOKENS = 8192  # padded tokens in a validation batch, at most
REWARM = 200  # updates over which a run resumed without its optimizer moments ramps its rate up again

# Options whose change on resume alters the run (others, such as --max-steps, just extend it).
# (The model's shape and the schedule are checked harder: a change is an error, see Trainer._resumable/_schedule.)
RESUME_SENSITIVE = ("data", "src_file", "tgt_file", "hf_dataset", "prepared", "augment", "augment_swap",
                    "register_tags", "max_tokens", "seed", "label_smoothing", "precision", "dropout", "ema")


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
                     "warmup", "max_len",
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


def training_precision(precision: str | None, device: torch.device) -> str:
    """--precision, with auto resolved: bf16 autocast where the hardware computes in bf16 (CUDA with bf16, a
    CPU with AVX-512 BF16 or AMX), else fp16 on CUDA and fp32 on a CPU. On a CPU without native bf16, autocast
    emulates it: `nmt train` small ran at 1,100 target tokens/s in bf16 and 2,800 in fp32 on an Intel Xeon
    with AVX-512 VNNI alone, where a Zen 4 gains from bf16 (docs/TRAINING.md). Not given: auto on CUDA
    (true fp32 there leaves the tensor cores idle), fp32 on a CPU."""
    if precision is None:
        precision = "auto" if device.type == "cuda" else "fp32"
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if machine().flags & {"avx512_bf16", "amx_bf16"} else "fp32"


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


def paper_peak_lr(d_model: int, warmup: int) -> float:
    """The peak of the paper's schedule, lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), reached at
    step = warmup: 7.0e-4 for base (512) and 4.9e-4 for big (1024) at warmup 4000."""
    return (d_model * warmup) ** -0.5


def inverse_sqrt(step: int, warmup: int) -> float:
    """The paper's schedule as a factor of the peak rate: linear warmup, then 1/sqrt(step)."""
    step = max(step, 1)
    return min(step / warmup, math.sqrt(warmup / step))


def linear_decay(step: int, warmup: int, total: int) -> float:
    """Linear warmup, then a straight line from the peak at `warmup` to zero at `total`: under a fixed budget
    the rate anneals by the end of the run instead of staying at warmup^0.5 / total^0.5 of the peak."""
    step = max(step, 1)
    if step < warmup:
        return step / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


DECAYS = ("inverse-sqrt", "linear")


def linear_decay_in_time(step: int, warmup: int, elapsed: float, budget: float) -> float:
    """Linear warmup, under a straight line that falls from the peak at the start to zero when `budget`
    seconds of training are spent: a fixed budget of CPU time, whatever a step of the model costs (runs of
    different shapes compared at the same cost)."""
    return max(0.0, min(max(step, 1) / warmup, 1.0 - elapsed / budget))


def rate_factor(schedule: dict, elapsed=None):
    """The stored schedule as LambdaLR's factor of the peak rate, by the step counted from 0; `elapsed()`,
    the seconds trained so far, for a linear decay over --max-minutes. A run resumed from a slim resume point
    (no optimizer moments) ramps its rate up again over REWARM updates from the step it resumed at."""
    warmup = schedule["warmup"]
    if "minutes" in schedule:
        budget = 60 * schedule["minutes"]

        def factor(step: int) -> float:
            return linear_decay_in_time(step + 1, warmup, elapsed(), budget)
    elif schedule.get("decay", "inverse-sqrt") == "linear":
        total = schedule["total"]

        def factor(step: int) -> float:
            return linear_decay(step + 1, warmup, total)
    else:
        def factor(step: int) -> float:
            return inverse_sqrt(step + 1, warmup)
    if "rewarm_from" not in schedule:
        return factor
    start = schedule["rewarm_from"]
    return lambda step: factor(step) * min(1.0, max(step + 1 - start, 1) / REWARM)


def write_slim_resume_point(last: str | Path, out: str | Path) -> Checkpoint:
    """A run's last.pt without its optimizer moments (nor --ema's average), its weights in fp16: a sixth of the
    size, small enough to keep in a repository or copy between machines. Put in a run folder as last.pt it
    resumes the run where it stood (step, schedule, data position, RNG), Adam starting its moments afresh
    under a short re-warmup."""
    checkpoint = load_checkpoint(last)
    if checkpoint.train_state is None:
        raise UsageError(f"{last} holds no training state: not a run's last.pt")
    state = {key: value for key, value in checkpoint.train_state.items() if key not in ("optimizer", "scaler")}
    # without --ema's average too (as large again): a run resumed from here starts it afresh from the weights
    slim = dataclasses.replace(checkpoint, weights=cast_weights(checkpoint.weights, torch.float16), train_state=state,
                               ema=None)
    save_checkpoint(out, slim)
    return slim


@dataclass
class Distributed:
    """This process's rank among `world_size` (torchrun's environment); collectives run on `device`, the
    device the loop trains on (NCCL takes CUDA tensors only)."""

    device: torch.device = torch.device("cpu")
    rank: int = 0
    world_size: int = 1
    group: object = None  # every rank, with the collectives' timeout (the default group has the join's)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environment(cls, device: torch.device, timeout_minutes: float = 30, backend: str | None = None,
                         join_minutes: float = 360) -> Distributed:
        """Join the process group torchrun describes (NCCL on CUDA, gloo on a CPU, or `backend`), with
        `timeout_minutes` for any collective to wait (the ranks wait at barriers for rank 0's validation and
        checkpoints). NCCL takes one GPU a process: more processes on a machine than GPUs is refused. A lone
        process under torchrun joins only where `backend` is given (to try the backend and DDP on one GPU)."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1 and (backend is None or "MASTER_ADDR" not in os.environ):
            return cls(device)
        import datetime

        import torch.distributed as dist

        backend = backend or ("nccl" if device.type == "cuda" else "gloo")
        if backend == "nccl" and device.type != "cuda":
            raise UsageError("--dist-backend nccl needs CUDA devices; on CPUs the ranks use gloo")
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        if backend == "nccl" and local > torch.cuda.device_count():
            raise UsageError(f"{local} processes on this machine but {torch.cuda.device_count()} visible GPU(s): NCCL "
                             "needs a GPU for each (--nproc_per_node at most the GPUs; --dist-backend gloo shares "
                             "them, slowly)")
        if not dist.is_initialized():
            # The join waits `join_minutes` for the slowest machine to prepare its corpus (hours, on a cold
            # node-local cache; a machine that died before joining is only noticed then): the default group has
            # that timeout, and the run's collectives go through a group of every rank that waits
            # `timeout_minutes`.
            dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=join_minutes),
                                    device_id=device if backend == "nccl" else None)
        group = dist.new_group(timeout=datetime.timedelta(minutes=timeout_minutes), backend=backend)
        log.info("joined the process group: rank %d of %d, %s on %s", dist.get_rank(), world_size, backend, device)
        return cls(device, dist.get_rank(), world_size, group)

    def close(self) -> None:
        """Leave the process group (at every exit: a group torn down by the interpreter's exit can abort)."""
        if self.group is not None and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    def any(self, flag: bool) -> bool:
        """True on every rank when `flag` is true on one of them."""
        return self.count(flag) > 0

    def count(self, flag: bool) -> int:
        """On every rank, the number of ranks where `flag` is true."""
        if self.world_size == 1:
            return int(flag)
        tensor = torch.tensor([int(flag)], device=self.device)
        torch.distributed.all_reduce(tensor, group=self.group)
        return int(tensor.item())

    def gathered(self, value) -> list:
        """Every rank's `value` (a picklable object), in rank order, on every rank."""
        if self.world_size == 1:
            return [value]
        values = [None] * self.world_size
        torch.distributed.all_gather_object(values, value, group=self.group)
        return values

    def from_main(self, value):
        """Rank 0's `value` (a picklable object), on every rank."""
        if self.world_size == 1:
            return value
        holder = [value]
        torch.distributed.broadcast_object_list(holder, src=0, group=self.group, device=self.device)
        return holder[0]


def training_device() -> torch.device:
    """CUDA device LOCAL_RANK, taken modulo the devices this process sees (a launcher that gives each
    process one GPU makes it device 0), and made the current one; else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(device)  # where NCCL and torch's own CUDA allocations of this rank go
    return device


def check_shared_folder(out: Path, dist: Distributed) -> None:
    """Every rank sees the run folder that rank 0 writes to (--out on a file system all machines share):
    rank 0 leaves a fresh token in it, and a rank that reads another (a node-local --out) refuses, on every
    rank at once, before anything is resumed or trained."""
    if dist.world_size == 1:
        return
    token_file = out / ".run-token"
    token = None
    if dist.is_main:
        import uuid

        token = uuid.uuid4().hex
        temporary = token_file.with_name(f".run-token.tmp{os.getpid()}")
        temporary.write_text(token)
        temporary.replace(token_file)
    token = dist.from_main(token)
    try:
        seen = token_file.read_text()
    except OSError:
        seen = None
    strangers = dist.count(seen != token)
    if strangers:
        raise UsageError(f"{strangers} of {dist.world_size} ranks do not see the run folder {out} that rank 0 writes "
                         "to: --out must be one folder that every machine shares (a network file system)")


def check_same_inputs(dist: Distributed, digests: dict[str, str | None]) -> None:
    """Every rank resumes the same last.pt and reads the same tokenizer and corpus (a stale network file system
    or a machine's own cache can hand one rank another): each `digests` value against rank 0's, on every rank,
    refused on every rank at once with what differs."""
    gathered = dist.gathered(digests)
    differing = sorted({name for other in gathered for name in digests if other[name] != gathered[0][name]})
    if differing:
        ranks = [rank for rank, other in enumerate(gathered) if other != gathered[0]]
        raise UsageError(f"ranks {', '.join(map(str, ranks))} read another {' and '.join(differing)} than rank 0: "
                         "every machine must see the same files (--out and the cache on one shared file system, "
                         "or identical copies)")


def lock_run_folder(out: Path):
    """Hold OUT/.lock for as long as this process lives (the returned file stays open), so that a second
    `nmt train` on the same folder is refused instead of mixing its checkpoints and metrics with this one's;
    then remove the temporary files that killed saves left (no other process writes here)."""
    import fcntl

    handle = open(out / ".lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise UsageError(f"another nmt train is using {out}: wait for it to end, or train into another --out") \
            from None
    for stale in out.glob(".*.tmp*"):
        stale.unlink(missing_ok=True)
    return handle


class Trainer:
    def __init__(self, config: TrainConfig):
        self.config = config
        self.out = Path(config.out)
        self.device = training_device()
        self.dist = Distributed(self.device)  # until run() joins the others
        self.started = time.monotonic()  # minus the time trained before, once resumed
        self.agreed_elapsed = None  # rank 0's training seconds, as the ranks last agreed on them
        self.scaler_state = None
        if config.threads:
            torch.set_num_threads(config.threads)
        if self.device.type == "cpu":
            keep_freed_memory()
            log.info("dropout and loss: %s", "nmt's C kernels" if library() is not None
                     else "torch's operators (no C kernels: NMT_NATIVE=0, no C compiler, or no AVX2)")
        if config.precision == "fp16" and self.device.type != "cuda":
            raise UsageError("--precision fp16 needs a CUDA device; use bf16 on CPU")
        self.precision = training_precision(config.precision, self.device)
        if config.precision == "auto" or (config.precision is None and self.device.type == "cuda"):
            log.info("precision auto: %s on this %s", self.precision, self.device.type)
        self._lock = None
        if int(os.environ.get("RANK", "0")) == 0:
            self.out.mkdir(parents=True, exist_ok=True)
            self._lock = lock_run_folder(self.out)
        else:  # one rank reports for all
            log.setLevel(max(log.level, logging.WARNING))

    # ---- data -------------------------------------------------------------------------------------
    def _prepare(self, spm_model: bytes | None) -> Prepared:
        """The corpus tokenized into the cache (nmt.data.prepare) with `spm_model`, else with one trained on a sample
        of the corpus, by one process of all that share the cache; the others wait for its folder to appear."""
        config = self.config
        if config.prepared:
            return self._open_prepared(spm_model)
        return prepare_training_data(config, spm_model)

    def _open_prepared(self, spm_model: bytes | None) -> Prepared:
        """--prepared: the folder's tokens, sentencepiece model and validation pairs (or --valid-src's)."""
        config = self.config
        prepared = open_prepared(config.prepared)
        if spm_model is not None and spm_model != prepared.tokenizer.model_bytes:
            raise UsageError(f"{config.prepared} was tokenized with another sentencepiece model than the one this "
                             "run uses (its last.pt's, --spm's or --init-from's)")
        if config.valid_src or config.valid_tgt:
            spec = DataSpec(valid_src=config.valid_src, valid_tgt=config.valid_tgt)
            return dataclasses.replace(prepared, valid=validation_pairs(spec))
        if not len(prepared.valid):
            raise DataError(f"{config.prepared} holds no validation pairs: give --valid-src/--valid-tgt")
        return prepared

    # ---- model, optimizer, schedule ---------------------------------------------------------------
    def _model_config(self, tokenizer: Tokenizer, init: Checkpoint | None) -> ModelConfig:
        if init is not None:
            return init.config
        return model_config(self.config, tokenizer.vocab_size)

    def run(self) -> dict:
        """Train; the process group is left and the folder's lock let go when the run ends, however it ends."""
        try:
            return self._train()
        except torch.distributed.DistError as exc:  # another rank died or hangs: one line, not torch's pages
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise NmtError(f"rank {self.dist.rank}: the other ranks did not answer within --dist-timeout "
                           f"{self.config.dist_timeout:g} minutes (one failed or hangs; its log says why): "
                           f"{first}") from None
        finally:
            self.dist.close()
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _train(self) -> dict:
        config = self.config
        # Everything that can take long happens before the ranks join: the corpus is prepared (or waited for,
        # on the file system) by one process of all, and no rank sits in a collective meanwhile.
        last = self._last_checkpoint() if (self.out / "last.pt").exists() else None
        init = load_checkpoint(config.init_from) if config.init_from else None
        prepared = self._prepare(self._spm_model(last, init))
        self.dist = Distributed.from_environment(self.device, config.dist_timeout, config.dist_backend,
                                                 config.join_timeout)
        check_shared_folder(self.out, self.dist)
        check_same_inputs(self.dist, {"last.pt": last.checksum if last is not None else None,
                                      "sentencepiece model": hashlib.sha256(prepared.tokenizer.model_bytes).hexdigest(),
                                      "prepared corpus": prepared.folder.name})
        tokenizer, corpus = prepared.tokenizer, TokenCorpus(prepared.folder)
        valid = prepared.valid
        if config.valid_bleu_lines and len(valid) > config.valid_bleu_lines:
            valid = ParallelText(valid.source[: config.valid_bleu_lines], valid.target[: config.valid_bleu_lines])
        valid_ids = tokenized_pairs(valid, tokenizer)

        torch.manual_seed(config.seed)  # the same initial weights on every rank
        model_config = self._model_config(tokenizer, init)
        model = Transformer(model_config).to(self.device)
        if init is not None:
            model.load_state_dict(init.weights)
        torch.manual_seed(config.seed + self.dist.rank)  # but different dropout
        batches = EpochBatches(corpus, config.max_tokens, config.seed)
        self.update_freq = batches_per_update(config, self.dist.world_size)
        if len(batches.of(0)) < self.dist.world_size:
            raise UsageError(f"the corpus makes {len(batches.of(0))} batches of --max-tokens {config.max_tokens}, "
                             f"fewer than the {self.dist.world_size} ranks: each rank needs one an update (a "
                             "smaller --max-tokens, fewer ranks or more data)")
        steps_per_epoch = steps_in_epoch(len(batches.of(0)), self.dist.world_size, self.update_freq)
        log.info("%d ranks x %d batches of up to %d padded tokens: up to %d padded tokens an update",
                 self.dist.world_size, self.update_freq, config.max_tokens,
                 self.dist.world_size * self.update_freq * config.max_tokens)
        resumed = self._resumable(last, model_config)
        self.schedule = self._schedule(resumed, model_config, steps_per_epoch)
        optimizer = torch.optim.Adam(model.parameters(), lr=self.schedule["lr"], betas=(0.9, 0.98), eps=1e-9,
                                     fused=self.device.type == "cuda" or None)  # one kernel for all parameters
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate_factor(self.schedule, self.elapsed))
        decay = self.schedule.get("decay", "inverse-sqrt")
        log.info("model: d_model %d, %d heads, d_ff %d, %d+%d layers, %.2fM parameters; %d training pairs, %d "
                 "validation; %d steps/epoch; peak lr %.2e, warmup %d, %s decay%s", model_config.d_model,
                 model_config.n_heads, model_config.d_ff, model_config.n_encoder_layers,
                 model_config.n_decoder_layers, sum(p.numel() for p in model.parameters()) / 1e6,
                 len(corpus), len(valid), steps_per_epoch, self.schedule["lr"], self.schedule["warmup"], decay,
                 _decay_end(self.schedule))

        state = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "best_bleu": -1.0, "bad_validations": 0,
                 "elapsed": 0.0, "world_size": self.dist.world_size, "update_freq": self.update_freq}
        if resumed is not None:
            state = self._resume(resumed, model, optimizer, scheduler)
        self.started = time.monotonic() - state["elapsed"]
        self.agreed_elapsed = state["elapsed"]
        wrapped = TranslationLoss(model, config.label_smoothing, compiled=config.compile)
        if self.dist.group is not None:
            wrapped = torch.nn.parallel.DistributedDataParallel(  # the model's buffers are constants: no broadcast
                wrapped, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                broadcast_buffers=False, process_group=self.dist.group)
        if self.dist.is_main:
            import yaml

            (self.out / "config.yaml").write_text(yaml.safe_dump({**config.to_dict(), **self.schedule,
                                                                  "model": model_config.to_dict()}))
        self.model = model
        self.average = None
        if config.ema:
            self.average = MovingAverage(model, config.ema, resumed.ema if resumed is not None else None)
        loop = _Loop(self, model, wrapped, optimizer, scheduler, tokenizer, state, valid, valid_ids, batches)
        return loop.run()

    def local_elapsed(self) -> float:
        """Seconds of training so far, across resumes, by this process's clock."""
        return time.monotonic() - self.started

    def elapsed(self) -> float:
        """Seconds of training so far by the run's one clock: rank 0's, as of the last update's all-reduce
        (each rank's own would let a time-based rate and stop differ between ranks), and this process's alone."""
        if self.dist.world_size == 1 or self.agreed_elapsed is None:
            return self.local_elapsed()
        return self.agreed_elapsed

    def _spm_model(self, last: Checkpoint | None, init: Checkpoint | None) -> bytes | None:
        """A resumed run's own sentencepiece model, else --spm's, else --init-from's; None: train one."""
        if last is not None:
            return last.spm_model
        if self.config.spm:
            try:
                return Tokenizer(Path(self.config.spm).read_bytes()).model_bytes
            except (OSError, RuntimeError) as exc:
                raise UsageError(f"cannot load the sentencepiece model {self.config.spm}: {exc}") from None
        return init.spm_model if init is not None else None

    def _last_checkpoint(self) -> Checkpoint:
        """OUT/last.pt, which rank 0 found to resume from (every rank reads the same, shared folder)."""
        path = self.out / "last.pt"
        checkpoint = load_checkpoint(path)
        if checkpoint.train_state is None:
            raise UsageError(f"{path} has no training state to resume from")
        return checkpoint

    def _resumable(self, last: Checkpoint | None, model_config: ModelConfig) -> Checkpoint | None:
        """`last`, checked to hold the model this run builds."""
        if last is None:
            return None
        stored, wanted = last.config.to_dict(), model_config.to_dict()
        differ = [f"{key} {stored[key]} -> {wanted[key]}" for key in wanted
                  if key not in ("dropout", "attention_dropout") and stored.get(key) != wanted[key]]
        if differ:
            raise UsageError(f"{self.out / 'last.pt'} holds another model ({', '.join(differ)}): resume with the "
                             "options it was trained with, or train into another --out")
        return last

    def _schedule(self, resumed: Checkpoint | None, model_config: ModelConfig, steps_per_epoch: int) -> dict:
        """Peak learning rate, warmup and decay: those stored in the run's checkpoint when resuming (a --lr,
        --warmup or --decay that differs is an error, unless --reset-schedule), else from the options. A linear
        decay ends at the planned step: --max-steps, else --max-epochs' steps."""
        config = self.config
        stored = resumed.train_state.get("schedule") if resumed is not None else None
        planned = config.max_steps or (config.max_epochs or 10) * steps_per_epoch
        if stored and not config.reset_schedule:
            stored = {"decay": "inverse-sqrt", **stored}
            for name in ("lr", "warmup", "decay"):
                given = getattr(config, name)
                if given is not None and given != stored[name]:
                    raise UsageError(f"--{name} {given} differs from the {stored[name]} that {self.out} was trained "
                                     "with: resume without it, or add --reset-schedule to change the schedule")
            if "minutes" in stored and config.max_minutes != stored["minutes"]:
                raise UsageError(f"{self.out}'s learning rate reaches zero after {stored['minutes']:g} minutes: "
                                 "resume with that --max-minutes, or add --reset-schedule to decay over the new one")
            if "total" in stored and (config.max_steps or config.max_epochs) and planned > stored["total"]:
                raise UsageError(f"{self.out}'s learning rate reaches zero at step {stored['total']}: add "
                                 "--reset-schedule to decay to zero at the new end instead")
            return self._rewarmed(stored, resumed)
        warmup = config.warmup or max(1, min(4000, planned // 10))
        schedule = {"lr": config.lr or paper_peak_lr(model_config.d_model, warmup), "warmup": warmup,
                    "decay": config.decay or "inverse-sqrt"}
        if config.decay == "linear" and (config.max_steps or config.max_epochs):
            schedule["total"] = planned
        elif config.decay == "linear":
            schedule["minutes"] = config.max_minutes  # to zero when the time budget is spent
        return self._rewarmed(schedule, resumed)

    @staticmethod
    def _rewarmed(schedule: dict, resumed: Checkpoint | None) -> dict:
        """`schedule`, ramping up again from the resumed step where the checkpoint holds no optimizer moments
        (write_slim_resume_point's): fresh moments under the full rate would jolt the weights."""
        if resumed is None or "optimizer" in resumed.train_state:
            return schedule
        return {**schedule, "rewarm_from": resumed.train_state["progress"]["step"]}

    def _resume(self, checkpoint: Checkpoint, model, optimizer, scheduler) -> dict:
        previous = checkpoint.training.get("config", {})
        changed = [f"{k}: {previous.get(k)!r} -> {getattr(self.config, k)!r}" for k in RESUME_SENSITIVE
                   if k in previous and previous[k] != getattr(self.config, k)]
        if changed:
            log.warning("resuming with changed options (the run is no longer one recipe): %s", "; ".join(changed))
        model.load_state_dict(checkpoint.weights)
        train_state = checkpoint.train_state
        if "optimizer" in train_state:
            optimizer.load_state_dict(train_state["optimizer"])
        else:
            log.warning("%s holds no optimizer moments (a slim resume point): Adam starts them afresh and the rate "
                        "ramps up again over %d updates", self.out / "last.pt", REWARM)
        scheduler.load_state_dict(train_state["scheduler"])
        if self.config.reset_schedule:  # the stored state keeps the step; the new schedule applies from here
            scheduler.base_lrs = [self.schedule["lr"] for _ in scheduler.base_lrs]
        ranks = train_state.get("rank_rng")
        if ranks is not None and len(ranks) == self.dist.world_size:  # each rank its own generators back
            mine = ranks[self.dist.rank]
        else:  # saved on another number of ranks (or before every rank's were saved): rank 0's, new streams else
            mine = {"torch": train_state["torch_rng"], "python": train_state["python_rng"]}
            if "cuda_rng" in train_state:
                mine["cuda"] = train_state["cuda_rng"]
            if self.dist.rank:
                torch.manual_seed(self.config.seed + self.dist.rank + train_state["progress"]["step"])
                mine = {"python": train_state["python_rng"]}  # the data order is the same on every rank
        if "torch" in mine:
            torch.set_rng_state(mine["torch"])
        if "cuda" in mine and self.device.type == "cuda":
            torch.cuda.set_rng_state(mine["cuda"], self.device)
        random.setstate(_to_random_state(mine["python"]))
        self.scaler_state = train_state.get("scaler")  # fp16's loss scale and its growth tracker
        log.info("resuming from %s at step %d", self.out / "last.pt", train_state["progress"]["step"])
        return self._same_batches(dict(train_state["progress"]))

    def _same_batches(self, progress: dict) -> dict:
        """The resumed progress, checked to take as many batches an update as before (ranks x update_freq: 8
        GPUs x 1 and 1 x 8 take the same batches, so the position in the epoch, counted in updates, stands).
        Another number of batches an update would be another recipe: an error."""
        world, freq = self.dist.world_size, self.update_freq
        was_world, was_freq = progress.get("world_size", world), progress.get("update_freq", freq)
        before = was_world * was_freq
        if before == world * freq:
            return {**progress, "world_size": world, "update_freq": freq}
        trained = f"{self.out} was trained with {before} batches an update ({was_world} ranks x --update-freq " \
                  f"{was_freq})"
        if before % world:
            raise UsageError(f"{trained}, which {world} ranks cannot split evenly: resume on a number of ranks that "
                             "divides it")
        raise UsageError(f"{trained}; {world} x {freq} would be another recipe: resume with --update-freq "
                         f"{before // world}")


Batch = tuple[list[list[int]], list[list[int]]]  # source and target token ids of the sentences in a batch


def tokenized_pairs(pairs: ParallelText, tokenizer: Tokenizer) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of the pairs with both sides non-empty (the validation set's loss is computed on them)."""
    source, target = tokenizer.encode_batch(pairs.source), tokenizer.encode_batch(pairs.target)
    kept = [(s, t) for s, t in zip(source, target, strict=True) if s and t]
    if not kept:
        raise DataError(f"the validation set has no pair with text on both sides ({len(pairs)} pairs)")
    return [s for s, _ in kept], [t for _, t in kept]


class EpochBatches:
    """Each epoch's token-budget batches of a prepared corpus (nmt.data.batching), from its stored lengths; the
    last epoch's are kept, since the first is asked for twice (its length, then its steps)."""

    def __init__(self, corpus: TokenCorpus, max_tokens: int, seed: int):
        self.corpus, self.max_tokens, self.seed = corpus, max_tokens, seed
        self._epoch, self._batches = None, []

    def of(self, epoch: int) -> list:
        if self._epoch != epoch:
            self._batches = token_batches(self.corpus.source_lengths, self.corpus.target_lengths, self.max_tokens,
                                          self.seed, epoch)
            self._epoch = epoch
        return self._batches


class MovingAverage:
    """An exponential moving average of a model's weights (Polyak averaging; fairseq's --ema-decay): after
    each update, average <- d * average + (1 - d) * weights, with d = min(decay, (1 + n) / (10 + n)) at
    update n so that a run from random weights is not held to them. Kept as a second model in eval mode,
    which validation decodes with; its weights are saved in every checkpoint (`Checkpoint.ema`)."""

    def __init__(self, model: Transformer, decay: float, weights: dict[str, torch.Tensor] | None = None):
        import copy

        self.decay = decay
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        if weights is not None:
            self.model.load_state_dict(weights)
        else:
            log.info("--ema %g: the moving average starts from the weights the run starts with", decay)
        self.averaged = [p for p in self.model.parameters()]
        self.live = [p for p in model.parameters()]

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Move the average towards the weights after update `step` (counted from 1)."""
        decay = min(self.decay, (1 + step) / (10 + step))
        torch._foreach_lerp_(self.averaged, [p.detach() for p in self.live], 1 - decay)

    def weights(self) -> dict[str, torch.Tensor]:
        return model_weights(self.model)


@dataclass
class Collated:
    """A batch as the step takes it: source (B, S), target input and output (B, T) ids, and its target tokens
    (EOS included)."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_tokens: int


def read_ahead(items: Iterator, depth: int) -> Iterator:
    """`items`, produced up to `depth` ahead by a thread; its exceptions raised here, in order. Closing the
    returned generator (the loop stopping mid-epoch) stops the thread at its next item and waits for it: a
    thread still building a batch when the interpreter exits frees its tensors after torch's runtime is gone
    ("terminate called without an active exception", exit 134)."""
    import queue

    buffer: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def offer(entry) -> bool:
        """Put `entry` once there is room; False if the consumer stopped first."""
        while not stop.is_set():
            try:
                buffer.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer((item, None)):
                    return
            offer((done, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            offer((done, exc))

    def consume() -> Iterator:
        thread = threading.Thread(target=produce, name="nmt-batches", daemon=True)
        thread.start()
        try:
            while True:
                item, error = buffer.get()
                if error is not None:
                    raise error
                if item is done:
                    return
                yield item
        finally:
            stop.set()
            thread.join()

    return consume()


def _to_random_state(value):
    version, internal, gauss = value
    return (version, tuple(internal), gauss)


class _Loop:
    """The step loop of one run; holds what the steps share."""

    def __init__(self, trainer, model, wrapped, optimizer, scheduler, tokenizer, state, valid, valid_ids, batches):
        self.trainer, self.config, self.dist = trainer, trainer.config, trainer.dist
        self.model, self.wrapped, self.optimizer, self.scheduler = model, wrapped, optimizer, scheduler
        self.tokenizer, self.state, self.valid, self.valid_ids = tokenizer, state, valid, valid_ids
        self.batches = batches
        self.model_config = model.config
        self.device = trainer.device
        self.interrupted = 0  # the signal that asked the run to stop at the next step boundary
        self.norm_sum, self.norm_count = torch.zeros((), device=self.device), 0  # gradient norms before clipping
        self.scaler = torch.amp.GradScaler("cuda") if trainer.precision == "fp16" else None
        # validation's batches: a --max-tokens raised to fill a GPU for training would not fit beside it
        self.valid_tokens = min(self.config.max_tokens, VALID_MAX_TOKENS)
        self.stop_voted = None  # whether some rank wanted to stop, as of the last update (finished())
        if self.scaler and trainer.scaler_state:
            self.scaler.load_state_dict(trainer.scaler_state)

    def autocast(self):
        if self.trainer.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.trainer.precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)

    def epoch_groups(self, epoch: int, first: int = 0) -> Iterator[list[Collated]]:
        """This rank's batches of one epoch, collated, `update_freq` to an update, from update `first` on (a
        resumed epoch skips the updates done without reading their batches); every rank gets as many. Read and
        collated PREFETCH_UPDATES updates ahead on a thread of their own (pinned on CUDA), so that the step
        never waits for the host to build its next batch."""
        indices = self.batches.of(epoch)
        world, size = self.dist.world_size, self.trainer.update_freq
        mine = indices[: len(indices) // world * world][self.dist.rank :: world]
        corpus = self.batches.corpus

        def groups() -> Iterator[list[Collated]]:
            for start in range(first * size, len(mine), size):
                yield [self.collated(corpus.pairs(batch)) for batch in mine[start : start + size]]

        return read_ahead(groups(), PREFETCH_UPDATES)

    def collated(self, batch: Batch) -> Collated:
        """A batch's token ids as the step takes them: padded (to 8 under --compile), pinned on CUDA."""
        c = self.model_config
        src, tgt_in, tgt_out = collate(batch[0], batch[1], c.pad_id, c.bos_id, c.eos_id,
                                       COMPILED_LENGTH_MULTIPLE if self.config.compile else 1)
        if self.device.type == "cuda":  # the copies from pinned memory overlap the device's work
            src, tgt_in, tgt_out = src.pin_memory(), tgt_in.pin_memory(), tgt_out.pin_memory()
        return Collated(src, tgt_in, tgt_out, sum(map(len, batch[1])) + len(batch[1]))  # targets with EOS

    def loss(self, batch: Collated) -> tuple[torch.Tensor, int]:
        """The batch's loss summed over its target tokens, and their number (counted on the host)."""
        pinned = self.device.type == "cuda"  # collated() pinned them: the copies need not be waited for
        src, tgt_in, tgt_out = (t.to(self.device, non_blocking=pinned) for t in (batch.src, batch.tgt_in,
                                                                                batch.tgt_out))
        with self.autocast():
            loss_sum = self.wrapped(src, tgt_in, tgt_out)  # nmt.model.loss: the logits never all at once
        return loss_sum, batch.n_tokens

    def finished(self) -> bool:
        """Whether to stop before the next update, the same on every rank. The step and epoch budgets are the
        same everywhere; the clock and signals are not: they are counted across ranks by the all-reduce each
        update already makes (its one host sync), or here before the first update."""
        s, c = self.state, self.config
        over = (c.max_steps and s["step"] >= c.max_steps) or (c.max_epochs and s["epoch"] >= c.max_epochs)
        over = over or s["step"] >= self.trainer.schedule.get("total", math.inf)  # a linear decay's rate is 0 there
        if self.stop_voted is None:
            self.stop_voted = self.dist.any(self.wants_to_stop())
        return bool(over or self.stop_voted)

    def wants_to_stop(self) -> bool:
        """This rank's own reasons to stop: training time spent, or a signal."""
        c = self.config
        return bool(c.max_minutes and self.trainer.elapsed() >= 60 * c.max_minutes or self.interrupted)

    def update(self, group: list[Collated]) -> tuple[float, int, bool]:
        """One optimizer step over a group of batches (gradient accumulation): the loss per target token over
        every rank, the target tokens of every rank, and whether the step was taken.

        The gradient is that of the loss summed over the update's target tokens on all ranks, divided by their
        number (the paper's and fairseq's normalization: every token weighs the same, whichever micro-batch or
        rank it is in). Each backward pass takes its batch's summed loss over a constant; DDP averages the
        ranks' gradients; the token count travels in the all-reduce the update makes anyway, and the gradients
        are scaled by it (and by the clip) on the device. An update whose loss is not finite on some rank is
        skipped by all of them; with fp16, so is one whose gradients overflow (the loss scaler's own skip), and
        the scheduler stays in step with the optimizer."""
        self.wrapped.train()
        scaler = self.scaler
        constant = self.config.max_tokens * len(group)  # keeps the backward's values near a per-token mean's
        total_loss, total_tokens = torch.zeros((), device=self.device), 0
        for k, batch in enumerate(group):
            sync = k == len(group) - 1 or self.dist.group is None
            with contextlib.nullcontext() if sync else self.wrapped.no_sync():  # all-reduce once per step
                loss_sum, n_tokens = self.loss(batch)
                scaled = loss_sum / constant
                (scaler.scale(scaled) if scaler else scaled).backward()
            total_loss += loss_sum.detach().float()
            total_tokens += n_tokens
        if scaler:
            scaler.unscale_(self.optimizer)
        gradients = [p.grad for p in self.model.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(gradients)  # of the rank-averaged gradients, before normalizing
        # (loss, target tokens, loss not finite, gradients not finite, a rank wants to stop, rank 0's clock):
        # the update's one all-reduce and its one host sync
        clock = self.trainer.local_elapsed() if self.dist.is_main else 0.0
        flags = torch.stack([total_loss, torch.full((), float(total_tokens), device=self.device),
                             (~torch.isfinite(total_loss)).float(), (~torch.isfinite(norm)).float(),
                             torch.full((), float(self.wants_to_stop()), device=self.device),
                             torch.full((), clock, device=self.device)]).double()
        if self.dist.group is not None:
            torch.distributed.all_reduce(flags, group=self.dist.group)
        to_tokens = self.dist.world_size * constant / flags[1]  # gradients of the mean loss per target token
        norm = norm * to_tokens
        factor = to_tokens
        if self.config.clip_norm > 0:
            factor = factor * (self.config.clip_norm / (norm + 1e-6)).clamp(max=1.0)
        torch._foreach_mul_(gradients, factor.float())
        loss_sum, tokens, bad_loss, bad_gradients, stop, clock = flags.tolist()
        self.trainer.agreed_elapsed = clock
        self.stop_voted = stop > 0
        mean_loss = loss_sum / tokens
        self.rate = self.optimizer.param_groups[0]["lr"]  # the rate of this update, for the log
        stepped = not (bad_loss or bad_gradients)
        if stepped:
            self.optimizer.step()
            self.scheduler.step()
            if self.trainer.average is not None:
                self.trainer.average.update(self.state["step"] + 1)
            self.norm_sum += norm.detach().float()  # summed on the device, read when the progress line is written
            self.norm_count += 1
        self.optimizer.zero_grad(set_to_none=True)
        if scaler:
            if bad_loss:  # as the scaler does for overflowing gradients: a smaller scale next time
                scaler.update(scaler.get_scale() * scaler.get_backoff_factor())
            else:  # unscale_ recorded whether the gradients overflowed: the scale backs off, or grows in time
                scaler.update()
        return mean_loss, int(tokens), stepped

    def run(self) -> dict:
        with self.stops_at_step_boundaries():
            return self._run()

    @contextlib.contextmanager
    def stops_at_step_boundaries(self) -> Iterator[None]:
        """Ctrl-C, SIGTERM and SIGHUP stop the run after the update in progress, with last.pt saved there, so
        that rerunning resumes exactly; a second Ctrl-C stops at once, keeping the last save. A second SIGTERM
        or SIGHUP is the same request again (a scheduler such as SLURM signals every process, and torchrun
        passes its own on to the workers): the save goes on. (Only the main thread can take signals; elsewhere
        they keep their handlers.)"""
        self.interrupted = 0

        def stop(signal_number, frame):
            if self.interrupted and signal_number == signal.SIGINT:
                raise Interrupted(signal_number, message=f"interrupted by {signal_name(signal_number)} again: "
                                  f"stopped at once; {self.trainer.out / 'last.pt'} holds the last save")
            if self.interrupted:
                log.warning("%s again: already stopping after this update (Ctrl-C twice stops at once)",
                            signal_name(signal_number))
                return
            self.interrupted = signal_number
            log.warning("%s: stopping after this update to save last.pt (Ctrl-C again: stop at once, without "
                        "saving)", signal_name(signal_number))

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        with stop_signals_handled_by(stop):
            yield

    def _run(self) -> dict:
        s = self.state
        window_tokens, window_loss, window_steps, window_start = 0, 0.0, 0, time.monotonic()
        skipped_in_a_row = 0
        while not self.finished():
            groups = self.epoch_groups(s["epoch"], s["batch_in_epoch"])
            try:  # the read-ahead thread closed and joined however the epoch ends
                for group in groups:
                    if self.finished():
                        break
                    loss, n_tokens, stepped = self.update(group)
                    s["batch_in_epoch"] += 1
                    if not stepped:
                        s["skipped"] = s.get("skipped", 0) + 1
                        skipped_in_a_row += 1
                        if math.isfinite(loss) and self.scaler:  # the scaler finding its scale: usual at first
                            log.info("update skipped after step %d: fp16 gradients overflowed", s["step"])
                        else:
                            log.warning("update skipped after step %d: the %s not finite", s["step"],
                                        "gradients are" if math.isfinite(loss) else "loss is")
                        if skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
                            raise NmtError(f"{skipped_in_a_row} updates in a row were skipped (loss or gradients not "
                                           f"finite) after step {s['step']}: stopped; last.pt holds the last save. "
                                           "Lower --lr, or use --precision fp32")
                        continue
                    skipped_in_a_row = 0
                    s["step"] += 1
                    window_loss += loss
                    window_tokens += n_tokens
                    window_steps += 1
                    if s["step"] % self.config.log_every == 0:
                        elapsed = time.monotonic() - window_start
                        self.report_progress(window_loss / window_steps, window_tokens / elapsed)
                        window_tokens, window_loss, window_steps, window_start = 0, 0.0, 0, time.monotonic()
                    if self.config.save_every and s["step"] % self.config.save_every == 0:
                        self.save_last()
                    if s["step"] % self.config.valid_every == 0:
                        paused = time.monotonic()
                        if self.validate_and_save():
                            return self.summary("early stop")
                        # tokens/s, --max-minutes and a decay over them count training time only
                        window_start += time.monotonic() - paused
                        self.trainer.started += time.monotonic() - paused
                else:
                    s["epoch"] += 1
                    s["batch_in_epoch"] = 0
            finally:
                groups.close()
        if self.dist.any(bool(self.interrupted)):
            self.save_last()
            raise Interrupted(self.interrupted or signal.SIGTERM, message=(
                f"interrupted by {signal_name(self.interrupted or signal.SIGTERM)} at step {s['step']}: saved "
                f"{self.trainer.out / 'last.pt'} there; rerun the same command to resume"))
        if s["step"] % self.config.valid_every != 0:
            self.validate_and_save()
        return self.summary("budget reached")

    def report_progress(self, loss: float, tokens_per_second: float) -> None:
        if not self.dist.is_main:
            return
        s, c = self.state, self.config
        elapsed = self.trainer.elapsed()
        remaining = []
        if c.max_steps:
            remaining.append(elapsed / s["step"] * (c.max_steps - s["step"]))
        if c.max_minutes:
            remaining.append(60 * c.max_minutes - elapsed)
        eta = f" | ETA {min(remaining) / 60:.0f} min" if remaining else ""
        lr = self.rate
        log.info("step %d | epoch %d | loss %.3f | lr %.2e | %.0f tgt tok/s%s", s["step"], s["epoch"] + 1, loss, lr,
                 tokens_per_second, eta)  # every rank's tokens, counted in the update's all-reduce
        record = {"step": s["step"], "epoch": s["epoch"] + 1, "train_loss": round(loss, 4), "lr": lr,
                  "tokens_per_s": round(tokens_per_second)}
        if s.get("skipped"):
            record["skipped_updates"] = s["skipped"]  # since the run began
        if self.scaler:
            record["loss_scale"] = self.scaler.get_scale()
        if self.norm_count:
            record["grad_norm"] = round(self.norm_sum.item() / self.norm_count, 4)  # mean over the window
            self.norm_sum.zero_()
            self.norm_count = 0
        if self.device.type == "cuda":
            record["gpu_memory_gib"] = round(torch.cuda.max_memory_allocated(self.device) / 2**30, 2)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.append_metrics(record)

    def append_metrics(self, record: dict) -> None:
        record["elapsed_s"] = round(self.trainer.local_elapsed(), 1)
        with open(self.trainer.out / "metrics.jsonl", "a") as file:
            file.write(json.dumps(record) + "\n")

    def validate(self, model: Transformer) -> tuple[float, float]:
        """Validation loss (per target token) and greedy BLEU of `model`."""
        valid_loss = self.validate_loss(model)
        translator = Translator(model, self.tokenizer, SearchOptions(beam_size=1), self.valid_tokens,
                                cuda_graphs=False)  # graphs captured for each batch shape would stay in memory
        hypotheses = [t.text for t in translator.translate(self.valid.source)]
        return valid_loss, score(hypotheses, self.valid.target).bleu

    def validate_loss(self, model: Transformer) -> float:
        """Cross-entropy per target token of the validation pairs under `model` (no label smoothing)."""
        model.eval()
        c = self.model_config
        criterion = TranslationLoss(model)  # the logits a chunk at a time, as in training
        total, count = 0.0, 0
        sources, targets = self.valid_ids
        with torch.no_grad():
            for batch in token_batches([len(s) for s in sources], [len(t) for t in targets], self.valid_tokens, 0, 0):
                src, tgt_in, tgt_out = collate([sources[i] for i in batch], [targets[i] for i in batch], c.pad_id,
                                               c.bos_id, c.eos_id)
                total += criterion(src.to(self.device), tgt_in.to(self.device), tgt_out.to(self.device)).item()
                count += int((tgt_out != c.pad_id).sum())
        return total / max(count, 1)

    def random_states(self) -> list[dict]:
        """Every rank's random generators (dropout's, the data order's), gathered on every rank: a resume on
        as many ranks gives each its own back, and is exact. A collective: every rank calls it."""
        mine = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if self.device.type == "cuda":
            mine["cuda"] = torch.cuda.get_rng_state(self.device)
        return self.dist.gathered(mine)

    def checkpoint(self, random_states: list[dict] | None = None) -> Checkpoint:
        """The run as it stands; with the training state to resume from where every rank's `random_states`
        are given (random_states())."""
        s = self.state
        s["elapsed"] = self.trainer.local_elapsed()  # rank 0's, which saves
        train_state = None
        if random_states is not None:
            train_state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                           "torch_rng": random_states[0]["torch"], "python_rng": random_states[0]["python"],
                           "rank_rng": random_states, "progress": dict(s), "schedule": dict(self.trainer.schedule)}
            if self.scaler:
                train_state["scaler"] = self.scaler.state_dict()
            if "cuda" in random_states[0]:
                train_state["cuda_rng"] = random_states[0]["cuda"]
        summary = {"step": s["step"], "epoch": s["epoch"] + 1, "best_bleu": round(s["best_bleu"], 2),
                   "hours": round(s["elapsed"] / 3600, 2), "data": self.config.data or self.config.src_file
                   or self.config.hf_dataset or self.config.prepared}
        average = self.trainer.average
        return Checkpoint(self.model.config, model_weights(self.model), self.tokenizer.model_bytes,
                          training={"config": self.config.to_dict(), "summary": summary}, train_state=train_state,
                          ema=average.weights() if average is not None else None)

    def save_last(self) -> None:
        """last.pt, written by rank 0 with every rank's random states (every rank calls it)."""
        random_states = self.random_states()
        if self.dist.is_main:
            save_checkpoint(self.trainer.out / "last.pt", self.checkpoint(random_states))

    def validate_and_save(self) -> bool:
        """Validate, write checkpoints; True when early stopping says stop (on every rank)."""
        stop = False
        s = self.state
        if self.dist.is_main:
            average = self.trainer.average
            record = {"step": s["step"], "epoch": s["epoch"] + 1}
            if average is not None:  # the average is what is scored and chosen; the weights' loss beside it
                record["valid_loss_weights"] = round(self.validate_loss(self.model), 4)
            valid_loss, bleu = self.validate(average.model if average is not None else self.model)
            improved = bleu > s["best_bleu"]
            s["bad_validations"] = 0 if improved else s["bad_validations"] + 1
            s["best_bleu"] = max(s["best_bleu"], bleu)
            log.info("validation at step %d: loss %.3f, greedy BLEU %.2f%s%s", s["step"], valid_loss, bleu,
                     " of the moving average" if average is not None else "", " (best)" if improved else "")
            self.append_metrics({**record, "valid_loss": round(valid_loss, 4), "valid_bleu": round(bleu, 2)})
            snapshot = self.checkpoint()
            out = self.trainer.out
            if improved:
                save_checkpoint(out / "best.pt", snapshot)
            if self.config.keep_last:
                save_checkpoint(out / f"step{s['step']:07d}.pt", snapshot)
                for old in sorted(out.glob("step*.pt"))[: -self.config.keep_last]:
                    old.unlink()
            stop = bool(self.config.patience) and s["bad_validations"] >= self.config.patience
        self.save_last()
        return self.dist.any(stop)

    def summary(self, reason: str) -> dict:
        s = self.state
        log.info("finished (%s) at step %d, best validation BLEU %.2f", reason, s["step"], s["best_bleu"])
        return {"step": s["step"], "best_bleu": s["best_bleu"], "reason": reason}


def _decay_end(schedule: dict) -> str:
    if "total" in schedule:
        return f" to 0 at step {schedule['total']}"
    return f" to 0 after {schedule['minutes']:g} minutes" if "minutes" in schedule else ""


def train(config: TrainConfig) -> dict:
    return Trainer(config).run()


def average_checkpoints(paths: list[str | Path], out: str | Path, ema: bool = False) -> None:
    """Average the weights (`ema`: the moving averages) of several checkpoints of one model, training state
    dropped."""
    save_checkpoint(out, averaged_checkpoint(load_for_averaging(paths, ema)))


def load_for_averaging(paths: list[str | Path], ema: bool = False) -> list[tuple[str | Path, Checkpoint]]:
    """Each path with its checkpoint (`ema`: with its moving average as its weights), all of one model, oldest
    first (by the step each was saved at)."""
    if not paths:
        raise UsageError("nothing to average: give checkpoint files")
    loaded = [(path, load_checkpoint(path)) for path in paths]
    if ema:
        missing = [str(path) for path, c in loaded if c.ema is None]
        if missing:
            raise UsageError(f"{', '.join(missing[:3])}: no moving average of the weights (trained without --ema)")
        loaded = [(path, c.with_ema_weights()) for path, c in loaded]
    if any(c.config != loaded[0][1].config for _, c in loaded):
        raise UsageError("checkpoints of different model configurations cannot be averaged")
    return sorted(loaded, key=lambda pair: saved_at_step(pair[1]))


def saved_at_step(checkpoint: Checkpoint) -> int:
    return checkpoint.training.get("summary", {}).get("step", 0)


def averaged_checkpoint(loaded: list[tuple[str | Path, Checkpoint]]) -> Checkpoint:
    """One checkpoint whose floating-point weights are the mean of the loaded checkpoints' (oldest first)."""
    checkpoints = [c for _, c in loaded]
    first, newest = checkpoints[0], checkpoints[-1]
    averaged = {}
    for name, tensor in first.weights.items():
        if tensor.is_floating_point():
            averaged[name] = sum(c.weights[name].double() for c in checkpoints).div(len(checkpoints)).to(tensor.dtype)
        else:
            averaged[name] = tensor
    summary = dict(newest.training.get("summary", {}), averaged=len(checkpoints))
    training = dict(newest.training, summary=summary, averaged_from=[str(path) for path, _ in loaded])
    return Checkpoint(first.config, averaged, first.spm_model, first.decoding, training)
