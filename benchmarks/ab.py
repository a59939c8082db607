"""A/B of two source trees of nmt on the same translation, in-process, for changes too small for this
machine's run-to-run noise (20-60% between runs of one command on a 2-core VM).

    mkdir -p /tmp/base && git archive HEAD nmt | tar -x -C /tmp/base     # the tree to compare against
    (RUN below imports either layout of nmt: flat modules before 2026-11-27, layered after)
    python benchmarks/ab.py /tmp/base . --beam 4 --batch 32 --sentences 320 --rounds 12

Each round runs both trees at once, one per core (taskset), and swaps the cores the next round, so that
both see the same moment of the machine; the ratio of their times is taken per round. The model is
loaded and warmed up before the clock starts; each run uses one thread. Running a tree against a copy of
itself shows the spread of the ratios: on a 2-core AVX2 EPYC, 0.86-1.09 over 6 rounds (greedy, batch 1,
150 sentences, --shortlist). The report also says whether both trees translated alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = """
import json, sys, time, torch
model, test_set, beam, batch, sentences, precision, shortlist, out = sys.argv[1:]
try:  # the layout since 2026-11-27
    from nmt.model.checkpoint import load_checkpoint
    from nmt.data.corpus import parse_test_set
    from nmt.decoding.translate import Translator
    from nmt.decoding.configuration import DecodingFlags, search_options
    def options_of(checkpoint):  # as `nmt translate` decodes
        return search_options(checkpoint, DecodingFlags(beam=int(beam)))
except ImportError:  # a tree from before
    from nmt.checkpoint import load_checkpoint
    from nmt.corpus import parse_test_set
    from nmt.translate import Translator
    from nmt_cli.main import search_options
    def options_of(checkpoint):
        return search_options(checkpoint, int(beam), None, None, None, None, 1, False)
torch.set_num_threads(1)
checkpoint = load_checkpoint(model)
options = options_of(checkpoint)
import dataclasses, inspect
if "config" in inspect.signature(Translator.from_checkpoint).parameters:  # one constructor, since 2026-11-28
    from nmt.decoding.configuration import DecodingConfig
    config = DecodingConfig.resolve(DecodingFlags(device="cpu", precision=precision), checkpoint, workers=1)
    config = dataclasses.replace(config, search=options, shortlist=shortlist == "1", batch_size=int(batch))
    translator = Translator.from_checkpoint(checkpoint, config)
else:
    translator = Translator.from_checkpoint(checkpoint, options, precision=precision, use_shortlist=shortlist == "1",
                                            batch_size=int(batch))
lines = parse_test_set(test_set).source[: int(sentences)]
translator.translate(lines[:8])
started = time.perf_counter()
texts = [t.text for t in translator.translate(lines)]
seconds = time.perf_counter() - started
with open(out, "w") as file:
    json.dump({"seconds": seconds, "texts": texts}, file)
"""


def run_pair(trees: list[str], cores: list[int], arguments: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        outputs = [str(Path(folder) / f"{i}.json") for i in range(2)]
        processes = [
            subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", RUN, *arguments, output],
                             env={**os.environ, "PYTHONPATH": str(Path(tree).resolve())}, cwd=folder)
            for tree, core, output in zip(trees, cores, outputs, strict=True)]
        if any(process.wait() for process in processes):
            sys.exit("error: a run failed (its message is above)")
        return [json.loads(Path(output).read_text()) for output in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree_a", help="a folder holding the nmt package to compare")
    parser.add_argument("tree_b")
    parser.add_argument("--model", default=None, help="A checkpoint or a shipped model's name; default the "
                        "default shipped model.")
    parser.add_argument("--test-set", default="multi30k:test_2016_flickr")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=320)
    parser.add_argument("--precision", default="int8_fp32")
    parser.add_argument("--shortlist", action="store_true")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    if (os.cpu_count() or 1) < 2:
        sys.exit("error: ab.py runs both trees at once and needs two cores")
    from results import model_file

    model = model_file(args.model)
    arguments = [model, args.test_set, str(args.beam), str(args.batch), str(args.sentences), args.precision,
                 "1" if args.shortlist else "0"]
    trees = [args.tree_a, args.tree_b]
    seconds: list[list[float]] = [[], []]
    same = True
    for round_ in range(args.rounds):
        cores = [0, 1] if round_ % 2 == 0 else [1, 0]
        results = run_pair(trees, cores, arguments)
        for times, result in zip(seconds, results, strict=True):
            times.append(result["seconds"])
        same = same and results[0]["texts"] == results[1]["texts"]
    ratios = [a / b for a, b in zip(*seconds, strict=True)]
    for tree, times in zip(trees, seconds, strict=True):
        print(f"{tree}: {' '.join(f'{t:.2f}' for t in times)} s, median {statistics.median(times):.2f}")
    print(f"A/B time ratios: {' '.join(f'{r:.3f}' for r in ratios)}, median {statistics.median(ratios):.3f} "
          f"(above 1: B is faster)")
    print(f"same translations: {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
