"""The speed targets against CTranslate2, measured so that run-to-run noise cannot decide them: whole-process
tokens/s of nmt's fastest CPU modes and of CTranslate2 on the shipped model, every command run ROUNDS times
in alternation, medians compared. 2 threads, an embedded test set (Multi30k test_2016_flickr unless told).

    python benchmarks/targets.py          # rewrites benchmarks/RESULTS.md's targets section of that test set
    python benchmarks/targets.py --test-set multi30k:test_2017_flickr --rounds 3

benchmarks/engines.py times each row once (on this VM the same command varies by 20-50% from run to run);
here each contender runs right after the others, again and again, so a slow phase of the machine hits all
of them alike.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import sacrebleu
import torch
from engines import ALL_CT2, ct2_command, ct2_name, nmt_command, nmt_name, target_tokens, whole_process
from results import (
    cpu_name,
    ct2_threads_note,
    ct2_threads_slowdown,
    left_out_note,
    model_file,
    modes_left_out,
    shown_path,
    translate_options,
    vector_extensions,
    write_section,
)

from nmt.apps.export import export_ctranslate2
from nmt.data.corpus import parse_test_set
from nmt.model.checkpoint import load_checkpoint

# CTranslate2 int8 with intra_threads=2 runs batch 1 at 100-200 tok/s here (over a minute per pass of the
# test set, against about 15 s for the others): at batch 1, where the targets name CT2 float32 only, it is
# left out.
BATCH_1_CT2 = (("float32", 1, False), ("float32", 2, False), ("int8", 2, False), ("int8", 2, True))
# (search, beam, batch, nmt modes, CTranslate2 runs, what must hold): the targets, each on the whole
# test set (1000 sentences; on the first 100 alone, nmt's 2 s of start-up, mostly `import torch`, decided
# the batch-1 rows)
TARGETS = [
    ("beam 4", 4, 32, (("bf16", False), ("bf16", True), ("int8_bf16", False), ("int8_bf16", True),
                       ("int8_fp32", False), ("int8_fp32", True)), ALL_CT2,
     "best nmt >= 1.5x CT2 float32 and >= 1.0x CT2 int8"),
    ("greedy", 1, 1, (("int8_bf16", False), ("int8_bf16", True), ("int8_fp32", False), ("int8_fp32", True)),
     BATCH_1_CT2, "best nmt >= 1.0x CT2 float32"),
    ("beam 4", 4, 1, (("int8_bf16", False), ("int8_bf16", True), ("int8_fp32", False), ("int8_fp32", True)),
     BATCH_1_CT2, "best nmt >= 1.0x CT2 float32"),
]


def ratio(rate: dict[str, float], name: str, reference: str) -> str:
    return f"{rate[name] / rate[reference]:.2f}x" if reference in rate else "not run"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--test-set", default="multi30k:test_2016_flickr", help="an embedded test set (nmt eval)")
    args = parser.parse_args()
    args.model = model_file(args.model)
    checkpoint = load_checkpoint(args.model)
    options = translate_options(checkpoint)
    tokenizer = checkpoint.tokenizer()
    exported = export_ctranslate2(checkpoint, Path(tempfile.mkdtemp()) / "ct2")
    test = parse_test_set(args.test_set)
    lines = []
    text = "".join(line + "\n" for line in test.source)
    skipped = modes_left_out(precision for *_, modes, _, _ in TARGETS for precision, _ in modes)
    for search, beam, batch, modes, ct2_runs, target in TARGETS:
        modes = [(precision, shortlist) for precision, shortlist in modes if precision not in skipped]
        contenders = {nmt_name(precision, True, shortlist): nmt_command(args.model, beam, batch, precision,
                                                                        shortlist=shortlist)
                      for precision, shortlist in modes}
        for kind, workers, vmap in ct2_runs:
            if vmap and checkpoint.shortlist is None:
                continue
            contenders[ct2_name(kind, workers, vmap)] = ct2_command(exported, options.lenpen, beam, batch, kind,
                                                                    workers=workers, vmap=vmap)
        seconds: dict[str, list[float]] = {name: [] for name in contenders}
        tokens, bleu = {}, {}
        for _ in range(args.rounds):
            for name, command in contenders.items():
                out, elapsed, _, _ = whole_process(command, text)
                seconds[name].append(elapsed)
                tokens[name] = target_tokens(tokenizer, out)
                bleu[name] = sacrebleu.corpus_bleu(out, [test.target]).score
        rate = {name: tokens[name] / statistics.median(times) for name, times in seconds.items()}
        best = max((name for name in rate if name.startswith("nmt")), key=rate.get)
        lines += [f"{search}, batch {batch}, {len(test.source)} sentences. Target: {target}.", "",
                  "| engine | whole-process tok/s (median) | seconds per round | ratio to CT2 float32 | ratio to CT2 "
                  "int8 | BLEU |",
                  "|---|---|---|---|---|---|"]
        for name, value in rate.items():
            rounds = ", ".join(f"{s:.2f}" for s in seconds[name])
            lines.append(f"| {name} | {value:.0f} | {rounds} | {ratio(rate, name, 'CTranslate2 float32')} | "
                         f"{ratio(rate, name, 'CTranslate2 int8')} | {bleu[name]:.2f} |")
        lines += ["", f"Best nmt mode: {best}, {ratio(rate, best, 'CTranslate2 float32')} CT2 float32, "
                  f"CT2 int8: {ratio(rate, best, 'CTranslate2 int8')} (against CTranslate2's 2-worker runs: "
                  f"{ratio(rate, best, 'CTranslate2 float32 2 workers')} and "
                  f"{ratio(rate, best, 'CTranslate2 int8 2 workers')}).", ""]
        slower = ct2_threads_slowdown(rate.get("CTranslate2 float32"), rate.get("CTranslate2 float32 2 workers"))
        if slower:
            lines[-1:-1] = ["", ct2_threads_note(f"{slower:.1f}x")]
        print("\n".join(lines[-len(rate) - 6 :]), flush=True)
    header = [f"Machine: {cpu_name()}, 2 threads, torch {torch.__version__}. Model: {shown_path(args.model)}, "
              "exported with `nmt export --format ctranslate2` for CTranslate2. Command: "
              f"`python benchmarks/targets.py --rounds {args.rounds} --test-set {args.test_set}`. Each command "
              "(`nmt translate --threads 2` with its default --workers, or a CTranslate2 + sentencepiece script, from "
              "start to last line) runs once per round, the contenders one after the other; tok/s from the median "
              "seconds. CTranslate2 runs with intra_threads=2 (the reference of the ratios) and with "
              f"inter_threads=2, intra_threads=1 (2 workers). Sentences: all of {args.test_set}. BLEU: cased "
              "sacreBLEU (13a) of each command's output against the references. Length caps: nmt "
              f"{options.max_len_a} x source pieces + {options.max_len_b}, CTranslate2 256 pieces (it has no cap "
              "relative to the source), which matters only where a translation runs away."
              + left_out_note(skipped), ""]
    write_section(f"Targets: whole-process against CTranslate2, repeated ({vector_extensions()} CPU, {args.test_set})",
                  header + lines, model=args.model)


if __name__ == "__main__":
    main()
