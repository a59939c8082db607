"""What must come through a translation unchanged: URLs, e-mail addresses, codes, numbers and emoji, found in
a sentence, replaced by placeholders the model copies, and put back after decoding.

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
still go behind placeholders that come back in French (RENDERINGS). First names (FIRST_NAMES: "Bob", "Marie") go
to the model as text too, and a translation that loses one is translated again with it behind a placeholder.

Also here: the entities as the robustness report counts them (`entities`), and casing: ALL-CAPS input is
translated in sentence case and the translation put back in capitals (`case_normalized`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nmt.text.casing import Casing

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
# A time of day with a.m. or p.m. (7 a.m., 10:30 p.m., 1pm): behind a placeholder that comes back as French
# writes it ("7 h", "22 h 30", "13 h"). The period that ends a sentence after it stays.
CLOCK_TIME = re.compile(r"(?<![\w:.])(\d{1,2})(?:[:.]([0-5]\d))?\s?([ap])\.?\s?m(?:\.(?!\s*$))?(?!\w)", re.IGNORECASE)
# Amounts and quantities with an English abbreviation glued to them, behind a placeholder that comes back as
# French writes them: money with a scale ($5bn -> 5 milliards de dollars, £2.5m -> 2,5 millions de livres), which
# the model turned into wrong amounts ("£14bn" came out "14 £"), and units glued to the number (10km -> 10 km,
# 5GB -> 5 Go). On the 19 lines of news:dev, news-commentary:dev_newsdiscuss and news:train that hold them,
# BLEU 19.12 -> 20.91, chrF 47.35 -> 50.17. Ordinals (2nd -> 2e) are left to the model: rendered the same way,
# they cost 1.4 BLEU on the 43 news:dev lines that hold them (the model writes "36e minute" itself, and a
# placeholder moved it: "la minute de 36e"). Only a translation that keeps an English ordinal or decade ("la
# minute 81st", "dans la 1980s") or drops an ordinal's French mark ("Il a fini 2.") is translated again with them
# rendered (GLUED_RENDERINGS).
MONEY_SCALE = re.compile(r"(?<![\w.])([$\u20ac\u00a3])(\d+(?:[.,]\d+)?)\s?(bn|mn|m|tn)(?![\w-])")
GLUED_UNIT = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)?)(km|kg|cm|mm|mg|ml|kW|MW|GW|kWh|GB|MB|TB|mph)(?![\w-])")
# An ordinal as English writes it (2nd, 21st, 9th); in a date ("November 9th", "the 20th of December") French
# writes the day as a number ("9 novembre"), the first as "1er"
ORDINAL = re.compile(r"(?<![\w.])(\d+)(?:st|nd|rd|th)(?![\w-])", re.IGNORECASE)
MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
         r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)")
MONTH_BEFORE = re.compile(MONTH + r"\.?\s+(?:the\s+)?(?:\d+(?:st|nd|rd|th)?\s*(?:,|&|and|to|-)\s*(?:the\s+)?)*$")
MONTH_AFTER = re.compile(r"\s+(?:of\s+)?" + MONTH + r"\b")
# The mark a French ordinal carries after its digits (2e, 1er, 1re, 2nde, 3ème, 4ᵉ)
FRENCH_ORDINAL_MARK = r"(?:e|er|re|ère|ème|eme|è|ᵉ|nde?)(?!\w)"
# A decade as English writes it (1980s, '90s, 70s; not mid-1990s, which French words otherwise)
DECADE = re.compile(r"(?<![\w.'\u2019-])['\u2019]?(\d{0,2}\d0)s(?![\w-])")
CURRENCIES = {"$": ("dollar", "de "), "\u20ac": ("euro", "d'"), "\u00a3": ("livre", "de ")}
SCALES = {"bn": "milliard", "m": "million", "mn": "million", "tn": "billion"}
FRENCH_UNITS = {"GB": "Go", "MB": "Mo", "TB": "To"}
EMOJI_JOINERS = "\u200d\ufe0f"


def is_emoji(char: str) -> bool:
    """A symbol drawn as a picture (©, ★, 😀); not the degree sign, a number's unit: behind a placeholder it moved
    ("-12°C" came out "jusqu'à ° -12C")."""
    return (unicodedata.category(char) == "So" and char != "°") or "\U0001f3fb" <= char <= "\U0001f3ff"  # tones: Sk


def emoji_runs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each run of emoji in `text`, joiners and variation selectors included."""
    runs, start = [], None
    for index, char in enumerate(text):
        if is_emoji(char) or (start is not None and char in EMOJI_JOINERS):
            start = index if start is None else start
        elif start is not None:
            runs.append((start, index))
            start = None
    if start is not None:
        runs.append((start, len(text)))
    return runs


def overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(start < span[1] and span[0] < end for start, end in spans)


def verbatim_spans(text: str, numbers: bool = True, glued: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each URL, e-mail, code, emoji run (and number), in order, not overlapping. A number
    with a word glued to it (NUMBER_WITH_WORD) is neither a code nor a number here, the model translates it;
    with `glued`, it is one like any other (its letters kept English behind the placeholder)."""
    spans: list[tuple[int, int]] = []
    left_to_model = [] if glued else [match.span() for match in NUMBER_WITH_WORD.finditer(text)]
    patterns = (URL, EMAIL, BACKTICKED, PATH, IDENTIFIER, CODE) + ((NUMBER,) if numbers else ())
    for pattern in patterns:
        for match in pattern.finditer(text):
            if not overlaps(match.span(), spans) and (pattern in (URL, EMAIL, BACKTICKED, PATH)
                                                      or not overlaps(match.span(), left_to_model)):
                spans.append(match.span())
    spans.extend(span for span in emoji_runs(text) if not overlaps(span, spans))
    return sorted(spans)


def french_time(match: re.Match) -> str | None:
    """CLOCK_TIME's match as French writes a time ("7 h", "13 h", "10 h 30"); None for an hour over 12."""
    hour, minutes, half = int(match.group(1)), match.group(2), match.group(3).lower()
    if not 1 <= hour <= 12:
        return None
    hour = hour % 12 + (12 if half == "p" else 0)
    return f"{hour} h" + (f" {minutes}" if minutes and minutes != "00" else "")


def french_number(digits: str) -> str:
    """An English number as French writes it: 2.5 -> 2,5 (a comma with one to two digits after it, as in 2,5,
    is taken for a decimal point only where it cannot be a thousands separator)."""
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", digits):
        whole, _, fraction = digits.partition(".")
        return whole.replace(",", "\u202f") + ("," + fraction if fraction else "")
    return digits.replace(".", ",")


def french_money(match: re.Match) -> str:
    currency, before = CURRENCIES[match.group(1)]
    amount, scale = match.group(2), SCALES[match.group(3)]
    thousands = re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", amount)
    plural = "s" if float(amount.replace(",", "") if thousands else amount.replace(",", ".")) >= 2 else ""
    return f"{french_number(amount)} {scale}{plural} {before}{currency}s"


def french_unit(match: re.Match) -> str:
    return f"{french_number(match.group(1))} {FRENCH_UNITS.get(match.group(2), match.group(2))}"


def french_ordinal(match: re.Match) -> str:
    """ORDINAL's match as French writes it: "2e", "1er"; in a date the day alone ("9"), the first "1er"."""
    digits = match.group(1)
    if digits.lstrip("0") == "1":
        return "1er"
    in_date = (MONTH_BEFORE.search(match.string, 0, match.start())
               or MONTH_AFTER.match(match.string, match.end()))
    return digits if in_date else f"{digits}e"


def french_decade(match: re.Match) -> str:
    """DECADE's match as French writes it: "années 1980", "années 90"."""
    return f"années {match.group(1)}"


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
        if not re.fullmatch(r"\d+\D+", french) or re.search(rf"(?<![\d.,]){digits}{FRENCH_ORDINAL_MARK}",
                                                             translation):
            kept += 1
    return kept


# A pattern of an English form and what its placeholder comes back as in French (None: as written)
RENDERINGS: tuple[tuple[re.Pattern, Callable[[re.Match], str | None]], ...] = (
    (CLOCK_TIME, french_time), (MONEY_SCALE, french_money), (GLUED_UNIT, french_unit))

# A doctor or professor and their name, behind a placeholder that comes back as French writes them ("le Dr Smith",
# "le docteur Smith", "le professeur Martin"): the model took "Dr." for a word ("Le dîner est ici.") and copied
# "Doctor"
TITLED_PERSON = re.compile(r"(?<![\w.])(Dr|Doctor|Prof|Professor)\.? ([A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?)(?![\w'’-])")
FRENCH_TITLES = {"Dr": "le Dr", "Doctor": "le docteur", "Prof": "le professeur", "Professor": "le professeur"}


def french_titled(match: re.Match) -> str:
    return f"{FRENCH_TITLES[match.group(1)]} {match.group(2)}"


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
    first_names: tuple[str, ...] = ()  # the first names left to the model, which its translation must keep

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
        if any(original.startswith("années ") for original in self.originals):
            text = SINGULAR_BEFORE_DECADE.sub(plural_article, text)
        return re.sub(r" {2,}", " ", text).strip()


# The article the model writes before a placeholder it takes for a singular noun, where it comes back as a
# decade (french_decade): "dans la ⦅1⦆" -> "dans la années 1980" -> "dans les années 1980"; "en ⦅1⦆", as a year
# takes it, is "dans les" before a decade
SINGULAR_BEFORE_DECADE = re.compile(r"\b(de la|à la|à l['\u2019]|du|au|la|le|de|l['\u2019]|en)\s*(?=années \d)",
                                    re.IGNORECASE)
PLURAL_ARTICLES = {"de la": "des", "à la": "aux", "à l'": "aux", "à l\u2019": "aux", "du": "des", "au": "aux",
                   "la": "les", "le": "les", "de": "des", "l'": "les", "l\u2019": "les", "en": "dans les"}


def plural_article(match: re.Match) -> str:
    article = match.group(1)
    plural = PLURAL_ARTICLES[article.lower()]
    return (plural.capitalize() if article[0].isupper() else plural) + " "


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


# A capitalized word (with a lower-case letter: not an acronym), hyphens and name apostrophes (O'Brien)
# inside; an apostrophe before a lower-case letter ends it: a contraction or possessive (I'd, He's, Tom's)
CAPITALIZED = re.compile(r"(?<![\w'\u2019-])[^\W\d_a-z](?:[\w-]|['\u2019](?![a-z]))*")


# First names a translation keeps as written: the model translated some ("Bob will fix the bug." -> "Un garçon
# réparera..."). They go to the model as text; a translation that loses one is translated again with it behind a
# placeholder (nmt.decoding.translate). The list leaves out names that are also English words (Will, Grace).
FIRST_NAMES = frozenset(line for line in Path(__file__).with_name("first_names.txt").read_text(encoding="utf-8")
                        .splitlines() if line and not line.startswith("#"))


def missing_names(names: Sequence[str], text: str) -> list[str]:
    """The names of `names` that `text` does not hold as words of their own."""
    return [name for name in names if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)]


