"""Files translated whole, their structure kept: the formats `nmt translate -i FILE` and `nmt serve`'s
/translate_file take, by name.

    kind = file_kind("film.srt")                          # "srt"; None for a name of no known kind
    out = translate_file(kind, data, translate, align)    # bytes in, bytes out

translate: texts -> their translations, in order; align: an English text and its French -> Pharaoh word
pairs (nmt.decoding.alignment), with which inline formatting follows its words.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

KINDS = {".txt": "txt", ".srt": "srt", ".html": "html", ".htm": "html", ".docx": "docx", ".md": "md",
         ".markdown": "md"}


def file_kind(name: str) -> str | None:
    return KINDS.get(Path(name).suffix.lower())


def translate_file(kind: str, data: bytes, translate: Callable[[list[str]], list[str]],
                   align: Callable[[str, str], list[tuple[int, int]]]) -> bytes:
    """A whole file of `kind` (txt, srt, html, docx, md) translated: a text file a line at a time, its line
    breaks kept; the others by nmt.apps.subtitles, webpages, office and markdown."""
    if kind == "docx":
        from nmt.apps.office import translate_docx

        return translate_docx(data, translate, align)
    text = data.decode("utf-8", errors="replace")
    if kind == "srt":
        from nmt.apps.subtitles import translate_srt

        return translate_srt(text, translate, align).encode()
    if kind == "html":
        from nmt.apps.webpages import translate_html

        return translate_html(text, translate, align).encode()
    if kind == "md":
        from nmt.apps.markdown import translate_markdown

        return translate_markdown(text, translate, align).encode()
    lines = text.split("\n")
    ends = ["\r" if line.endswith("\r") else "" for line in lines]
    translated = translate([line.removesuffix("\r") for line in lines])
    return "\n".join(line + end for line, end in zip(translated, ends, strict=True)).encode()
