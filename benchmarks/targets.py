"""The speed targets against CTranslate2, measured so that run-to-run noise cannot decide them: whole-process
tokens/s of nmt's fastest CPU modes and of CTranslate2 on the shipped model, every command run ROUNDS times
in alternation, medians compared. 2 threads, Multi30k test_2016_flickr.

    python benchmarks/targets.py          # rewrites benchmarks/RESULTS.md's targets section

benchmarks/engines.py times each row once (on this VM the same command varies by 20-50% from run to run);
here each contender runs right after the others, again and again, so a slow phase of the machine hits all
of them alike.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch
from engines import ct2_command, nmt_command, whole_process
from results import cpu_name, write_section

from nmt.checkpoint import load_checkpoint
from nmt.corpus import data_dir, parse_test_set
from nmt.export import export_ctranslate2

# (search, beam, batch, sentences, nmt modes, what must hold): the targets
TARGETS = [
    ("beam 4", 4, 32, 1000, ("bf16", "int8_bf16"), "best nmt >= 1.5x CT2 float32 and >= 1.0x CT2 int8"),
    ("greedy", 1, 1, 100, ("int8_bf16",), "best nmt >= 1.0x CT2 float32"),
    ("beam 4", 4, 1, 100, ("int8_bf16",), "best nmt >= 1.0x CT2 float32"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(data_dir() / "models" / "en-fr.pt"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    checkpoint = load_checkpoint(args.model)
    lenpen = checkpoint.decoding.get("lenpen", 1.0)
    tokenizer = checkpoint.tokenizer()
    exported = export_ctranslate2(checkpoint, Path(tempfile.mkdtemp()) / "ct2")
    test = parse_test_set("multi30k:test_2016_flickr")
    lines = []
    for search, beam, batch, n, modes, target in TARGETS:
        text = "".join(line + "\n" for line in test.source[:n])
        contenders = {f"nmt {mode}": nmt_command(args.model, beam, batch, mode) for mode in modes}
        for kind in ("float32", "int8"):
            contenders[f"CTranslate2 {kind}"] = ct2_command(exported, lenpen, beam, batch, kind)
            contenders[f"CTranslate2 {kind} 2 workers"] = ct2_command(exported, lenpen, beam, batch, kind, workers=2)
        seconds: dict[str, list[float]] = {name: [] for name in contenders}
        tokens = {}
        for _ in range(args.rounds):
            for name, command in contenders.items():
                out, elapsed, _, _ = whole_process(command, text)
                seconds[name].append(elapsed)
                tokens[name] = sum(len(ids) for ids in tokenizer.encode_batch(out))
        rate = {name: tokens[name] / statistics.median(times) for name, times in seconds.items()}
        best = max((name for name in rate if name.startswith("nmt")), key=rate.get)
        lines += [f"{search}, batch {batch}, {n} sentences. Target: {target}.", "",
                  "| engine | whole-process tok/s (median) | seconds per round | ratio to CT2 float32 | ratio to CT2 "
                  "int8 |",
                  "|---|---|---|---|---|"]
        for name, value in rate.items():
            rounds = ", ".join(f"{s:.2f}" for s in seconds[name])
            lines.append(f"| {name} | {value:.0f} | {rounds} | {value / rate['CTranslate2 float32']:.2f}x | "
                         f"{value / rate['CTranslate2 int8']:.2f}x |")
        lines += ["", f"Best nmt mode: {best}, {rate[best] / rate['CTranslate2 float32']:.2f}x CT2 float32, "
                  f"{rate[best] / rate['CTranslate2 int8']:.2f}x CT2 int8 (against CTranslate2's 2-worker runs: "
                  f"{rate[best] / rate['CTranslate2 float32 2 workers']:.2f}x and "
                  f"{rate[best] / rate['CTranslate2 int8 2 workers']:.2f}x).", ""]
        print("\n".join(lines[-len(rate) - 6 :]), flush=True)
    header = [f"Machine: {cpu_name()}, 2 threads, torch {torch.__version__}. Model: {args.model}, exported with "
              "`nmt export --format ctranslate2` for CTranslate2. Command: "
              f"`python benchmarks/targets.py --rounds {args.rounds}`. Each command (`nmt translate --threads 2` "
              "with its default --workers, or a CTranslate2 + sentencepiece script, from start to last line) runs "
              "once per round, the contenders one after the other; tok/s from the median seconds. CTranslate2 "
              "runs with intra_threads=2 (the reference of the ratios) and with inter_threads=2, intra_threads=1 "
              "(2 workers). Sentences: the first N of multi30k:test_2016_flickr.", ""]
    write_section("Targets: whole-process against CTranslate2, repeated", header + lines)


if __name__ == "__main__":
    main()
