"""Gettext catalogs translated for a localiser: `nmt translate -i app.pot -o fr.po`.

    french = translate_po(text, translate, CatalogOptions())   # a .pot or .po in, a French .po out

Every untranslated entry gets its msgstr (a plural entry msgstr[0] from msgid and msgstr[1] from msgid_plural, as
French has two forms); an entry translated already is kept unless `overwrite`. What a program fills in or reads
comes back intact: printf formats (%s, %d, %(name)s, %1$d), brace fields ({name}, {0}), Qt's %1, markup (<b>)
go to the model as placeholders it copies (one it drops goes back where it stood); a count ("%d files", "{count}
files") goes as a number instead, so that it stands where French puts a count ("%d fichiers", not "Fichiers %d"),
and as a placeholder again where the model does not write that number back once. The accelerator (_File,
&File) is taken out and put back before the same letter of the French where it has one, else before its first
letter ("_Open" -> "_Ouvrir"). A translation whose formats are not the msgid's (a line of more than
MAX_PLACEHOLDERS formats, whose others would reach the model raw) is not written: the entry stays untranslated,
and its translator comment says why. A translation made here is marked fuzzy, for a translator to review, unless
`fuzzy` is off; msgctxt, comments, references and flags are kept. The header says Language: fr, UTF-8 and French
plural forms. The file passes GNU gettext's `msgfmt --check`: a catalog with a string left open is refused
(nmt.data.po), line breaks open and end a translation where they open and end its msgid, and a translation kept
from the input that msgfmt would refuse under French's header (three plural forms) is marked fuzzy and said why.

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

# What a program fills in or reads in a message: printf's formats (C and Python's %(name)s, Apple's %@), brace fields,
# Qt's %1, markup tags, and any other % before a letter (strftime's %b %Y, glibc's %m: the model wrote "%b" as "% de")
FORMAT = re.compile(r"%%|%\([\w.]+\)[-+ #0]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]"
                    r"|%(?:\d+\$)?[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?"
                    r"[diouxXeEfFgGaAcspn@]|%L?\d+|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}|</?[A-Za-z][^<>]*>|%[A-Za-z]")
# A format that a program fills with a count: printf's and Python's integer conversions, Qt's %n, a brace field
# named as a count or typed d; alone between spaces or punctuation that ends a word (not "%d:%02d", "%d%%")
COUNT = re.compile(r"(?:%\([\w.]+\)[-+ #0]*\d*|%(?:\d+\$)?[-+ #0']*\d*(?:hh|h|ll|l|L|q|j|z|t)?)[diu]|%n"
                   r"|\{(?:n|num|count|number|total|\w+_count|count_\w+)?(?::\d*d)?\}")
# The numbers a count goes to the model as: small ones, which it puts where French puts a count ("37 files" ->
# "Fichiers 37", "5 files" -> "5 fichiers"; one digit or two, no thousands separator to write)
STAND_INS = ("5", "7", "8", "6", "9", "4", "3", "12", "15")
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

    from nmt.data.po import po_entries

    try:
        for _ in po_entries(text.split("\n")):  # polib reads a string left open as another msgid
            pass
        catalog = polib.pofile(text, wrapwidth=78)
    except (OSError, ValueError, UnicodeError, FileRefused) as exc:
        raise FileRefused(f"not a gettext catalog: {exc}") from None
    todo = [entry for entry in catalog if not entry.obsolete and entry.msgid
            and (options.overwrite or not entry.translated() and "fuzzy" not in entry.flags)]
    messages = [Message.of(entry.msgid, singular=bool(entry.msgid_plural)) for entry in todo]
    plurals = [Message.of(entry.msgid_plural) if entry.msgid_plural else None for entry in todo]
    found = iter(counted_translations([message for message in messages + plurals if message], translate))
    french = [message.restored([next(found) for _ in message.pieces()]) for message in messages]
    french_plurals = [plural.restored([next(found) for _ in plural.pieces()]) if plural else None
                      for plural in plurals]
    for entry, singular, plural in zip(todo, french, french_plurals, strict=True):
        singular = with_line_ends(entry.msgid, singular)
        plural = with_line_ends(entry.msgid_plural, plural) if plural is not None else None
        if not same_formats(entry.msgid, singular) or (plural is not None and not same_formats(entry.msgid_plural,
                                                                                                  plural)):
            # a format lost or changed (more than MAX_PLACEHOLDERS in a line): untranslated, never corrupt
            note(entry, "left untranslated: its formats did not all come back from the translation")
            continue
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
    for entry in catalog:  # kept translations msgfmt --check would refuse under the French header: for review
        if not entry.obsolete and entry.msgid and entry.translated() and (problem := msgfmt_problem(entry)):
            entry.flags.append("fuzzy")
            note(entry, problem)
    return catalog.__unicode__()


NOTE = "nmt: "  # what this module says in an entry's translator comment


def note(entry, text: str) -> None:
    """Say `text` in `entry`'s translator comment (once), for the translator who opens the catalog."""
    line = NOTE + text
    if line not in entry.tcomment.split("\n"):
        entry.tcomment = f"{entry.tcomment}\n{line}" if entry.tcomment else line


