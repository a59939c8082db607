"""The step loop of a run (Loop): batches of each epoch read ahead on a thread, the update with accumulation
and precision, the moving average of the weights, validation, checkpoints and the stop at a step boundary."""


from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from nmt.data.batching import collate, static_collate, token_batches
from nmt.data.corpus import ParallelText
from nmt.data.prepare import TokenCorpus
from nmt.decoding.configuration import DecodingConfig
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translator  # at start, not at the first validation: code changed mid-run stays out
from nmt.errors import DataError, Interrupted, NmtError, signal_name, stop_signals_handled_by
from nmt.model.checkpoint import Checkpoint, model_weights, save_checkpoint
from nmt.model.loss import TranslationLoss
from nmt.model.transformer import Transformer
from nmt.text.metrics import score
from nmt.text.tokenizer import Tokenizer
from nmt.training.flops import peak_flops, training_flops

if TYPE_CHECKING:
    from nmt.training.config import TrainConfig
    from nmt.training.distributed import Distributed

log = logging.getLogger("nmt")

MAX_SKIPPED_IN_A_ROW = 50  # updates skipped for a loss or gradients that are not finite, before giving up
COMPILED_LENGTH_MULTIPLE = 8  # --compile: lengths padded to it, so no length recompiles the step for alignment
PREFETCH_UPDATES = 2  # updates whose batches a thread reads and collates ahead of the step
VALID_MAX_TOKENS = 8192  # padded tokens in a validation batch, at most


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

    def __init__(self, corpus: TokenCorpus, max_tokens: int, seed: int, static_shapes: bool = False):
        self.corpus, self.max_tokens, self.seed, self.static_shapes = corpus, max_tokens, seed, static_shapes
        self._epoch, self._batches = None, []

    def of(self, epoch: int) -> list:
        if self._epoch != epoch:
            self._batches = token_batches(self.corpus.source_lengths, self.corpus.target_lengths, self.max_tokens,
                                          self.seed, epoch, self.static_shapes)
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
    def update(self, step: int, skipped: torch.Tensor) -> None:
        """Move the average towards the weights after update `step` (counted from 1), unless `skipped` (a
        boolean on the device: the update was not taken; read by no one, so that the host need not wait)."""
        decay = min(self.decay, (1 + step) / (10 + step))
        weight = torch.where(skipped, 0.0, 1 - decay)  # one per tensor: a single tensor weight is read on the host
        torch._foreach_lerp_(self.averaged, [p.detach() for p in self.live], [weight] * len(self.averaged))

    def weights(self) -> dict[str, torch.Tensor]:
        return model_weights(self.model)


