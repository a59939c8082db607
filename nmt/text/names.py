"""Names in English text: first names (first_names.txt), companies ("Apple Inc."), capitalized words the
vocabulary holds only in pieces, a name after a title ("Dr. Smith", not "Mr President"), and a doctor's or
professor's title as French writes it; whether a translation kept them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

# A doctor or professor and their name, behind a placeholder that comes back as French writes them ("le Dr Smith",
# "le docteur Smith", "le professeur Martin"): the model took "Dr." for a word ("Le dîner est ici.") and copied
# "Doctor"
NAME_WORDS = r"[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?"  # the name after a title: one or two capitalized words
TITLED_NAME_AFTER = rf" ({NAME_WORDS})(?![\w'’-])"
TITLED_PERSON = re.compile(r"(?<![\w.])(Dr|Doctor|Prof|Professor|Mr\.? (?:and|&) Mrs)\.?" + TITLED_NAME_AFTER)

# A couple ("Mr. and Mrs. Brown"): the model kept one of them ("M. Brown vit ici.") or put the name after the wrong
# title. Written out for the model as two people ("Mr Brown and Mrs Brown", whose verb it then makes plural), and
# written back as French does ("M. et Mme Brown", nmt.text.conventions); where the model still loses one, the
# retry (strict) puts the couple behind one placeholder, as TITLED_PERSON does
COUPLE = re.compile(r"(?<![\w.])Mr\.? (?:and|&) Mrs\.?" + TITLED_NAME_AFTER)
COUPLE_WRITTEN_OUT = re.compile(rf"(?<![\w.])Mr ({NAME_WORDS}) and Mrs \1(?![\w'’-])")


FRENCH_TITLES = {"Dr": "le Dr", "Doctor": "le docteur", "Prof": "le professeur", "Professor": "le professeur",
                 "Mr and Mrs": "M. et Mme"}


def french_titled(match: re.Match) -> str:
    title = "Mr and Mrs" if match.group(1).startswith("Mr") else match.group(1)
    return f"{FRENCH_TITLES[title]} {match.group(2)}"


def couples_written_out(text: str) -> str:
    """`text` with each couple as two people: "Mr. and Mrs. Brown" -> "Mr Brown and Mrs Brown"."""
    return COUPLE.sub(lambda match: f"Mr {match.group(1)} and Mrs {match.group(1)}", text)


def kept_couples(source: str, translation: str) -> bool:
    """Whether a translation of `source` (couples written out) holds a Mme for each couple in it."""
    return len(re.findall(r"\bMmes?\b", translation)) >= len(COUPLE_WRITTEN_OUT.findall(source))


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


def names_kept(names: Sequence[str], text: str) -> int:
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


# A company and its legal form ("Apple Inc.", "Acme Ltd.", "Procter & Gamble Co."): the model took "Inc." for the
# sentence's end and lost the name ("Apple Inc. reported record profits." -> "Inc. Enregistrer les bénéfices
# enregistrés."). The name is the capitalized words right before the form, those that open a sentence left out;
# a translation must keep the name, and may drop the form ("Les actions de Boeing" for "Boeing Co shares")
LEGAL_FORM = r",? (?:Inc|Corp|Ltd|LLC|plc|PLC|Co|GmbH|AG|S\.A|N\.V)(?![\w-])\.?"
LEGAL_FORMS = frozenset("Inc Corp Ltd LLC plc PLC Co GmbH AG".split())  # a name's form, no name of its own
COMPANY = re.compile(r"(?<![\w'’&.-])((?:[A-Z][\w'’&-]*|&)(?: (?:[A-Z][\w'’&-]*|&)){0,3})" + LEGAL_FORM)
OPENING_WORDS = frozenset(
    "The A An And But Or So Yet Then Now Today Yesterday Meanwhile However When While After Before Since As At In "
    "On For From By With To Both Like Unlike Its Their His Her Our".split())


def company_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of each company and its legal form in `sentence` (COMPANY): "Apple Inc." of "Yesterday
    Apple Inc. said"."""
    spans = []
    for match in COMPANY.finditer(sentence):
        start = match.start()
        for word in re.finditer(r"\S+", match.group(1)):
            if word.group() not in OPENING_WORDS:
                break
            start = match.start() + word.end() + 1
        if start < match.end(1) and sentence[start] != "&":
            spans.append((start, match.end()))
    return spans


# A saint's name ("St. Mary's Hospital", "St. Louis", "the St. Lawrence River"): the model read "St." as a word or
# a sentence's end ("He was taken to St. Mary's Hospital." -> "Il a été pris à St. L'hôpital de Mary.", "The St.
# Lawrence River froze." -> "La loi se gele."). Not a street after its name ("Main St. Louis"), nor a feast day
# ("St. Patrick's Day": French says "la Saint-Patrick")
SAINT = re.compile(r"(?<![\w.])St\.? [A-Z][a-z]+(?:-[A-Z][a-z]+)?(?:['’]s)?(?![\w'’-])(?! Day\b)")


