"""What a user should check in a translation: the flags `nmt translate --format jsonl` and the server give a
line, each with its reason.

    untranslated_words("Run the tests.", "Run les tests.")             ->  ["Run"]
    lost_numbers("It costs $1,299.", "Il coûte cher.")                   ->  ["1299"]

An English word is one the English side of the training corpora writes twenty times as often as their French side
(ENGLISH_WORDS, counted by nmt.data.lexicon_counts): "the" and "run" are, "message", "options" and "important"
are words of both. A French word is one their French side writes twice or more (FRENCH_WORDS): a word of a
translation that is neither French nor the source's is one the model made up ("Répondres", "Sous-projecte").
"""

from __future__ import annotations

import gzip
import re
from functools import cache
from pathlib import Path

from nmt.text.protect import entities, missing_numbers

ENGLISH_WORDS = Path(__file__).with_name("english_words.txt.gz")
FRENCH_WORDS = Path(__file__).with_name("french_words.txt.gz")
WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def write_words(words: list[str], path: Path) -> None:
    """A sorted word list as load_english_words reads it, the same bytes for the same words."""
    path.write_bytes(gzip.compress(("\n".join(words) + "\n").encode("utf-8"), mtime=0))


@cache
def load_english_words(path: Path = ENGLISH_WORDS) -> frozenset[str]:
    return frozenset(gzip.decompress(path.read_bytes()).decode("utf-8").split())


def untranslated_words(source: str, translation: str) -> list[str]:
    """The English words of `source` that `translation` kept as they were: words of three letters or more of
    ENGLISH_WORDS, in the order the translation has them; a hyphenated word by its parts ("Préférences List-based")."""
    english = load_english_words()
    in_source = {part for word in WORD.findall(source) for part in parts_of(word.lower())}
    found = []
    for word in WORD.findall(translation):
        for part in parts_of(word):
            lower = part.lower()
            if len(lower) >= 3 and lower in in_source and lower in english and lower not in (w.lower() for w in found):
                found.append(part)
    return found


def parts_of(word: str) -> list[str]:
    """A word and, where it is hyphenated, its parts: "list-based" -> ["list-based", "list", "based"]."""
    return [word, *word.split("-")] if "-" in word else [word]


def unknown_words(source: str, translation: str) -> list[str]:
    """The words of `translation` that no French corpus writes (FRENCH_WORDS, lower case; a hyphenated or elided
    word by its parts of three letters or more) and `source` does not hold: made-up words ("Répondres",
    "Sous-projecte"), in order; a real word used wrongly ("Supprimer les regardes") passes."""
    french = load_english_words(FRENCH_WORDS)
    in_source = {part for word in WORD.findall(source) for part in re.split(r"[-'’]", word.lower())}
    found = []
    for word in WORD.findall(translation):
        if word.lower() in french:
            continue
        parts = [part for part in re.split(r"[-'’]", word.lower()) if len(part) >= 3]
        if any(part not in french and part not in in_source for part in parts) and word not in found:
            found.append(word)
    return found


def lost_numbers(source: str, translation: str) -> list[str]:
    """The digits of the numbers of `source` that `translation` does not hold, in order (the robustness report's
    entities, nmt.text.protect.missing_numbers)."""
    return missing_numbers(entities(source)[1], translation)


# A translation's confidence (the mean log-probability of its tokens, EOS included) below which it is among the
# worst tenth of its kind, short (SHORT_WORDS words or fewer: labels, buttons) or a sentence, where the model's
# decoding defaults say nothing: measured with the shipped general model on 200 lines of each of news:dev,
# tatoeba:dev, software-ui:dev, europarl:dev and news-commentary:dev_newsdiscuss (benchmarks/FLAGS.md)
CONFIDENCE_FLOORS = {"short": -0.652, "sentence": -0.535}
SHORT_WORDS = 4


def kind_of(line: str) -> str:
    """short (a label, a button, a heading) or sentence."""
    return "short" if len(line.split()) <= SHORT_WORDS else "sentence"


def low_confidence(line: str, floors: dict | None) -> float | None:
    """The confidence under which a translation of `line` is flagged, or None where none is known."""
    return (floors or CONFIDENCE_FLOORS).get(kind_of(line))


