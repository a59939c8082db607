"""Checkpoints after a run: weights averaged over several (or their moving averages), and a run's last.pt made
small enough to keep (a slim resume point)."""


from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import torch

from nmt.errors import UsageError
from nmt.model.checkpoint import Checkpoint, cast_weights, load_checkpoint, save_checkpoint

log = logging.getLogger("nmt")


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
