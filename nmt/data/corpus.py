"""Parallel corpora: the embedded ones by name, and local files.

    pairs = load_embedded("multi30k", "train")      # ParallelText(source=[...], target=[...])
    pairs = read_parallel("train.en.gz", "train.fr.gz")
    source = PairSource(identity, read, valid)      # a training corpus read a chunk at a time (nmt.data.sources)

Files are read by splitting on "\\n" only, dropping a trailing "\\r": `str.splitlines()` would also
split on U+2028 and friends, which occur inside sentences, and misalign every pair after them.
"""

from __future__ import annotations

import gzip
import os
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import BinaryIO

from nmt.errors import DataError

# name -> (folder, {split: file stem}); training validates on "valid", else on "dev", a split that has no
# file (stem None) but is held out of "train".
EMBEDDED = {
    "multi30k": ("multi30k", {"train": "train", "valid": "val", "test_2016_flickr": "test_2016_flickr",
                              "test_2017_flickr": "test_2017_flickr"}),
    "tatoeba": ("tatoeba", {"train": "train", "dev": None}),
    "news-commentary": ("news_commentary", {"train": "train", "dev": None, "dev_newsdiscuss": "dev_newsdiscuss"}),
    "robustness": ("robustness", {"dev": "dev", "test": "test"}),  # nmt.apps.robustness scores it by category
    "news": ("news", {"train": "train", "dev": "dev", "test": "test"}),  # WMT newstest2012 dev, 2013 test
    "software-ui": ("software_ui", {"train": "train", "dev": None}),  # interface strings of free applications
    "software-ui-extra": ("software_ui_extra", {"train": "train", "dev": None}),  # of 48 more applications
    "python-docs": ("python_docs", {"train": "train", "dev": None}),  # the Python documentation, paragraphs
    "web-apps": ("web_apps", {"train": "train", "dev": "dev"}),  # shops, accounts, mail; dev: 3 unseen projects
    "help-docs": ("help_docs", {"train": "train", "dev": None}),  # help pages, manuals, package descriptions
}
SOURCE_LANG, TARGET_LANG = "en", "fr"
HELD_OUT_SEED = 1  # a split named None above is held out of "train" by distinct source sentence, this seed


@dataclass
class ParallelText:
    source: list[str]
    target: list[str]

    def __len__(self) -> int:
        return len(self.source)


@dataclass
class PairSource:
    """The training pairs of a DataSpec, read in order a chunk at a time and never all in memory.

    identity: names the content (corpus names, file names with their sizes and content digests, a hub
    dataset's name, config and fingerprint) for the cache key; valid: the validation pairs the source comes
    with (--valid-src/--valid-tgt, a validation split, an embedded corpus's held-out split), else None."""

    identity: str
    read: object  # chunk size -> Iterator[ParallelText]
    valid: ParallelText | None

    def chunks(self, size: int) -> Iterator[ParallelText]:
        return self.read(size)


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
    except UNREADABLE as exc:
        raise unreadable(path, exc) from None
    text = raw.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def stream_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file, plain or .gz, as read_lines splits them, one at a time as they are read
    (a corpus too large to hold whole); one error line where it cannot be read."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as stream:
            yield from read_stream_lines(stream)
    except UNREADABLE as exc:
        raise unreadable(path, exc) from None


# A missing or unreadable file (OSError), a gzip file cut short (EOFError) or damaged inside (zlib.error).
UNREADABLE = (OSError, EOFError, zlib.error)


def unreadable(path: str | Path, exc: BaseException) -> DataError:
    """One line for UNREADABLE's errors, naming the file."""
    if isinstance(exc, EOFError):
        reason = "the compressed file is cut short (an interrupted download or copy?)"
    elif isinstance(exc, zlib.error) or isinstance(exc, gzip.BadGzipFile):
        reason = f"the compressed file is damaged ({exc})"
    else:
        reason = getattr(exc, "strerror", None) or str(exc)
    return DataError(f"cannot read {path}: {reason}")


def read_stream_lines(stream: BinaryIO, on_bad_bytes: Callable[[], None] | None = None) -> Iterator[str]:
    """The lines of a binary stream as read_lines splits them, one at a time as they arrive: on b"\n" only,
    a trailing "\r" dropped, invalid UTF-8 replaced (on_bad_bytes called the first time)."""
    reported = False
    for raw in iter(stream.readline, b""):
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            if on_bad_bytes is not None and not reported:
                on_bad_bytes()
                reported = True
            yield raw.decode("utf-8", errors="replace")


