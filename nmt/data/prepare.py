"""Data preparation: a corpus tokenized once, in parallel, into a cache of token ids on disk that every later
start, resume and rank opens in a moment.

    prepared = prepare(source, PrepareOptions(vocab_size=32000))    # nmt.data.sources.training_source(spec)
    corpus = TokenCorpus(prepared.folder)                             # memory-mapped, O(1) per pair

A cache folder (under $NMT_CACHE_DIR, default ~/.cache/nmt/prepared) is named by a hash of what makes it:
the corpus's identity (nmt.data.sources.PairSource), the sentencepiece model and the filter. It holds the token ids
of both sides as flat arrays with their offsets and lengths (numpy memory maps: a pair is two slices, read
at the same cost whatever the corpus size, where `datasets`' row access grew with it), the validation pairs
held out of the corpus when it has none, the sentencepiece model, and meta.json. `datasets` still reads the
corpora (parquet, json, Arrow, the hub); the cache is numpy's.

Sentencepiece trains on a uniform random sample of the whole corpus (reservoir sampling over one pass), not
its first rows. Tokenizing runs in forked worker processes, a chunk of pairs each; the folder is written
under a temporary name (host, process and a random part: containers on several machines often share process
ids) and renamed when complete, so a cache that exists is whole.

One process makes a missing folder: whichever creates its `.claim` file first (an exclusive create, which
network file systems honour), however many ranks, machines or `nmt prepare`s want it; the others wait on the
file system for its meta.json, and take a claim over whose holder stopped refreshing it (a killed process).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import random
import secrets
import shutil
import signal
import socket
import threading
import time
import zipfile
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from nmt.data.corpus import PairSource, ParallelText, held_out_size, read_lines
from nmt.data.sources import DataSpec, FilterSpec, training_source
from nmt.errors import DataError, Interrupted, NmtError, signal_name, stop_signals_handled_by
from nmt.text.tokenizer import Tokenizer, train_tokenizer

log = logging.getLogger("nmt")

CACHE_VERSION = 1
SPM_VERSION = 2  # 2: with nmt.text.protect's placeholders as pieces
CHUNK_PAIRS = 50_000
CLAIM_REFRESH = 30  # seconds between the refreshes of a claim by the process that holds it
CLAIM_STALE = 300  # seconds without a refresh after which a claim is taken over


@dataclass(frozen=True)
class PrepareOptions:
    vocab_size: int = 8000
    spm_model: bytes | None = None  # a sentencepiece model to use instead of training one
    spm_sample: int = 1_000_000  # sentences (both sides together) sentencepiece trains on
    limits: FilterSpec = FilterSpec()
    valid_size: int = 1000  # pairs held out when the source has no validation set
    seed: int = 1
    workers: int | None = None  # tokenizing processes; default one per CPU core
    cache_dir: str | None = None

    @classmethod
    def of(cls, options, spm_model: bytes | None) -> PrepareOptions:
        """From the preparation options of `nmt train` and `nmt prepare`, by their names (a TrainConfig, say):
        vocab_size, spm_sample, max_len, max_ratio, seed, prepare_workers, cache_dir."""
        return cls(vocab_size=options.vocab_size, spm_model=spm_model, spm_sample=options.spm_sample,
                   limits=FilterSpec(options.max_len, options.max_ratio), seed=options.seed,
                   workers=options.prepare_workers, cache_dir=options.cache_dir)


def prepare_training_data(options, spm_model: bytes | None = None) -> Prepared:
    """The cache of the training data that `options` name (DataSpec.of, PrepareOptions.of): what `nmt prepare`
    makes and `nmt train` opens."""
    return prepare(training_source(DataSpec.of(options)), PrepareOptions.of(options, spm_model))


@dataclass(frozen=True)
class Prepared:
    folder: Path
    tokenizer: Tokenizer
    valid: ParallelText


def cache_root(cache_dir: str | None = None) -> Path:
    if cache_dir:
        return Path(cache_dir)
    if os.environ.get("NMT_CACHE_DIR"):
        return Path(os.environ["NMT_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nmt" / "prepared"


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def prepare(source: PairSource, options: PrepareOptions) -> Prepared:
    """The cache of `source`, made if missing (by this process, or by another that claimed it first: then
    this one waits for it). With no --spm, a sentencepiece model is trained first (and cached under the
    corpus's identity, vocabulary size, sample size and seed)."""
    root = cache_root(options.cache_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "it is a file" if root.is_file() else exc.strerror
        raise DataError(f"cannot use {root} as the folder of prepared corpora: {reason} (--cache-dir, "
                        "$NMT_CACHE_DIR)") from None
    hold_out = source.valid is None
    plan = _digest(CACHE_VERSION, SPM_VERSION, source.identity, options.vocab_size, options.spm_sample, options.seed,
                   options.valid_size if hold_out else None)
    if options.spm_model:
        tokenizer, share = Tokenizer(options.spm_model), None
    else:
        spm_folder = root / f"spm-{plan}"
        made_once(spm_folder, lambda: _train_sentencepiece(source, options, spm_folder, hold_out))
        tokenizer = Tokenizer((spm_folder / "spm.model").read_bytes())
        share = json.loads((spm_folder / "meta.json").read_text())["held_out_share"]
    key = _digest(CACHE_VERSION, source.identity, hashlib.sha256(tokenizer.model_bytes).hexdigest(),
                  asdict(options.limits), options.valid_size if hold_out else None, options.seed)
    folder = root / f"corpus-{key}"

    def write() -> None:
        held_out = share
        if hold_out and held_out is None:  # with --spm, the corpus has not been counted yet
            held_out = _held_out_share(sum(len(chunk) for chunk in source.chunks(CHUNK_PAIRS)), options.valid_size)
        _write(source, options, tokenizer, folder, held_out if hold_out else None)

    made_once(folder, write)
    meta = json.loads((folder / "meta.json").read_text())
    valid = source.valid if not hold_out else ParallelText(*_read_valid(folder))
    log.info("prepared corpus %s: %d pairs, %d + %d tokens", folder, meta["pairs"], meta["source_tokens"],
             meta["target_tokens"])
    return Prepared(folder, tokenizer, valid)


def open_prepared(folder: str | Path) -> Prepared:
    """A folder `nmt prepare` made, as a complete training input (token ids, sentencepiece model, validation
    pairs), read without the corpus it came from: no hub, no network."""
    folder = Path(folder)
    if not (folder / "meta.json").is_file() or not (folder / "spm.model").is_file():
        raise DataError(f"{folder} is not a folder that `nmt prepare` made (it has no meta.json and spm.model)")
    try:
        tokenizer = Tokenizer((folder / "spm.model").read_bytes())
    except RuntimeError:
        raise DataError(f"{folder / 'spm.model'} is not a sentencepiece model") from None
    valid = ParallelText(*_read_valid(folder)) if (folder / "valid.en").is_file() else ParallelText([], [])
    return Prepared(folder, tokenizer, valid)


def kept_beside(folder: Path, name: str, make: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Arrays computed from a prepared folder's tokens, made once and kept in the folder as NAME (.npz, written
    under a temporary name and renamed, read without pickle). A folder that cannot be written gets a warning
    and the arrays are made again next time."""
    path = folder / name
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as stored:
                return dict(stored)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            log.warning("%s is unreadable (%s): making it again", path, exc)
    arrays = make()
    temporary = folder / f".{name}.{unique_suffix()}"
    try:
        with open(temporary, "wb") as file:
            np.savez(file, **arrays)
        os.replace(temporary, path)
    except OSError as exc:
        log.warning("cannot keep %s in %s (%s): it will be made again next time", name, folder, exc.strerror or exc)
    finally:
        temporary.unlink(missing_ok=True)
    return arrays


def unique_suffix() -> str:
    """A temporary file's suffix no other process makes: host, process id and a random part."""
    return f"tmp-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


def made_once(folder: Path, make: Callable[[], None], poll: float = 1.0) -> None:
    """`make()` the cache folder where it has no meta.json yet, in one process among all that share the cache:
    the one that creates FOLDER.claim; the others wait until the folder is whole (its meta.json), or until the
    claim goes stale (CLAIM_STALE seconds unrefreshed: its process died) and they claim it in turn."""
    claim = folder.with_name(f"{folder.name}.claim")
    folder.parent.mkdir(parents=True, exist_ok=True)
    announced = False
    while not (folder / "meta.json").exists():
        try:
            descriptor = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if not announced:
                log.info("waiting for %s (being prepared by %s)", folder, _holder(claim))
                announced = True
            _drop_if_stale(claim)
            time.sleep(poll)
            continue
        with os.fdopen(descriptor, "w") as handle:
            handle.write(f"{socket.gethostname()} {os.getpid()}\n")
        try:
            if not (folder / "meta.json").exists():  # finished by another between the check and the claim
                with _refreshed(claim):
                    make()
        finally:
            claim.unlink(missing_ok=True)
        return


def _holder(claim: Path) -> str:
    try:
        host, pid = claim.read_text().split()
        return f"process {pid} on {host}"
    except (OSError, ValueError):
        return "another process"


def _drop_if_stale(claim: Path) -> None:
    try:
        if time.time() - claim.stat().st_mtime > CLAIM_STALE:
            log.warning("%s was not refreshed for %d s (its process has died?): taking it over", claim, CLAIM_STALE)
            claim.unlink(missing_ok=True)
    except FileNotFoundError:
        pass


class _refreshed:
    """Touch `claim` every CLAIM_REFRESH seconds from a daemon thread while the work inside runs."""

    def __init__(self, claim: Path):
        self.claim, self.done = claim, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.wait(CLAIM_REFRESH):
            try:
                os.utime(self.claim)
            except OSError:
                pass

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


def _train_sentencepiece(source: PairSource, options: PrepareOptions, folder: Path, hold_out: bool) -> None:
    started = time.monotonic()
    sample, pairs = _sample(source, options.spm_sample, options.seed)
    if not pairs:
        raise DataError("the training corpus has no sentence pairs")
    sampled = time.monotonic()
    log.info("training a %d-piece sentencepiece model on %d sentences sampled from %d pairs", options.vocab_size,
             len(sample), pairs)
    tokenizer = train_tokenizer(sample, options.vocab_size)
    with _temporary(folder) as temporary:
        (temporary / "spm.model").write_bytes(tokenizer.model_bytes)
        share = _held_out_share(pairs, options.valid_size) if hold_out else None
        meta = {"pairs": pairs, "held_out_share": share, "sample": len(sample),
                "sample_seconds": round(sampled - started, 1), "train_seconds": round(time.monotonic() - sampled, 1)}
        (temporary / "meta.json").write_text(json.dumps(meta))
        _publish(temporary, folder)


def _held_out_share(pairs: int, valid_size: int) -> float:
    return held_out_size(pairs, valid_size) / max(pairs, 1)


def _sample(source: PairSource, size: int, seed: int) -> tuple[list[str], int]:
    """A uniform random sample of `size` sentences of the corpus, both sides alike (reservoir sampling of
    pairs over one pass: Vitter's algorithm R), and the number of pairs."""
    rng = random.Random(seed)
    wanted = max(1, size // 2)
    reservoir: list[tuple[str, str]] = []
    seen = 0
    for chunk in source.chunks(CHUNK_PAIRS):
        for pair in zip(chunk.source, chunk.target, strict=True):
            seen += 1
            if len(reservoir) < wanted:
                reservoir.append(pair)
            else:
                slot = rng.randrange(seen)
                if slot < wanted:
                    reservoir[slot] = pair
    return [sentence for pair in reservoir for sentence in pair if sentence.strip()], seen


def holds_out(source_sentence: str, share: float) -> bool:
    """Whether a pair goes to validation: by a hash of its English side, so that every pair of one English
    sentence falls on the same side (one sentence often has several translations)."""
    return zlib.crc32(source_sentence.encode("utf-8")) < share * 2**32


# ---- tokenizing in worker processes --------------------------------------------------------------------

_worker_state: tuple[Tokenizer, FilterSpec, float | None, type] | None = None


def _start_pool_worker(*arguments) -> None:
    """A forked tokenizing process: the parent's stop handlers are not its own (SIGTERM and SIGHUP end it where
    it stands; Ctrl-C is the parent's to handle)."""
    for each in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _start_worker(*arguments)


def _start_worker(tokenizer_bytes: bytes, limits: FilterSpec, share: float | None, dtype) -> None:
    global _worker_state
    _worker_state = (Tokenizer(tokenizer_bytes), limits, share, dtype)


def _encode_chunk(chunk: ParallelText) -> dict:
    tokenizer, limits, share, dtype = _worker_state
    return encode_pairs(chunk, tokenizer, limits, share, dtype)


def encode_pairs(chunk: ParallelText, tokenizer: Tokenizer, limits: FilterSpec, share: float | None,
                 dtype=np.uint16) -> dict:
    """A chunk's kept pairs as flat token arrays with their lengths, the indices of the pairs held out for
    validation, and how many pairs each filter rule removed."""
    held = [i for i, source in enumerate(chunk.source) if holds_out(source, share)] if share else []
    source_ids = tokenizer.encode_batch(chunk.source)
    target_ids = tokenizer.encode_batch(chunk.target)
    source_lengths = np.fromiter(map(len, source_ids), dtype=np.int64, count=len(source_ids))
    target_lengths = np.fromiter(map(len, target_ids), dtype=np.int64, count=len(target_ids))
    keep, counts = keep_mask(source_lengths, target_lengths, limits)
    keep[held] = False
    return {
        "source": _flatten(source_ids, keep, dtype), "target": _flatten(target_ids, keep, dtype),
        "source_lengths": source_lengths[keep].astype(np.uint16),
        "target_lengths": target_lengths[keep].astype(np.uint16),
        "held_out": held, "removed": counts,
    }


def _flatten(ids: list[list[int]], keep: np.ndarray, dtype) -> np.ndarray:
    kept = [row for row, wanted in zip(ids, keep.tolist(), strict=True) if wanted]
    return np.fromiter(itertools.chain.from_iterable(kept), dtype=dtype, count=sum(map(len, kept)))


def keep_mask(source_lengths: np.ndarray, target_lengths: np.ndarray, limits: FilterSpec
              ) -> tuple[np.ndarray, dict[str, int]]:
    """Which pairs training keeps (not empty, at most limits.max_tokens a side, length ratio within
    limits.max_ratio x + 5), and how many each rule removed, the first rule that applies counted."""
    empty = (source_lengths == 0) | (target_lengths == 0)
    longest = np.maximum(source_lengths, target_lengths)
    too_long = ~empty & (longest > limits.max_tokens)
    ratio = ~empty & ~too_long & (longest > limits.max_ratio * np.minimum(source_lengths, target_lengths) + 5)
    counts = {"empty": int(empty.sum()), "too long": int(too_long.sum()), "length ratio": int(ratio.sum())}
    return ~(empty | too_long | ratio), counts


def _write(source: PairSource, options: PrepareOptions, tokenizer: Tokenizer, folder: Path,
           share: float | None) -> None:
    if options.limits.max_tokens > np.iinfo(np.uint16).max:
        raise DataError(f"--max-len above {np.iinfo(np.uint16).max} tokens is not supported")
    dtype = np.uint16 if tokenizer.vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    with _temporary(folder) as temporary:
        _write_into(temporary, source, options, tokenizer, folder, share, dtype)


def _write_into(temporary: Path, source: PairSource, options: PrepareOptions, tokenizer: Tokenizer, folder: Path,
                share: float | None, dtype) -> None:
    workers = options.workers or os.cpu_count() or 1
    started = time.monotonic()
    removed = {"empty": 0, "too long": 0, "length ratio": 0}
    valid = ParallelText([], [])
    pairs = source_tokens = target_tokens = 0
    files = {name: open(temporary / f"{name}.bin", "wb")
             for name in ("source", "target", "source_lengths", "target_lengths")}
    try:
        arguments = (tokenizer.model_bytes, options.limits, share, dtype)
        reported = started
        for chunk, result in _encoded(source.chunks(CHUNK_PAIRS), workers, arguments):
            _check_stop()
            for name, handle in files.items():
                result[name].tofile(handle)
            for index in result["held_out"]:
                valid.source.append(chunk.source[index].replace("\n", " "))
                valid.target.append(chunk.target[index].replace("\n", " "))
            for rule, count in result["removed"].items():
                removed[rule] += count
            pairs += len(result["source_lengths"])
            source_tokens += len(result["source"])
            target_tokens += len(result["target"])
            if time.monotonic() - reported > 30:
                log.info("tokenized %d pairs", pairs)
                reported = time.monotonic()
    finally:
        for handle in files.values():
            handle.close()
    if not pairs:
        reasons = ", ".join(f"{n} {rule}" for rule, n in removed.items() if n) or "none"
        raise DataError(f"no training pairs are left after filtering (removed: {reasons})")
    for side in ("source", "target"):
        lengths = np.fromfile(temporary / f"{side}_lengths.bin", dtype=np.uint16)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        offsets.tofile(temporary / f"{side}_offsets.bin")
    validation = valid if share is not None else source.valid  # the folder is a complete training input
    if validation is not None:
        (temporary / "valid.en").write_text("".join(line.replace("\n", " ") + "\n" for line in validation.source))
        (temporary / "valid.fr").write_text("".join(line.replace("\n", " ") + "\n" for line in validation.target))
    (temporary / "spm.model").write_bytes(tokenizer.model_bytes)
    meta = {"version": CACHE_VERSION, "identity": source.identity, "pairs": pairs, "source_tokens": source_tokens,
            "target_tokens": target_tokens, "dtype": np.dtype(dtype).name, "removed": removed,
            "held_out": len(valid), "valid_pairs": len(validation) if validation is not None else 0,
            "limits": asdict(options.limits), "workers": workers, "seconds": round(time.monotonic() - started, 1)}
    meta["files"] = {name: {"bytes": (temporary / name).stat().st_size, "sha256": _file_digest(temporary / name)}
                     for name in TOKEN_FILES}
    (temporary / "meta.json").write_text(json.dumps(meta, indent=1))
    _publish(temporary, folder)
    log.info("tokenized %d pairs in %.0f s (removed: %s)", pairs, meta["seconds"],
             ", ".join(f"{n} {rule}" for rule, n in removed.items() if n) or "none")


def _encoded(chunks: Iterator[ParallelText], workers: int, arguments: tuple) -> Iterator[tuple[ParallelText, dict]]:
    """(chunk, encode_pairs of it), in order, from `workers` forked processes (one: this process). At most
    two chunks per worker are read ahead, so the corpus is never in memory.

    concurrent.futures, not multiprocessing.Pool: a pool's terminate (its exit) raced its own thread writing a
    chunk into the workers' pipe, and could wait for ever on it once the workers were gone (CI, a SIGTERM while
    tokenizing); a worker that died (out of memory) left its chunk's result waiting for ever, where the
    executor raises (killed while it sends a result back, the executor too waits for ever on the rest of it).
    On a stop the chunks already handed to a worker are finished, the others dropped."""
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        _start_worker(*arguments)
        yield from ((chunk, _encode_chunk(chunk)) for chunk in chunks)
        return
    executor = ProcessPoolExecutor(workers, multiprocessing.get_context("fork"), initializer=_start_pool_worker,
                                   initargs=arguments)
    try:
        pending: deque = deque()
        for chunk in chunks:
            pending.append((chunk, executor.submit(_encode_chunk, chunk)))
            if len(pending) >= 2 * workers:
                chunk, result = pending.popleft()
                yield chunk, result.result()
        while pending:
            chunk, result = pending.popleft()
            yield chunk, result.result()
    except BrokenProcessPool:
        raise NmtError("a tokenizing process died (out of memory? fewer --workers use less)") from None
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def _temporary(folder: Path) -> Iterator[Path]:
    """A temporary folder beside `folder`, removed if the work in it fails or is stopped (published ones are
    renamed). A stop signal (whose default ends the process where it stands, leaving a WMT-size folder of many
    GB) is noted, and raised as Interrupted by _check_stop at the next chunk and before the folder is published:
    never from the handler, which lands anywhere, in a fork's hooks too (one that dropped the raise half-way
    through logging's lock release left a pool's workers forked again behind its terminate, waiting for ever)."""
    temporary = folder.with_name(f"{folder.name}.{unique_suffix()}")
    temporary.mkdir(parents=True)
    _STOPPED.clear()
    stops = stop_signals_handled_by(_note_stop) if threading.current_thread() is threading.main_thread() \
        else contextlib.nullcontext()
    try:
        with stops:
            yield temporary
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


_STOPPED: list[int] = []  # the stop signals that came while preparing


def _note_stop(signal_number: int, frame) -> None:
    _STOPPED.append(signal_number)


def _check_stop() -> None:
    """Raise Interrupted if a stop signal came while preparing (checked between chunks and before a folder is
    published)."""
    if _STOPPED:
        raise Interrupted(_STOPPED[-1], message=f"interrupted by {signal_name(_STOPPED[-1])} while preparing the "
                          "corpus: its temporary folder is removed")


def _publish(temporary: Path, folder: Path) -> None:
    """Rename the finished folder into place; another process that finished first wins, as the same."""
    _check_stop()
    try:
        temporary.rename(folder)
    except OSError:
        if not (folder / "meta.json").exists():
            raise
        shutil.rmtree(temporary, ignore_errors=True)


def _read_valid(folder: Path) -> tuple[list[str], list[str]]:
    return read_lines(folder / "valid.en"), read_lines(folder / "valid.fr")


TOKEN_FILES = ("source.bin", "target.bin", "source_offsets.bin", "target_offsets.bin", "source_lengths.bin",
               "target_lengths.bin")


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def verified_meta(folder: Path) -> dict:
    """A prepared folder's meta.json, once its token files are checked: each file's size as its counts say, and
    its SHA-256 as written where the folder has them (folders made before they were written have sizes
    alone). DataError in one line for a folder that is damaged: a file truncated, missing or changed."""

    def damaged(what: str) -> DataError:
        return DataError(f"the prepared corpus in {folder} is damaged ({what}): remove it and prepare it again "
                         "(nmt prepare, or nmt train)")

    try:
        meta = json.loads((folder / "meta.json").read_text())
        pairs, itemsize = int(meta["pairs"]), np.dtype(meta["dtype"]).itemsize
        sizes = {"source.bin": int(meta["source_tokens"]) * itemsize,
                 "target.bin": int(meta["target_tokens"]) * itemsize,
                 "source_offsets.bin": (pairs + 1) * 8, "target_offsets.bin": (pairs + 1) * 8,
                 "source_lengths.bin": pairs * 2, "target_lengths.bin": pairs * 2}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise damaged(f"meta.json: {exc}") from None
    for name, size in sizes.items():
        path = folder / name
        if not path.is_file():
            raise damaged(f"{name} is missing")
        if path.stat().st_size != size:
            raise damaged(f"{name} holds {path.stat().st_size} bytes, not {size}")
    for name, written in meta.get("files", {}).items():
        if _file_digest(folder / name) != written.get("sha256"):
            raise damaged(f"{name} is not as it was written")
    return meta


class TokenCorpus:
    """A prepared corpus, memory-mapped: `pairs(indices)` reads the token ids of those pairs alone. Its files are
    checked first (verified_meta)."""

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        meta = verified_meta(folder)
        dtype = np.dtype(meta["dtype"])
        self.source = np.memmap(folder / "source.bin", dtype=dtype, mode="r")
        self.target = np.memmap(folder / "target.bin", dtype=dtype, mode="r")
        self.source_offsets = np.memmap(folder / "source_offsets.bin", dtype=np.int64, mode="r")
        self.target_offsets = np.memmap(folder / "target_offsets.bin", dtype=np.int64, mode="r")
        self.source_lengths = np.memmap(folder / "source_lengths.bin", dtype=np.uint16, mode="r")
        self.target_lengths = np.memmap(folder / "target_lengths.bin", dtype=np.uint16, mode="r")
        self.meta = meta

    def __len__(self) -> int:
        return len(self.source_lengths)

    def flat_chunks(self, chunk: int = 200_000) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """The pairs in order, `chunk` at a time, flat: (source ids, source lengths, target ids, target lengths)
        as int64 arrays, read straight from the memory maps."""
        so, to = self.source_offsets, self.target_offsets
        for start in range(0, len(self), chunk):
            end = min(start + chunk, len(self))
            yield (np.asarray(self.source[so[start] : so[end]], dtype=np.int64),
                   np.asarray(self.source_lengths[start:end], dtype=np.int64),
                   np.asarray(self.target[to[start] : to[end]], dtype=np.int64),
                   np.asarray(self.target_lengths[start:end], dtype=np.int64))

    def pairs(self, indices) -> tuple[list[np.ndarray], list[np.ndarray]]:
        so, to = self.source_offsets, self.target_offsets
        return ([self.source[so[i] : so[i + 1]] for i in indices], [self.target[to[i] : to[i + 1]] for i in indices])
