"""Parallel corpora: the embedded ones by name, and local files.

    pairs = load_embedded("multi30k", "train")      # ParallelText(source=[...], target=[...])
    pairs = read_parallel("train.en.gz", "train.fr.gz")

Files are read by splitting on "\\n" only, dropping a trailing "\\r": `str.splitlines()` would also
split on U+2028 and friends, which occur inside sentences, and misalign every pair after them.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from nmt.errors import DataError

# name -> (folder, {split: file stem}); the validation split is used for model selection.
EMBEDDED = {
    "multi30k": ("multi30k", {"train": "train", "valid": "val", "test_2016_flickr": "test_2016_flickr",
                              "test_2017_flickr": "test_2017_flickr"}),
    "tatoeba": ("tatoeba", {"train": "train"}),
    "news-commentary": ("news_commentary", {"train": "train", "dev_newsdiscuss": "dev_newsdiscuss"}),
}
SOURCE_LANG, TARGET_LANG = "en", "fr"


@dataclass
class ParallelText:
    source: list[str]
    target: list[str]

    def __len__(self) -> int:
        return len(self.source)


def data_dir() -> Path:
    """$NMT_DATA_DIR, else the `nmt_data` package (the checkout's data/ folder, or its installed copy)."""
    if os.environ.get("NMT_DATA_DIR"):
        return Path(os.environ["NMT_DATA_DIR"])
    return Path(str(resources.files("nmt_data")))


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file, plain or .gz, split on "\\n" only, trailing "\\r" dropped."""
    path = Path(path)
    try:
        raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    text = raw.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel(source_path: str | Path, target_path: str | Path) -> ParallelText:
    source, target = read_lines(source_path), read_lines(target_path)
    if len(source) != len(target):
        raise DataError(f"{source_path} has {len(source)} lines but {target_path} has {len(target)}")
    return ParallelText(source, target)


def load_embedded(name: str, split: str) -> ParallelText:
    if name not in EMBEDDED:
        raise DataError(f"unknown corpus {name!r}; embedded corpora: {', '.join(EMBEDDED)}")
    folder, splits = EMBEDDED[name]
    if split not in splits:
        raise DataError(f"corpus {name!r} has no split {split!r}; it has {', '.join(splits)}")
    base = data_dir() / folder / splits[split]
    return read_parallel(f"{base}.{SOURCE_LANG}.gz", f"{base}.{TARGET_LANG}.gz")


def parse_test_set(name: str) -> ParallelText:
    """'corpus:split' (e.g. multi30k:test_2016_flickr) -> its sentence pairs."""
    corpus, _, split = name.partition(":")
    if not split:
        names = [f"{c}:{s}" for c, (_, splits) in EMBEDDED.items() for s in splits if s != "train"]
        raise DataError(f"test set {name!r} must be CORPUS:SPLIT, one of {', '.join(names)}")
    return load_embedded(corpus, split)
