"""Checkpoints: round trip, and every way a file can be wrong gives one clear error."""

from __future__ import annotations

import errno
import os
import pickle
import subprocess
import sys

import pytest
import torch

from nmt.errors import CheckpointError, NmtError
from nmt.model.checkpoint import FORMAT_VERSION, Checkpoint, load_checkpoint, model_weights, save_checkpoint
from tests.conftest import tiny_model


def test_round_trip_restores_identical_logits(tmp_path, tokenizer):
    model = tiny_model(vocab_size=tokenizer.vocab_size)
    path = tmp_path / "model.pt"
    save_checkpoint(path, Checkpoint(model.config, model_weights(model), tokenizer.model_bytes,
                                     decoding={"beam_size": 5}))
    loaded = load_checkpoint(path)
    src, tgt = torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 9, 10]])
    assert torch.equal(loaded.build_model()(src, tgt), model(src, tgt))
    assert loaded.config == model.config
    assert loaded.decoding == {"beam_size": 5}
    assert loaded.tokenizer().encode("A dog runs.") == tokenizer.encode("A dog runs.")
    assert not list(tmp_path.glob(".*tmp*")), "the temporary file is renamed away"


def test_half_precision_weights_load_as_fp32(tmp_path, tokenizer):
    model = tiny_model(vocab_size=tokenizer.vocab_size)
    path = tmp_path / "half.pt"
    save_checkpoint(path, Checkpoint(model.config, model_weights(model, torch.float16), tokenizer.model_bytes))
    rebuilt = load_checkpoint(path).build_model()
    assert rebuilt.embed.weight.dtype == torch.float32
    torch.testing.assert_close(rebuilt.embed.weight, model.embed.weight, atol=1e-3, rtol=1e-3)


@pytest.fixture
def saved(tmp_path, tokenizer):
    model = tiny_model(vocab_size=tokenizer.vocab_size)
    path = tmp_path / "good.pt"
    save_checkpoint(path, Checkpoint(model.config, model_weights(model), tokenizer.model_bytes))
    return path


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "nothing.pt")


def test_truncated_file(tmp_path, saved):
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(truncated)


def test_foreign_files(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(CheckpointError):
        load_checkpoint(text)
    other = tmp_path / "other.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, other)
    with pytest.raises(CheckpointError, match="not an nmt checkpoint"):
        load_checkpoint(other)


def test_newer_format_version(tmp_path, saved):
    payload = torch.load(saved, weights_only=True)
    payload["format_version"] = FORMAT_VERSION + 1
    newer = tmp_path / "newer.pt"
    torch.save(payload, newer)
    with pytest.raises(CheckpointError, match="newer"):
        load_checkpoint(newer)


class Payload:
    """Unpickling this would run a shell command that creates a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_payload_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"format": "nmt-checkpoint", "format_version": 1, "x": Payload(marker)}, evil)
    with pytest.raises(CheckpointError, match="refused"):
        load_checkpoint(evil)
    plain = tmp_path / "evil.pkl"
    plain.write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointError):
        load_checkpoint(plain)
    assert not marker.exists()
    # one short line each, not PyTorch's paragraph about weights_only
    noise = tmp_path / "noise.pt"
    noise.write_bytes(bytes(range(256)) * 8)
    for path, line in ((evil, "refused, the file holds Python objects other than tensors"),
                       (noise, "not an nmt checkpoint (not a file torch.save writes)")):
        result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "info", str(path)], capture_output=True,
                                text=True)
        assert result.returncode == 2 and line in result.stderr and "weights_only" not in result.stderr
        assert result.stderr.count("\n") == 1


def test_bad_files_give_one_line_through_the_cli(tmp_path, saved):
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(saved.read_bytes()[:1000])
    for path in (tmp_path / "missing.pt", truncated):
        result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "info", str(path)],
                                capture_output=True, text=True)
        assert result.returncode == 2
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
        assert "Traceback" not in result.stderr


def test_interrupted_write_keeps_the_previous_file(tmp_path, saved, monkeypatch):
    before = saved.read_bytes()
    checkpoint = load_checkpoint(saved)

    def crash(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", crash)
    kept = r"^cannot write .*good.pt: No space left on device; the previous good.pt is kept$"
    with pytest.raises(NmtError, match=kept):
        save_checkpoint(saved, checkpoint)
    assert saved.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["good.pt"]


def damage(payload: dict, how: str) -> None:
    weights = payload["model"]
    name = next(iter(weights))
    if how == "wrong shape":
        weights[name] = torch.zeros(3, 3)
    elif how == "missing weight":
        del weights[name]
    elif how == "extra weight":
        weights["extra.weight"] = torch.zeros(2)
    elif how == "zero heads":
        payload["model_config"]["n_heads"] = 0
    elif how == "string beam size":
        payload["decoding"]["beam_size"] = "4"
    elif how == "NaN weight":
        weights[name] = torch.full_like(weights[name], float("nan"))
    elif how in ("one NaN among numbers", "one infinite value"):
        weights[name] = weights[name].clone()
        weights[name].view(-1)[7] = float("nan") if how == "one NaN among numbers" else -float("inf")
    elif how == "shortlist out of range":
        vocab = payload["model_config"]["vocab_size"]
        payload["shortlist"] = {"table": torch.full((vocab, 2), vocab + 7), "frequent": torch.tensor([4, 5])}


DAMAGES = ["wrong shape", "missing weight", "extra weight", "zero heads", "string beam size", "NaN weight",
           "one NaN among numbers", "one infinite value", "shortlist out of range"]


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_checkpoints_are_one_checkpoint_error(tmp_path, saved, how):
    payload = torch.load(saved, weights_only=True)
    damage(payload, how)
    damaged = tmp_path / "damaged.pt"
    torch.save(payload, damaged)
    with pytest.raises(CheckpointError, match=str(damaged)):
        load_checkpoint(damaged)


@pytest.mark.parametrize("spm_model, error", [
    (b"not a sentencepiece model", "the checkpoint's sentencepiece model is damaged"),
    (None, "is not the one its model was trained with"),  # another vocabulary size
])
def test_a_damaged_or_foreign_sentencepiece_model_is_one_line_through_the_cli(tmp_path, tokenizer, spm_model,
                                                                              error):
    model = tiny_model(vocab_size=tokenizer.vocab_size + 5)  # for the foreign case: the ids do not fit
    path = tmp_path / "model.pt"
    save_checkpoint(path, Checkpoint(model.config, model_weights(model), spm_model or tokenizer.model_bytes))
    with pytest.raises(CheckpointError, match=error):
        load_checkpoint(path).tokenizer()
    result = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", str(path), "-q"],
                            input="A dog runs.\n", capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: the checkpoint's sentencepiece model") and error in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_flipped_bit_inside_a_weight_is_refused(tmp_path, saved):
    import zipfile

    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        largest = max(archive.infolist(), key=lambda info: info.file_size)  # the embedding matrix's record
    with open(saved, "rb") as file:  # its data starts after the local header, whose name and extra field vary
        file.seek(largest.header_offset + 26)
        name_length, extra_length = (int.from_bytes(file.read(2), "little") for _ in range(2))
    start = largest.header_offset + 30 + name_length + extra_length
    data[start + largest.file_size // 2] ^= 0x10
    flipped = tmp_path / "flipped.pt"
    flipped.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"flipped.pt: damaged: its contents do not match the checksum"):
        load_checkpoint(flipped)
    assert load_checkpoint(saved).weights  # the intact file loads
