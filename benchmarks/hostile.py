"""Hostile input through the real `nmt translate`: how long each takes and whether the line contract held
(exit 0, one output line per input line, no traceback).

    python benchmarks/hostile.py                       # the shipped model, default options
    python benchmarks/hostile.py --options "--precision int8_fp32 --shortlist"

The inputs are built from the embedded corpora: a 3,000-word line of News Commentary sentences, the same
words without punctuation (no sentence or clause to cut at), a 75-word sentence, 1,000 blank lines before
two sentences, and blank-only inputs. Each row is one whole process, timed from start to exit (importing
torch counts). Results go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time

from results import cpu_name, model_file, write_section

from nmt.data.corpus import load_embedded

NMT = [sys.executable, "-m", "nmt_cli.main", "translate"]


def inputs() -> dict[str, str]:
    news = load_embedded("news-commentary", "train").source
    words = " ".join(line for line in news[:400] if line.strip()).split()[:3000]
    bare = " ".join(word.strip(".,;:!?\"'()") for word in words)
    long_sentence = ", ".join(sentence.rstrip(".") for sentence in load_embedded("multi30k", "valid").source[:6])
    return {
        "3,000-word line, News Commentary": " ".join(words) + "\n",
        "3,000-word line, no punctuation": bare + "\n",
        f"one {len(long_sentence.split())}-word sentence (six captions joined by commas)": long_sentence + ".\n",
        "1,000 blank lines, then two sentences": "\n" * 1000 + "A dog runs.\nTwo men talk.\n",
        "a lone newline": "\n",
        "an empty input": "",
        "blank lines without a final newline": "\n \n\t",
    }


def run(options: list[str], text: str) -> dict:
    started = time.perf_counter()
    result = subprocess.run(NMT + options, input=text.encode(), capture_output=True)
    seconds = time.perf_counter() - started
    lines_in = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    out = result.stdout.decode()
    return {"seconds": seconds, "code": result.returncode,
            "lines_ok": out.count("\n") == lines_in, "words_in": len(text.split()), "words_out": len(out.split()),
            "traceback": b"Traceback" in result.stderr}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default="", help="extra options of nmt translate, as one string")
    args = parser.parse_args()
    options = shlex.split(args.options) + ["--quiet"]
    rows = []
    for name, text in inputs().items():
        measured = run(options, text)
        print(name, measured, flush=True)
        contract = "yes" if measured["code"] == 0 and measured["lines_ok"] and not measured["traceback"] else "NO"
        rows.append(f"| {name} | {measured['seconds']:.2f} | {measured['words_in']} | {measured['words_out']} | "
                    f"{contract} |")
    command = "python benchmarks/hostile.py" + (f' --options "{args.options}"' if args.options else "")
    write_section(f"Hostile input: nmt translate {args.options or 'with its defaults'}", [
        f"`{command}` on {cpu_name()}, {time.strftime('%Y-%m-%d')}; the shipped model. Each row is one whole "
        "process, start-up included (the rows of blank input are start-up alone). Contract: exit 0, one output "
        "line per input line, no traceback. Words in and out: a translation far shorter than its source would "
        "show text lost.",
        "",
        "| input | seconds | words in | words out | contract |",
        "|---|---|---|---|---|",
        *rows,
    ], model=None if "--model" in (args.options or "") else model_file(None))


if __name__ == "__main__":
    main()
