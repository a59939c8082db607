"""Whether a model writes the register asked of it (issue 80): 200 held-out English lines that address someone
(a "you"; their reference French says tu or vous): all 140 of tatoeba:dev's, the 19 of software-ui:dev and the 31
of software-ui-extra:dev (interface strings), 10 of python-docs:dev (documentation); translated with each
--formality the model takes, and for each the number of translations in either register, mixing both, or
addressing no one (nmt.text.register).

    python benchmarks/formality.py --model runs/general3/ema.pt
"""

from __future__ import annotations

import argparse
import random
import re

from nmt.data.corpus import parse_test_set
from nmt.decoding.configuration import DecodingConfig, DecodingFlags, knows_registers
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint
from nmt.text.register import FORMAL, INFORMAL, MIXED, register_of

SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|yourselves)\b", re.IGNORECASE)
SOURCES = (("tatoeba:dev", 140), ("software-ui:dev", 19), ("software-ui-extra:dev", 31), ("python-docs:dev", None))
LINES = 200


def probe_lines() -> list[tuple[str, str]]:
    """(set, English line): LINES lines with a second person whose reference French has a register, drawn by a
    fixed seed, each English line once: every one of tatoeba:dev and the interface sets, python-docs:dev's to
    make up the number (None)."""
    lines = []
    for name, count in SOURCES:
        pairs = parse_test_set(name)
        candidates = sorted({source for source, target in zip(pairs.source, pairs.target, strict=True)
                             if SECOND_PERSON.search(source) and register_of(target) in (FORMAL, INFORMAL)})
        wanted = LINES - len(lines) if count is None else min(count, len(candidates))
        lines += [(name, line) for line in random.Random(80).sample(candidates, wanted)]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="data/models/general.pt")
    args = parser.parse_args()
    checkpoint = load_checkpoint(args.model)
    lines = probe_lines()
    formalities = ("formal", "informal", "auto") if knows_registers(checkpoint) else ("auto",)
    counts = {name: sum(each == name for each, _ in lines) for name, _ in SOURCES}
    print(f"{args.model}: {len(lines)} lines ({', '.join(f'{name} {count}' for name, count in counts.items())})")
    print("| --formality | formal | informal | mixed | neither | in the register asked |")
    print("|---|---|---|---|---|---|")
    for formality in formalities:
        config = DecodingConfig.resolve(DecodingFlags(formality=formality, workers=1), checkpoint)
        translator = Translator.from_checkpoint(checkpoint, config)
        found = [register_of(t.text) for t in translator.translate([line for _, line in lines])]
        counts = {kind: sum(r == kind for r in found) for kind in (FORMAL, INFORMAL, MIXED, None)}
        asked = f"{counts[formality] / len(lines):.1%}" if formality != "auto" else "-"
        print(f"| {formality} | {counts[FORMAL]} | {counts[INFORMAL]} | {counts[MIXED]} | {counts[None]} | {asked} |")


if __name__ == "__main__":
    main()
