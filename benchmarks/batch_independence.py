"""Whether a sentence translates the same alone and in a batch: `nmt translate --batch-size 1` against the
default batching (4,096 tokens a batch), in each precision, on the first lines of test sets; counts the
lines whose translations differ.

    python benchmarks/batch_independence.py --model captions --lines 300

Rewrites the section "Batch independence" of benchmarks/RESULTS.md. A count, not a timing: it may run
beside other work.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from results import cpu_name, model_file, vector_extensions, write_section

from nmt.data.corpus import parse_test_set


def translate(model: str, precision: str, text: str, alone: bool) -> list[str]:
    command = [sys.executable, "-m", "nmt_cli.main", "translate", "--model", model, "--precision", precision, "-q",
               "--threads", "1", "--workers", "1", *(["--batch-size", "1"] if alone else [])]
    done = subprocess.run(command, input=text, capture_output=True, text=True, check=True)
    return done.stdout.split("\n")[:-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="A checkpoint, or a shipped model's name; default the default shipped model.")
    parser.add_argument("--test-sets", default="multi30k:test_2016_flickr,europarl:dev")
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--precisions", default="int8_fp32,int8_bf16,fp32")
    args = parser.parse_args()
    model = model_file(args.model)
    rows = ["| precision | " + " | ".join(args.test_sets.split(",")) + " |",
            "|---|" + "---|" * len(args.test_sets.split(","))]
    for precision in args.precisions.split(","):
        cells = []
        for name in args.test_sets.split(","):
            source = parse_test_set(name).source[: args.lines]
            text = "".join(line + "\n" for line in source)
            alone = translate(model, precision, text, True)
            batched = translate(model, precision, text, False)
            differ = sum(a != b for a, b in zip(alone, batched, strict=True))
            cells.append(f"{differ} of {len(source)}")
            print(precision, name, cells[-1], flush=True)
        rows.append(f"| {precision} | " + " | ".join(cells) + " |")
    lines = [f"{cpu_name()}. Lines whose translation alone (`--batch-size 1`) differs from their translation in "
             f"the default batches, first {args.lines} lines of each set, beam and options as shipped.", "", *rows]
    print("\n".join(lines))
    write_section(f"Batch independence: a sentence alone and in a batch ({vector_extensions()} CPU)", lines, model)


if __name__ == "__main__":
    main()