def msgfmt_problem(entry) -> str | None:
    """What GNU msgfmt --check would refuse in a translated entry under French's two plural forms: forms not
    two, a line break that opens or ends the msgid but not its translation (or the other way), a format of a
    c-format or python-format entry not in its translation; None if nothing."""
    checked = any(flag in entry.flags for flag in ("c-format", "python-format"))
    if entry.msgid_plural:
        if sorted(entry.msgstr_plural) != [0, 1]:
            return f"{len(entry.msgstr_plural)} plural forms where French has 2: kept, marked fuzzy"
        pairs = [(entry.msgid, entry.msgstr_plural[0]), (entry.msgid_plural, entry.msgstr_plural[1])]
        general = set(FORMAT.findall(entry.msgid_plural))  # what each form may use, to msgfmt
        if checked and any(not set(FORMAT.findall(form)) <= general for form in entry.msgstr_plural.values()):
            return "a plural form holds a format the msgid_plural has not: marked fuzzy"
    else:
        pairs = [(entry.msgid, entry.msgstr)]
    for english, french in pairs:
        if english.startswith("\n") != french.startswith("\n") or english.endswith("\n") != french.endswith("\n"):
            return "a line break opens or ends the msgid but not its translation (or the other way): marked fuzzy"
        if checked and not entry.msgid_plural and not same_formats(english, french):
            return "the translation's formats are not the msgid's: marked fuzzy"
    return None


def with_line_ends(english: str, french: str) -> str:
    """`french` opening and ending with a line break where `english` does, and only there (msgfmt --check)."""
    if english.startswith("\n") != french.startswith("\n"):
        french = "\n" + french if english.startswith("\n") else french.lstrip("\n")
    if english.endswith("\n") != french.endswith("\n"):
        french = french + "\n" if english.endswith("\n") else french.rstrip("\n")
    return french


def same_formats(english: str, french: str) -> bool:
    """Whether `french` holds each format of `english` (FORMAT: printf's, brace fields, markup) as often, as
    `msgfmt --check-format` asks; the order may change ("%1$s ... %2$s")."""
    return sorted(FORMAT.findall(english)) == sorted(FORMAT.findall(french))


def counted_translations(messages: list, translate: Callable[[list[str]], list[str]]) -> list[str]:
    """The translations of every message's pieces (a Message, or nmt.apps.xliff's Inline: pieces(counted),
    piece_counts()), in order, with placeholders where the counts stood: a piece
    whose counts' numbers do not each come back once, or that came back as it went ("5 Selected"), is translated
    again with its counts as placeholders."""
    pieces = [piece for message in messages for piece in message.pieces()]
    guarded = [piece for message in messages for piece in message.pieces(counted=False)]
    counts = [each for message in messages for each in message.piece_counts()]
    french = [_counts_back(text, numbers) if not numbers or text != piece else None
              for piece, text, numbers in zip(pieces, translate(pieces), counts, strict=True)]
    again = [index for index, text in enumerate(french) if text is None]
    for index, text in zip(again, translate([guarded[index] for index in again]) if again else [], strict=True):
        french[index] = text
    return french


