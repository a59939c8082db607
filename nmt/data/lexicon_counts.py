"""The English and the French words of nmt.text.flags, counted in both sides of parallel training corpora (`make
lexicon`):

    python -m nmt.data.lexicon_counts ../shared/data/europarl/train news tatoeba --lists english

A corpus is an embedded one by name (its training split alone) or the stem of a pair of files (STEM.en.gz and
STEM.fr.gz). A word is English where its English side writes it at least MIN_COUNT times and RATIO times as often
as its French side: "the" and "run" are, "message", "options" and "important" are words of both. A word is French
where the French side writes it at least FRENCH_MIN_COUNT times ("personnaliser" is, "personaliser" is not).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from nmt.data.corpus import EMBEDDED, load_embedded, stream_lines
from nmt.text.flags import ENGLISH_WORDS, FRENCH_WORDS, WORD, write_words

MIN_COUNT = 5
RATIO = 20
FRENCH_MIN_COUNT = 2  # a word written twice is no slip of one translator's


def read_side(source: str, side: str) -> Iterable[str]:
    """One side (en, fr) of an embedded corpus's training split, by name; else of the files STEM.en.gz, STEM.fr.gz."""
    if source in EMBEDDED:
        pairs = load_embedded(source, "train")
        return pairs.source if side == "en" else pairs.target
    return stream_lines(f"{source}.{side}.gz")


def english_words(english: Counter, french: Counter) -> list[str]:
    """The words `english` counts at least MIN_COUNT times and RATIO times as often as `french` does."""
    return sorted(word for word, count in english.items() if count >= MIN_COUNT and count >= RATIO * (french[word] + 1))


def french_words(french: Counter) -> list[str]:
    """The words `french` counts at least FRENCH_MIN_COUNT times."""
    return sorted(word for word, count in french.items() if count >= FRENCH_MIN_COUNT)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Count the English words of nmt.text.flags.")
    parser.add_argument("sources", nargs="+", help="Embedded corpora by name, or stems of .en.gz/.fr.gz file pairs")
    parser.add_argument("--out", type=Path, default=ENGLISH_WORDS)
    parser.add_argument("--french-out", type=Path, default=FRENCH_WORDS)
    parser.add_argument("--lists", choices=("english", "french", "both"), default="both", help="The lists to write")
    args = parser.parse_args(argv)
    counts = {"en": Counter(), "fr": Counter()}
    for source in args.sources:
        for side, counter in counts.items():
            for line in read_side(source, side):
                counter.update(word.lower() for word in WORD.findall(line))
    for kind, path, words in (("english", args.out, lambda: english_words(counts["en"], counts["fr"])),
                              ("french", args.french_out, lambda: french_words(counts["fr"]))):
        if args.lists in (kind, "both"):
            write_words(words(), path)
            print(f"{path}: {len(words())} words")


if __name__ == "__main__":
    main()
