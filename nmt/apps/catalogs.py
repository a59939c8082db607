"""Gettext catalogs translated for a localiser: `nmt translate -i app.pot -o fr.po`.

    french = translate_po(text, translate, CatalogOptions())   # a .pot or .po in, a French .po out

Every untranslated entry gets its msgstr (a plural entry msgstr[0] from msgid and msgstr[1] from msgid_plural, as
French has two forms); an entry translated already is kept unless `overwrite`. What a program fills in or reads
comes back intact: printf formats (%s, %d, %(name)s, %1$d), brace fields ({name}, {0}), Qt's %1, markup (<b>)
go to the model as placeholders it copies (one it drops goes back where it stood), and the accelerator (_File,
&File) is taken out and put back before the same letter of the French where it has one, else before its first
letter ("_Open" -> "_Ouvrir"). A translation made here is marked fuzzy, for a translator to review, unless `fuzzy`
is off; msgctxt, comments, references and flags are kept. The header says Language: fr, UTF-8 and French plural
forms. The file passes GNU gettext's `msgfmt --check`.

polib reads and writes the files: a small, pure-Python library kept since 2006 that keeps everything a catalog
holds (obsolete entries, previous msgids, comments, flags, line wrapping) and that CAT tools' users rely on.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass

from nmt.errors import FileRefused
from nmt.text.protect import MAX_PLACEHOLDERS, PLACEHOLDER, PLACEHOLDER_PATTERN, Protected

FRENCH_PLURALS = "nplurals=2; plural=(n > 1);"

# What a program fills in or reads in a message: printf's formats (C and Python's %(name)s), brace fields,
# Qt's %1, markup tags
FORMAT = re.compile(r"%%|%\([\w.]+\)[-+ #0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
                    r"|%(?:\d+\$)?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?"
                    r"[diouxXeEfFgGaAcspn]|%L?\d+|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}|</?[A-Za-z][^<>]*>")
# An accelerator: _ (GTK) or & (Qt, KDE) before a letter, not inside a word (snake_case) nor an entity (&amp;)
ACCELERATOR = re.compile(r"(?<![\w&_])([_&])(?=[^\W\d_])(?!\w+;)")


@dataclass(frozen=True)
class CatalogOptions:
    overwrite: bool = False  # translate entries that have a translation already
    fuzzy: bool = True  # mark what the model translated as fuzzy


def translate_po(text: str, translate: Callable[[list[str]], list[str]],
                 options: CatalogOptions = CatalogOptions()) -> str:
    """A .pot or .po catalog's text, its entries translated into French (see the module docstring)."""
    import polib

    try:
        catalog = polib.pofile(text, wrapwidth=78)
    except (OSError, ValueError, UnicodeError) as exc:
        raise FileRefused(f"not a gettext catalog: {exc}") from None
    todo = [entry for entry in catalog if not entry.obsolete and entry.msgid
            and (options.overwrite or not entry.translated() and "fuzzy" not in entry.flags)]
    messages = [Message.of(entry.msgid) for entry in todo]
    plurals = [Message.of(entry.msgid_plural) if entry.msgid_plural else None for entry in todo]
    pieces = [piece for message in messages + [p for p in plurals if p] for piece in message.pieces()]
    found = iter(translate(pieces))
    french = [message.restored([next(found) for _ in message.pieces()]) for message in messages]
    french_plurals = [plural.restored([next(found) for _ in plural.pieces()]) if plural else None
                      for plural in plurals]
    for entry, singular, plural in zip(todo, french, french_plurals, strict=True):
        if plural is not None:
            entry.msgstr_plural = {0: singular, 1: plural}
        else:
            entry.msgstr = singular
        if options.fuzzy and "fuzzy" not in entry.flags:
            entry.flags.append("fuzzy")
        elif not options.fuzzy and "fuzzy" in entry.flags:
            entry.flags.remove("fuzzy")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M+0000")
    catalog.metadata.update({"Language": "fr", "MIME-Version": "1.0", "PO-Revision-Date": now,
                             "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit",
                             "Plural-Forms": FRENCH_PLURALS})
    catalog.metadata_is_fuzzy = False
    catalog.encoding = "utf-8"
    return catalog.__unicode__()


@dataclass(frozen=True)
class Message:
    """A msgid as the model is given it: its lines (a message's own line breaks kept), its formats and markup as
    placeholders, its accelerator taken out."""

    lines: tuple[str, ...]  # with placeholders, without the accelerator; "" for an empty line
    originals: tuple[tuple[str, ...], ...]  # per line, what placeholder n+1 stands for
    positions: tuple[tuple[float, ...], ...]
    accelerator: tuple[str, str] | None  # (mark, letter)

    @classmethod
    def of(cls, msgid: str) -> Message:
        accelerator = None
        marks = ACCELERATOR.findall(msgid)
        if len(marks) == 1:
            match = ACCELERATOR.search(msgid)
            accelerator = (match.group(1), msgid[match.end()])
            msgid = msgid[:match.start()] + msgid[match.end():]
        lines, originals, positions = [], [], []
        for line in msgid.split("\n"):
            kept, where = [], []

            def placeholder(match: re.Match, kept=kept, where=where, line=line) -> str:
                if len(kept) == MAX_PLACEHOLDERS:
                    return match.group()
                kept.append(match.group())
                where.append(match.start() / max(1, len(line)))
                return PLACEHOLDER.format(len(kept))

            lines.append(FORMAT.sub(placeholder, line))
            originals.append(tuple(kept))
            positions.append(tuple(where))
        return cls(tuple(lines), tuple(originals), tuple(positions), accelerator)

    def pieces(self) -> list[str]:
        """The texts the model translates: the lines with words in them."""
        return [line.strip() for line in self.lines if has_words(line)]

    def restored(self, translations: list[str]) -> str:
        """The msgstr from the translations of pieces(), in order: each line's spaces at its ends and its
        placeholders' originals back (a dropped one where it stood, a repeated or invented one removed), the
        accelerator on its letter."""
        found = iter(translations)
        lines = []
        for line, originals, positions in zip(self.lines, self.originals, self.positions, strict=True):
            if not has_words(line):  # not translated: its placeholders' originals back where they were
                lines.append(PLACEHOLDER_PATTERN.sub(lambda match, kept=originals: kept[int(match.group(1)) - 1],
                                                     line))
                continue
            lead, trail = line[:len(line) - len(line.lstrip())], line[len(line.rstrip()):]
            lines.append(lead + Protected("", originals, positions).restore(next(found)) + trail)
        text = "\n".join(lines)
        return _with_accelerator(text, self.accelerator) if self.accelerator else text


def has_words(line: str) -> bool:
    """Whether `line` holds a letter outside its placeholders: something for the model to translate."""
    return any(char.isalpha() for char in PLACEHOLDER_PATTERN.sub("", line))


def _with_accelerator(text: str, accelerator: tuple[str, str]) -> str:
    """`text` with the accelerator mark before the first word-initial letter that is the English one's (any case),
    else before that letter anywhere in a word, else before the first letter."""
    mark, letter = accelerator
    spots = [r"(?<![\w%{<])" + re.escape(letter), r"(?<![%{<])" + re.escape(letter), r"[^\W\d_]"]
    for spot in spots:
        match = re.search(spot, text, re.IGNORECASE if spot != spots[-1] else 0)
        if match and not _inside_format(text, match.start()):
            return text[:match.start()] + mark + text[match.start():]
    return mark + text


def _inside_format(text: str, index: int) -> bool:
    return any(match.start() <= index < match.end() for match in FORMAT.finditer(text))
