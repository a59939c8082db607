"""How English capitalizes its words in running text, for putting a line in Title Case or in capitals in
sentence case.

A heading or menu item in Title Case ("Open File", "Lessons From the Steve Jobs Interview") is translated in
sentence case (nmt.text.protect.case_normalized): the model knows "file" and "interview" as words, "File" as
a name. Which capitals are a name's is what the table here tells, counted in the English of the training
corpora: a word written more often in lower case than capitalized inside sentences loses its capital
("File" -> "file"); one written capitalized ("Jobs" after "Steve", "Facebook", "Tymoshenko") or never seen
keeps it, and so do both words of a pair seen capitalized together ("Wall Street", "White House").

    casing = load_casing()                              # the table shipped beside this module
    casing.keeps_capital(["Open", "File"], 1)           ->  False
    casing.keeps_capital(["Wall", "Street"], 1)         ->  True

The table is counted in the English of the training corpora by nmt.data.casing_counts (`make casing`).
Measured with the shipped general model (default `nmt translate`, AMD Zen 4), against lowering every word the
vocabulary did not hold in fewer pieces capitalized, with Title Case from three words up: the 191 two-word
Title Case lines of the dev sets 13.5 -> 21.7 BLEU (chrF 32.6 -> 50.4; "Ouvrir File" -> "Ouvrir le fichier"),
the 125 longer ones 24.4 -> 24.6 ("facebook", "tymoshenko" now kept), software-ui:dev 30.75 -> 31.31; the 19
Title Case lines of the test sets 46.1 -> 51.0. Lowering every word of two-word lines instead broke names
("Donald Trump" -> "Contrôle Donald", "Wall Street" -> "La rue de Wall"). A line in capitals gets its names'
capitals back the same way: 746 dev lines put in capitals 22.7 -> 25.1 BLEU (case-insensitive), robustness:test
119 -> 120 of 120 passing.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from nmt.text.names import FIRST_NAMES

TABLE = Path(__file__).with_name("casing.txt.gz")
MIN_WORD_COUNT = 2  # a lower-case word seen once may be a typo
MIN_NAME_COUNT = 3  # a pair of capitalized words seen this often is a name
WORD = re.compile(r"[^\W\d_][\w'\u2019-]*")
SENTENCE_END = (".", "!", "?", ":", '"')


def word_of(token: str) -> str:
    """A whitespace token without the punctuation around it: '"File,"' -> 'File'."""
    return token.strip(".,;:!?()[]\"'\u2019\u00ab\u00bb")


@dataclass(frozen=True)
class Casing:
    lower: frozenset[str]  # words running text writes in lower case at least as often as capitalized
    names: frozenset[str]  # pairs of words running text writes capitalized together: "Wall Street"

    def keeps_capital(self, words: Sequence[str], index: int) -> bool:
        """Whether words[index] of a line in Title Case (or in capitals, each word capitalized) is capitalized
        as a name rather than as a heading's word: running English writes it so, alone or with the word before
        or after it."""
        word = word_of(words[index])
        if word.lower() not in self.lower:
            return True
        before = word_of(words[index - 1]) if index > 0 else ""
        after = word_of(words[index + 1]) if index + 1 < len(words) else ""
        return f"{before} {word}" in self.names or f"{word} {after}" in self.names


# A sentence's first word, after any opening marks: "(Contributed by", "High-quality", "Kill process"
OPENING = re.compile(r"[\W_]*?\b([A-Z][a-z]+)\b(?!['\u2019]\w)")
FRENCH_SENTENCE_START = re.compile(r"(?:^|[.!?:…][\s\"'»”]*\s)[\s\"'«“\u00a0\u202f(\-–—]*$")  # "- Oh, ..."


def lowered_opening(sentence: str, casing: Casing) -> str | None:
    """The first word of `sentence` if it has its capital only for opening it: running English writes it in
    lower case (casing), it is no first name, and the word after it has no capital (which a Title Case
    heading's or a name's would: "Magenta Channel", "Iris Meder"). None otherwise."""
    match = OPENING.match(sentence)
    if not match:
        return None
    word = match.group(1)
    words = sentence[match.start(1) :].split()
    after = word_of(words[1]) if len(words) > 1 else ""
    if word in FIRST_NAMES or casing.keeps_capital(words, 0) or after[:1].isupper():
        return None
    return word


def copied_word(word: str, translation: str, anywhere: bool = False) -> bool:
    """Whether `translation` holds `word`, capital and all, inside one of its sentences, where French gives a
    capital to names only (or `anywhere`: a word French does not have): the model copied the opening word it
    did not know ("Sales rose" -> "Les Sales ont augmenté", "Kill process" -> "Le processus de Kill",
    "(Contributed by" -> "(Contributed de")."""
    return any(anywhere or not FRENCH_SENTENCE_START.search(translation[: match.start()])
               for match in re.finditer(rf"(?<![\w-]){re.escape(word)}\b", translation))


@cache
def load_casing(path: Path = TABLE) -> Casing:
    """The table at `path`: a word a line (lower case), or two words a line (a name)."""
    lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    return Casing(frozenset(line for line in lines if " " not in line),
                  frozenset(line for line in lines if " " in line))


def count_casing(lines: Iterable[str], words: Counter, pairs: Counter | None) -> None:
    """Add to `words` each word as written inside a sentence (not its first word), and to `pairs` each two
    capitalized words in a row. Lines in Title Case or in capitals say nothing of a word's case: skipped."""
    for line in lines:
        if is_title_case(line) or is_all_caps(line):
            continue
        tokens = line.split()
        previous = ""
        for index, token in enumerate(tokens):
            word = word_of(token)
            if not WORD.fullmatch(word):
                previous = ""
                continue
            if index > 0 and not tokens[index - 1].endswith(SENTENCE_END):
                words[word] += 1
                if pairs is not None and previous[:1].isupper() and word[0].isupper():
                    pairs[f"{previous} {word}"] += 1
            previous = word


def casing_table(words: Counter, pairs: Counter) -> list[str]:
    """The lines of a table (load_casing) from count_casing's counts: the words seen in lower case at least
    as often as capitalized, then the pairs seen capitalized that hold one of them, but for those with a
    small word (SMALL_WORDS), the bits of titles."""
    lower = {word for word, count in words.items() if word[0].islower() and count >= MIN_WORD_COUNT
             and count >= words[word[0].upper() + word[1:]]}
    names = {pair for pair, count in pairs.items() if count >= MIN_NAME_COUNT
             and any(word.lower() in lower for word in pair.split(" "))
             and not any(word.lower() in SMALL_WORDS for word in pair.split(" "))}  # "The End", "Out Of"
    return sorted(lower) + sorted(names)


def write_casing(lines: list[str], path: Path) -> None:
    """casing_table's lines as load_casing reads them, the same bytes for the same lines."""
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0))


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
