"""Shipped models by name (data/models/models.json): `nmt models` lists them, `--model NAME` picks one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from nmt.apps.shipped import default_model_name, is_model_name, shipped_models
from nmt.data.corpus import data_dir

NMT = [sys.executable, "-m", "nmt_cli.main"]


def nmt(*args, stdin="", env=None):
    return subprocess.run(NMT + list(args), input=stdin, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_every_listed_model_is_installed_and_the_default_is_listed():
    models = shipped_models()
    assert default_model_name() in models
    assert all(entry["installed"] and entry["domain"] for entry in models.values())


@pytest.mark.slow
def test_nmt_models_marks_the_default_and_a_name_translates_as_its_file(tiny_checkpoint, tmp_path):
    folder = tmp_path / "data"
    shutil.copytree(data_dir(), folder, ignore=shutil.ignore_patterns("*.pt"))
    shutil.copy(tiny_checkpoint, folder / "models" / "tiny.pt")
    index = {"default": "tiny", "models": {
        "tiny": {"file": "tiny.pt", "domain": "a test model", "bleu": {"multi30k:valid": 1.5}},
        "absent": {"file": "absent.pt", "domain": "not installed here"}}}
    (folder / "models" / "models.json").write_text(json.dumps(index))
    env = {"NMT_DATA_DIR": str(folder), "NMT_MODEL": ""}
    listed = nmt("models", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "* tiny: a test model (tiny.pt" in listed.stdout and "multi30k:valid 1.5" in listed.stdout
    assert "  absent: not installed here (absent.pt, not installed)" in listed.stdout
    by_default = nmt("translate", "-q", stdin="A dog runs.\n", env=env)
    by_name = nmt("translate", "-q", "--model", "tiny", stdin="A dog runs.\n", env=env)
    by_path = nmt("translate", "-q", "--model", str(tiny_checkpoint), stdin="A dog runs.\n", env=env)
    assert by_default.returncode == 0, by_default.stderr
    assert by_default.stdout == by_name.stdout == by_path.stdout and by_name.stdout.count("\n") == 1
    for name, message in (("absent", "'absent' is not installed"), ("nonesuch", "no model named 'nonesuch'")):
        refused = nmt("translate", "--model", name, stdin="A dog.\n", env=env)
        assert refused.returncode == 2 and message in refused.stderr and refused.stderr.count("\n") == 1


def test_a_path_is_never_taken_for_a_name(tmp_path, monkeypatch):
    assert is_model_name("captions") and not is_model_name("runs/x/best.pt") and not is_model_name("best.pt")
    (tmp_path / "model").write_text("")
    monkeypatch.chdir(tmp_path)
    assert not is_model_name("model")  # a file of that name here wins
