"""What must come through a translation unchanged: URLs, e-mail addresses, codes, numbers, emoji and text in other
scripts, found in a sentence, replaced by placeholders the model copies, and put back after decoding.

    protected = protect("Visit https://example.com at 9:30.")
    protected.text                      ->  "Visit ⦅1⦆ at 9:30."    (numbers: the model's, checked)
    protected.restore("Visitez ⦅1⦆ à 9 h 30.")  ->  "Visitez https://example.com à 9 h 30."
    protect("Visit https://example.com at 9:30.", strict=True).text  ->  "Visit ⦅1⦆ at ⦅2⦆."

A model learns to copy the placeholders in training (nmt.data.augment swaps them in for words both sides of a
pair share), and its sentencepiece model holds each as one piece (nmt.text.tokenizer.PLACEHOLDERS); a model
without them translates the entities as text. Restoring never loses an entity: one the translation dropped
goes back where its placeholder stood in the source, in proportion; a placeholder the model invented or
repeated is removed.

Numbers go to the model as text first: it writes them as French does ("1 249,99", "35 employés") where a
placeholder moved them or kept the English form; `Protected.numbers` lists their digits, and a translation that
loses one is translated again with the numbers behind placeholders (`strict`; nmt.decoding.translate). On
the 640 news:dev lines with digits, BLEU 24.87 -> 25.60 and numbers kept 1,017 -> 1,019 of 1,019; on the 139 of
news-commentary:dev_newsdiscuss 22.11 -> 22.90, 162 -> 164 of 165; robustness:dev and :test BLEU 57.25 -> 58.30
and 54.68 -> 55.93, every entity intact. Times with a.m./p.m., amounts with a scale and units glued to a number
still go behind placeholders that come back in French (GLUED_RENDERINGS, written by nmt.text.typography). First
names and companies (nmt.text.names: "Bob", "Marie", "Apple Inc.") go to the model as text too, and a translation
that loses one is translated again with it behind a placeholder.

Also here: the entities as the robustness report counts them (`entities`). Neighbours: nmt.text.names (names and
titles), nmt.text.typography (French renderings), nmt.text.casing (capitals and Title Case).
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nmt.text.names import TITLED_PERSON, french_titled, kept_name_spans, name_spans, name_to_keep, titled_name_spans
from nmt.text.typography import (
    FRENCH_ORDINAL_MARK,
    SINGULAR_BEFORE_DECADE,
    french_day_time,
    french_decade,
    french_feet_and_inches,
    french_imperial_unit,
    french_money,
    french_ordinal,
    french_time,
    french_unit,
    plural_article,
)

PLACEHOLDER = "\u2985{}\u2986"  # ⦅1⦆: white parentheses, which ordinary text does not use
MAX_PLACEHOLDERS = 9
PLACEHOLDERS = tuple(PLACEHOLDER.format(n) for n in range(1, MAX_PLACEHOLDERS + 1))
PLACEHOLDER_PATTERN = re.compile("\u2985([1-9])\u2986")

URL = re.compile(r"(?i:https?://|www\.)\S+?(?=[.,;:!?)\"']*(?:\s|$))")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# a --flag, a version (3.2.1, 2.0.0-rc1), a token of letters and digits (AF1234, X7k9-Qp2z, H5N1)
# Codes stay behind placeholders: left to the model as first names are (retried where lost), the 66 dev lines
# that hold one went 29.7 -> 29.3 BLEU, the 33 test lines 23.4 -> 21.3 ("le CO2" and "le G20" gained; a
# line that lost one came back with its numbers behind placeholders too, and worse)
CODE = re.compile(r"(?<![\w-])(?:--?[a-z][\w-]*|\d+(?:\.\d+){2,}(?:[\w.-]*\w)?"
                  r"|(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)\w[\w.-]*\w)")
# Code in prose, as documentation and messages write it (the model translated it: "Run `pip install nmt`" came
# out "Run 'p installe le nmp »"): a `backticked span`, an identifier in snake_case or camelCase (a call's
# brackets with it), a dotted name of two letters or more a part (nmt.decoding.translate, config.yaml; not
# "e.g."), a path (/usr/bin, ~/.config, ./run.sh, C:\Users)
BACKTICKED = re.compile(r"`[^`\n]+`")
# A program's format in a message, printf's, Qt's or a brace field ("Deleted %d files", "Hello, %1$s", "Last
# modified: %1", "{count} new"): the model wrote "%d files" as "% des fichiers", "%1" as "% 1" and "{count}" as
# "{counte }"; not "50% d'entre eux", "{ }"
FORMAT_SPEC = re.compile(r"(?<![\w%])%(?:\d+\$|\([\w.]+\))?[-+#0']*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t)?"
                         r"[diouxXeEfFgGcsp@](?!\w)|(?<![\w%])%L?[1-9]\d?(?![\w%])"
                         r"|(?<![\w{])\{(?:\d+|[A-Za-z_]\w*)(?:[.:!][^{}\s]*)?\}(?!\})")
IDENTIFIER = re.compile(r"(?<![\w.-])(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w+)+|[A-Za-z_]\w*_\w+|[a-z]+[A-Z]\w*"
                        r"|[A-Z][a-z\d]+(?:[A-Z][a-z\d]*)+)(?:\(\))?(?![\w-])")
PATH = re.compile(r"(?<![\w/.])(?:~|\.{1,2})?/[\w.-]*\w(?:/[\w.-]*\w)*/?(?![\w/])|(?<!\w)[A-Za-z]:\\[\w.\\-]*\w")
# a number as English writes it: 12, 1,249.99, 9:30, +44 20 7946 0958 (a phone's groups are one entity)
NUMBER = re.compile(r"\+?\d+(?:[.,:]\d+)*(?:[ -]\(?\d+\)?(?:[.,:-]\d+)*)*")
DIGIT_GROUPS = re.compile(r"\d+(?:[.,:]\d+)*")
# A number an English suffix, unit or word is glued to (1980s, 2nd, 10km, 5bn, 35-year-old): left to the model,
# which writes "années 1980", "2e", "10 km", "5 milliards", "35 ans"; a placeholder would keep the English
# letters beside it ("⦅1⦆s"). Its digits still count as a number the translation must keep (entities).
NUMBER_WITH_WORD = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?:-?[a-z]+)+(?![\w-])")
# A time zone after a time, which goes with it behind its placeholder: the model dropped it ("The meeting is at
# 3 PM EST." -> "La réunion est à 15 h.")
TIME_ZONE = (r"(?: (\(?(?-i:UTC|GMT|[ECMP][SD]?T|BST|CES?T|JST|AE[SD]T)(?:[+-]\d{1,2}(?::?\d\d)?)?\)?)"
             r"(?![\w+-]))?")  # in capitals only: "at 3 pm est" is no zone
# A time of day with a.m. or p.m. (7 a.m., 10:30 p.m., 1pm): behind a placeholder that comes back as French
# writes it ("7 h", "22 h 30", "13 h", "15 h EST"). The period that ends a sentence after it stays.
CLOCK_TIME = re.compile(r"(?<![\w:.])(\d{1,2})(?:[:.]([0-5]\d))?\s?([ap])\.?\s?m(?:\.(?!\s*$))?(?!\w)" + TIME_ZONE,
                        re.IGNORECASE)
# A time on the 24-hour clock after a word that says it is one ("at 20:00", "from 9:30 to 17:45"), which the model
# copied ("ferme à 20:00"): as French writes it ("20 h", "9 h 30"); "John 3:16" and a score "2:30" stay
DAY_TIME = re.compile(r"(?<![\w:.])(\d{1,2}):([0-5]\d)(?![\d:]|\s?[ap]\.?\s?m\b)" + TIME_ZONE, re.IGNORECASE)
# Amounts and quantities with an English abbreviation glued to them, behind a placeholder that comes back as
# French writes them: money with a scale ($5bn -> 5 milliards de dollars, £2.5m -> 2,5 millions de livres), which
# the model turned into wrong amounts ("£14bn" came out "14 £"), and units glued to the number (10km -> 10 km,
# 5GB -> 5 Go). On the 19 lines of news:dev, news-commentary:dev_newsdiscuss and news:train that hold them,
# BLEU 19.12 -> 20.91, chrF 47.35 -> 50.17. Ordinals (2nd -> 2e) are left to the model: rendered the same way,
# they cost 1.4 BLEU on the 43 news:dev lines that hold them (the model writes "36e minute" itself, and a
# placeholder moved it: "la minute de 36e"). Only a translation that keeps an English ordinal or decade ("la
# minute 81st", "dans la 1980s") or drops an ordinal's French mark ("Il a fini 2.") is translated again with them
# rendered (GLUED_RENDERINGS).
MONEY_SCALE = re.compile(r"(?<![\w.])([$\u20ac\u00a3])(\d+(?:[.,]\d+)?)\s?(bn|mn|m|tn|M|B)(?![\w-])")
# Imperial units after a number, which French writes out: the model made "180 lbs" "180 libraires" (booksellers)
# and "20 sq ft" "20 sq flèche", kept "70 mph" English ("70 mphe"); not "in" ("at 5 in the morning"), but feet and
# inches together ("5 ft 6 in")
FEET_AND_INCHES = re.compile(r"(?<![\w.,])(\d+)\s?(?:ft|')\s?(\d+)\s?(?:in|\"|'')(?![\w-])")
IMPERIAL_UNIT = re.compile(r"(?<![\w.,])(\d+(?:,\d{3})*(?:\.\d+)?)\s?(lbs?|oz|sq\.?\s?ft|ft|tsp|tbsp|yds?|gal|mph|mi)"
                           r"(?![\w-])")
GLUED_UNIT = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)?)(km|kg|cm|mm|mg|ml|kW|MW|GW|kWh|GB|MB|TB)(?![\w-])")
# An ordinal as English writes it (2nd, 21st, 9th); in a date ("November 9th", "the 20th of December") French
# writes the day as a number ("9 novembre"), the first as "1er"
ORDINAL = re.compile(r"(?<![\w.])(\d+)(?:st|nd|rd|th)(?![\w-])", re.IGNORECASE)
# A decade as English writes it (1980s, '90s, 70s; not mid-1990s, which French words otherwise)
DECADE = re.compile(r"(?<![\w.'\u2019-])['\u2019]?(\d{0,2}\d0)s(?![\w-])")
EMOJI_JOINERS = "\u200d\ufe0f"


def is_emoji(char: str) -> bool:
    """A symbol drawn as a picture (©, ★, 😀); not the degree sign, a number's unit: behind a placeholder it moved
    ("-12°C" came out "jusqu'à ° -12C")."""
    return (unicodedata.category(char) == "So" and char != "°") or "\U0001f3fb" <= char <= "\U0001f3ff"  # tones: Sk


def emoji_runs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each run of emoji in `text`, joiners, variation selectors and the spaces between emoji
    included ("🎉 🎉 🎉" is one run: one placeholder, where 10,000 of them would take more than there are)."""
    runs, start, end = [], None, 0
    for index, char in enumerate(text):
        if is_emoji(char) or (start is not None and char in EMOJI_JOINERS):
            start = index if start is None else start
            end = index + 1
        elif start is not None and not char.isspace():
            runs.append((start, end))
            start = None
    if start is not None:
        runs.append((start, end))
    return runs