@dataclass
class Collated:
    """A batch as the step takes it: source (B, S), target input and output (B, T) ids, its target tokens
    (EOS included) and the FLOPs of its forward and backward on its real tokens (nmt.training.flops)."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_tokens: int
    flops: int


@dataclass
class Queued:
    """An update whose work the device may not have done yet: its all-reduced values (summed loss, target
    tokens, loss not finite, gradients not finite, a rank wants to stop, rank 0's clock, FLOPs) on their way
    to a host tensor, which `copied` (CUDA) says is filled."""

    step: int  # the update's number, counted from 1
    values: torch.Tensor
    copied: torch.cuda.Event | None

    def read(self) -> list[float]:
        if self.copied is not None:
            self.copied.synchronize()  # waits for this update's copy, not for the work queued after it
        return self.values.tolist()


@dataclass
class Window:
    """The updates since the last progress line: their target tokens and FLOPs, the loss of those taken."""

    start: float
    tokens: int = 0
    flops: int = 0
    loss: float = 0.0
    taken: int = 0


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


def to_random_state(value):
    version, internal, gauss = value
    return (version, tuple(internal), gauss)


class Clock:
    """Seconds of training across resumes, validation's pauses left out: what --max-minutes and a decay over
    minutes count. With several ranks, the run's one clock is rank 0's as the ranks last agreed on it at an
    update (each rank's own would let a time-based rate and stop differ between ranks)."""

    def __init__(self, world_size: int = 1, before: float = 0.0):
        self.world_size = world_size
        self.started = time.monotonic() - before
        self.agreed: float | None = None  # rank 0's seconds, as the ranks last agreed on them

    def resume(self, before: float) -> None:
        """Count from `before` seconds trained already."""
        self.started, self.agreed = time.monotonic() - before, before

    def local(self) -> float:
        """Seconds by this process's clock."""
        return time.monotonic() - self.started

    def elapsed(self) -> float:
        """Seconds by the run's one clock."""
        return self.local() if self.world_size == 1 or self.agreed is None else self.agreed

    def pause(self, seconds: float) -> None:
        """Leave out `seconds` that were not training (a validation)."""
        self.started += seconds


@dataclass(frozen=True)
class Run:
    """What the Trainer resolved for the step loop: the configuration, the ranks and device, the precision, the
    batches an update, the rate's schedule, the output folder and the clock."""

    config: TrainConfig
    dist: Distributed
    device: torch.device
    precision: str  # fp32, bf16 or fp16
    update_freq: int
    schedule: dict
    out: Path
    clock: Clock


@dataclass(frozen=True)
class Learner:
    """What learns: the model, its loss (wrapped for the ranks), the optimizer and the rate's scheduler, the
    moving average of the weights (--ema), a resumed fp16 loss scale."""

    model: Transformer
    wrapped: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    average: MovingAverage | None = None
    scaler_state: dict | None = None


@dataclass(frozen=True)
class Feed:
    """What the loop reads: the training batches, the validation pairs and their token ids, the tokenizer."""

    batches: EpochBatches | None
    tokenizer: Tokenizer | None = None
    valid: ParallelText | None = None
    valid_ids: list | None = None


class Loop:
    """The step loop of one run; holds what the steps share."""

    def __init__(self, run: Run, learner: Learner, feed: Feed, state: dict):
        """state: the run's progress (step, epoch, ...), updated in place and saved with each checkpoint."""
        self.setup, self.config, self.dist, self.clock = run, run.config, run.dist, run.clock
        self.model, self.wrapped, self.optimizer = learner.model, learner.wrapped, learner.optimizer
        self.scheduler, self.average = learner.scheduler, learner.average
        self.tokenizer, self.valid, self.valid_ids, self.batches = feed.tokenizer, feed.valid, feed.valid_ids, \
            feed.batches
        self.state = state
        self.model_config = learner.model.config
        self.device = run.device
        self.interrupted = 0  # the signal that asked the run to stop at the next step boundary
        self.norm_sum = torch.zeros((), device=self.device)  # of the gradient norms (before clipping) of the
        # updates taken since the last progress line
        self.scaler = torch.amp.GradScaler("cuda") if run.precision == "fp16" else None
        # validation's batches: a --max-tokens raised to fill a GPU for training would not fit beside it
        self.valid_tokens = min(self.config.max_tokens, VALID_MAX_TOKENS)
        self.peak = peak_flops(self.device)[1]  # a GPU's dense bf16 FLOP/s, for the utilization logged
        self.stop_voted = None  # whether some rank wanted to stop, as of the last update read (finished())
        # fused Adam skips an update on the device (its found_inf), with no wait for the update's values
        self.skips_on_device = all(group.get("fused") for group in self.optimizer.param_groups) and \
            getattr(self.optimizer, "_step_supports_amp_scaling", False)
        self.pending: Queued | None = None  # the last update queued, its values not yet read (advance())
        self.window = Window(time.monotonic())
        self.skipped_in_a_row = 0
        if self.scaler and learner.scaler_state:
            self.scaler.load_state_dict(learner.scaler_state)

    def autocast(self):
        if self.setup.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.setup.precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)

    def epoch_groups(self, epoch: int, first: int = 0) -> Iterator[list[Collated]]:
        """This rank's batches of one epoch, collated, `update_freq` to an update, from update `first` on (a
        resumed epoch skips the updates done without reading their batches); every rank gets as many. Read and
        collated PREFETCH_UPDATES updates ahead on a thread of their own (pinned on CUDA), so that the step
        never waits for the host to build its next batch."""
        indices = self.batches.of(epoch)
        world, size = self.dist.world_size, self.setup.update_freq
        mine = indices[: len(indices) // world * world][self.dist.rank :: world]
        corpus = self.batches.corpus

        def groups() -> Iterator[list[Collated]]:
            for start in range(first * size, len(mine), size):
                yield [self.collated(corpus.pairs(batch)) for batch in mine[start : start + size]]

        return read_ahead(groups(), PREFETCH_UPDATES)

    def collated(self, batch: Batch) -> Collated:
        """A batch's token ids as the step takes them: padded (to 8 under --compile; with --static-shapes to one
        of a few shapes), pinned on CUDA."""
        c = self.model_config
        if self.config.static_shapes:
            src, tgt_in, tgt_out = static_collate(batch[0], batch[1], c.pad_id, c.bos_id, c.eos_id,
                                                  self.config.max_tokens)
        else:
            src, tgt_in, tgt_out = collate(batch[0], batch[1], c.pad_id, c.bos_id, c.eos_id,
                                           COMPILED_LENGTH_MULTIPLE if self.config.compile else 1)
        flops = training_flops(c, [len(s) + 1 for s in batch[0]], [len(t) + 1 for t in batch[1]])  # EOS counted
        if self.device.type == "cuda":  # the copies from pinned memory overlap the device's work
            src, tgt_in, tgt_out = src.pin_memory(), tgt_in.pin_memory(), tgt_out.pin_memory()
        return Collated(src, tgt_in, tgt_out, sum(map(len, batch[1])) + len(batch[1]), flops)  # targets with EOS

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
        update already makes (read an update later, while the next one runs: read()), or here before the first
        update. A lone process needs no vote."""
        s, c = self.state, self.config
        over = (c.max_steps and s["step"] >= c.max_steps) or (c.max_epochs and s["epoch"] >= c.max_epochs)
        over = over or s["step"] >= self.setup.schedule.get("total", math.inf)  # a linear decay's rate is 0 there
        if self.dist.world_size == 1:
            return bool(over or self.wants_to_stop())
        if self.stop_voted is None:
            self.stop_voted = self.dist.any(self.wants_to_stop())
        return bool(over or self.stop_voted)

    def wants_to_stop(self) -> bool:
        """This rank's own reasons to stop: training time spent, or a signal."""
        c = self.config
        return bool(c.max_minutes and self.clock.elapsed() >= 60 * c.max_minutes or self.interrupted)

    def update(self, group: list[Collated]) -> Queued:
        """One optimizer step over a group of batches (gradient accumulation), queued on the device: nothing in
        it waits for the device's work, so that the host goes on to launch the next update's while the device
        runs this one. Its values (read(): the loss per target token over every rank, the target tokens and
        FLOPs (nmt.training.flops) of every rank, and whether the step was taken) reach the host later.

        The gradient is that of the loss summed over the update's target tokens on all ranks, divided by their
        number (the paper's and fairseq's normalization: every token weighs the same, whichever micro-batch or
        rank it is in). Each backward pass takes its batch's summed loss over a constant; DDP averages the
        ranks' gradients; the token count travels in the all-reduce the update makes anyway, and the gradients
        are scaled by it (and by the clip) on the device. An update whose loss or gradients are not finite on
        some rank (with fp16, gradients that overflow: the loss scaler's skip) is skipped by all of them, on the
        device: fused Adam leaves the weights and its moments as they were where told so (`found_inf`); an
        optimizer that cannot is told on the host, which then waits for the update's values. The rate's schedule
        moves with every update, taken or skipped (a skip is rare, and knowing of it would take a wait)."""
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
        # the update's one all-reduce (Queued's values)
        clock = self.clock.local() if self.dist.is_main else 0.0
        total_flops = float(sum(batch.flops for batch in group))
        flags = torch.stack([total_loss, torch.full((), float(total_tokens), device=self.device),
                             (~torch.isfinite(total_loss)).float(), (~torch.isfinite(norm)).float(),
                             torch.full((), float(self.wants_to_stop()), device=self.device),
                             torch.full((), clock, device=self.device),
                             torch.full((), total_flops, device=self.device, dtype=torch.float64)]).double()
        if self.dist.group is not None:
            torch.distributed.all_reduce(flags, group=self.dist.group)
        queued = self.queued(flags)
        skipped = flags[2] + flags[3] > 0
        to_tokens = self.dist.world_size * constant / flags[1]  # gradients of the mean loss per target token
        norm = norm * to_tokens
        factor = to_tokens
        if self.config.clip_norm > 0:
            factor = factor * (self.config.clip_norm / (norm + 1e-6)).clamp(max=1.0)
        torch._foreach_mul_(gradients, factor.float())
        self.rate = self.optimizer.param_groups[0]["lr"]  # the rate of this update, for the log
        if self.skips_on_device:
            self.optimizer.found_inf = skipped.float()
            self.optimizer.step()
        elif not skipped.item():
            self.optimizer.step()
        self.scheduler.step()
        if self.average is not None:
            self.average.update(queued.step, skipped)
        self.norm_sum += torch.where(skipped, 0.0, norm.detach().float())  # read by the progress line
        self.optimizer.zero_grad(set_to_none=True)
        if scaler:  # unscale_ recorded whether the gradients overflowed: the scale backs off, or grows in time
            scaler.update()
        return queued

    def queued(self, values: torch.Tensor) -> Queued:
        """The update's values, copied to the host once the device gets there (on CUDA, without waiting)."""
        cuda = self.device.type == "cuda"
        host = torch.empty(values.shape, dtype=values.dtype, device="cpu", pin_memory=cuda)
        host.copy_(values, non_blocking=cuda)
        copied = None
        if cuda:
            copied = torch.cuda.Event()
            copied.record()
        return Queued(self.state["step"] + 1, host, copied)

    def read(self, queued: Queued) -> tuple[float, int, int, bool]:
        """A queued update's loss per target token, target tokens, FLOPs and whether it was taken (waiting for
        them if need be); what the ranks agreed on in it (a rank wants to stop, the clock) taken in."""
        loss_sum, tokens, bad_loss, bad_gradients, stop, clock, flops = queued.read()
        self.clock.agreed = clock
        self.stop_voted = stop > 0
        return loss_sum / tokens, int(tokens), int(flops), not (bad_loss or bad_gradients)

    def advance(self, group: list[Collated]) -> None:
        """Queue an update, then take in the one before it, which the device has done, or soon will, while
        this one's work waits in line behind it."""
        queued = self.update(group)
        self.settle()
        self.pending = queued

    def settle(self) -> None:
        """Take in the last update queued, if not yet (before what needs the run's state as of now: a
        progress line, a checkpoint, validation, the end)."""
        if self.pending is None:
            return
        queued, self.pending = self.pending, None
        loss, tokens, flops, taken = self.read(queued)
        window = self.window
        window.tokens += tokens
        window.flops += flops
        if taken:
            window.loss += loss
            window.taken += 1
            self.skipped_in_a_row = 0
            return
        s = self.state
        s["skipped"] = s.get("skipped", 0) + 1
        self.skipped_in_a_row += 1
        if math.isfinite(loss) and self.scaler:  # the scaler finding its scale: usual at first
            log.info("update %d skipped: fp16 gradients overflowed", queued.step)
        else:
            log.warning("update %d skipped: the %s not finite", queued.step,
                        "gradients are" if math.isfinite(loss) else "loss is")
        if self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW:
            raise NmtError(f"{self.skipped_in_a_row} updates in a row were skipped (loss or gradients not finite) "
                           f"up to update {queued.step}: stopped; last.pt holds the last save. Lower --lr, or use "
                           "--precision fp32")

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
                                  f"stopped at once; {self.setup.out / 'last.pt'} holds the last save")
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
        self.window = Window(time.monotonic())
        while not self.finished():
            groups = self.epoch_groups(s["epoch"], s["batch_in_epoch"])
            try:  # the read-ahead thread closed and joined however the epoch ends
                for group in groups:
                    if self.finished():
                        break
                    with self.dist.waiting():  # for the other ranks, in DDP's all-reduce and the read of an update
                        self.advance(group)
                    s["batch_in_epoch"] += 1
                    s["step"] += 1
                    if s["step"] % self.config.log_every == 0:
                        self.settle()
                        self.report_progress()
                    every = self.config.checkpoint_every
                    if every and s["step"] % every == 0 and s["step"] % self.config.valid_every != 0 \
                            and self.dist.is_main:
                        self.settle()
                        self.save_step(self.checkpoint())  # a validation writes its own
                    if self.config.save_every and s["step"] % self.config.save_every == 0:
                        self.settle()
                        self.save_last()
                    if s["step"] % self.config.valid_every == 0:
                        self.settle()
                        paused = time.monotonic()
                        if self.validate_and_save():
                            return self.summary("early stop")
                        # tokens/s, --max-minutes and a decay over them count training time only
                        self.window.start += time.monotonic() - paused
                        self.clock.pause(time.monotonic() - paused)
                else:
                    s["epoch"] += 1
                    s["batch_in_epoch"] = 0
            finally:
                groups.close()
        self.settle()
        if self.dist.any(bool(self.interrupted)):
            self.save_last()
            raise Interrupted(self.interrupted or signal.SIGTERM, message=(
                f"interrupted by {signal_name(self.interrupted or signal.SIGTERM)} at step {s['step']}: saved "
                f"{self.setup.out / 'last.pt'} there; rerun the same command to resume"))
        if s["step"] % self.config.valid_every != 0:
            self.validate_and_save()
        return self.summary("budget reached")

    def report_progress(self) -> None:
        """The progress line and metrics.jsonl's record of the updates since the last (read: settle())."""
        window, now = self.window, time.monotonic()
        norm_sum, self.norm_sum = self.norm_sum, torch.zeros_like(self.norm_sum)
        self.window = Window(now)
        if not self.dist.is_main or not window.taken:  # every update skipped: their warnings said so
            return
        loss, seconds = window.loss / window.taken, now - window.start
        tokens_per_second, flops_per_second = window.tokens / seconds, window.flops / seconds
        s, c = self.state, self.config
        elapsed = self.clock.elapsed()
        remaining = []
        if c.max_steps:
            remaining.append(elapsed / s["step"] * (c.max_steps - s["step"]))
        if c.max_minutes:
            remaining.append(60 * c.max_minutes - elapsed)
        eta = f" | ETA {min(remaining) / 60:.0f} min" if remaining else ""
        lr = self.rate
        # every rank's FLOPs on real tokens (nmt.training.flops)
        work = f" | {flops_per_second / 1e12:.1f} TFLOP/s" if flops_per_second >= 1e12 else \
            f" | {flops_per_second / 1e9:.1f} GFLOP/s"
        peak = self.peak * self.dist.world_size if self.peak else None
        if peak:
            work += f" | MFU {flops_per_second / peak:.1%}"
        log.info("step %d | epoch %d | loss %.3f | lr %.2e | %.0f tgt tok/s%s%s", s["step"], s["epoch"] + 1, loss,
                 lr, tokens_per_second, work, eta)  # every rank's tokens, counted in the update's all-reduce
        record = {"step": s["step"], "epoch": s["epoch"] + 1, "train_loss": round(loss, 4), "lr": lr,
                  "tokens_per_s": round(tokens_per_second), "tflops_per_s": round(flops_per_second / 1e12, 4)}
        if peak:
            record["mfu"] = round(flops_per_second / peak, 4)
        if s.get("skipped"):
            record["skipped_updates"] = s["skipped"]  # since the run began
        if self.scaler:
            record["loss_scale"] = self.scaler.get_scale()
        record["grad_norm"] = round(norm_sum.item() / window.taken, 4)  # mean over the window's updates taken
        if self.device.type == "cuda":
            record["gpu_memory_gib"] = round(torch.cuda.max_memory_allocated(self.device) / 2**30, 2)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.append_metrics(record)

    def append_metrics(self, record: dict) -> None:
        record["elapsed_s"] = round(self.clock.local(), 1)
        with open(self.setup.out / "metrics.jsonl", "a") as file:
            file.write(json.dumps(record) + "\n")

    def validate(self, model: Transformer) -> tuple[float, float]:
        """Validation loss (per target token) and greedy BLEU of `model`."""
        valid_loss = self.validate_loss(model)
        # (no CUDA graphs: those captured for each batch shape would stay in memory)
        translator = Translator(model, self.tokenizer, DecodingConfig.plain(SearchOptions(beam_size=1),
                                                                            max_tokens=self.valid_tokens,
                                                                            cuda_graphs=False))
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
        s["elapsed"] = self.clock.local()  # rank 0's, which saves
        train_state = None
        if random_states is not None:
            train_state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                           "torch_rng": random_states[0]["torch"], "python_rng": random_states[0]["python"],
                           "rank_rng": random_states, "progress": dict(s), "schedule": dict(self.setup.schedule)}
            if self.scaler:
                train_state["scaler"] = self.scaler.state_dict()
            if "cuda" in random_states[0]:
                train_state["cuda_rng"] = random_states[0]["cuda"]
        summary = {"step": s["step"], "epoch": s["epoch"] + 1, "best_bleu": round(s["best_bleu"], 2),
                   "hours": round(s["elapsed"] / 3600, 2), "data": self.config.data or self.config.src_file
                   or self.config.hf_dataset or self.config.prepared}
        average = self.average
        return Checkpoint(self.model.config, model_weights(self.model), self.tokenizer.model_bytes,
                          training={"config": self.config.to_dict(), "summary": summary}, train_state=train_state,
                          ema=average.weights() if average is not None else None)

    def save_last(self) -> None:
        """last.pt, written by rank 0 with every rank's random states (every rank calls it)."""
        random_states = self.random_states()
        if self.dist.is_main:
            save_checkpoint(self.setup.out / "last.pt", self.checkpoint(random_states))

    def save_step(self, snapshot: Checkpoint) -> None:
        """stepN.pt (rank 0), the last --keep-last of them kept: what `nmt average` averages."""
        if self.dist.is_main and self.config.keep_last:
            out = self.setup.out
            save_checkpoint(out / f"step{self.state['step']:07d}.pt", snapshot)
            for old in sorted(out.glob("step*.pt"))[: -self.config.keep_last]:
                old.unlink()

    def validate_and_save(self) -> bool:
        """Validate, write checkpoints; True when early stopping says stop (on every rank)."""
        stop = False
        s = self.state
        if self.dist.is_main:
            average = self.average
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
            out = self.setup.out
            if improved:
                save_checkpoint(out / "best.pt", snapshot)
            self.save_step(snapshot)
            stop = bool(self.config.patience) and s["bad_validations"] >= self.config.patience
        self.save_last()
        return self.dist.any(stop)

    def summary(self, reason: str) -> dict:
        s = self.state
        log.info("finished (%s) at step %d, best validation BLEU %.2f", reason, s["step"], s["best_bleu"])
        return {"step": s["step"], "best_bleu": s["best_bleu"], "reason": reason}
