"""What heavy requests cost the other clients of `nmt serve` (issue 96), in seconds: a one-liner's wait beside a
heavy request of Chinese, spaced emoji or English, and after a heavy client left; the longest translate call;
64 keep-alive clients' rate and p99; /health on a kept-alive connection; the CLI's fuzzy memory on long lines.
Timings: run it alone on the machine. `--code DIR` runs another checkout's nmt (a `git worktree` of an older
commit), so that two versions compare in one run. Prints a Markdown table.

    python benchmarks/serve_costs.py [--model general.pt] [--code ../base] > table.md
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from serve_limits import Served, client

ROOT = Path(__file__).resolve().parent.parent
ONE_LINER = {"q": "The museum opens at nine tomorrow.", "source": "en", "target": "fr"}
PARAGRAPH = ("The committee approved the budget for next year after a long debate about schools, roads and the "
             "hospital, and asked the mayor to report on the costs before the summer. ")
HEAVY = {
    "8,000 Chinese characters": "".join(chr(0x4E00 + (n * 7919) % 20_000) for n in range(8_000)),
    "10,000 emoji between spaces (20,000 characters)": "\U0001f600 " * 10_000,
    "20,000 characters of English in one line": (PARAGRAPH * 200)[:20_000],
}


def run_code(code: Path) -> dict[str, str]:
    """The environment that runs `code`'s nmt and nmt_cli (its cli/ folder under the package's name), and a
    working directory of nothing else: `python -m` would find this checkout's nmt in the current one first."""
    links = Path(tempfile.mkdtemp(prefix="nmt-code-"))
    (links / "nmt_cli").symlink_to(code.resolve() / "cli")
    os.chdir(links)
    return {"PYTHONPATH": f"{code.resolve()}{os.pathsep}{links}"}


def calls(served: Served) -> tuple[float, float]:
    """(calls, the bucket every call so far fits under, in seconds) from nmt_call_seconds; (calls, nan) where
    the server has no such metric (an older nmt)."""
    text = httpx.get(served.url + "/metrics").text
    total = re.search(r"^nmt_batch_lines_count (\S+)$", text, re.M)
    count = float(total.group(1)) if total else 0.0
    buckets = [(float(bound), float(value)) for bound, value in
               re.findall(r'^nmt_call_seconds_bucket\{le="([\d.]+)"\} (\S+)$', text, re.M)]
    fits = next((bound for bound, value in buckets if value >= count), float("nan"))
    return count, fits


def beside_heavy(served: Served, name: str, text: str, leaves: bool) -> str:
    """A one-liner of another address sent 1 s after the heavy request (whose client leaves after 2 s if
    `leaves`): its status and seconds."""
    finished: dict = {}

    def heavy():
        with client("127.0.0.2") as one:
            one.timeout = httpx.Timeout(2.0 if leaves else 600.0)
            started = time.perf_counter()
            try:
                finished["heavy"] = one.post(served.url + "/translate", json={
                    "q": text, "source": "en", "target": "fr"}).status_code
            except httpx.TimeoutException:
                finished["heavy"] = "left after 2 s"
            finished["heavy_s"] = time.perf_counter() - started

    thread = threading.Thread(target=heavy)
    thread.start()
    time.sleep(3.0 if leaves else 1.0)
    with client("127.0.0.3") as other:
        started = time.perf_counter()
        code = other.post(served.url + "/translate", json=ONE_LINER).status_code
        waited = time.perf_counter() - started
    thread.join()
    _, fits = calls(served)
    heavy_s = f", in {finished['heavy_s']:.1f} s" if not leaves else ""
    return (f"| {name}{', its client gone after 2 s' if leaves else ''} | {finished['heavy']}{heavy_s} | "
            f"{code} in {waited:.2f} s | {fits:g} s |")


