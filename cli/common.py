"""What the commands share: finding and loading models, reading input and writing output (never a
half-written file), Ctrl-C and SIGTERM, logging."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import io
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import typer

from nmt.decoding.configuration import DecodingFlags
from nmt.errors import STOP_SIGNALS, Interrupted, UsageError, stop_now_or_later, stop_signals_handled_by


def find_model(model: Path | None) -> Path:
    """--model (a file, or a shipped model's name), then $NMT_MODEL (the same), then the default shipped model."""
    from nmt.apps.shipped import default_model_name, is_model_name, model_path

    chosen = str(model) if model is not None else os.environ.get("NMT_MODEL")
    if chosen:
        return model_path(chosen) if is_model_name(chosen) else Path(chosen)
    if default_model_name() is None:
        raise UsageError("no model: pass --model PATH or set NMT_MODEL (no shipped model is installed)")
    return model_path(None)


def load_models(paths: list[Path] | None):
    """The checkpoint of the first --model (else $NMT_MODEL, else the shipped model) and those of the others."""
    from nmt.model.checkpoint import load_checkpoint

    paths = paths or [None]
    return load_checkpoint(find_model(paths[0])), tuple(load_checkpoint(find_model(path)) for path in paths[1:])


def file_translator(translator):
    """What nmt.apps.files needs of a Translator: texts -> translations, and word alignments."""
    from nmt.decoding.alignment import align

    def lines(texts: list[str]) -> list[str]:
        return [t.text for t in translator.translate(texts)]

    def aligned(source: str, target: str) -> list[tuple[int, int]]:
        return align(translator.model, translator.tokenizer, source, target)

    return lines, aligned


def resolve_decoding(models: list[Path] | None, flags: DecodingFlags, workers: int | None = None):
    """The checkpoints of --model and the decoding configuration resolved over the first (nmt.decoding.configuration);
    --verbose prints it. workers: the default when --workers is not given."""
    from nmt.decoding.configuration import DecodingConfig

    checkpoint, others = load_models(models)
    config = DecodingConfig.resolve(flags, checkpoint, workers=workers, ensemble=bool(others))
    if flags.verbose:
        typer.echo(f"decoding: {config.summary()}", err=True)
    return checkpoint, others, config


def load_translator(models: list[Path] | None, flags: DecodingFlags):
    """The Translator of --model and the decoding options, and its resolved configuration."""
    from nmt.decoding.translate import Translator

    checkpoint, others, config = resolve_decoding(models, flags)
    return Translator.from_checkpoint(checkpoint, config, others), config


MODEL_HELP = ("Checkpoint file, or a shipped model's name (`nmt models`); default $NMT_MODEL, then the default "
              "shipped model.")


MODELS_HELP = (MODEL_HELP[:-1] + ". Given several times: an ensemble "
               "averaging the models' log-probabilities at each step (one sentencepiece model).")


# What one file may cost (nmt.apps.files.FileLimits): `nmt translate -i FILE` and `nmt serve`'s /translate_file,
# the server's defaults lower (SERVER_LIMITS).
FILE_LIMIT_OPTIONS = {
    "max_chars": typer.Option(None, "--max-file-chars", help="Characters of text one file may give to translate "
                              "(exit 2 or 413 above). Default 5,000,000 (nmt serve: 500,000)."),
    "max_depth": typer.Option(None, "--max-file-depth", help="How deep a file's markup may nest. Default 256 (nmt "
                              "serve: 128)."),
    "max_inflated": typer.Option(None, "--max-file-inflated", help="Bytes a .docx's parts may inflate to, together. "
                                 "Default 268,435,456 (nmt serve: 67,108,864)."),
    "max_ratio": typer.Option(None, "--max-file-ratio", help="How many times a .docx's part over 1 MiB may inflate "
                              "(a zip bomb's: thousands). Default 100."),
}


def file_limits(base, **given):
    """`base` (nmt.apps.files.FileLimits) with the --max-file-* options given in place of its values."""
    values = {name: value for name, value in given.items() if value is not None}
    for name, value in values.items():
        if value < 1:
            raise UsageError(f"--max-file-{name.removeprefix('max_')} must be at least 1, not {value}")
    return dataclasses.replace(base, **values)


def read_yaml(path: Path) -> dict:
    import yaml

    try:
        values = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read config {path}: {exc}") from None
    if not isinstance(values, dict):
        raise UsageError(f"config {path} must be a mapping of option names to values")
    return {k.replace("-", "_"): v for k, v in values.items()}


def decoded_input(source, path: Path | None, encoding: str | None, input_format: str):
    """(a stream of UTF-8 lines, the line end to write) for text read a line at a time: in its encoding
    (nmt.apps.encodings.sniff over its first 64 KiB, recoded as it is read where not UTF-8); binary data refused
    in one line; CRLF written where its first line ends so."""
    from nmt.apps.encodings import NotText, recoded, sniff, warn_if_guessed
    from nmt.apps.files import looks_binary

    if not hasattr(source, "peek"):  # a stream handed in (a test's stdin): buffered to look at its start
        source = io.BufferedReader(source, 65536)
    head = source.peek(65536)[:65536]
    named = f"{path}" if path is not None else "the input"
    if path is not None and input_format != "jsonl" and looks_binary(head):
        raise UsageError(f"{named} is not a text file: it holds binary data (a picture, an archive?)")
    try:
        found, how = sniff(head, "txt", encoding)
    except NotText as exc:
        raise UsageError(f"{named} is not a text file: {exc}") from None
    warn_if_guessed(found, how, named)
    first = head.split(b"\n", 1)[0] if b"\n" in head else b""
    newline = "\r\n" if first.endswith(b"\r") or first.endswith(b"\r\x00") else "\n"
    return (source if found == "utf-8" else recoded(source, found)), newline


def opened_input(path: Path | None):
    if path is None:
        if sys.stdin is None:
            raise UsageError("standard input is closed: give --input FILE")
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


@contextlib.contextmanager
def opened_output(path: Path | None, input: Path | None) -> Iterator[TextIO]:
    """stdout, or the file `path`: written as PATH.partial and renamed to PATH once every line is in it, so
    PATH is never left half-written; after an interruption PATH.partial holds the lines finished (where there
    are some); after an error nothing is left.
    A device or a pipe (not a regular file) is written in place. The reader of stdout going away (`nmt
    translate | head -1`) ends the command quietly, as Unix tools do."""
    if path is None:
        if sys.stdout is None:
            raise UsageError("standard output is closed: give --output FILE")
        if (sys.stdout.encoding or "").lower().replace("-", "") != "utf8" and hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(encoding="utf-8")  # French needs more than ASCII: the output is UTF-8 always
        try:
            yield sys.stdout
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more can reach the reader
            raise typer.Exit(0) from None
        except OSError as exc:  # a full disk or device: the user's to mend, as an unwritable --output is
            raise UsageError(f"cannot write the translations to standard output: {exc.strerror or exc}") from None
        return
    if input is not None and path.exists() and input.exists() and path.samefile(input):
        raise UsageError(f"--output {path} is the input file: write the translations to another file")
    # a device or pipe, however it is reached (/dev/stdout is a link to one), is written in place, never replaced
    in_place = path.exists() and (not path.is_file() or path.absolute().parts[1:2] in (("dev",), ("proc",)))
    target = path if in_place else path.with_name(path.name + ".partial")
    try:
        if not in_place and target.is_symlink():  # ours to write: a link planted there is not followed
            target.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (0 if in_place else os.O_NOFOLLOW)
        sink = open(os.open(target, flags, 0o666), "w", encoding="utf-8")
    except OSError as exc:  # named as the user gave it: PATH.partial is nmt's own affair
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    where = "" if in_place else f" (they are in {target})"
    try:
        with sink:
            yield sink
        if not in_place:
            os.replace(target, path)
    except Interrupted as stop:
        if not in_place and target.stat().st_size == 0:  # nothing finished: nothing to keep
            target.unlink(missing_ok=True)
            raise stop from None
        raise stop.after(0, where) from None
    except BaseException as exc:
        if not in_place:
            target.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # a full disk, an immutable PATH that cannot be replaced
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP raise nmt.errors.Interrupted: the command flushes what is finished, stops
    its worker processes and exits with 128 + the signal's number. A second signal ends it at once."""

    def stop(signal_number, frame):
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_DFL)
        stop_now_or_later(signal_number)

    with stop_signals_handled_by(stop):
        yield


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a command imports torch and loads its model, then the
    objects made so far frozen (never scanned again) and the collector back on.

    Start-up makes a few hundred thousand objects that live as long as the process and little garbage,
    and `import torch` alone runs hundreds of collections over them. Frozen objects also stay untouched
    in forked decoding workers, whose collections would otherwise write to every page of the parent's
    objects that they share."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def configure_logging(quiet: bool, progress: bool = False) -> None:
    """Warnings (and, for long jobs, progress) on stderr; `--quiet` keeps only errors."""
    level = logging.ERROR if quiet else logging.INFO
    layout = "%(asctime)s %(message)s" if progress else "%(levelname)s: %(message)s"
    logging.basicConfig(level=level, format=layout, datefmt="%H:%M:%S", stream=sys.stderr)
    logging.getLogger("nmt").setLevel(level)
    for noisy in ("datasets", "httpx", "huggingface_hub", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
