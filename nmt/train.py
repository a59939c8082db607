"""Training as in the paper: Adam(0.9, 0.98, 1e-9), inverse-square-root schedule with warmup, label
smoothing 0.1, dropout; with token-budget batches, accumulation, bf16/fp16, validation BLEU, best/last
checkpoints, early stopping, exact resume, and DistributedDataParallel under torchrun.

    train(TrainConfig(data="multi30k", preset="small", out="runs/m30k"))

The output folder holds `last.pt` (with the training state), `best.pt` (best validation BLEU),
`step*.pt` (the last few validations, for `nmt average`), `config.yaml` and `metrics.jsonl`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import math
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from nmt.allocator import keep_freed_memory
from nmt.batching import collate, token_batches
from nmt.checkpoint import Checkpoint, load_checkpoint, model_weights, save_checkpoint
from nmt.config import PRESETS, ModelConfig
from nmt.corpus import ParallelText
from nmt.data import Corpus, DataSpec, FilterSpec, load_training_corpus, parse_names, tokenize
from nmt.errors import NmtError, UsageError
from nmt.evaluate import score
from nmt.model import Transformer
from nmt.tokenizer import Tokenizer, train_tokenizer

log = logging.getLogger("nmt")

# Options whose change on resume alters the run (others, such as --max-steps, just extend it).
RESUME_SENSITIVE = ("data", "src_file", "tgt_file", "hf_dataset", "preset", "vocab_size", "max_tokens", "lr",
                    "warmup", "seed", "update_freq", "label_smoothing", "precision", "dropout")


@dataclass(frozen=True)
class TrainConfig:
    out: str
    data: str | None = None  # embedded corpora, comma-separated; "tatoeba*2" repeats one
    src_file: str | None = None
    tgt_file: str | None = None
    hf_dataset: str | None = None
    hf_config: str | None = None
    streaming: bool = False
    valid_src: str | None = None
    valid_tgt: str | None = None
    preset: str = "small"
    pre_norm: bool = False
    dropout: float = 0.1
    max_positions: int = 512
    vocab_size: int = 8000
    spm: str | None = None
    max_tokens: int = 4096
    update_freq: int = 1
    lr: float = 1e-3
    warmup: int | None = None  # default: a tenth of the planned steps, at most 4000
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    precision: str = "fp32"
    max_steps: int | None = None
    max_epochs: int | None = None
    max_minutes: float | None = None
    valid_every: int = 1000
    valid_bleu_lines: int | None = None  # validate on the first N pairs only
    patience: int = 0  # validations without a better BLEU before stopping; 0: never
    keep_last: int = 5
    seed: int = 1
    threads: int | None = None
    init_from: str | None = None
    max_len: int = 250  # filter: subword tokens per side
    max_ratio: float = 3.0
    log_every: int = 100

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise UsageError(f"unknown preset {self.preset!r}; choose from {', '.join(PRESETS)}")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise UsageError(f"--precision must be fp32, bf16 or fp16, not {self.precision!r}")
        if not (self.max_steps or self.max_epochs or self.max_minutes):
            raise UsageError("give a budget: --max-steps, --max-epochs or --max-minutes")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def inverse_sqrt(step: int, warmup: int) -> float:
    """The paper's schedule as a factor of the peak rate: linear warmup, then 1/sqrt(step)."""
    step = max(step, 1)
    return min(step / warmup, math.sqrt(warmup / step))


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environment(cls, device: torch.device) -> Distributed:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1:
            return cls()
        import torch.distributed as dist

        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), world_size)

    def barrier(self) -> None:
        if self.world_size > 1:
            torch.distributed.barrier()

    def any(self, flag: bool) -> bool:
        """True on every rank when `flag` is true on one of them."""
        if self.world_size == 1:
            return flag
        tensor = torch.tensor([int(flag)])
        torch.distributed.all_reduce(tensor)
        return bool(tensor.item())


