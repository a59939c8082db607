"""Shipped models side by side, as a user runs them: `nmt translate --model NAME` with its defaults, whole
process (start-up included), every model ROUNDS times in alternation, medians compared. Words per second
are the source's words over the median seconds; BLEU is cased sacreBLEU of what the command wrote.

    python benchmarks/models.py --models captions,general --test-set multi30k:test_2016_flickr --rounds 5

Rewrites the section "Models: ..." of benchmarks/RESULTS.md for that test set. Never run it while something
else loads the cores (a training run, the tests).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
from pathlib import Path

import sacrebleu
from engines import whole_process
from results import cpu_name, shown_path, write_section

from nmt.apps.shipped import is_model_name, model_path
from nmt.data.corpus import parse_test_set


def model_file(model: str) -> str:
    """A shipped model's file, or the path given."""
    return str(model_path(model)) if is_model_name(model) else model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="captions,general", help="shipped names or checkpoint paths, by commas")
    parser.add_argument("--test-set", default="multi30k:test_2016_flickr", help="an embedded test set (nmt eval)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    test = parse_test_set(args.test_set)
    text = "".join(line + "\n" for line in test.source)
    words = sum(len(line.split()) for line in test.source)
    models = args.models.split(",")
    seconds: dict[str, list[float]] = {model: [] for model in models}
    peaks: dict[str, list[float]] = {model: [] for model in models}
    bleu: dict[str, float] = {}
    for round_number in range(args.rounds):
        for model in models:
            command = [sys.executable, "-m", "nmt_cli.main", "translate", "--model", model, "-q",
                       "--threads", str(args.threads)]
            lines, took, peak, _ = whole_process(command, text)
            seconds[model].append(took)
            peaks[model].append(peak)
            bleu[model] = sacrebleu.corpus_bleu(lines, [test.target]).score
            print(f"round {round_number + 1}: {model} {took:.2f} s, {words / took:.0f} words/s, "
                  f"BLEU {bleu[model]:.2f}", flush=True)
    first = statistics.median(seconds[models[0]])
    lines = [f"{cpu_name()}, {args.threads} threads; {len(test.source)} lines, {words} source words of "
             f"{args.test_set}; each command {args.rounds} times in alternation, medians. Whole process: "
             "start-up, loading and translating, as `nmt translate --model NAME` runs by default.", "",
             "| model | file | median s | words/s | vs first | peak MiB | BLEU |", "|---|---|---|---|---|---|---|"]
    for model in models:
        median = statistics.median(seconds[model])
        lines.append(f"| {model} | {Path(model_file(model)).name} | {median:.2f} | {words / median:.0f} | "
                     f"{first / median:.2f}x | {max(peaks[model]):.0f} | {bleu[model]:.2f} |")
    print("\n".join(lines))
    files = "; ".join(f"{model}: {shown_path(model_file(model))} SHA-256 "
                      f"{hashlib.sha256(Path(model_file(model)).read_bytes()).hexdigest()[:12]}" for model in models)
    write_section(f"Models: shipped models with their defaults ({args.test_set})", [f"Files: {files}.", "", *lines])


if __name__ == "__main__":
    main()