def _counts_back(french: str, numbers: dict[str, int]) -> str | None:
    """`french` with each count's number as its placeholder again, or None where one is not there exactly once."""
    for number, placeholder in numbers.items():
        # not "1er", "1,5", "15", nor a placeholder's "⦅5⦆"
        spots = list(re.finditer(rf"(?<![\w,.\u2985]){number}(?![\w\u2986]|[,.]\d)", french))
        if len(spots) != 1:
            return None
        french = french[:spots[0].start()] + PLACEHOLDER.format(placeholder) + french[spots[0].end():]
    return french


@dataclass(frozen=True)
class Message:
    """A msgid as the model is given it: its lines (a message's own line breaks kept), its formats and markup as
    placeholders, its accelerator taken out."""

    lines: tuple[str, ...]  # with placeholders, without the accelerator; "" for an empty line
    originals: tuple[tuple[str, ...], ...]  # per line, what placeholder n+1 stands for
    positions: tuple[tuple[float, ...], ...]
    accelerator: tuple[str, str] | None  # (mark, letter)
    counts: tuple[dict[str, int], ...] = ()  # per line, the number each count goes to the model as: its placeholder

    @classmethod
    def of(cls, msgid: str, singular: bool = False) -> Message:
        """`singular`: the msgid of a plural entry, whose first count goes to the model as 1 (its others as
        placeholders: a second 1 could not be told apart)."""
        accelerator = None
        marks = ACCELERATOR.findall(msgid)
        if len(marks) == 1:
            match = ACCELERATOR.search(msgid)
            accelerator = (match.group(1), msgid[match.end()])
            msgid = msgid[:match.start()] + msgid[match.end():]
        lines, originals, positions, counts = [], [], [], []
        for line in msgid.split("\n"):
            kept, where, numbers = [], [], {}
            free = stand_ins(line, singular)

            def placeholder(match: re.Match, kept=kept, where=where, line=line, free=free, numbers=numbers) -> str:
                if len(kept) == MAX_PLACEHOLDERS:
                    return match.group()
                kept.append(match.group())
                where.append(match.start() / max(1, len(line)))
                if free and alone(line, match) and COUNT.fullmatch(match.group()):
                    numbers[free.pop(0)] = len(kept)
                return PLACEHOLDER.format(len(kept))

            lines.append(FORMAT.sub(placeholder, line))
            originals.append(tuple(kept))
            positions.append(tuple(where))
            counts.append(numbers)
        return cls(tuple(lines), tuple(originals), tuple(positions), accelerator, tuple(counts))

    def pieces(self, counted: bool = True) -> list[str]:
        """The texts the model translates: the lines with words in them, each count as its number (`counted`) or
        as its placeholder."""
        return [(with_numbers(line, numbers) if counted else line).strip()
                for line, numbers in zip(self.lines, self.counts, strict=True) if has_words(line)]

    def piece_counts(self) -> list[dict[str, int]]:
        """For each of pieces(), the number each count went to the model as: its placeholder."""
        return [numbers for line, numbers in zip(self.lines, self.counts, strict=True) if has_words(line)]

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


def stand_ins(line: str, singular: bool = False) -> list[str]:
    """The numbers the counts of `line` may go to the model as: STAND_INS (a plural entry's singular: 1) but those
    the line writes itself (not counting a format's "%1$d")."""
    written = FORMAT.sub(" ", line)
    return [number for number in (("1",) if singular else STAND_INS)
            if not re.search(rf"(?<!\d){number}(?!\d)", written)]


def alone(line: str, match: re.Match) -> bool:
    """Whether a format stands as a word: spaces or the line's ends around it, or punctuation then those."""
    before, after = line[:match.start()], line[match.end():]
    return re.search(r"(?:^|\s)[(\[«\"']?$", before) is not None and re.match(r"[)\]»\"'.,;:!?]*(?:\s|$)", after) \
        is not None


def with_numbers(line: str, numbers: dict[str, int]) -> str:
    """`line` with each count's placeholder as the number it goes to the model as."""
    for number, placeholder in numbers.items():
        line = line.replace(PLACEHOLDER.format(placeholder), number)
    return line


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
