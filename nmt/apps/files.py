"""Files translated whole, their structure kept: the formats `nmt translate -i FILE` and `nmt serve`'s
/translate_file take, by name.

    kind = file_kind("film.srt")                          # "srt"; None for a name of no known kind
    out = translate_file(kind, data, translate, align)    # bytes in, bytes out

translate: texts -> their translations, in order; align: an English text and its French -> Pharaoh word
pairs (nmt.decoding.alignment), with which inline formatting follows its words.

A file may cost only so much (FileLimits): the characters it gives to translate, the nesting of its markup,
and for a .docx (a zip) the size of its members once inflated and their compression ratio, read from the
zip's directory before a byte is inflated (Python's zipfile then reads no member past its declared size).
Over a limit, or a file its parser cannot read, is a FileRefused (exit 2 on the command line, HTTP 413 or
400 from the server) naming the limit and the option that raises it.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nmt.apps.catalogs import CatalogOptions
from nmt.apps.encodings import NotText, decoded, sniff
from nmt.errors import FileRefused

KINDS = {".txt": "txt", ".srt": "srt", ".html": "html", ".htm": "html", ".docx": "docx", ".md": "md",
         ".markdown": "md", ".po": "po", ".pot": "po", ".xlf": "xliff", ".xliff": "xliff"}


def file_kind(name: str) -> str | None:
    return KINDS.get(Path(name).suffix.lower())


@dataclass(frozen=True)
class FileLimits:
    """What one file may cost. The defaults fit a long report (a 600-page book is about 1.5M characters);
    `nmt serve` takes lower ones (SERVER_LIMITS)."""

    max_chars: int = 5_000_000  # characters given to the model, all texts of the file together
    max_depth: int = 256  # nesting of a page's HTML elements (markdown-it caps Markdown's at 20 itself)
    max_inflated: int = 256 * 2**20  # bytes of a zip's members (a .docx's XML) once inflated, together
    max_ratio: int = 100  # inflated over compressed size of a member over 1 MiB (Word's XML: 5-20)


SERVER_LIMITS = FileLimits(max_chars=500_000, max_depth=128, max_inflated=64 * 2**20, max_ratio=100)


OPTIONS = {"max_chars": "--max-file-chars", "max_depth": "--max-file-depth", "max_inflated": "--max-file-inflated",
           "max_ratio": "--max-file-ratio"}


def over(limits: FileLimits, field: str, what: str) -> FileRefused:
    return FileRefused(f"{what} ({OPTIONS[field]} raises the limit)", field)


def counted(translate: Callable[[list[str]], list[str]], limits: FileLimits) -> Callable[[list[str]], list[str]]:
    """`translate`, refusing (before translating) once the texts given to it exceed limits.max_chars."""
    total = 0

    def translate_counted(texts: list[str]) -> list[str]:
        nonlocal total
        total += sum(map(len, texts))
        if total > limits.max_chars:
            raise over(limits, "max_chars", f"the file holds more than {limits.max_chars:,} characters to translate")
        return translate(texts)

    return translate_counted


def check_zip(data: bytes, limits: FileLimits) -> None:
    """A zip's members, by its directory, against the inflated size and ratio limits; an unreadable zip."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise FileRefused(f"not a Word (.docx) document: not a readable zip ({exc})") from None
    total = 0
    for member in members:
        total += member.file_size
        if total > limits.max_inflated:
            raise over(limits, "max_inflated", f"the document's parts inflate to more than {limits.max_inflated:,} "
                       "bytes")
        if member.file_size > 2**20 and member.file_size > limits.max_ratio * max(member.compress_size, 1):
            ratio = member.file_size // max(member.compress_size, 1)
            raise over(limits, "max_ratio", f"the document's part {member.filename} inflates {ratio:,} times (a zip "
                       f"bomb?), more than {limits.max_ratio}")


TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)[^>]*?(/?)>")
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())


def check_depth(text: str, limits: FileLimits) -> None:
    """The nesting of `text`'s HTML tags (a linear scan, before any parser) against limits.max_depth."""
    depth, deepest = 0, 0
    for match in TAG.finditer(text):
        closing, name, self_closing = match.groups()
        if closing:
            depth = max(0, depth - 1)
        elif not self_closing and name.lower() not in VOID:
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limits.max_depth:
                raise over(limits, "max_depth", f"the markup nests deeper than {limits.max_depth} elements")