# Letters of the Latin script (accents, IPA, ligatures and letterlike symbols with them): a letter outside
# these is of another script, which an English-French model does not read
LATIN_LETTERS = ((0, 0x36F), (0x1D00, 0x1EFF), (0x2100, 0x214F), (0x2C60, 0x2C7F), (0xA720, 0xA7FF),
                 (0xAB30, 0xAB6F), (0xFB00, 0xFB06), (0xFF21, 0xFF5A))


def is_foreign_letter(char: str) -> bool:
    """A letter of a script other than Latin: 你, Ж, α, ع, ก."""
    return char.isalpha() and not any(low <= ord(char) <= high for low, high in LATIN_LETTERS)


def foreign_runs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each run of text in another script (is_foreign_letter), from its first such letter to its
    last with the spaces, digits, marks and punctuation between them: a Latin letter ends a run. The model
    read such runs as bytes and wrote French it made up ("你好世界" came out "< Fitzgeraldpidla, ..."), three
    tokens a character: behind a placeholder they come back as written."""
    runs, start, end = [], None, 0
    for index, char in enumerate(text):
        if is_foreign_letter(char) or (start is not None and unicodedata.category(char) in ("Mn", "Mc")):
            start = index if start is None else start
            end = index + 1
        elif char.isalpha() and start is not None:
            runs.append((start, end))
            start = None
    if start is not None:
        runs.append((start, end))
    return runs


def is_foreign(text: str) -> bool:
    """Whether `text` has letters and all of them are of other scripts than Latin: nothing in it for the model."""
    letters = [char for char in text if char.isalpha()]
    return bool(letters) and all(is_foreign_letter(char) for char in letters)


def overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(start < span[1] and span[0] < end for start, end in spans)


def overlaps_sorted(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    """overlaps(span, spans) where `spans` are in order and do not overlap each other: by bisection."""
    after = bisect.bisect_left(spans, span)
    return (after > 0 and spans[after - 1][1] > span[0]) or (after < len(spans) and spans[after][0] < span[1])


def verbatim_spans(text: str, numbers: bool = True, glued: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each URL, e-mail, code, emoji run, run of another script (and number), in order, not
    overlapping. A number with a word glued to it (NUMBER_WITH_WORD) is neither a code nor a number here, the
    model translates it; with `glued`, it is one like any other (its letters kept English behind the
    placeholder)."""
    spans: list[tuple[int, int]] = []  # in order: a text of 10,000 emoji is checked in a moment
    left_to_model = [] if glued else [match.span() for match in NUMBER_WITH_WORD.finditer(text)]
    patterns = (URL, EMAIL, BACKTICKED, PATH, FORMAT_SPEC, IDENTIFIER, CODE) + ((NUMBER,) if numbers else ())
    found = (match.span() for pattern in patterns for match in pattern.finditer(text)
             if pattern in (URL, EMAIL, BACKTICKED, PATH, FORMAT_SPEC)
             or not overlaps_sorted(match.span(), left_to_model))
    for span in itertools.chain(found, emoji_runs(text), foreign_runs(text)):
        if not overlaps_sorted(span, spans):
            bisect.insort(spans, span)
    return spans


