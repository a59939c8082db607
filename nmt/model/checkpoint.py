"""Self-contained checkpoints: weights, model config, sentencepiece model and format version in one file.

Files are written atomically (temporary file, fsync, rename) and read with `torch.load(weights_only=True)`,
which refuses any pickle that would build objects other than tensors and plain containers, so loading
never runs code from the file. A SHA-256 of the contents is stored in the file and checked on loading: torch's
zip records do not notice a flipped bit inside a tensor. Training state (optimizer, scheduler, step, RNG, data
position) is optional and only read when resuming; so is a lexical shortlist (nmt.model.shortlist) for faster decoding.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from nmt.errors import CheckpointError, NmtError
from nmt.model.config import ModelConfig
from nmt.model.shortlist import Shortlist
from nmt.model.transformer import Transformer
from nmt.text.tokenizer import Tokenizer

FORMAT = "nmt-checkpoint"
FORMAT_VERSION = 1


@dataclass
class Checkpoint:
    config: ModelConfig
    weights: dict[str, torch.Tensor]
    spm_model: bytes
    decoding: dict = field(default_factory=dict)  # tuned decoding defaults (beam, lenpen, ...)
    training: dict = field(default_factory=dict)  # resolved training config and summary
    train_state: dict | None = None  # optimizer, scheduler, step, RNG, data position
    shortlist: Shortlist | None = None  # for `nmt translate --shortlist`
    ema: dict[str, torch.Tensor] | None = None  # `nmt train --ema`'s moving average of the weights
    checksum: str | None = None  # of the file it was loaded from (not written: save_checkpoint computes it)

    def with_ema_weights(self) -> Checkpoint:
        """This checkpoint with its moving average in place of its weights (for `nmt average --ema`), no
        training state: a model to decode with or to average."""
        if self.ema is None:
            raise CheckpointError("the checkpoint holds no moving average of its weights (train with --ema)")
        return Checkpoint(self.config, self.ema, self.spm_model, self.decoding, self.training)

    def build_model(self, device: str | torch.device = "cpu") -> Transformer:
        return Transformer.from_weights(self.config, self.weights).to(device).eval()

    def tokenizer(self) -> Tokenizer:
        """The stored sentencepiece model, checked to be one and to give the ids the model was trained on."""
        try:
            tokenizer = Tokenizer(self.spm_model)
        except RuntimeError:
            raise CheckpointError("the checkpoint's sentencepiece model is damaged (it cannot be read)") from None
        processor, config = tokenizer.processor, self.config
        specials = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        if tokenizer.vocab_size != config.vocab_size or specials != (config.pad_id, config.unk_id, config.bos_id,
                                                                     config.eos_id):
            raise CheckpointError(f"the checkpoint's sentencepiece model ({tokenizer.vocab_size} pieces, special ids "
                                  f"{specials}) is not the one its model was trained with ({config.vocab_size} "
                                  "pieces)")
        return tokenizer


def save_checkpoint(path: str | Path, checkpoint: Checkpoint) -> None:
    path = Path(path)
    payload = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_config": checkpoint.config.to_dict(),
        "model": checkpoint.weights,
        "spm_model": bytes(checkpoint.spm_model),
        "decoding": dict(checkpoint.decoding),
        "training": dict(checkpoint.training),
    }
    if checkpoint.train_state is not None:
        payload["train_state"] = checkpoint.train_state
    if checkpoint.shortlist is not None:
        payload["shortlist"] = checkpoint.shortlist.to_dict()
    if checkpoint.ema is not None:
        payload["ema"] = checkpoint.ema
    payload["checksum"] = content_checksum(payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(temporary, "wb") as file:
            torch.save(payload, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError as exc:  # a full disk, most often: one line, and the previous file is still whole
        kept = f"; the previous {path.name} is kept" if path.exists() else ""
        raise NmtError(f"cannot write {path}: {exc.strerror or exc}{kept}") from None
    finally:
        temporary.unlink(missing_ok=True)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint onto the CPU; every way a file can be wrong becomes one CheckpointError line."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"model file not found: {path}")
    try:
        with warnings.catch_warnings():  # a foreign pickle's protocol warning is not the user's business
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        if not zipfile.is_zipfile(path):  # what torch.save writes: a zip of a pickle and its tensors
            raise CheckpointError(f"{path}: not an nmt checkpoint (not a file torch.save writes)") from None
        raise CheckpointError(f"{path}: refused, the file holds Python objects other than tensors (nmt loads "
                              "tensors and plain values only, so that a model file never runs code)") from None
    except Exception as exc:  # torch raises many types for damaged files: each means the same to a user
        reason = type(exc).__name__
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt: {reason})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an nmt checkpoint")
    version = payload.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version} is newer than this nmt reads ({FORMAT_VERSION}); upgrade nmt"
        )
    stored = payload.pop("checksum", None)  # files written before checksums have none
    computed = content_checksum(payload)
    if stored is not None and stored != computed:
        raise CheckpointError(f"{path}: damaged: its contents do not match the checksum stored in it (a flipped bit "
                              "or a bad copy?)")
    try:
        checkpoint = Checkpoint(
            config=ModelConfig.from_dict(payload["model_config"]),
            weights=payload["model"],
            spm_model=bytes(payload["spm_model"]),
            decoding=payload.get("decoding", {}),
            training=payload.get("training", {}),
            train_state=payload.get("train_state"),
            shortlist=Shortlist.from_dict(payload["shortlist"]) if "shortlist" in payload else None,
            ema=payload.get("ema"),
            checksum=computed,
        )
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as exc:
        raise CheckpointError(f"{path}: incomplete nmt checkpoint ({exc})") from None
    shortlist, vocab_size = checkpoint.shortlist, checkpoint.config.vocab_size
    if shortlist is not None and (shortlist.table.dim() != 2 or shortlist.table.size(0) != vocab_size):
        raise CheckpointError(f"{path}: its shortlist does not cover the model's {vocab_size} tokens")
    if shortlist is not None and any(ids.numel() and not (0 <= int(ids.min()) and int(ids.max()) < vocab_size)
                                     for ids in (shortlist.table, shortlist.frequent)):
        raise CheckpointError(f"{path}: its shortlist names tokens outside the model's {vocab_size}")
    _check_weights(path, checkpoint.config, checkpoint.weights)
    if checkpoint.ema is not None:
        _check_weights(path, checkpoint.config, checkpoint.ema, "moving average ")
    _check_decoding(path, checkpoint.decoding)
    return checkpoint


def content_checksum(payload: dict) -> str:
    """SHA-256 over everything in a checkpoint's payload (but the checksum): tensors by dtype, shape and bytes,
    containers in key order, other values by their repr (what torch.load gives back, it gives back alike)."""
    digest = hashlib.sha256()

    def add(value) -> None:
        if isinstance(value, torch.Tensor):
            tensor = value.detach().cpu().contiguous().reshape(-1)
            digest.update(f"T{tensor.dtype}{tuple(value.shape)}".encode())
            digest.update(tensor.view(torch.uint8).numpy().data)
        elif isinstance(value, dict):
            digest.update(f"D{len(value)}".encode())
            for key in sorted(value, key=repr):
                add(key)
                add(value[key])
        elif isinstance(value, list | tuple):
            digest.update(f"L{len(value)}".encode())
            for item in value:
                add(item)
        elif isinstance(value, bytes | bytearray):
            digest.update(f"B{len(value)}".encode())
            digest.update(value)
        else:
            digest.update(f"P{value!r}".encode())

    add({key: value for key, value in payload.items() if key != "checksum"})
    return digest.hexdigest()


def _check_weights(path: Path, config: ModelConfig, weights, what: str = "") -> None:
    """The weights are those of the model the config describes (names and shapes), and finite."""
    with torch.device("meta"):
        expected = {name: tuple(t.shape) for name, t in Transformer(config).state_dict().items()}
    if not isinstance(weights, dict) or not all(isinstance(t, torch.Tensor) for t in weights.values()):
        raise CheckpointError(f"{path}: its {what}weights are not a dictionary of tensors")
    missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or extra:
        mismatch = "; ".join(part for part in (f"missing {', '.join(missing[:3])}" if missing else "",
                                           f"unexpected {', '.join(extra[:3])}" if extra else "") if part)
        raise CheckpointError(f"{path}: its {what}weights do not match its model config ({mismatch})")
    for name, shape in expected.items():
        if tuple(weights[name].shape) != shape:
            raise CheckpointError(f"{path}: {what}weight {name} has shape {tuple(weights[name].shape)}, its model "
                                  f"config gives {shape}")
        if weights[name].is_floating_point() and weights[name].numel() and not finite(weights[name]):
            raise CheckpointError(f"{path}: {what}weight {name} holds NaN or infinite values")


def finite(tensor: torch.Tensor) -> bool:
    """Whether a non-empty tensor holds no NaN or infinity: its largest magnitude is finite (max propagates NaN).
    A twentieth of isfinite().all()'s time on the general model's weights (1.7 against 34 ms, every load)."""
    return bool(torch.isfinite(tensor.abs().max()))


DECODING_TYPES = {"beam_size": int, "lenpen": float, "max_len_a": float, "max_len_b": int, "min_len": int}


def _check_decoding(path: Path, decoding: dict) -> None:
    """Stored decoding defaults are numbers of the right kind (nmt.decoding.search.SearchOptions checks ranges)."""
    for key, value in decoding.items():
        kind = DECODING_TYPES.get(key)
        if kind is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                 or (kind is int and not isinstance(value, int))):
            raise CheckpointError(f"{path}: its decoding default {key} is {value!r}, not a {kind.__name__}")


def model_weights(model: torch.nn.Module, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The state dict of the unwrapped, uncompiled module (DDP's `.module`, compile's `._orig_mod`)."""
    while hasattr(model, "module") or hasattr(model, "_orig_mod"):
        model = getattr(model, "module", None) or model._orig_mod
    weights = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}
    return weights if dtype is None else cast_weights(weights, dtype)


def cast_weights(weights: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The floating-point tensors of `weights` in `dtype` (fp16 for a release: half the size); the rest as they are."""
    return {name: t.to(dtype) if t.is_floating_point() else t for name, t in weights.items()}
