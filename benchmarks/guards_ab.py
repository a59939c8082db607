"""What the ordinary-input guards cost in translation speed: the decoding-time protections (sentence case for
capitals, placeholders for links, numbers, codes and emoji: on unless `--no-protect`) and the n-gram repeat
block (`--no-repeat-ngram 4`), each against the same Translator without it, in one process.

    python benchmarks/guards_ab.py --model runs/shipped/last.pt --rounds 8

Each round translates the same lines with and without the guard, in alternating order, after a warm-up, so
both see the same moment of this noisy machine; the ratio of their times is taken per round and the median
reported. Lines: multi30k:valid (captions, few entities) and robustness:dev (every line has something to
guard). The model must have nmt's placeholders (trained since they exist) for the protection to act.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch
from results import decoding

from nmt.data.corpus import parse_test_set
from nmt.decoding.configuration import DecodingConfig, DecodingFlags, search_options
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint


def timed(translator: Translator, lines: list[str]) -> float:
    started = time.perf_counter()
    translator.translate(lines)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--lenpen", type=float, default=0.6)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--lines", type=int, default=300, help="Lines of multi30k:valid.")
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoint = load_checkpoint(args.model)
    # no n-gram block in the baseline, whatever the checkpoint stores (the shipped model stores 4)
    options = search_options(checkpoint, DecodingFlags(beam=args.beam, lenpen=args.lenpen, no_repeat_ngram=0))
    sets = {"multi30k:valid": parse_test_set("multi30k:valid").source[: args.lines],
            "robustness:dev": parse_test_set("robustness:dev").source}
    base = Translator.from_checkpoint(checkpoint, decoding(checkpoint, options, args.precision, ordinary_input=False))
    print(f"model {args.model}, placeholders: {base.tokenizer.has_placeholders}, precision {args.precision}, "
          f"beam {args.beam}, one thread, {args.rounds} rounds")
    guarded = {
        "protections (default) against --no-protect":
            Translator(base.model, base.tokenizer, DecodingConfig.plain(options, ordinary_input=True)),
        "protections with --protect-names against --no-protect":
            Translator(base.model, base.tokenizer, DecodingConfig.plain(options, ordinary_input=True,
                                                                        protect_names=True)),
        "--no-repeat-ngram 4 against none":
            Translator(base.model, base.tokenizer, DecodingConfig.plain(dataclasses.replace(options, no_repeat_ngram=4),
                                                                        ordinary_input=False)),
    }
    for label, translator in guarded.items():
        for name, lines in sets.items():
            timed(base, lines[:16])
            timed(translator, lines[:16])
            ratios = []
            for round_number in range(args.rounds):
                pair = (base, translator) if round_number % 2 == 0 else (translator, base)
                seconds = {id(t): timed(t, lines) for t in pair}
                ratios.append(seconds[id(translator)] / seconds[id(base)])
            print(f"{label}, {name} ({len(lines)} lines): time ratio median {statistics.median(ratios):.3f} "
                  f"(rounds {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