class Trainer:
    def __init__(self, config: TrainConfig):
        self.config = config
        self.out = Path(config.out)
        self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() \
            else torch.device("cpu")
        self.dist = Distributed.from_environment(self.device)
        if config.threads:
            torch.set_num_threads(config.threads)
        if self.device.type == "cpu":
            keep_freed_memory()
        if config.precision == "fp16" and self.device.type != "cuda":
            raise UsageError("--precision fp16 needs a CUDA device; use bf16 on CPU")
        if self.dist.is_main:
            self.out.mkdir(parents=True, exist_ok=True)

    # ---- data -------------------------------------------------------------------------------------
    def _corpus(self) -> Corpus:
        config = self.config
        spec = DataSpec(names=parse_names(config.data) if config.data else (), src_file=config.src_file,
                        tgt_file=config.tgt_file, hf_dataset=config.hf_dataset, hf_config=config.hf_config,
                        streaming=config.streaming, valid_src=config.valid_src, valid_tgt=config.valid_tgt,
                        seed=config.seed)
        return load_training_corpus(spec)

    def _tokenizer(self, corpus: Corpus, init: Checkpoint | None) -> Tokenizer:
        """--spm, else the one of --init-from or an earlier run here, else a new one (trained on rank 0)."""
        if self.config.spm:
            try:
                return Tokenizer(Path(self.config.spm).read_bytes())
            except (OSError, RuntimeError) as exc:
                raise UsageError(f"cannot load the sentencepiece model {self.config.spm}: {exc}") from None
        if init is not None:
            return init.tokenizer()
        path = self.out / "spm.model"
        if not path.exists() and self.dist.is_main:
            log.info("training a %d-piece sentencepiece model", self.config.vocab_size)
            text = corpus.train.source + corpus.train.target if corpus.train else _stream_sample(corpus.stream)
            sample = random.Random(self.config.seed).sample(text, min(len(text), 2_000_000))
            tokenizer = train_tokenizer(sample, self.config.vocab_size)
            temporary = path.with_suffix(".tmp")
            temporary.write_bytes(tokenizer.model_bytes)
            temporary.replace(path)
        self.dist.barrier()
        return Tokenizer(path.read_bytes())

    # ---- model, optimizer, schedule ---------------------------------------------------------------
    def _model_config(self, tokenizer: Tokenizer, init: Checkpoint | None) -> ModelConfig:
        if init is not None:
            return init.config
        return ModelConfig.preset(self.config.preset, vocab_size=tokenizer.vocab_size, dropout=self.config.dropout,
                                  pre_norm=self.config.pre_norm, max_positions=self.config.max_positions)

    def run(self) -> dict:
        config = self.config
        corpus = self._corpus()
        init = load_checkpoint(config.init_from) if config.init_from else None
        tokenizer = self._tokenizer(corpus, init)
        limits = FilterSpec(config.max_len, config.max_ratio)
        stream, src_ids, tgt_ids = None, [], []
        if corpus.train is None:
            stream = StreamingBatches(corpus.stream, tokenizer, limits, config.max_tokens, config.seed)
        else:
            train_set, _ = tokenize(corpus.train, tokenizer, limits, "training")
            src_ids, tgt_ids = train_set["src"], train_set["tgt"]
        src_lengths, tgt_lengths = [len(s) for s in src_ids], [len(t) for t in tgt_ids]
        valid = corpus.valid
        if config.valid_bleu_lines and len(valid) > config.valid_bleu_lines:
            valid = ParallelText(valid.source[: config.valid_bleu_lines], valid.target[: config.valid_bleu_lines])

        torch.manual_seed(config.seed)  # the same initial weights on every rank
        model_config = self._model_config(tokenizer, init)
        model = Transformer(model_config).to(self.device)
        if init is not None:
            model.load_state_dict(init.weights)
        torch.manual_seed(config.seed + self.dist.rank)  # but different dropout
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=(0.9, 0.98), eps=1e-9)
        if stream is None:
            batches_per_epoch = len(token_batches(src_lengths, tgt_lengths, config.max_tokens, config.seed, 0))
            steps_per_epoch = max(1, batches_per_epoch // (config.update_freq * self.dist.world_size))
        else:
            steps_per_epoch = 0  # unknown until the stream has been read once
        planned = config.max_steps or (config.max_epochs or 10) * (steps_per_epoch or 4000)
        warmup = config.warmup or max(1, min(4000, planned // 10))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: inverse_sqrt(step + 1, warmup))
        log.info("model: %s, %.2fM parameters; %d training pairs, %d validation; %d steps/epoch; warmup %d",
                 config.preset, sum(p.numel() for p in model.parameters()) / 1e6, len(src_ids), len(corpus.valid),
                 steps_per_epoch, warmup)

        state = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "best_bleu": -1.0, "bad_validations": 0,
                 "elapsed": 0.0}
        last = self.out / "last.pt"
        if last.exists():
            state = self._resume(last, model, optimizer, scheduler)
        wrapped = model
        if self.dist.world_size > 1:
            wrapped = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if self.dist.is_main:
            import yaml

            (self.out / "config.yaml").write_text(yaml.safe_dump({**config.to_dict(), "warmup": warmup,
                                                                  "model": model_config.to_dict()}))
        self.model = model
        loop = _Loop(self, model, wrapped, optimizer, scheduler, tokenizer, state, valid,
                     (src_ids, tgt_ids, src_lengths, tgt_lengths), stream)
        return loop.run()

    def _resume(self, path: Path, model, optimizer, scheduler) -> dict:
        checkpoint = load_checkpoint(path)
        if checkpoint.train_state is None:
            raise UsageError(f"{path} has no training state to resume from")
        previous = checkpoint.training.get("config", {})
        changed = [f"{k}: {previous.get(k)!r} -> {getattr(self.config, k)!r}" for k in RESUME_SENSITIVE
                   if k in previous and previous[k] != getattr(self.config, k)]
        if changed:
            log.warning("resuming with changed options (the run is no longer one recipe): %s", "; ".join(changed))
        model.load_state_dict(checkpoint.weights)
        train_state = checkpoint.train_state
        optimizer.load_state_dict(train_state["optimizer"])
        scheduler.load_state_dict(train_state["scheduler"])
        torch.set_rng_state(train_state["torch_rng"])
        if self.dist.rank:  # only rank 0's generator is saved: the others start a new stream
            torch.manual_seed(self.config.seed + self.dist.rank + train_state["progress"]["step"])
        random.setstate(_to_random_state(train_state["python_rng"]))
        log.info("resuming from %s at step %d", path, train_state["progress"]["step"])
        return dict(train_state["progress"])


Batch = tuple[list[list[int]], list[list[int]]]  # source and target token ids of the sentences in a batch


def _grouped(batches: Iterator[Batch], size: int) -> Iterator[list[Batch]]:
    while group := list(itertools.islice(batches, size)):
        yield group


class StreamingBatches:
    """Batches from a corpus read as a stream (`--streaming`): `buffer` pairs at a time are tokenized,
    filtered and cut into token-budget batches; rank r of n takes every n-th batch of each buffer."""

    def __init__(self, rows, tokenizer: Tokenizer, limits: FilterSpec, max_tokens: int, seed: int,
                 buffer: int = 100_000):
        self.rows, self.tokenizer, self.limits = rows, tokenizer, limits
        self.max_tokens, self.seed, self.buffer = max_tokens, seed, buffer

    def batches(self, epoch: int, dist: Distributed) -> Iterator[Batch]:
        from nmt.corpus import ParallelText
        from nmt.data import _pairs

        pairs = _pairs(self.rows.shuffle(seed=self.seed + epoch, buffer_size=10_000)
                       if hasattr(self.rows, "shuffle") else self.rows)
        for number in itertools.count():
            chunk = list(itertools.islice(pairs, self.buffer))
            if not chunk:
                return
            text = ParallelText([s for s, _ in chunk], [t for _, t in chunk])
            dataset, _ = tokenize(text, self.tokenizer, self.limits, f"stream buffer {number + 1}")
            src, tgt = dataset["src"], dataset["tgt"]
            indices = token_batches([len(s) for s in src], [len(t) for t in tgt], self.max_tokens,
                                    self.seed + number, epoch)
            indices = indices[: len(indices) // dist.world_size * dist.world_size][dist.rank :: dist.world_size]
            for batch in indices:
                yield [src[i] for i in batch], [tgt[i] for i in batch]


def _to_random_state(value):
    version, internal, gauss = value
    return (version, tuple(internal), gauss)


def _stream_sample(stream, n: int = 200_000) -> list[str]:
    from nmt.data import _pairs

    text = []
    for source, target in _pairs(stream):
        text.extend([source, target])
        if len(text) >= n:
            break
    return text


class _Loop:
    """The step loop of one run; holds what the steps share."""

    def __init__(self, trainer, model, wrapped, optimizer, scheduler, tokenizer, state, valid, data, stream):
        self.trainer, self.config, self.dist = trainer, trainer.config, trainer.dist
        self.model, self.wrapped, self.optimizer, self.scheduler = model, wrapped, optimizer, scheduler
        self.tokenizer, self.state, self.valid = tokenizer, state, valid
        self.src_ids, self.tgt_ids, self.src_lengths, self.tgt_lengths = data
        self.stream = stream
        self.model_config = model.config
        self.device = trainer.device
        self.started = time.monotonic() - state["elapsed"]
        self.valid_set = None  # tokenized on first use

    def autocast(self):
        if self.config.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.config.precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)

    def epoch_groups(self, epoch: int) -> Iterator[list[Batch]]:
        """This rank's batches of one epoch, `update_freq` to an update; every rank gets as many."""
        if self.stream is not None:
            yield from _grouped(self.stream.batches(epoch, self.dist), self.config.update_freq)
            return
        indices = token_batches(self.src_lengths, self.tgt_lengths, self.config.max_tokens, self.config.seed, epoch)
        world = self.dist.world_size
        indices = indices[: len(indices) // world * world][self.dist.rank :: world]
        batches = (([self.src_ids[i] for i in b], [self.tgt_ids[i] for i in b]) for b in indices)
        yield from _grouped(batches, self.config.update_freq)

    def loss(self, batch: Batch) -> tuple[torch.Tensor, int]:
        c = self.model_config
        src, tgt_in, tgt_out = collate(batch[0], batch[1], c.pad_id, c.bos_id, c.eos_id)
        src, tgt_in, tgt_out = src.to(self.device), tgt_in.to(self.device), tgt_out.to(self.device)
        with self.autocast():
            logits = self.wrapped(src, tgt_in)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt_out.view(-1), ignore_index=c.pad_id,
                               label_smoothing=self.config.label_smoothing)
        return loss, int((tgt_out != c.pad_id).sum())

    def finished(self) -> bool:
        s, c = self.state, self.config
        over = (c.max_steps and s["step"] >= c.max_steps) or (c.max_epochs and s["epoch"] >= c.max_epochs)
        timed_out = c.max_minutes and (time.monotonic() - self.started) >= 60 * c.max_minutes
        return self.dist.any(bool(over or timed_out))

    def update(self, group: list[Batch], scaler) -> tuple[float, int]:
        """One optimizer step over a group of batches (gradient accumulation): its mean loss and tokens."""
        self.wrapped.train()
        total_loss, total_tokens = 0.0, 0
        for k, batch in enumerate(group):
            sync = k == len(group) - 1 or self.dist.world_size == 1
            with contextlib.nullcontext() if sync else self.wrapped.no_sync():  # all-reduce once per step
                loss, n_tokens = self.loss(batch)
                if not torch.isfinite(loss):
                    raise NmtError(f"the loss became {loss.item()} at step {self.state['step'] + 1}: stopped "
                                   "without saving; lower --lr or use --precision fp32")
                scaled = loss / len(group)
                (scaler.scale(scaled) if scaler else scaled).backward()
            total_loss += loss.item() / len(group)
            total_tokens += n_tokens
        if scaler:
            scaler.unscale_(self.optimizer)
        if self.config.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        if scaler:
            scaler.step(self.optimizer)
            scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        return total_loss, total_tokens

    def run(self) -> dict:
        scaler = torch.amp.GradScaler("cuda") if self.config.precision == "fp16" else None
        s = self.state
        window_tokens, window_loss, window_steps, window_start = 0, 0.0, 0, time.monotonic()
        try:
            while not self.finished():
                for group in itertools.islice(self.epoch_groups(s["epoch"]), s["batch_in_epoch"], None):
                    if self.finished():
                        break
                    loss, n_tokens = self.update(group, scaler)
                    s["step"] += 1
                    s["batch_in_epoch"] += 1
                    window_loss += loss
                    window_tokens += n_tokens
                    window_steps += 1
                    if s["step"] % self.config.log_every == 0:
                        elapsed = time.monotonic() - window_start
                        self.report_progress(window_loss / window_steps, window_tokens / elapsed)
                        window_tokens, window_loss, window_steps, window_start = 0, 0.0, 0, time.monotonic()
                    if s["step"] % self.config.valid_every == 0:
                        paused = time.monotonic()
                        if self.validate_and_save():
                            return self.summary("early stop")
                        window_start += time.monotonic() - paused  # tokens/s counts training time only
                else:
                    s["epoch"] += 1
                    s["batch_in_epoch"] = 0
        except KeyboardInterrupt:
            self.save_last()
            log.warning("interrupted: saved %s at step %d", self.trainer.out / "last.pt", s["step"])
            raise
        if s["step"] % self.config.valid_every != 0:
            self.validate_and_save()
        return self.summary("budget reached")

    def report_progress(self, loss: float, tokens_per_second: float) -> None:
        if not self.dist.is_main:
            return
        s, c = self.state, self.config
        elapsed = time.monotonic() - self.started
        remaining = []
        if c.max_steps:
            remaining.append(elapsed / s["step"] * (c.max_steps - s["step"]))
        if c.max_minutes:
            remaining.append(60 * c.max_minutes - elapsed)
        eta = f" | ETA {min(remaining) / 60:.0f} min" if remaining else ""
        lr = self.scheduler.get_last_lr()[0]
        log.info("step %d | epoch %d | loss %.3f | lr %.2e | %.0f tgt tok/s%s", s["step"], s["epoch"] + 1, loss, lr,
                 tokens_per_second * self.dist.world_size, eta)
        self.append_metrics({"step": s["step"], "epoch": s["epoch"] + 1, "train_loss": round(loss, 4), "lr": lr,
                             "tokens_per_s": round(tokens_per_second * self.dist.world_size)})

    def append_metrics(self, record: dict) -> None:
        record["elapsed_s"] = round(time.monotonic() - self.started, 1)
        with open(self.trainer.out / "metrics.jsonl", "a") as file:
            file.write(json.dumps(record) + "\n")

    def validate(self) -> tuple[float, float]:
        from nmt.search import SearchOptions
        from nmt.translate import Translator

        self.model.eval()
        c = self.model_config
        total, count = 0.0, 0
        if self.valid_set is None:
            self.valid_set, _ = tokenize(self.valid, self.tokenizer, FilterSpec(10**6, 10**6), "validation")
        valid_set = self.valid_set
        with torch.no_grad():
            for batch in token_batches([len(s) for s in valid_set["src"]], [len(t) for t in valid_set["tgt"]],
                                       self.config.max_tokens, 0, 0):
                src, tgt_in, tgt_out = collate([valid_set["src"][i] for i in batch],
                                               [valid_set["tgt"][i] for i in batch], c.pad_id, c.bos_id, c.eos_id)
                logits = self.model(src.to(self.device), tgt_in.to(self.device)).float()
                total += F.cross_entropy(logits.view(-1, logits.size(-1)), tgt_out.to(self.device).view(-1),
                                         ignore_index=c.pad_id, reduction="sum").item()
                count += int((tgt_out != c.pad_id).sum())
        translator = Translator(self.model, self.tokenizer, SearchOptions(beam_size=1), self.config.max_tokens)
        hypotheses = [t.text for t in translator.translate(self.valid.source)]
        return total / max(count, 1), score(hypotheses, self.valid.target).bleu

    def checkpoint(self, with_state: bool = False) -> Checkpoint:
        s = self.state
        s["elapsed"] = time.monotonic() - self.started
        train_state = None
        if with_state:
            train_state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                           "torch_rng": torch.get_rng_state(), "python_rng": random.getstate(), "progress": dict(s)}
        summary = {"step": s["step"], "epoch": s["epoch"] + 1, "best_bleu": round(s["best_bleu"], 2),
                   "hours": round(s["elapsed"] / 3600, 2), "data": self.config.data or self.config.src_file
                   or self.config.hf_dataset}
        return Checkpoint(self.model.config, model_weights(self.model), self.tokenizer.model_bytes,
                          training={"config": self.config.to_dict(), "summary": summary}, train_state=train_state)

    def save_last(self) -> None:
        if self.dist.is_main:
            save_checkpoint(self.trainer.out / "last.pt", self.checkpoint(with_state=True))

    def validate_and_save(self) -> bool:
        """Validate, write checkpoints; True when early stopping says stop (on every rank)."""
        stop = False
        s = self.state
        if self.dist.is_main:
            valid_loss, bleu = self.validate()
            improved = bleu > s["best_bleu"]
            s["bad_validations"] = 0 if improved else s["bad_validations"] + 1
            s["best_bleu"] = max(s["best_bleu"], bleu)
            log.info("validation at step %d: loss %.3f, greedy BLEU %.2f%s", s["step"], valid_loss, bleu,
                     " (best)" if improved else "")
            self.append_metrics({"step": s["step"], "epoch": s["epoch"] + 1, "valid_loss": round(valid_loss, 4),
                                 "valid_bleu": round(bleu, 2)})
            snapshot = self.checkpoint()
            out = self.trainer.out
            if improved:
                save_checkpoint(out / "best.pt", snapshot)
            if self.config.keep_last:
                save_checkpoint(out / f"step{s['step']:07d}.pt", snapshot)
                for old in sorted(out.glob("step*.pt"))[: -self.config.keep_last]:
                    old.unlink()
            self.save_last()
            stop = bool(self.config.patience) and s["bad_validations"] >= self.config.patience
        return self.dist.any(stop)

    def summary(self, reason: str) -> dict:
        s = self.state
        log.info("finished (%s) at step %d, best validation BLEU %.2f", reason, s["step"], s["best_bleu"])
        return {"step": s["step"], "best_bleu": s["best_bleu"], "reason": reason}


def train(config: TrainConfig) -> dict:
    return Trainer(config).run()


def average_checkpoints(paths: list[str | Path], out: str | Path) -> None:
    """Average the weights of several checkpoints of one model (training state dropped)."""
    if not paths:
        raise UsageError("nothing to average: give checkpoint files")
    checkpoints = [load_checkpoint(p) for p in paths]
    first = checkpoints[0]
    if any(c.config != first.config for c in checkpoints):
        raise UsageError("checkpoints of different model configurations cannot be averaged")
    averaged = {}
    for name, tensor in first.weights.items():
        if tensor.is_floating_point():
            averaged[name] = sum(c.weights[name].double() for c in checkpoints).div(len(checkpoints)).to(tensor.dtype)
        else:
            averaged[name] = tensor
    newest = max(checkpoints, key=lambda c: c.training.get("summary", {}).get("step", 0))
    summary = dict(newest.training.get("summary", {}), averaged=len(checkpoints))
    training = dict(newest.training, summary=summary, averaged_from=[str(p) for p in paths])
    save_checkpoint(out, Checkpoint(first.config, averaged, first.spm_model, first.decoding, training))