# Numbers with an English ending left to the model, and what the retry of a translation that kept the ending
# renders them as
GLUED_RENDERINGS: tuple[tuple[re.Pattern, Callable[[re.Match], str]], ...] = (
    (ORDINAL, french_ordinal), (DECADE, french_decade))


def glued_kept(glued: Sequence[tuple[str, str]], translation: str) -> int:
    """How many of `glued` (English and French forms of the numbers with an English ending left to the model:
    ("2nd", "2e"), ("1980s", "années 1980")) `translation` writes as French does: its digits without the English
    ending, and with the French ordinal's mark ("2e", "1re") where the French form has one."""
    kept = 0
    for english, french in glued:
        digits, ending = re.fullmatch(r"['\u2019]?(\d+)(\w+)", english).groups()
        if re.search(rf"(?<![\d.,]){digits}['\u2019]?{ending}(?!\w)", translation, re.IGNORECASE):
            continue
        if french.startswith("années "):  # "Les 2020 ont été" for "The 2020s have been": a year, not a decade
            kept += re.search(rf"\bannées\s+{digits}(?!\d)", translation, re.IGNORECASE) is not None
        elif not re.fullmatch(r"\d+\D+", french) or re.search(rf"(?<![\d.,]){digits}{FRENCH_ORDINAL_MARK}",
                                                               translation):
            kept += 1
    return kept


