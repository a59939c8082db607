"""Start-up: `echo Hello. | nmt translate`, whole process, for this tree and another, alternating, and
`import torch` alone as the floor.

    mkdir -p /tmp/base && git archive REV | tar -x -C /tmp/base \
        && ln -s cli /tmp/base/nmt_cli && ln -s data /tmp/base/nmt_data     # the other tree, importable
    python benchmarks/startup.py /tmp/base --rounds 15

The other tree is put first on PYTHONPATH, so that its nmt, nmt_cli and nmt_data shadow this checkout's
editable install; both run the same interpreter, torch and model. Never run it while something else loads
the cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def seconds(command: list[str], env: dict) -> float:
    """Run from a folder of no nmt: a checkout as the working folder would shadow PYTHONPATH's tree."""
    started = time.perf_counter()
    subprocess.run(command, input=b"Hello.\n", capture_output=True, check=True, env=env, cwd=tempfile.gettempdir())
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="another tree of nmt, made importable as the docstring shows")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    translate = [sys.executable, "-m", "nmt_cli.main", "translate"]
    here = {**os.environ, "PYTHONPATH": ""}
    other = {**os.environ, "PYTHONPATH": str(args.other.resolve())}
    times = {"this tree": [], str(args.other): [], "import torch": []}
    for round_number in range(args.rounds + 1):
        runs = [("this tree", translate, here), (str(args.other), translate, other),
                ("import torch", [sys.executable, "-c", "import os, torch; os._exit(0)"], here)]
        for name, command, env in runs if round_number % 2 else runs[::-1]:
            elapsed = seconds(command, env)
            if round_number:  # the first round warms the page cache
                times[name].append(elapsed)
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.3f} s, range {min(values):.3f}-{max(values):.3f} "
              f"over {len(values)} runs")


if __name__ == "__main__":
    main()
