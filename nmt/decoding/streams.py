"""Lines streamed through a Translator: stdin or a file translated a window of lines at a time, each line written
in order as soon as those before it are done (`nmt translate`'s text and jsonl modes), and running text a paragraph
at a time (--document)."""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import time
from typing import TYPE_CHECKING, BinaryIO, TextIO

from nmt.data.corpus import read_stream_lines
from nmt.errors import Interrupted, UsageError, held_stops
from nmt.text.tokenizer import without_surrogates

if TYPE_CHECKING:
    pass

from nmt.decoding.translate import Translation, Translator

log = logging.getLogger("nmt")


def translate_stream(translator: Translator, source: BinaryIO, sink: TextIO, *, window: int = 1000,
                     as_json: bool = False, quiet: bool = False, records: bool = False, newline: str = "\n") -> int:
    """Translate `source` line by line to `sink`, `window` lines at a time (1: answer each line at once).
    Returns the number of lines written. Lines are written in order as soon as all before them are done,
    and flushed at the end of each window; on an interruption (nmt.errors.Interrupted) the finished lines
    are flushed and the interruption goes on with their count. records: each line is a JSON object with
    "source" and optionally "prefix" (a line that is not stops the translation before its window, with
    every line before that window written). newline: what ends each line written (the input's CRLF kept)."""
    lines = read_stream_lines(source, lambda: log.warning("invalid UTF-8 in the input was replaced by U+FFFD"))
    written, started, last_report = 0, time.monotonic(), time.monotonic()
    try:
        while chunk := list(itertools.islice(lines, window)):
            prefixes = None
            if records:
                chunk, prefixes = parse_records(chunk, first_number=written + 1)
            written += _translate_window(translator, chunk, sink, as_json, prefixes, newline)
            now = time.monotonic()
            if not quiet and now - last_report > 5:
                log.info("%d lines, %.1f lines/s", written, written / (now - started))
                last_report = now
    except Interrupted as stop:
        raise stop.after(written) from None
    return written


def translate_document(translator: Translator, text: str) -> str:
    """Running text translated paragraph by paragraph: paragraphs are separated by blank lines, and a
    paragraph's lines (wrapped at any width) are joined into one text that nmt.text.segment splits into
    sentences. The French keeps the paragraphs and every blank line between them, one line a paragraph."""
    blocks: list[list[str]] = []  # paragraphs (their lines) and runs of blank lines ([""] each)
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if not line.strip():
            blocks.append([""])
        elif blocks and blocks[-1] != [""]:
            blocks[-1].append(line.strip())
        else:
            blocks.append([line.strip()])
    if text.endswith("\n") and blocks and blocks[-1] == [""]:
        blocks.pop()  # the final newline ends the last line, it is not a blank line
    paragraphs = [" ".join(block) for block in blocks if block != [""]]
    translated = iter(t.text for t in translator.translate(paragraphs))
    return "".join(("" if block == [""] else next(translated)) + "\n" for block in blocks)


def parse_records(lines: list[str], first_number: int) -> tuple[list[str], list[str | None]]:
    """(sources, prefixes) of JSON lines {"source": ..., "prefix": ...} ("prefix" optional); UsageError
    naming the first line that is not one (numbered from first_number)."""
    sources, prefixes = [], []
    for number, line in enumerate(lines, first_number):
        try:
            record = json.loads(line)
            source, prefix = record["source"], record.get("prefix")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise UsageError(f"input line {number}: not a JSON object with a source") from None
        if not isinstance(source, str) or not isinstance(prefix, str | None):
            raise UsageError(f"input line {number}: source and prefix must be strings")
        sources.append(without_surrogates(source))  # JSON's "\ud800", which no output could write
        prefixes.append(without_surrogates(prefix) if prefix else prefix)
    return sources, prefixes


def _translate_window(translator: Translator, chunk: list[str], sink: TextIO, as_json: bool,
                      prefixes: list[str | None] | None = None, newline: str = "\n") -> int:
    """Write the translations of `chunk` in order; returns len(chunk)."""
    ready: dict[int, Translation] = {}
    next_line = 0
    try:
        with contextlib.closing(translator.translate_as_ready(chunk, prefixes)) as translations:
            for index, translation in translations:
                ready[index] = translation
                while next_line in ready:  # write the in-order prefix as soon as it is complete
                    done = ready.pop(next_line)
                    with held_stops():  # a stop signal waits until the line is both written and counted
                        sink.write((done.to_json() if as_json else done.text.replace("\n", " ")) + newline)
                        next_line += 1
    except Interrupted as stop:
        raise stop.after(next_line) from None
    finally:
        sink.flush()
    return len(chunk)
