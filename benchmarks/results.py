"""benchmarks/RESULTS.md is made of sections, one per benchmark script; each run rewrites its own."""

from __future__ import annotations

import platform
from pathlib import Path

RESULTS = Path(__file__).parent / "RESULTS.md"


def write_section(title: str, lines: list[str]) -> None:
    """Replace (or append) the section headed `## {title}` with `lines`."""
    previous = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
    start = previous.find(f"## {title}")
    if start >= 0:
        end = previous.find("\n## ", start + 1)
        previous = previous[:start] + previous[end + 1 :] if end >= 0 else previous[:start]
    RESULTS.write_text(previous.rstrip("\n") + "\n\n" + "\n".join([f"## {title}", "", *lines]) + "\n")
    print(f"written to {RESULTS}")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