def keep_alive_clients(served: Served, clients: int = 64, seconds: float = 30.0) -> str:
    """`clients` kept-alive connections sending one-liners for `seconds`: rate, p50, p99, errors."""
    times: list[float] = []
    errors = 0
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def run(number: int):
        nonlocal errors
        with client(f"127.0.1.{1 + number}") as each:
            while time.monotonic() < stop:
                started = time.perf_counter()
                code = each.post(served.url + "/translate", json={**ONE_LINER, "q": f"{ONE_LINER['q']} ({number})"}
                                 ).status_code
                with lock:
                    times.append(time.perf_counter() - started)
                    errors += code != 200

    began = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(clients)))
    elapsed = time.perf_counter() - began
    ordered = sorted(times)
    return (f"| {clients} keep-alive clients of one-liners for {seconds:.0f} s | {len(times) / elapsed:.1f} req/s, "
            f"p50 {statistics.median(ordered):.2f} s, p99 {ordered[int(0.99 * (len(ordered) - 1))]:.2f} s, "
            f"{errors} errors |")


def health_kept_alive(served: Served, times: int = 50) -> str:
    with httpx.Client(timeout=30) as kept:
        kept.get(served.url + "/health")
        took = []
        for _ in range(times):
            started = time.perf_counter()
            kept.get(served.url + "/health")
            took.append(time.perf_counter() - started)
    return f"| /health {times} times on one kept-alive connection | median {1000 * statistics.median(took):.1f} ms |"


def fuzzy_memory(model: str, env: dict[str, str]) -> str:
    """The CLI on 10 lines of 1,000 characters, with a TMX of 2,000 paragraphs offering fuzzy matches and without."""
    folder = Path(tempfile.mkdtemp(prefix="nmt-fuzzy-"))
    units = "".join(f'<tu><tuv xml:lang="en"><seg>{n}: {PARAGRAPH * 4}</seg></tuv><tuv xml:lang="fr"><seg>{n}: '
                    f'Le comité a approuvé le budget.</seg></tuv></tu>\n' for n in range(2_000))
    (folder / "m.tmx").write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4"><header srclang="en" '
                                  f'datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="x" creationtool="x" '
                                  f'creationtoolversion="1"/><body>\n{units}</body></tmx>\n', encoding="utf-8")
    lines = "".join(f"{n * 37}: {(PARAGRAPH * 7)[:990]}\n" for n in range(10))
    seconds = []
    for memory in (["--memory", str(folder / "m.tmx"), "--memory-threshold", "0.5"], []):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "--model", model, "-q", *memory],
                       input=lines, text=True, capture_output=True, check=True, env={**os.environ, **env})
        seconds.append(time.perf_counter() - started)
    return (f"| `nmt translate`, 10 lines of 1,000 characters | {seconds[0]:.1f} s with a TMX of 2,000 paragraphs "
            f"(fuzzy 0.5), {seconds[1]:.1f} s without |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "data" / "models" / "general.pt"))
    parser.add_argument("--code", type=Path, help="another checkout's nmt to run (default: this one)")
    args = parser.parse_args()
    args.model = str(Path(args.model).resolve())
    env = run_code(args.code) if args.code else {}
    code = args.code or ROOT
    commit = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    digest = hashlib.sha256(Path(args.model).read_bytes()).hexdigest()[:12]
    print(f"{datetime.date.today()}, {cpu}, {os.cpu_count()} cores, nmt {commit}, {Path(args.model).name} "
          f"({digest}), `python benchmarks/serve_costs.py --model {Path(args.model).name}"
          f"{' --code ' + str(args.code) if args.code else ''}`\n")
    print("| heavy request (client 127.0.0.2) | its answer | a one-liner of 127.0.0.3 sent 1 s after | every "
          "call under |\n|---|---|---|---|")
    os.environ.update(env)  # the servers run the code measured
    served = Served(args.model)
    try:
        for name, text in HEAVY.items():
            print(beside_heavy(served, name, text, leaves=False), flush=True)
        print(beside_heavy(served, "8,000 Chinese characters", HEAVY["8,000 Chinese characters"], leaves=True))
        print("\n| case | figure |\n|---|---|")
        print(health_kept_alive(served), flush=True)
        print(keep_alive_clients(served), flush=True)
    finally:
        served.stop()
    print(fuzzy_memory(args.model, env), flush=True)


if __name__ == "__main__":
    main()