def check_file(kind: str, data: bytes, limits: FileLimits = FileLimits(), encoding: str | None = None) -> None:
    """What can be checked of a file before any model or parser: binary data where text is expected (a
    signature, control bytes: nmt.apps.encodings.sniff), a zip's sizes and ratios and its parts' entity
    declarations (.docx), the nesting of a page's markup."""
    if kind == "docx":
        from nmt.apps.office import declares_entities

        check_zip(data, limits)
        declares_entities(data)
        return
    article = f"a{'n' if kind[0] in 'aeiou' else ''} {kind} file"
    if looks_binary(data, markup=kind != "txt"):
        raise FileRefused(f"not {article}: it holds binary data (a picture, an archive?)")
    if kind != "xliff":  # XML: its parser reads the encoding it declares
        try:
            sniff(data[:65536], kind, encoding)
        except NotText as exc:
            raise FileRefused(f"not {article}: {exc}") from None
    if kind == "html":
        check_depth(data.decode("utf-8", errors="replace"), limits)


def translate_file(kind: str, data: bytes, translate: Callable[[list[str]], list[str]],
                   align: Callable[[str, str], list[tuple[int, int]]], limits: FileLimits = FileLimits(),
                   catalog: CatalogOptions = CatalogOptions(), encoding: str | None = None) -> bytes:
    """A whole file of `kind` (txt, srt, html, docx, md, po, xliff) translated: a text file a line at a time, its
    line breaks kept; the others by nmt.apps.subtitles, webpages, office, markdown, catalogs and xliff (the last two
    as `catalog` says); within `limits` (check_file first). Text is read in its encoding (`encoding`, else as
    nmt.apps.encodings.sniff finds it) and written in UTF-8, with the line ends it had (CRLF or LF)."""
    check_file(kind, data, limits, encoding)
    translate = counted(translate, limits)
    if kind == "docx":
        from nmt.apps.office import translate_docx

        return translate_docx(data, translate, align)
    if kind == "xliff":
        from nmt.apps.xliff import translate_xliff

        return translate_xliff(data, translate, catalog)
    text = decoded(data, kind, encoding)
    if kind in ("srt", "md", "po"):  # their readers take LF: CRLF put back after
        crlf = "\r\n" in text.split("\n", 1)[0] + "\n" and text.count("\r\n") == text.count("\n")
        translated = translate_structured(kind, text.replace("\r\n", "\n"), translate, align, catalog)
        return (translated.replace("\n", "\r\n") if crlf else translated).encode()
    if kind == "html":
        from nmt.apps.webpages import translate_html

        return translate_html(text, translate, align).encode()
    lines = text.split("\n")
    ends = ["\r" if line.endswith("\r") else "" for line in lines]
    translated = translate([line.removesuffix("\r") for line in lines])
    return "\n".join(line + end for line, end in zip(translated, ends, strict=True)).encode()


def translate_structured(kind: str, text: str, translate: Callable[[list[str]], list[str]],
                         align: Callable[[str, str], list[tuple[int, int]]], catalog: CatalogOptions) -> str:
    """Subtitles, Markdown or a gettext catalog, with LF line ends, translated."""
    if kind == "srt":
        from nmt.apps.subtitles import translate_srt

        return translate_srt(text, translate, align)
    if kind == "md":
        from nmt.apps.markdown import translate_markdown

        return translate_markdown(text, translate, align)
    from nmt.apps.catalogs import translate_po

    return translate_po(text, translate, catalog)


# PNG, JPEG, GIF, zip (a .docx too), PDF, an ELF program, gzip: what people give as text by mistake
BINARY_SIGNATURES = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"PK\x03\x04", b"%PDF", b"\x7fELF", b"\x1f\x8b")


def looks_binary(data: bytes, markup: bool = False) -> bool:
    """Whether `data` is no text: a picture's, archive's or program's signature; for a markup file (`markup`)
    also a NUL byte in its first 8 KiB. A text file keeps its odd lines (a NUL in one is still a line, and
    gets its line out)."""
    head = data[:8192]
    return head.startswith(BINARY_SIGNATURES) or (markup and b"\0" in head)
