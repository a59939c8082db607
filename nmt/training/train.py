"""Training as in the paper: Adam(0.9, 0.98, 1e-9), inverse-square-root schedule with warmup (or a linear decay
to zero at the end of a planned run), label smoothing 0.1, dropout; with token-budget batches, accumulation,
bf16/fp16, validation BLEU, best/last checkpoints, early stopping, exact resume (Ctrl-C included), and
DistributedDataParallel under torchrun.

    train(TrainConfig(data="multi30k", preset="small", out="runs/m30k"))

The output folder holds `last.pt` (with the training state), `best.pt` (best validation BLEU),
`step*.pt` (the last few validations, for `nmt average`), `config.yaml` and `metrics.jsonl`.

The rooms: config (TrainConfig and what it resolves to), schedule (the learning rate as a function of the step),
distributed (ranks, devices, shared-folder checks), loop (the step loop: batches read ahead, the update, the
moving average, validation, checkpoints), averaging (checkpoints after a run), and here the Trainer, which
builds a run's model, data, optimizer and schedule, resumes it, and hands them to the loop.
"""


from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import random
from pathlib import Path

import torch

from nmt.data.corpus import ParallelText
from nmt.data.prepare import Prepared, TokenCorpus, open_prepared, prepare_training_data
from nmt.data.sources import DataSpec, validation_pairs
from nmt.errors import DataError, NmtError, UsageError, first_line, stop_now_or_later, stop_signals_handled_by
from nmt.model.checkpoint import Checkpoint, load_checkpoint
from nmt.model.config import ModelConfig
from nmt.model.loss import TranslationLoss
from nmt.model.native import library
from nmt.model.transformer import Transformer
from nmt.text.tokenizer import Tokenizer
from nmt.training.allocator import keep_freed_memory
from nmt.training.config import TrainConfig, batches_per_update, model_config, steps_in_epoch
from nmt.training.distributed import (
    Distributed,
    PeerFailures,
    PreparedByRankZero,
    check_same_inputs,
    check_shared_folder,
    lock_run_folder,
    training_device,
    training_precision,
    unanswered,
)
from nmt.training.loop import (
    Clock,
    EpochBatches,
    Feed,
    Learner,
    Loop,
    MovingAverage,
    Run,
    to_random_state,
    tokenized_pairs,
)
from nmt.training.schedule import REWARM, decay_end, paper_peak_lr, rate_factor

log = logging.getLogger("nmt")

# Options whose change on resume alters the run (others, such as --max-steps, just extend it).
# (The model's shape and the schedule are checked harder: a change is an error, see Trainer._resumable/_schedule.)
RESUME_SENSITIVE = ("data", "src_file", "tgt_file", "hf_dataset", "prepared", "augment", "augment_swap",
                    "register_tags", "max_tokens", "static_shapes", "seed", "label_smoothing", "precision", "dropout",
                    "ema")


