"""BLEU of every CPU `--precision` mode against fp32 on each test set: the shipped model, 2 threads.

    python benchmarks/precision.py        # rewrites benchmarks/RESULTS.md's precision section

The quality bar of reduced precision is 0.5 BLEU of fp32 on the embedded test sets; benchmarks/engines.py
shows it on one of them next to the speed, this shows it on all of them. Decoding uses the checkpoint's
tuned defaults (beam size, length penalty) and greedy search, with `nmt translate`'s default batching.
int8_bf16 multiplies many rows with its bf16 copy of the int8 weights and few rows (16 at most) with the
int8 kernel, so it also runs at a batch size small enough for the kernel: both paths are covered. The
lexical shortlist stored in the model (`--shortlist`) is measured in fp32, int8_bf16 and int8_fp32. On a
CPU without native bf16 the bf16 modes and torchao's int8 are left out (there int8_bf16 took 5x and int8
15x as long as fp32).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
from results import (
    cpu_name,
    decoding,
    left_out_note,
    model_file,
    modes_left_out,
    shown_path,
    translate_options,
    vector_extensions,
    write_section,
)

from nmt.data.corpus import parse_test_set
from nmt.decoding.translate import Translator
from nmt.model.checkpoint import load_checkpoint
from nmt.model.quantize import INT8_KERNEL_MAX_ROWS
from nmt.text.metrics import score

TEST_SETS = ("multi30k:test_2016_flickr", "multi30k:test_2017_flickr", "news-commentary:dev_newsdiscuss", "tatoeba:dev",
             "europarl:test")
MODES = ("fp32", "bf16", "int8", "int8_bf16", "int8_fp32")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--sentences", type=int, default=None, help="only the first N of each test set")
    args = parser.parse_args()
    args.model = model_file(args.model)
    torch.set_num_threads(2)
    checkpoint = load_checkpoint(args.model)
    tuned = translate_options(checkpoint)  # the stored beam, length penalty and n-gram block
    searches = [(f"beam {tuned.beam_size}", tuned), ("greedy", replace(tuned, beam_size=1))]
    rows, signature = [], ""
    skipped = modes_left_out(MODES)
    for name in TEST_SETS:
        test = parse_test_set(name)
        sources, references = test.source[: args.sentences], test.target[: args.sentences]
        for label, options in searches:
            kernel_batch = INT8_KERNEL_MAX_ROWS // options.beam_size
            runs = ([(mode, None, False) for mode in MODES] + [("int8_bf16", kernel_batch, False)]
                    + [(mode, None, True) for mode in ("fp32", "int8_bf16", "int8_fp32")
                       if checkpoint.shortlist is not None])
            runs = [run for run in runs if run[0] not in skipped]
            baseline = None
            for mode, batch_size, shortlist in runs:
                config = decoding(checkpoint, options, mode, batch_size=batch_size, shortlist=shortlist)
                translator = Translator.from_checkpoint(checkpoint, config)
                started = time.perf_counter()
                out = [t.text for t in translator.translate(sources)]
                seconds = time.perf_counter() - started
                scores = score(out, references)
                signature = scores.signatures["bleu"]
                baseline = baseline or (scores.bleu, out)
                same = sum(a == b for a, b in zip(baseline[1], out, strict=True))
                batch = f"batch {batch_size} (int8 kernel)" if batch_size else "4096 tokens"
                mode_name = f"{mode} --shortlist" if shortlist else mode
                rows.append((name, len(sources), label, mode_name, batch, scores.bleu, scores.bleu - baseline[0], same,
                             seconds))
                print(rows[-1], flush=True)
    lines = [
        f"Machine: {cpu_name()}, 2 threads, torch {torch.__version__}. Model: {shown_path(args.model)}. Command: "
        f"`python benchmarks/precision.py{f' --sentences {args.sentences}' if args.sentences else ''}`. "
        f"BLEU: sacreBLEU {signature}, cased, on detokenized output. Batches: `nmt translate`'s default (4096 "
        "padded source tokens), or the batch size given. Seconds: in-process translation time, for orientation "
        "only (benchmarks/engines.py measures speed)."
        + left_out_note(skipped),
        "",
        "| test set | sentences | search | precision | batches | BLEU | change vs fp32 | outputs identical to fp32 "
        "| seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, label, mode, batch, bleu, change, same, seconds in rows:
        lines.append(f"| {name} | {n} | {label} | {mode} | {batch} | {bleu:.2f} | {change:+.2f} | {same} of {n} | "
                     f"{seconds:.1f} |")
    worst = min(rows, key=lambda row: row[6])
    lines += ["", f"Largest drop: {worst[6]:+.2f} BLEU ({worst[3]}, {worst[2]}, {worst[4]}, {worst[0]})."]
    write_section(f"Precision: BLEU of each mode on every embedded test set ({vector_extensions()} CPU)", lines,
                  model=args.model)


if __name__ == "__main__":
    main()
