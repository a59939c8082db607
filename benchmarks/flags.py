"""How many wrong and right translations get a flag (nmt.text.flags): the judged lines of flags-judged.tsv
(120 held-out lines, each translation judged right or wrong by hand) translated again with --format jsonl's
flags, and the share of each that is flagged, with the confidence floors at several shares of the dev sets'
worst translations. Writes a table to stdout.

    python benchmarks/flags.py [--model data/models/general.pt]
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

from nmt.data.corpus import parse_test_set
from nmt.decoding.configuration import DecodingConfig, DecodingFlags
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint
from nmt.text.flags import kind_of

JUDGED = Path(__file__).with_name("flags-judged.tsv")
CALIBRATION = ("news:dev", "tatoeba:dev", "software-ui:dev", "europarl:dev", "news-commentary:dev_newsdiscuss")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="data/models/general.pt")
    parser.add_argument("--calibration-lines", type=int, default=200)
    parser.add_argument("--judged", type=Path, default=JUDGED, help="the judged lines (flags-judged-web.tsv: 110 "
                        "short web strings)")
    args = parser.parse_args()
    os.environ.setdefault("NMT_EUROPARL_DIR", str(Path(__file__).parents[2] / "shared" / "data" / "europarl"))
    checkpoint = load_checkpoint(args.model)
    translator = Translator.from_checkpoint(checkpoint, DecodingConfig.resolve(DecodingFlags(workers=1), checkpoint))
    rows = [line.rstrip("\n").split("\t") for line in args.judged.read_text(encoding="utf-8").splitlines()
            if not line.startswith("#")]
    found = translator.translate([row[2] for row in rows])
    same = sum(t.text == row[3] for t, row in zip(found, rows, strict=True))

    confidences: dict[str, list[float]] = {}
    for name in CALIBRATION:
        pairs = parse_test_set(name)
        picked = random.Random(7).sample(range(len(pairs.source)), args.calibration_lines)
        for t in translator.translate([pairs.source[i] for i in picked]):
            if t.confidence is not None:
                confidences.setdefault(kind_of(t.source), []).append(t.confidence)
    wrong = [row[1] == "wrong" for row in rows]
    print(f"{len(rows)} judged lines ({sum(wrong)} wrong); {same} translated as when judged")
    print("| floor: worst share of the dev sets | short | sentence | wrong flagged | right flagged |")
    print("|---|---|---|---|---|")
    for share in (0.05, 0.10, 0.15, 0.20, 0.30):
        floors = {kind: sorted(values)[int(share * len(values))] for kind, values in confidences.items()}
        flagged = [any(not f.startswith("low confidence") for f in t.flags)
                   or (t.confidence is not None and t.confidence < floors[kind_of(t.source)]) for t in found]
        hit = sum(f and w for f, w in zip(flagged, wrong, strict=True))
        false = sum(f and not w for f, w in zip(flagged, wrong, strict=True))
        right = len(rows) - sum(wrong)
        print(f"| {share:.0%} | {floors['short']:.3f} | {floors['sentence']:.3f} | {hit} of {sum(wrong)} "
              f"({hit / sum(wrong):.0%}) | {false} of {right} ({false / right:.0%}) |")


if __name__ == "__main__":
    main()