# A pattern of an English form and what its placeholder comes back as in French (None: as written)
RENDERINGS: tuple[tuple[re.Pattern, Callable[[re.Match], str | None]], ...] = (
    (CLOCK_TIME, french_time), (DAY_TIME, french_day_time), (MONEY_SCALE, french_money), (GLUED_UNIT, french_unit),
    (FEET_AND_INCHES, french_feet_and_inches), (IMPERIAL_UNIT, french_imperial_unit))


def missing_numbers(numbers: Sequence[str], translation: str) -> list[str]:
    """The digit strings of `numbers` (in order) that `translation` does not keep: each kept one is found as a run
    of its digits after the one before (however grouped: "1,249.99" -> "1 249,99" keeps 124999)."""
    digits, start, missing = re.sub(r"\D", "", translation), 0, []
    for number in numbers:
        found = digits.find(number, start)
        if found >= 0:
            start = found + len(number)
        else:
            missing.append(number)
    return missing


def numbers_kept(numbers: Sequence[str], translation: str) -> int:
    """How many of `numbers` (digit strings, in order) `translation` keeps (missing_numbers)."""
    return len(numbers) - len(missing_numbers(numbers, translation))


def entities(text: str) -> tuple[list[str], list[str]]:
    """(strings a translation must keep byte-identical: URLs, e-mails, codes, emoji; the digit strings of
    its numbers, a full hour without its minutes since French writes "18 h", a time with a.m. or p.m. as
    French writes it: "2 p.m." is "14 h"), in order."""
    spans = verbatim_spans(text, numbers=False)
    verbatim = [text[start:end] for start, end in spans]
    rest = "".join(" " if any(start <= i < end for start, end in spans) else char for i, char in enumerate(text))
    rest = CLOCK_TIME.sub(lambda match: french_time(match) or match.group(), rest)
    numbers = [re.sub(r"\D", "", re.sub(r"^(\d{1,2}):00$", r"\1", number)) for number in DIGIT_GROUPS.findall(rest)]
    return verbatim, numbers


