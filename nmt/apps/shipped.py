"""The models shipped in data/models/, by name: models.json there lists each one's file, domain and scores,
and which is the default.

    path = model_path("captions")          # data/models/en-fr.pt
    model_path(None)                       # the default model's file
    for name, entry in shipped_models().items(): print(name, entry["domain"])

A name is what `nmt translate --model NAME` takes in place of a path; `nmt models` lists them.
"""

from __future__ import annotations

import json
from pathlib import Path

from nmt.data.corpus import data_dir
from nmt.errors import UsageError


def _index() -> dict:
    path = data_dir() / "models" / "models.json"
    if not path.is_file():
        return {"default": None, "models": {}}
    return json.loads(path.read_text())


def shipped_models() -> dict[str, dict]:
    """Name -> entry ({"file", "domain", "scores", ...}) of every model listed, installed or not; an entry's
    "path" is its file under data/models/ and "installed" whether that file is there."""
    folder = data_dir() / "models"
    models = {}
    for name, entry in _index()["models"].items():
        path = folder / entry["file"]
        models[name] = {**entry, "path": path, "installed": path.is_file()}
    return models


def default_model_name() -> str | None:
    return _index()["default"]


def model_path(name: str | None) -> Path:
    """The file of the shipped model `name` (None: the default one); a usage error names the others."""
    models = shipped_models()
    name = name or default_model_name()
    if name not in models:
        known = ", ".join(models) or "none"
        raise UsageError(f"no model named {name!r} and no such file; shipped models: {known} (see `nmt models`)")
    if not models[name]["installed"]:
        raise UsageError(f"the shipped model {name!r} is not installed ({models[name]['path']} is missing)")
    return models[name]["path"]


def is_model_name(value: str) -> bool:
    """Whether --model VALUE names a shipped model rather than a file: a bare name that is not a file here."""
    return "/" not in value and "\\" not in value and not value.endswith(".pt") and not Path(value).exists()
