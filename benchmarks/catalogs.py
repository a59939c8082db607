"""How long a localiser waits: a 5,000-entry .pot translated whole (`nmt translate -i`, the default model and
options, the shipped interface memory on), and a translation memory's lookups at about 100,000 entries (the
shipped interface memory: exact and fuzzy, per string). Run with nothing else on the machine (no training).

    python benchmarks/catalogs.py [--entries 5000]

The .pot's messages are held-out lines no training corpus or memory holds: the dev splits of software-ui,
software-ui-extra, python-docs, tatoeba and news, a fifth of the entries each.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polib

from nmt.data.corpus import parse_test_set
from nmt.data.memory import shipped_memory

SETS = ("software-ui:dev", "software-ui-extra:dev", "python-docs:dev", "tatoeba:dev", "news:dev")


def catalog(entries: int) -> polib.POFile:
    pot = polib.POFile()
    pot.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    seen = set()
    for name in SETS:
        for line in parse_test_set(name).source[: entries // len(SETS)]:
            if line and line not in seen:
                seen.add(line)
                pot.append(polib.POEntry(msgid=line, msgstr=""))
    return pot


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=5000)
    args = parser.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}")
    started = time.perf_counter()
    memory = shipped_memory()
    loaded = time.perf_counter() - started
    lines = [entry.msgid for entry in catalog(2000)]
    started = time.perf_counter()
    served = sum(bool(memory.exact(line)) for line in lines)
    exact = (time.perf_counter() - started) / len(lines)
    started = time.perf_counter()
    memory.fuzzy(lines[0], 0.85)
    indexed = time.perf_counter() - started
    started = time.perf_counter()
    offered = sum(memory.fuzzy(line, 0.85) is not None for line in lines)
    fuzzy = (time.perf_counter() - started) / len(lines)
    print(f"memory: {len(memory):,} entries, read in {loaded:.2f} s; exact lookup {exact * 1e6:.0f} us a string "
          f"({served} of {len(lines)} held-out strings matched); trigram index built in {indexed:.2f} s, fuzzy "
          f"lookup {fuzzy * 1e3:.1f} ms a string ({offered} offered at 0.85)")
    with tempfile.TemporaryDirectory() as folder:
        pot = Path(folder) / "app.pot"
        catalog(args.entries).save(str(pot))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-i", str(pot), "-o",
                        str(Path(folder) / "fr.po"), "-q"], check=True)
        took = time.perf_counter() - started
        french = polib.pofile(str(Path(folder) / "fr.po"))
        words = sum(len(entry.msgid.split()) for entry in french)
        filled = sum(bool(entry.msgstr) for entry in french)
        print(f"`nmt translate -i app.pot`: {len(french):,} entries ({words:,} English words) in {took:.1f} s, "
              f"{len(french) / took:.1f} entries/s, {words / took:.0f} words/s; {filled:,} filled (marked fuzzy)")


if __name__ == "__main__":
    main()
