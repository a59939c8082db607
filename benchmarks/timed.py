"""Run a command and append its wall time and peak memory to a log: each step of `make model-general`.

    python benchmarks/timed.py runs/general/steps.jsonl prepare -- nmt prepare ...

Peak memory is the largest resident set of the command's processes (getrusage of the children: the
command, or the biggest of the workers it waited for), in MiB. The command's exit code is this one's.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def main() -> int:
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: timed.py LOG STEP -- COMMAND...")
    log, step, command = Path(sys.argv[1]), sys.argv[2], sys.argv[4:]
    started = time.monotonic()
    code = subprocess.call(command)
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    record = {"step": step, "seconds": round(seconds, 1), "peak_rss_mib": round(peak), "exit": code,
              "ended": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": " ".join(command)}
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as file:
        file.write(json.dumps(record) + "\n")
    print(f"{step}: {seconds:.0f} s, peak {peak:.0f} MiB", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
