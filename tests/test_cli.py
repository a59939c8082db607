"""The `nmt` console script itself: help, version, info."""

from __future__ import annotations

import gc
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmt import __version__
from nmt.checkpoint import load_checkpoint
from nmt_cli.main import collection_paused

# the console script pip installed beside this interpreter (the real entry point, not a module call)
NMT = shutil.which("nmt", path=str(Path(sys.executable).parent)) or "nmt"


def test_help_lists_every_command_with_a_description():
    result = subprocess.run([NMT, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for command in ("translate", "score", "attention", "train", "eval", "info", "average", "tune", "shortlist",
                    "plot", "export"):
        line = next(line for line in result.stdout.splitlines() if line.strip().startswith(command + " "))
        assert len(line.split()) > 2, f"{command} has no description"


def test_version():
    result = subprocess.run([NMT, "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"nmt {__version__}"


def test_info_shows_config_vocabulary_and_parameters(tiny_checkpoint):
    result = subprocess.run([NMT, "info", str(tiny_checkpoint)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    checkpoint = load_checkpoint(tiny_checkpoint)
    n_parameters = sum(t.numel() for t in checkpoint.weights.values())
    assert f"parameters: {n_parameters:,}" in result.stdout
    assert f"vocabulary: {checkpoint.tokenizer().vocab_size}" in result.stdout
    assert "d_model: 32" in result.stdout and "beam_size=2" in result.stdout


def test_unknown_option_is_a_usage_error_without_traceback():
    result = subprocess.run([NMT, "translate", "--bogus"], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_collection_paused_freezes_what_loading_made_and_turns_the_collector_back_on():
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with collection_paused():
            assert not gc.isenabled()
            loaded = [[index] for index in range(1000)]  # objects that outlive loading, as a model's do
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(loaded)
        with pytest.raises(ValueError), collection_paused():
            raise ValueError("a model that fails to load")
        assert gc.isenabled()
        gc.disable()  # a caller that had turned it off keeps it off
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
