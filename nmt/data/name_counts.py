"""The names a translation keeps as written (nmt.text.names.kept_names: companies, brands, products, places),
counted in parallel training corpora (`make names`):

    python -m nmt.data.name_counts ../shared/data/europarl/train news news-commentary web-apps help-docs

A corpus is an embedded one by name (its training split alone) or the stem of a pair of files (STEM.en.gz and
STEM.fr.gz). A name is a capitalized English word that the English writes inside a sentence (not its first word,
not in a Title Case or capitals line) at least MIN_COUNT times, whose French translation holds it unchanged at
least KEPT of those times (news translators write some companies otherwise, "la firme de Cupertino"): "Amazon",
"Google", "Shell"; not "Parliament" (Parlement) nor "English" (anglais). Each comes with how often the English
writes it in lower case anywhere, which tells a name that opens a sentence from a word that does
(nmt.text.names.brand_spans).
"""

from __future__ import annotations

import argparse
import gzip
import re
from collections import Counter
from pathlib import Path

from nmt.data.lexicon_counts import read_side
from nmt.text.names import CALENDAR_WORDS, CAPITALIZED, KEPT_NAMES_FILE, is_heading

MIN_COUNT = 10
KEPT = 0.6
WORD = re.compile(r"[^\W\d_][\w'’-]*")
FRENCH_WORD = re.compile(r"[^\W\d_][\w-]*")  # an elided article or preposition apart: l'Europe, d'Amazon
SENTENCE_END = re.compile(r"[.!?:;…\"“”«»()\[\]]\s*$")


def inside_words(sentence: str) -> list[str]:
    """The capitalized words of `sentence` past its first word and any word that opens a clause after . ! ? : ;
    or a quote; none where the line is in Title Case or capitals (a heading capitalizes every word)."""
    if len(WORD.findall(sentence)) < 3 or is_heading(sentence):
        return []
    found = []
    for match in CAPITALIZED.finditer(sentence):
        before = sentence[: match.start()]
        if not before.strip() or SENTENCE_END.search(before) or match.group() in CALENDAR_WORDS:
            continue
        if any(char.islower() for char in match.group()) and match.group() != "I":
            found.append(match.group())
    return found


def count(sources: list[str]) -> tuple[Counter, Counter, Counter]:
    """Inside-sentence capitalized words, how many of them the French holds unchanged, and lower-case words."""
    inside, kept, lower = Counter(), Counter(), Counter()
    for source in sources:
        for english, french in zip(read_side(source, "en"), read_side(source, "fr"), strict=True):
            lower.update(word for word in WORD.findall(english) if word.islower())
            french_words = set(WORD.findall(french)) | set(FRENCH_WORD.findall(french))  # "l'Europe" holds Europe
            for word in inside_words(english):
                inside[word] += 1
                kept[word] += word in french_words
    return inside, kept, lower


def kept_names(inside: Counter, kept: Counter, lower: Counter) -> list[tuple[str, int, int]]:
    """(name, times written inside a sentence, times written in lower case) of the names, alphabetically."""
    return sorted((word, n, lower[word.lower()]) for word, n in inside.items()
                  if n >= MIN_COUNT and kept[word] >= KEPT * n)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Count the names translations keep (nmt.text.names.KEPT_NAMES).")
    parser.add_argument("sources", nargs="+", help="Embedded corpora by name, or stems of .en.gz/.fr.gz file pairs")
    parser.add_argument("--out", type=Path, default=KEPT_NAMES_FILE)
    args = parser.parse_args(argv)
    names = kept_names(*count(args.sources))
    head = ("# Names a translation keeps as written (nmt.text.names): name TAB times written inside an English "
            "sentence TAB times written\n# in lower case; counted by `make names` (nmt.data.name_counts) in "
            f"{', '.join(Path(s).name for s in args.sources)}.\n")
    body = "".join(f"{name}\t{inside}\t{lower}\n" for name, inside, lower in names)
    args.out.write_bytes(gzip.compress((head + body).encode(), mtime=0))
    print(f"{args.out}: {len(names)} names")


if __name__ == "__main__":
    main()
