"""The character encoding of a file or stream a user gives: said (--encoding), marked (a byte order mark),
declared (an HTML page's or XML file's own declaration), UTF-16 without a mark (its zero bytes), UTF-8, or
else Windows-1252 (the usual non-UTF-8 text of Western European systems: Latin-1 and more), with a warning.
Data that is no text (control bytes, random data) is refused. What nmt writes is UTF-8, and a page's
declaration says so.

    encoding, why = sniff(head, kind, given)    # "utf-16", "a byte order mark"
    text = decoded(data, kind, given)           # a whole file: str, its declaration (if any) now UTF-8's
"""

from __future__ import annotations

import codecs
import io
import logging
import re
from typing import BinaryIO

from nmt.errors import UsageError

log = logging.getLogger("nmt")

BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
DECLARED = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)"""
                      rb"""|<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
CONTROLS = frozenset(range(0, 9)) | {11, 14, 15} | frozenset(range(16, 27)) | frozenset(range(28, 32)) | {127}
FALLBACK = "cp1252"
BINARY_JUDGED = 512  # bytes of data before its control bytes can say it is binary


class NotText(UsageError):
    """Data that is no text in any encoding nmt would guess."""


def sniff(head: bytes, kind: str = "txt", given: str | None = None) -> tuple[str, str]:
    """(encoding, how it was found) for data that starts with `head` (a few KiB), of a file `kind` (txt, srt,
    html, md, po, xliff): `given` (--encoding), a byte order mark, the page's declaration (html, xliff), UTF-16
    by its zero bytes, UTF-8, or Windows-1252 where the high bytes are none of UTF-8's. NotText for binary data."""
    if given:
        try:
            return codecs.lookup(given).name, "--encoding"
        except LookupError:
            raise UsageError(f"--encoding {given}: no such encoding (utf-8, utf-16, cp1252, latin-1, ...)") from None
    for mark, name in BOMS:
        if head.startswith(mark):
            return name, "a byte order mark"
    zeros_even, zeros_odd = head[0::2].count(0), head[1::2].count(0)
    if len(head) >= 32 and max(zeros_even, zeros_odd) > 0.5 * len(head) / 2 and min(zeros_even, zeros_odd) == 0:
        return ("utf-16-le" if zeros_odd > zeros_even else "utf-16-be"), "its zero bytes (UTF-16)"
    if kind in ("html", "xliff") and (found := DECLARED.search(head)):
        name = (found.group(1) or found.group(2)).decode("ascii")
        try:
            return codecs.lookup(name).name, "the page's declaration"
        except LookupError:
            pass
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(head)  # a sequence cut at the end waits
    bad = text.count("\ufffd") - head.decode("utf-8", errors="ignore").count("\ufffd")
    # data long enough to judge, with more control bytes or invalid UTF-8 than text has (a few odd lines are
    # still lines, each with its line out)
    if len(head) >= BINARY_JUDGED and (sum(byte in CONTROLS for byte in head) > 0.05 * len(head)
                                       or bad > 0.3 * len(text)):
        raise NotText("it holds binary data, not text (a picture, an archive?)")
    if bad and not any(ord(char) >= 0x80 and char != "\ufffd" for char in text):
        return FALLBACK, "its bytes, which are not UTF-8"  # no UTF-8 sequence at all: a Western European file
    return "utf-8", "UTF-8"


def warn_if_guessed(encoding: str, how: str, name: str) -> None:
    """The warning of a text read as Windows-1252 because it is not UTF-8 (sniff's guess, not --encoding's)."""
    if encoding == FALLBACK and how != "--encoding":
        log.warning("%s is not UTF-8 (invalid UTF-8 and no UTF-8 sequence in its start): read as Windows-1252 "
                    "(Latin-1); --encoding says otherwise", name)


def decoded(data: bytes, kind: str, given: str | None = None, name: str = "the file") -> str:
    """A whole file's text (sniff), with a page's charset declaration changed to UTF-8's (what nmt writes);
    bytes its encoding cannot read replaced by U+FFFD, with a warning."""
    encoding, how = sniff(data[:65536], kind, given)
    warn_if_guessed(encoding, how, name)
    text = data.decode(encoding, errors="replace")
    if "\ufffd" in text and "\ufffd" not in data.decode(encoding, errors="ignore"):
        log.warning("%s: bytes that are not %s were replaced by U+FFFD", name, encoding)
    if kind == "html" and encoding not in ("utf-8", "utf-8-sig"):
        text = re.sub(r"""(<meta[^>]+charset\s*=\s*["']?\s*)[A-Za-z0-9_.:-]+""", r"\1utf-8", text, count=1,
                      flags=re.IGNORECASE)
    return text.removeprefix("\ufeff")


def recoded(source: BinaryIO, encoding: str) -> BinaryIO:
    """`source`, a stream in `encoding`, as a stream of UTF-8 lines (its line ends kept), read as it arrives."""
    text = io.TextIOWrapper(source, encoding=encoding, errors="replace", newline="")
    return _Utf8Lines(text)


class _Utf8Lines(io.RawIOBase):
    """A text stream read a line at a time, each line given as UTF-8 bytes (readline, as read_stream_lines reads
    a binary stream)."""

    def __init__(self, text: io.TextIOWrapper):
        super().__init__()
        self.text = text
        self.first = True

    def readable(self) -> bool:
        return True

    def readline(self, size: int = -1) -> bytes:
        line = self.text.readline()
        if self.first:
            line, self.first = line.removeprefix("\ufeff"), False
        return line.encode("utf-8")