@dataclass(frozen=True)
class Protected:
    text: str  # the sentence with placeholders
    originals: tuple[str, ...]  # what placeholder n+1 stands for
    positions: tuple[float, ...]  # where each placeholder stood, as a share of the sentence's length
    untouched: bool = False  # the sentence held placeholder brackets of its own: its translation stays as it is
    numbers: tuple[str, ...] = ()  # the digits of the numbers left to the model, which its translation must keep
    glued: tuple[tuple[str, str], ...] = ()  # ordinals and decades left to the model: English, French form
    kept_names: tuple[str, ...] = ()  # the first names and companies left to the model, which its translation keeps

    def restore(self, translation: str) -> str:
        """`translation` with each placeholder replaced by its original; a missing one inserted at its
        relative place (at a word boundary), an unknown or repeated one removed."""
        if self.untouched:
            return translation
        seen: set[int] = set()
        # the entities' own spaces are held as NUL until the end: a missing one is not inserted inside another
        originals = [original.replace(" ", "\0") for original in self.originals]

        def put_back(match: re.Match) -> str:  # the match holds the space before the placeholder, if any
            number = int(match.group(2))
            if number > len(originals) or number in seen:
                return ""
            seen.add(number)
            return match.group(1) + originals[number - 1]

        text = re.sub("( ?)" + PLACEHOLDER_PATTERN.pattern, put_back, translation.replace("\0", ""))
        for number, (original, position) in enumerate(zip(originals, self.positions, strict=True), 1):
            if number not in seen:
                text = insert_at_word_boundary(text, original, position)
        text = text.replace("\0", " ")
        for ordinal in {original for original in self.originals if re.fullmatch(r"\d+(?:e|er|re)", original)}:
            # the model's own ordinal mark after the placeholder: "⦅1⦆e siècle" came back "19ee siècle"
            text = re.sub(rf"(?<![\d.,]){ordinal}{FRENCH_ORDINAL_MARK}", ordinal, text)
        if any(original.startswith("années ") for original in self.originals):
            text = SINGULAR_BEFORE_DECADE.sub(plural_article, text)
        return re.sub(r" {2,}", " ", text).strip()


# A sentence's closing punctuation, with the quotes and brackets after it: an entity that stood at the end of
# the source goes before it ("in Room 4B." -> "en salle 4B.", not "en salle. 4B")
CLOSING = re.compile(r"\s?[.!?\u2026:;]+[\"'\u00bb\u201d)\]]*$")