class Trainer:
    def __init__(self, config: TrainConfig):
        self.config = config
        self.out = Path(config.out)
        self.device = training_device()
        self.dist = Distributed(self.device)  # until run() joins the others
        self.clock = Clock()  # of the ranks once they have joined, from the time trained before once resumed
        self.scaler_state = None
        self.peers: PeerFailures | None = None  # before the ranks join, another's failure (under torchrun)
        self.dist_rank = int(os.environ.get("RANK", "0"))  # torchrun's, before the ranks join
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
            return self._open_prepared(config.prepared, spm_model)
        shared = None
        if config.hf_dataset and self.peers is not None:  # under torchrun: the dataset read by rank 0 alone
            shared = PreparedByRankZero(self.out, self.dist_rank)
            if shared.rank != 0:
                folder = shared.wait(config.join_timeout)
                try:
                    return self._open_prepared(folder, spm_model)
                except (DataError, UsageError) as exc:  # not on this machine: prepared here too
                    log.warning("rank %d prepares the dataset itself: %s", shared.rank, exc)
        prepared = prepare_training_data(config, spm_model)
        if shared is not None and shared.rank == 0:
            shared.publish(prepared.folder)
        return prepared

    def _open_prepared(self, folder: str | Path, spm_model: bytes | None) -> Prepared:
        """--prepared (or rank 0's folder): the folder's tokens, sentencepiece model and validation pairs (or
        --valid-src's)."""
        config = self.config
        prepared = open_prepared(folder)
        if spm_model is not None and spm_model != prepared.tokenizer.model_bytes:
            raise UsageError(f"{folder} was tokenized with another sentencepiece model than the one this "
                             "run uses (its last.pt's, --spm's or --init-from's)")
        if config.valid_src or config.valid_tgt:
            spec = DataSpec(valid_src=config.valid_src, valid_tgt=config.valid_tgt)
            return dataclasses.replace(prepared, valid=validation_pairs(spec))
        if not len(prepared.valid):
            raise DataError(f"{folder} holds no validation pairs: give --valid-src/--valid-tgt")
        return prepared

    # ---- model, optimizer, schedule ---------------------------------------------------------------
    def _model_config(self, tokenizer: Tokenizer, init: Checkpoint | None) -> ModelConfig:
        if init is not None:
            return init.config
        return model_config(self.config, tokenizer.vocab_size)

    def run(self) -> dict:
        """Train; the process group is left and the folder's lock let go when the run ends, however it ends."""
        watch = None
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a rank failing before the join tells the others
            watch = self.peers = PeerFailures(self.out, self.dist_rank).start()
        try:
            return self._train()
        except torch.distributed.DistError as exc:  # another rank died or hangs: one line, not torch's pages
            first = first_line(exc)
            if self.dist.world_size == 1:  # in the join
                raise NmtError(f"rank {self.dist_rank}: the other ranks did not join within --join-timeout "
                               f"{self.config.join_timeout:g} minutes (one was not started, or hangs before "
                               f"joining; its log says why): {first}") from None
            raise NmtError(f"{unanswered(self.dist.rank, self.config.dist_timeout)}: {first}") from None
        except BaseException as exc:
            if watch is None or self.dist.world_size > 1:  # joined: the process group tells the others
                raise
            watch.stop()
            if watch.failure is not None:  # stopped by another rank's failure (a SIGTERM it raised)
                raise NmtError(watch.failure) from None
            first = first_line(exc)
            watch.note(f"{first} ({type(exc).__name__})" if not isinstance(exc, NmtError) else first)
            raise
        finally:
            if watch is not None:
                watch.stop()
            self.dist.close()
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _train(self) -> dict:
        config = self.config
        # Everything that can take long happens before the ranks join: the corpus is prepared (or waited for,
        # on the file system) by one process of all, and no rank sits in a collective meanwhile.
        # a stop signal while preparing is Interrupted, one line (also the stop PeerFailures asks for)
        with stop_signals_handled_by(lambda number, frame: stop_now_or_later(number)):
            last = self._last_checkpoint() if (self.out / "last.pt").exists() else None
            init = load_checkpoint(config.init_from) if config.init_from else None
            prepared = self._prepare(self._spm_model(last, init))
        if self.peers is not None:
            self.peers.joining = True  # in torch's join no signal is handled: a peer's failure ends the process
        self.dist = Distributed.from_environment(self.device, config.dist_timeout, config.dist_backend,
                                                 config.join_timeout)
        if self.peers is not None:
            self.peers.stop()
            if self.dist.is_main:  # joined: notes of launches that failed before are history
                self.peers.clear()
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
        batches = EpochBatches(corpus, config.max_tokens, config.seed, config.static_shapes)
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
        # fused: one kernel for all parameters (on a CPU too: 8.8 ms a step over small's 9.6M parameters, where
        # torch's default there, a loop over them, takes 36.5), and an update skipped on the device where its
        # values are not finite (Loop.update), not after waiting for them
        optimizer = torch.optim.Adam(model.parameters(), lr=self.schedule["lr"], betas=(0.9, 0.98), eps=1e-9,
                                     fused=True)
        self.clock = Clock(self.dist.world_size)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate_factor(self.schedule, self.clock.elapsed))
        decay = self.schedule.get("decay", "inverse-sqrt")
        log.info("model: d_model %d, %d heads, d_ff %d, %d+%d layers, %.2fM parameters; %d training pairs, %d "
                 "validation; %d steps/epoch; peak lr %.2e, warmup %d, %s decay%s", model_config.d_model,
                 model_config.n_heads, model_config.d_ff, model_config.n_encoder_layers,
                 model_config.n_decoder_layers, sum(p.numel() for p in model.parameters()) / 1e6,
                 len(corpus), len(valid), steps_per_epoch, self.schedule["lr"], self.schedule["warmup"], decay,
                 decay_end(self.schedule))

        state = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "best_bleu": -1.0, "bad_validations": 0,
                 "elapsed": 0.0, "world_size": self.dist.world_size, "update_freq": self.update_freq}
        if resumed is not None:
            state = self._resume(resumed, model, optimizer, scheduler)
        self.clock.resume(state["elapsed"])
        wrapped = TranslationLoss(model, config.label_smoothing, compiled=config.compile,
                                  graphs=config.static_shapes and self.device.type == "cuda")
        if self.dist.group is not None:
            with self.dist.waiting():  # the model's buffers are constants: no broadcast
                wrapped = torch.nn.parallel.DistributedDataParallel(
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
        run = Run(config, self.dist, self.device, self.precision, self.update_freq, self.schedule, self.out,
                  self.clock)
        learner = Learner(model, wrapped, optimizer, scheduler, self.average, self.scaler_state)
        return Loop(run, learner, Feed(batches, tokenizer, valid, valid_ids), state).run()

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
        if "optimizer" in train_state:  # fused, whichever kind of Adam saved it (a run's CPU part before fused)
            saved = train_state["optimizer"]
            optimizer.load_state_dict({**saved, "param_groups": [{**group, "fused": True, "foreach": None}
                                                                 for group in saved["param_groups"]]})
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
        random.setstate(to_random_state(mine["python"]))
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


def train(config: TrainConfig) -> dict:
    return Trainer(config).run()