def kept_first_names(names: Sequence[str], text: str) -> int:
    """How many of `names` `text` holds, each as a word of its own."""
    return len(names) - len(missing_names(names, text))


# English capitalizes these without their being names
CALENDAR_WORDS = frozenset(
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July August "
    "September October November December".split())


def name_spans(sentence: str, is_rare: Callable[[str], bool]) -> list[tuple[int, int]]:
    """(start, end) of the names in `sentence` as far as its spelling tells: runs of capitalized words that
    `is_rare` (words the model's vocabulary holds only in pieces), not days or months nor the plural of a
    word it holds whole, joined by a space or a hyphen, without a possessive's or contraction's ending
    (Okonkwo's). The sentence's first word counts only in a run of two or more, where it is a first name
    rather than a capital any sentence has."""

    def is_name(word: str) -> bool:
        if not any(char.islower() for char in word) or word.rstrip("s") in CALENDAR_WORDS or not is_rare(word):
            return False
        return not (word.endswith("s") and len(word) > 3 and not is_rare(word[:-1]))  # a plural: Sundays, Indians

    words = [match for match in CAPITALIZED.finditer(sentence) if is_name(match.group())]
    spans: list[list[int]] = []
    for match in words:
        if spans and sentence[spans[-1][1]:match.start()] in (" ", "-"):
            spans[-1][1] = match.end()
        else:
            spans.append([match.start(), match.end()])
    first = next((match.start() for match in re.finditer(r"\S", sentence)), 0)
    return [(start, end) for start, end in spans
            if start != first or " " in sentence[start:end] or "-" in sentence[start:end]]