def insert_at_word_boundary(text: str, entity: str, position: float) -> str:
    """`text` with `entity` inserted at the space nearest `position` x its length, or at its start or its end
    (before its closing punctuation)."""
    if not text:
        return entity
    closing = CLOSING.search(text)
    end = closing.start() if closing else len(text)
    target = round(position * len(text))
    boundaries = [0, end] + [m.start() for m in re.finditer(r" ", text[:end])]
    cut = min(boundaries, key=lambda b: abs(b - target))
    if cut == end and closing:
        return f"{text[:end].rstrip()} {entity}{text[end:]}".strip()
    return f"{text[:cut]} {entity} {text[cut:]}".strip()


def protect(sentence: str, numbers: bool = True, names: Callable[[str], bool] | None = None,
            strict: bool = False, titles: bool = False) -> Protected:
    """`sentence` with its URLs, e-mails, codes, emoji (and numbers; and with `names`, the names name_spans
    finds by it) replaced by ⦅1⦆, ⦅2⦆, ... (at most MAX_PLACEHOLDERS, in order; later ones stay as text).
    Numbers, and numbers with words glued to them, are left to the model (their digits listed in `numbers`, for
    the translation to keep), and so are first names and companies (`kept_names`); with `strict` (the retry of
    a translation that lost one), both go behind placeholders too (times and amounts of RENDERINGS go behind
    placeholders either way). With `titles`, a doctor or professor and their name go behind one that comes back
    in French (TITLED_PERSON). A sentence that already holds placeholder brackets is left as it is."""
    if "\u2985" in sentence or "\u2986" in sentence:
        return Protected(sentence, (), (), untouched=True)
    spans = verbatim_spans(sentence, numbers and strict, strict)
    kept = [span for span in kept_name_spans(sentence) if not overlaps(span, spans)]
    if strict:
        spans, kept = sorted(spans + kept), []
    rendered = {}  # span -> what its placeholder comes back as, where not the source's own text
    if numbers or titles:
        chosen = (RENDERINGS + (GLUED_RENDERINGS if strict else ()) if numbers else ()) + (
            ((TITLED_PERSON, french_titled),) if titles else ())
        for pattern, render in chosen:
            for match in pattern.finditer(sentence):
                french = render(match)
                others = [span for span in spans if not contains(match.span(), span)]  # its digits go in it
                if french is not None and not overlaps(match.span(), others):
                    spans = others + [match.span()]
                    rendered[match.span()] = french
        spans = sorted(spans)
    if names is not None:
        spans = sorted(spans + [span for span in name_spans(sentence, names) if not overlaps(span, spans)])
        spans = sorted(spans + [span for span in titled_name_spans(sentence) if not overlaps(span, spans)])
    spans = spans[:MAX_PLACEHOLDERS]
    pieces, originals, positions, last = [], [], [], 0
    for number, (start, end) in enumerate(spans, 1):
        pieces.append(sentence[last:start] + PLACEHOLDER.format(number))
        originals.append(rendered.get((start, end), sentence[start:end]))
        positions.append(start / max(1, len(sentence)))
        last = end
    pieces.append(sentence[last:])
    left_spans: list[tuple[int, int]] = []
    glued: list[tuple[str, str]] = []
    if numbers and not strict:
        for pattern in (NUMBER_WITH_WORD, NUMBER):
            left_spans += [match.span() for match in pattern.finditer(sentence)
                           if not overlaps(match.span(), spans) and not overlaps(match.span(), left_spans)]
        glued = [(match.group(), render(match)) for pattern, render in GLUED_RENDERINGS
                 for match in pattern.finditer(sentence) if not overlaps(match.span(), spans)]
    left = tuple(re.sub(r"\D", "", sentence[start:end]) for start, end in sorted(left_spans))
    kept_names = tuple(name_to_keep(sentence[start:end]) for start, end in kept)  # checked whole where a name's
    # placeholder holds the family name: the model wrote "John rencontrera Smith" for "John ⦅2⦆"
    return Protected("".join(pieces), tuple(originals), tuple(positions), numbers=left, glued=tuple(glued),
                     kept_names=kept_names)


def contains(outer: tuple[int, int], inner: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


