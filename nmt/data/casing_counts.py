"""The casing table of nmt.text.casing, counted in the English of training corpora (`make casing`):

    python -m nmt.data.casing_counts ../shared/data/europarl/train.en.gz news tatoeba --words-only software-ui

Embedded corpora are read by name, their training split alone (a held-out dev split is not counted).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from nmt.data.corpus import EMBEDDED, load_embedded, stream_lines
from nmt.text.casing import TABLE, casing_table, count_casing, write_casing


def read_english(source: str) -> Iterable[str]:
    """The English side of an embedded corpus's training split, by name; else the lines of a file (plain or
    .gz), read as they come."""
    if source in EMBEDDED:
        return load_embedded(source, "train").source
    return stream_lines(source)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build the casing table of nmt.text.casing.")
    parser.add_argument("sources", nargs="+", help="English files, or embedded corpora by name")
    parser.add_argument("--words-only", action="append", default=[],
                        help="A source counted for words but not for names (interface strings name their "
                             "buttons and menus in capitals)")
    parser.add_argument("--out", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    words, pairs = Counter(), Counter()
    for source in args.sources + args.words_only:
        count_casing(read_english(source), words, None if source in args.words_only else pairs)
    lines = casing_table(words, pairs)
    write_casing(lines, args.out)
    print(f"{args.out}: {len(lines)} lines")


if __name__ == "__main__":
    main()