# Words after a first name that make it a place, which French translates ("Charles University" -> "l'Université
# Charles", "Charles Bridge" -> "le pont Charles")
PLACE_WORDS = frozenset(
    "University College School Institute Foundation Hospital Street Square Avenue Road Bridge Park Hall Center "
    "Centre Station Airport Church Cathedral Palace Museum Theatre Theater Stadium Library Prize Award".split())


# A title before a name, abbreviated or not ("Mrs. White", "Doctor Smith"): the words after it are a name even
# where they are English words ("White" came out "Blanche"), a possessive's 's left out; not an office ("Mr
# President", "Mr Commissioner": Europarl's every other line), which French translates ("Monsieur le Président")
TITLED_NAME = re.compile(r"(?<![\w.])(?:Mr|Mrs|Ms|Miss|Dr|Prof|Doctor|Professor)\.?"
                         r" ([A-Z][\w-]*(?:['’](?!s\b)[\w-]+)*(?: [A-Z][\w-]*(?:['’](?!s\b)[\w-]+)*)?)(?![\w-])")
OFFICES = frozenset("President Vice-President Speaker Chairman Chairwoman Chair Commissioner Minister Secretary "
                    "Ambassador Mayor Governor Justice Deputy Rapporteur Prime High Member Members Director".split())


def titled_name_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of the names after a title (TITLED_NAME) in `sentence`, not an office's."""
    return [match.span(1) for match in TITLED_NAME.finditer(sentence) if match.group(1).split(" ")[0] not in OFFICES]


