"""Training data: corpora from the embedded set, local files or the Hugging Face hub (read through
`datasets`), as a stream of chunks of pairs with their validation pairs, for nmt.data.prepare to tokenize.

    source = training_source(DataSpec(names=("multi30k",)))        # PairSource(identity, read, valid)
    for chunk in source.chunks(50_000): ...                         # ParallelText, in order

Every source is reduced to `ParallelText` chunks in the Hugging Face translation schema's languages:
English source, French target.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nmt.data.augment import Augment, augmented
from nmt.data.corpus import (
    EMBEDDED,
    SOURCE_LANG,
    TARGET_LANG,
    PairSource,
    ParallelText,
    data_dir,
    load_embedded,
    read_parallel,
    stream_lines,
)
from nmt.data.register import RegisterTags, cleaned, registered
from nmt.errors import DataError, first_line


@dataclass(frozen=True)
class DataSpec:
    """Where training and validation pairs come from (one of names, files, hf_dataset)."""

    names: tuple[str, ...] = ()  # embedded corpora; "tatoeba*2" repeats a corpus
    src_file: str | None = None
    tgt_file: str | None = None
    hf_dataset: str | None = None  # hub name, save_to_disk folder, or json/jsonl/parquet file
    hf_config: str | None = None
    streaming: bool = False
    valid_src: str | None = None
    valid_tgt: str | None = None
    valid_size: int = 1000  # held out when no validation set exists
    augment: bool = False  # add nmt.data.augment's variants of the training pairs
    augment_swap: float | None = None  # nmt.data.augment.Augment.swap, when not its default
    register_tags: bool = False  # tag the English side with the register of the French (nmt.data.register)
    seed: int = 1

    @classmethod
    def of(cls, options) -> DataSpec:
        """From the data options of `nmt train` and `nmt prepare`, by their names (a TrainConfig, say):
        data (a --data string), src_file, tgt_file, hf_dataset, hf_config, streaming, valid_src, valid_tgt,
        augment, augment_swap, register_tags, seed."""
        return cls(names=parse_names(options.data) if options.data else (), src_file=options.src_file,
                   tgt_file=options.tgt_file, hf_dataset=options.hf_dataset, hf_config=options.hf_config,
                   streaming=bool(options.streaming), valid_src=options.valid_src, valid_tgt=options.valid_tgt,
                   augment=bool(options.augment), augment_swap=options.augment_swap,
                   register_tags=bool(options.register_tags), seed=options.seed)


@dataclass
class Corpus:
    train: ParallelText
    valid: ParallelText


@dataclass(frozen=True)
class FilterSpec:
    max_tokens: int = 250  # per side, in subword tokens
    max_ratio: float = 3.0  # pairs whose longer side exceeds max_ratio x the shorter + 5 tokens go


def parse_names(value: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in value.split(",") if part.strip())
    for name in names:
        corpus, star, times = name.partition("*")
        if corpus not in EMBEDDED:
            raise DataError(f"unknown corpus {corpus!r}; embedded corpora: {', '.join(EMBEDDED)}")
        if star and not (times.isdigit() and int(times) > 0):
            raise DataError(f"{name!r}: NAME*K repeats a corpus K times, K a positive whole number")
    return names


def _concat(parts: list[ParallelText]) -> ParallelText:
    return ParallelText([s for p in parts for s in p.source], [t for p in parts for t in p.target])


def _embedded(spec: DataSpec) -> Corpus:
    train_parts, valid_parts = [], []
    for name in spec.names:
        corpus, _, times = name.partition("*")
        splits = EMBEDDED[corpus][1]
        valid_split = "valid" if "valid" in splits else "dev"
        pairs, valid = load_embedded(corpus, "train", spec.seed), load_embedded(corpus, valid_split, spec.seed)
        train_parts.extend([pairs] * (int(times) if times else 1))
        valid_parts.append(valid)
    return Corpus(_concat(train_parts), _concat(valid_parts))


def load_hf(name: str, config: str | None, split: str, streaming: bool = False):
    """A dataset in the translation schema ({"translation": {"en": .., "fr": ..}}), local or from the hub:
    a save_to_disk folder; a folder of parquet/json/jsonl files named by split (`train-*.parquet`, as a hub
    download leaves them, with or without its README; under CONFIG/ when there is such a subfolder); a
    file or glob of such files (split "train"); else a hub name through `datasets.load_dataset`."""
    import datasets

    path = Path(name)
    try:
        if path.is_dir() and (path / "dataset_dict.json").exists():
            folds = datasets.load_from_disk(str(path))
            if split not in folds:
                raise DataError(f"{name} has no {split!r} split (it has {', '.join(folds)})")
            return folds[split]
        if path.is_dir() and (path / "dataset_info.json").exists():
            if split != "train":
                raise DataError(f"{name} holds one split, taken as training data: give --valid-src/--valid-tgt")
            return datasets.load_from_disk(str(path))
        if path.is_dir():
            return _load_split_files(path / config if config and (path / config).is_dir() else path, split,
                                     streaming)
        if path.is_file() or glob.has_magic(name):
            files = sorted(glob.glob(name)) if glob.has_magic(name) else [name]
            if not files:
                raise DataError(f"no file matches {name}")
            if split != "train":
                raise DataError(f"{name} has no {split} split of its own: give --valid-src/--valid-tgt")
            return datasets.load_dataset(_file_kind(files[0]), data_files=files, split="train", streaming=streaming)
    except (FileNotFoundError, ValueError, KeyError, datasets.exceptions.DatasetGenerationError) as exc:
        raise DataError(f"cannot read the local dataset {name}: {_first_line(exc)}") from None
    if name.startswith((".", "/", "~")) or os.sep in name.strip("/").replace("/", "", 1):
        raise DataError(f"no such file or folder: {name}")
    try:
        return datasets.load_dataset(name, config, split=split, streaming=streaming)
    except Exception as exc:  # offline, unknown name, missing split: all mean "cannot get it from the hub"
        raise DataError(
            f"cannot load {name!r} from the Hugging Face hub ({_first_line(exc)}); offline, use local files: "
            "--src-file/--tgt-file, or --hf-dataset with a save_to_disk folder, a folder or glob of "
            "json/jsonl/parquet files"
        ) from None


def _first_line(exc: Exception) -> str:
    return first_line(exc)[:200]


def _file_kind(path: str) -> str:
    return "parquet" if path.endswith(".parquet") else "json"


def _load_split_files(folder: Path, split: str, streaming: bool):
    import datasets

    for pattern in (f"{split}-*.parquet", f"{split}.parquet", f"{split}-*.json*", f"{split}.json*"):
        files = sorted(str(f) for f in folder.rglob(pattern))
        if files:
            return datasets.load_dataset(_file_kind(files[0]), data_files=files, split="train", streaming=streaming)
    if split == "train":
        raise DataError(f"{folder} holds no {split}-*.parquet, {split}-*.jsonl or save_to_disk dataset")
    raise DataError(f"{folder} has no {split} split ({split}-*.parquet or .jsonl): give --valid-src/--valid-tgt")


def _pairs(rows) -> Iterator[tuple[str, str]]:
    for row in rows:
        translation = row.get("translation") if isinstance(row, dict) else None
        if not isinstance(translation, dict) or SOURCE_LANG not in translation or TARGET_LANG not in translation:
            raise DataError(f'dataset rows must look like {{"translation": {{"{SOURCE_LANG}": ..., '
                            f'"{TARGET_LANG}": ...}}}}')
        yield translation[SOURCE_LANG] or "", translation[TARGET_LANG] or ""


def _to_parallel(rows) -> ParallelText:
    pairs = ParallelText([], [])
    for source, target in _pairs(rows):
        pairs.source.append(source)
        pairs.target.append(target)
    return pairs


def validation_pairs(spec: DataSpec) -> ParallelText | None:
    if spec.valid_src or spec.valid_tgt:
        if not (spec.valid_src and spec.valid_tgt):
            raise DataError("--valid-src and --valid-tgt go together")
        return read_parallel(spec.valid_src, spec.valid_tgt)
    return None


# ---- training pairs as a stream of chunks (nmt.data.prepare tokenizes them once into a cache) -------------------


def training_source(spec: DataSpec) -> PairSource:
    """The pairs of --hf-dataset, or of --data and --src-file/--tgt-file, either or both (the embedded corpora,
    then the files: synthetic pairs beside real ones, say); validation pairs as given, else the embedded
    corpora's. With spec.augment, each chunk is followed by its variants (nmt.data.augment). The French sides
    have their elisions joined, and with spec.register_tags the English sides their register tags
    (nmt.data.register)."""
    source = _training_source(spec)
    if spec.augment:
        if spec.augment_swap is not None and not 0 <= spec.augment_swap <= 1:
            raise DataError(f"--augment-swap is a share between 0 and 1, not {spec.augment_swap}")
        swap = {} if spec.augment_swap is None else {"swap": spec.augment_swap}
        source = augmented(source, Augment(seed=spec.seed, **swap))
    return registered(source, RegisterTags(seed=spec.seed)) if spec.register_tags else cleaned(source)


def _training_source(spec: DataSpec) -> PairSource:
    files = spec.src_file or spec.tgt_file
    if spec.hf_dataset and (spec.names or files) or not (spec.names or files or spec.hf_dataset):
        raise DataError("give one training source: --data NAMES and/or --src-file/--tgt-file, or --hf-dataset")
    given_valid = validation_pairs(spec)
    if spec.names or files:
        identities, readers, valid = [], [], given_valid
        if spec.names:
            corpus = _embedded(spec)
            identities.append(f"embedded {','.join(spec.names)} seed {spec.seed} " + _fingerprint(
                f for name in spec.names for f in sorted((data_dir_of(name)).glob("*.gz"))))
            readers.append(lambda size: _in_chunks(corpus.train, size))
            valid = valid or corpus.valid
        if files:
            if not (spec.src_file and spec.tgt_file):
                raise DataError("--src-file and --tgt-file go together")
            paths = (Path(spec.src_file), Path(spec.tgt_file))
            for path in paths:
                if not path.is_file():
                    raise DataError(f"cannot read {path}: no such file")
            identities.append("files " + _fingerprint(paths))
            readers.append(lambda size: _read_files(*paths, size))
        return PairSource(" + ".join(identities),
                          lambda size: itertools.chain.from_iterable(read(size) for read in readers), valid)
    rows = load_hf(spec.hf_dataset, spec.hf_config, "train", spec.streaming)
    valid = given_valid
    if valid is None:
        try:
            valid = _to_parallel(load_hf(spec.hf_dataset, spec.hf_config, "validation", spec.streaming))
        except DataError:
            valid = None  # held out of the training pairs by nmt.data.prepare
    fingerprint = getattr(rows, "_fingerprint", None) or _fingerprint(_files_under(spec.hf_dataset))
    identity = f"hf {spec.hf_dataset} {spec.hf_config} {fingerprint}"
    return PairSource(identity, lambda size: _read_rows(rows, size), valid)


def data_dir_of(name: str) -> Path:
    return data_dir() / EMBEDDED[name.partition("*")[0]][0]


def _fingerprint(paths) -> str:
    """Each file's size and a digest of its bytes: the same content has the same text wherever it lies and
    whenever it was copied (a fresh clone, a re-mounted disk), and any change to the content changes it.
    Hashing costs about 0.2 s per 100 MB, once per start."""
    parts = []
    for path in paths:
        with open(path, "rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()[:20]
        parts.append(f"{Path(path).name}:{Path(path).stat().st_size}:{digest}")
    return " ".join(parts)


def _files_under(name: str) -> list[str]:
    path = Path(name)
    if path.is_dir():
        return sorted(str(f) for f in path.rglob("*") if f.is_file())
    return sorted(glob.glob(name)) if glob.has_magic(name) else ([name] if path.is_file() else [])


def _in_chunks(pairs: ParallelText, size: int) -> Iterator[ParallelText]:
    for start in range(0, len(pairs), size):
        yield ParallelText(pairs.source[start : start + size], pairs.target[start : start + size])


def _read_files(source_path: Path, target_path: Path, size: int) -> Iterator[ParallelText]:
    """Both files in lockstep, split on "\\n" only with a trailing "\\r" dropped (as nmt.data.corpus.read_lines)."""
    missing = object()
    chunk = ParallelText([], [])
    lines = itertools.zip_longest(stream_lines(source_path), stream_lines(target_path), fillvalue=missing)
    for source, target in lines:
        if source is missing or target is missing:
            raise DataError(f"{source_path} and {target_path} have different numbers of lines")
        chunk.source.append(source)
        chunk.target.append(target)
        if len(chunk) == size:
            yield chunk
            chunk = ParallelText([], [])
    if len(chunk):
        yield chunk


def _read_rows(rows, size: int) -> Iterator[ParallelText]:
    for batch in rows.iter(batch_size=size):
        if "translation" not in batch:
            raise DataError(f'dataset rows must look like {{"translation": {{"{SOURCE_LANG}": ..., '
                            f'"{TARGET_LANG}": ...}}}}')
        yield _to_parallel({"translation": pair} for pair in batch["translation"])


def training_pairs(spec: DataSpec) -> ParallelText:
    """All the training pairs of `spec` in memory (for counts over a corpus that fits, as `nmt shortlist`)."""
    return _concat(list(training_source(spec).chunks(100_000)))