def saint_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of each saint's name in `sentence` (SAINT)."""
    spans = []
    for match in SAINT.finditer(sentence):
        before = sentence[: match.start()].split()
        if before and before[-1][:1].isupper() and before[-1] not in OPENING_WORDS and not before[-1].endswith("."):
            continue  # a street: "Main St."
        spans.append(match.span())
    return spans


# Companies, brands, products and places that translations keep as written ("Orange", "Amazon", "Shell", "Uber"),
# counted in the training corpora by nmt.data.name_counts (`make names`): the model read some as words ("Orange
# raised its prices" -> "L'orange a élevé ...", "Shell reported ..." -> "Elle rapporta ...")
KEPT_NAMES_FILE = Path(__file__).with_name("kept_names.txt.gz")


@cache
def kept_names() -> dict[str, int]:
    """Each name of KEPT_NAMES_FILE -> how many times more often the English writes it inside a sentence than in
    lower case (above 1: mostly a name; below: a word that is also a name)."""
    import gzip

    names = {}
    for line in gzip.decompress(KEPT_NAMES_FILE.read_bytes()).decode("utf-8").splitlines():
        if line and not line.startswith("#"):
            name, inside, lower = line.split("\t")
            names[name] = int(inside) / (int(lower) + 1)
    return names


# The short words Title Case leaves in lower case ("Terms of Service", "Sign in with Google")
TITLE_CASE_SMALL = frozenset("and the for but nor yet with from into onto over upon via per off out".split())


def is_heading(line: str) -> bool:
    """Whether `line` is in Title Case or capitals, as headings and buttons are: two words of three letters or more
    (but TITLE_CASE_SMALL), every one capitalized ("Install Firefox On Linux"; not "I use Google Maps daily")."""
    words = [word for word in re.findall(r"[^\W\d_][\w'’-]*", line)
             if len(word) >= 3 and word not in TITLE_CASE_SMALL]
    return len(words) >= 2 and all(word[0].isupper() for word in words)


# After a name that opens a sentence, the words that make it the subject of a verb: "Orange raised", "Amazon will
# deliver", "Shell's profits"; where the word opening a sentence is more often a word than a name ("Orange juice",
# "Apple pie"), it is a name only before one of these
VERB_AFTER = re.compile(r"['’]s\b|(?:will|would|can|could|may|might|must|shall|should|has|have|had|is|was|are|were|"
                        r"does|did|says|said|plans|wants|announced|reported|raised|cut|launched|released|bought|sold|"
                        r"posted|agreed|and|[a-z]+ed)\b")


def brand_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of the names of kept_names() in `sentence`, each with the capitalized words right after it
    ("Microsoft Teams", "Amazon Prime"): inside a sentence always; opening one where the word is mostly a name, or
    where a verb follows (VERB_AFTER); in a Title Case or capitals line (a heading) only the words mostly names."""
    names = kept_names()
    words = list(CAPITALIZED.finditer(sentence))
    heading = is_heading(sentence)
    spans: list[tuple[int, int]] = []
    for index, match in enumerate(words):
        word = match.group()
        if word not in names or word in LEGAL_FORMS or (spans and match.start() < spans[-1][1]):
            continue
        if names[word] <= 1:  # a word as often as a name: a name where the sentence's grammar says so
            before = sentence[: match.start()]
            opening = not before.strip() or re.search(r"[.!?:;]\s+$", before) is not None
            if heading or (opening and not VERB_AFTER.match(sentence[match.end():].lstrip())):
                continue
        end = match.end()
        for following in words[index + 1:]:
            if heading or sentence[end:following.start()] != " " or following.group() in CALENDAR_WORDS:
                break
            end = following.end()
        spans.append((match.start(), end))
    return spans


def kept_name_spans(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of the names a translation of `sentence` must keep, in order: its companies with their
    legal forms (company_spans; name_to_keep leaves the form out), its saints' names (saint_spans) and its first
    names with their family names (first_name_spans). Not yet brand_spans': on the lines of news:test and
    web-apps:dev whose translation it changed it cost BLEU (benchmarks/GENERAL.md section 7)."""
    spans = company_spans(sentence)
    for found in (saint_spans(sentence), first_name_spans(sentence)):
        spans += [span for span in found if not any(start < span[1] and span[0] < end for start, end in spans)]
    return sorted(spans)


def name_to_keep(name: str) -> str:
    """What a translation must hold of a name kept_name_spans found: "Apple" of "Apple Inc.", "St. Mary" of "St.
    Mary's", "Bob" of "Bob"."""
    return re.sub(r"['’]s$", "", re.sub(LEGAL_FORM + "$", "", name))