def first_name_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of the first names of FIRST_NAMES in `sentence`, capitalized as names are, with the
    capitalized word right after one: its family name ("Marie Dupont", "John Smith"; "George Washington" of
    "George Washington University")."""
    words = list(CAPITALIZED.finditer(sentence))
    spans: list[tuple[int, int]] = []
    for match, following in zip(words, words[1:] + [None] if words else [], strict=True):
        if match.group() not in FIRST_NAMES or (spans and match.start() < spans[-1][1]):
            continue
        family = (following is not None and sentence[match.end():following.start()] == " "
                  and following.group() not in CALENDAR_WORDS and following.group() not in PLACE_WORDS)
        spans.append((match.start(), following.end() if family else match.end()))
    return spans


def protect(sentence: str, numbers: bool = True, names: Callable[[str], bool] | None = None,
            strict: bool = False, titles: bool = False) -> Protected:
    """`sentence` with its URLs, e-mails, codes, emoji (and numbers; and with `names`, the names name_spans
    finds by it) replaced by ⦅1⦆, ⦅2⦆, ... (at most MAX_PLACEHOLDERS, in order; later ones stay as text).
    Numbers, and numbers with words glued to them, are left to the model (their digits listed in `numbers`, for
    the translation to keep), and so are first names (`first_names`); with `strict` (the retry of a translation
    that lost one), both go behind placeholders too (times and amounts of RENDERINGS go behind placeholders
    either way). With `titles`, a doctor or professor and their name go behind one that comes back in French
    (TITLED_PERSON). A sentence that already holds placeholder brackets is left as it is."""
    if "\u2985" in sentence or "\u2986" in sentence:
        return Protected(sentence, (), (), untouched=True)
    spans = verbatim_spans(sentence, numbers and strict, strict)
    first_names = [span for span in first_name_spans(sentence) if not overlaps(span, spans)]
    if strict:
        spans, first_names = sorted(spans + first_names), []
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
    kept_names = tuple(sentence[start:end] for start, end in first_names)  # checked whole where a name's
    # placeholder holds the family name: the model wrote "John rencontrera Smith" for "John ⦅2⦆"
    return Protected("".join(pieces), tuple(originals), tuple(positions), numbers=left, glued=tuple(glued),
                     first_names=kept_names)


def contains(outer: tuple[int, int], inner: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def is_all_caps(text: str) -> bool:
    """Whether `text` is written in capitals: at least two words and no lowercase letter."""
    letters = [char for char in text if char.isalpha()]
    return len(text.split()) >= 2 and len(letters) >= 4 and all(char.isupper() for char in letters)


SMALL_WORDS = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "and", "or", "but", "with", "without", "by",
               "from", "as", "into", "under", "over", "about", "up"}


def is_title_case(text: str) -> bool:
    """Whether `text` is a heading or menu item in Title Case: every word but the small ones ("of", "the")
    capitalized, at least two of them ("Open File"; a sentence full of names still has a verb in lower
    case)."""
    content = [word for word in text.split() if any(char.isalpha() for char in word)
               and word.lower() not in SMALL_WORDS]
    return len(content) >= 2 and all(word[0].isupper() for word in content) and not is_all_caps(text)


def is_capitals_word(text: str) -> bool:
    """Whether `text` is one word in capitals, of at least four letters ("WARNING", "SAVE!")."""
    letters = [char for char in text if char.isalpha()]
    return len(text.split()) == 1 and len(letters) >= 4 and all(char.isupper() for char in letters)


def is_acronym(word: str) -> bool:
    """Whether `word` is written in capitals, with two letters or more ("MIDI", "DC25", "BOSH")."""
    letters = [char for char in word if char.isalpha()]
    return len(letters) >= 2 and all(char.isupper() for char in letters)


def case_normalized(sentence: str, casing: Casing | None = None,
                    is_word: Callable[[str], bool] | None = None) -> tuple[str, bool]:
    """(`sentence` in sentence case if it is in capitals or Title Case, whether it was in capitals): the translation
    of a sentence in capitals goes back to capitals. In Title Case a word that `casing` says English writes
    capitalized (nmt.text.casing: "Steve Jobs", "Wall Street", but not "Open File") keeps its capital, and so do a
    first name (FIRST_NAMES), the word after it (a family name) and an acronym ("Provides LADSPA Effects"); without
    `casing` the other words are lowered. In capitals a word gets a capital where `casing` says the same of it, and
    so does a first name ("ASK MARIE AT WALL STREET" -> "Ask Marie at Wall Street"): models trained with
    nmt.data.augment's case variants do without this. A line of one word in capitals is a sentence in capitals where
    `is_word` (the vocabulary holds it lower-cased as one piece: "WARNING", not "NATO" or "UNESCO", which the model
    knows as they are)."""

    def first_name(word: str) -> bool:
        return word.strip(".,;:!?()\"'’").capitalize() in FIRST_NAMES

    def keeps_capital(words: list[str], index: int) -> bool:  # in Title Case
        word = words[index]
        return (index == 0 or first_name(word) or first_name(words[index - 1]) or is_acronym(word)
                or (casing is not None and casing.keeps_capital(words, index)))

    def capitalized(word: str) -> str:  # '"MARIE,"' -> '"Marie,"'; "10KM" -> "10km"
        first = next((i for i, char in enumerate(word) if char.isalnum()), 0)
        return word[:first] + word[first:first + 1].upper() + word[first + 1:].lower()

    letters = sentence.strip(".,;:!?()\"'’").lower()
    capitals = is_all_caps(sentence) or (is_word is not None and is_capitals_word(sentence) and is_word(letters))
    if capitals:
        words = [capitalized(word) for word in sentence.split(" ")]
        lowered = " ".join(word if first_name(word) or (casing is not None and casing.keeps_capital(words, i))
                           else word.lower() for i, word in enumerate(words))
    elif is_title_case(sentence):
        words = sentence.split(" ")
        lowered = " ".join(word if keeps_capital(words, i) else word.lower() for i, word in enumerate(words))
    else:
        return sentence, False
    first = next((i for i, char in enumerate(lowered) if char.isalpha()), 0)
    return lowered[:first] + lowered[first:first + 1].upper() + lowered[first + 1:], capitals
