"""A gettext catalog (.po, .pot) read a line at a time, its strings checked as GNU msgfmt checks them: polib reads
a string left open (`msgid "Save`) as "Sav" and a stray line as nothing, where msgfmt stops with "end-of-line
within string". Translation memories read their pairs here (nmt.data.memory); catalogs are checked here before
polib reads them (nmt.apps.catalogs).

    for entry in po_entries(lines):
        entry.fields["msgid"], entry.fields.get("msgstr"), entry.fuzzy
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from nmt.errors import FileRefused

KEYWORD = re.compile(r'(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(".*)$')
BARE_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*"')  # a quote no backslash escapes
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


@dataclass
class PoEntry:
    """One entry: its fields (msgctxt, msgid, msgid_plural, msgstr or msgstr[0], msgstr[1]...), unescaped."""

    fields: dict[str, str] = field(default_factory=dict)
    fuzzy: bool = False
    line: int = 0  # where its first keyword stands

    @property
    def translated(self) -> bool:
        """A msgid with every msgstr filled, not fuzzy, not the header."""
        strings = [value for name, value in self.fields.items() if name.startswith("msgstr")]
        return bool(self.fields.get("msgid")) and bool(strings) and all(strings) and not self.fuzzy


def po_entries(lines: Iterable[str]) -> Iterator[PoEntry]:
    """The entries of a catalog's lines, in order (obsolete ones, #~, left out); FileRefused naming the line of
    the first string left open, quote not escaped, or line that is no part of an entry."""
    entry, name, fuzzy = PoEntry(), "", False
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            if text.startswith("#,") and "fuzzy" in text:
                fuzzy = True
            elif text.startswith("#~"):  # the flag was an obsolete entry's
                fuzzy = False
            continue
        keyword = KEYWORD.match(text)
        if keyword is None and not (name and text.startswith('"')):
            raise FileRefused(f"line {number}: not a line of a gettext catalog: {text[:60]}")
        quoted = keyword.group(2) if keyword else text
        if len(quoted) < 2 or not quoted.endswith('"') or BARE_QUOTE.search(quoted[1:-1]):
            raise FileRefused(f"line {number}: a string left open, or with a quote not escaped: {text[:60]}")
        if keyword:
            name = keyword.group(1)
            if name in ("msgctxt", "msgid") and any(key.startswith("msgstr") for key in entry.fields):
                yield entry  # the next entry begins
                entry = PoEntry()
            if not entry.fields:
                entry.line, entry.fuzzy, fuzzy = number, fuzzy, False
            entry.fields[name] = ""
        entry.fields[name] += unescaped(quoted[1:-1])
    if entry.fields:
        yield entry


def unescaped(text: str) -> str:
    """A catalog string's C escapes (\\n, \\t, \\", \\\\) as the characters they stand for."""
    return re.sub(r"\\(.)", lambda match: ESCAPES.get(match.group(1), match.group(0)), text)