def read_parallel(source_path: str | Path, target_path: str | Path) -> ParallelText:
    source, target = read_lines(source_path), read_lines(target_path)
    if len(source) != len(target):
        raise DataError(f"{source_path} has {len(source)} lines but {target_path} has {len(target)}")
    return ParallelText(source, target)


def held_out_size(n_pairs: int, wanted: int = 1000) -> int:
    return min(wanted, n_pairs // 10)


def split_by_source(pairs: ParallelText, size: int, seed: int) -> tuple[ParallelText, ParallelText]:
    """Hold out `size` pairs whose source sentences never occur in the rest (one English sentence can have
    several French variants: a split by pair would leak them into validation)."""
    sources = sorted(set(pairs.source))
    random.Random(seed).shuffle(sources)
    held_out, count = set(), 0
    by_source: dict[str, int] = {}
    for source in pairs.source:
        by_source[source] = by_source.get(source, 0) + 1
    for source in sources:
        if count >= size:
            break
        held_out.add(source)
        count += by_source[source]
    train, valid = ParallelText([], []), ParallelText([], [])
    for source, target in zip(pairs.source, pairs.target, strict=True):
        part = valid if source in held_out else train
        part.source.append(source)
        part.target.append(target)
    return train, valid


def load_embedded(name: str, split: str, seed: int = HELD_OUT_SEED) -> ParallelText:
    """A split of an embedded corpus. For a held-out split (tatoeba "dev"), "train" is what remains."""
    if name not in EMBEDDED:
        raise DataError(f"unknown corpus {name!r}; embedded corpora: {', '.join(EMBEDDED)}")
    folder, splits = EMBEDDED[name]
    if split not in splits:
        raise DataError(f"corpus {name!r} has no split {split!r}; it has {', '.join(splits)}")
    held_out = [s for s, stem in splits.items() if stem is None]
    if held_out and (split == "train" or split in held_out):
        pairs = _read_split(folder, splits["train"])
        train, dev = split_by_source(pairs, held_out_size(len(pairs)), seed)
        return dev if split in held_out else train
    return _read_split(folder, splits[split])


def _read_split(folder: str, stem: str) -> ParallelText:
    base = data_dir() / folder / stem
    return read_parallel(f"{base}.{SOURCE_LANG}.gz", f"{base}.{TARGET_LANG}.gz")


# Corpora too large to embed, found on disk by name: name -> (environment variable, splits held out for
# evaluation). Europarl v7's held-out sessions (dev, test) are read from the folder that also holds its
# training files (train.en.gz, train.fr.gz), which `nmt train` takes by path.
EXTERNAL = {"europarl": ("NMT_EUROPARL_DIR", ("dev", "test"))}


def external_dir(name: str) -> Path:
    """The folder of an external corpus: its environment variable, else ../shared/data/NAME beside the
    checkout (where the project's machines keep it)."""
    variable, _ = EXTERNAL[name]
    if os.environ.get(variable):
        return Path(os.environ[variable])
    return data_dir().resolve().parent.parent / "shared" / "data" / name


def parse_test_set(name: str) -> ParallelText:
    """'corpus:split' (e.g. multi30k:test_2016_flickr, europarl:test) -> its sentence pairs."""
    corpus, _, split = name.partition(":")
    if not split:
        names = [f"{c}:{s}" for c, (_, splits) in EMBEDDED.items() for s in splits if s != "train"]
        names += [f"{c}:{s}" for c, (_, splits) in EXTERNAL.items() for s in splits]
        raise DataError(f"test set {name!r} must be CORPUS:SPLIT, one of {', '.join(names)}")
    if corpus in EXTERNAL:
        variable, splits = EXTERNAL[corpus]
        if split not in splits:
            raise DataError(f"corpus {corpus!r} has no split {split!r}; it has {', '.join(splits)}")
        folder = external_dir(corpus)
        if not (folder / f"{split}.{SOURCE_LANG}.gz").is_file():
            raise DataError(f"{name}: no {split}.{SOURCE_LANG}.gz in {folder}; set {variable} to the folder of "
                            f"{corpus}'s {split}.{SOURCE_LANG}.gz and {split}.{TARGET_LANG}.gz")
        return read_parallel(folder / f"{split}.{SOURCE_LANG}.gz", folder / f"{split}.{TARGET_LANG}.gz")
    return load_embedded(corpus, split)
