"""`nmt serve` under load, on loopback: a bounded load of requests of 1-5 sentences from concurrent clients,
against the same requests sent one at a time, to the same server.

    python benchmarks/serve.py --requests 500 --clients 32

Reports throughput (sentences/s), latency percentiles, errors, and the server's batch sizes (from
/metrics), into the "Serve" section of benchmarks/RESULTS.md. The clients run in this process (asyncio,
httpx) on the same CPU as the server: on a 2-core machine they take part of its time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time

import httpx
import sacrebleu

sys.path.insert(0, os.path.dirname(__file__))
from results import cpu_name, model_file, write_section  # noqa: E402

from nmt.data.corpus import parse_test_set  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def requests_of(count: int, seed: int) -> tuple[list[list[str]], dict[str, str]]:
    """`count` requests of 1-5 sentences from multi30k test 2016 and tatoeba dev, in a fixed order, and the
    reference of each sentence."""
    references = {}
    for name in ("multi30k:test_2016_flickr", "tatoeba:dev"):
        pairs = parse_test_set(name)
        references.update(zip(pairs.source, pairs.target, strict=True))
    pool = sorted(references)
    chooser = random.Random(seed)
    return [chooser.sample(pool, chooser.randint(1, 5)) for _ in range(count)], references


async def run_load(url: str, requests: list[list[str]], clients: int) -> tuple[float, list[float], int, dict]:
    """(seconds, each request's latency, errors, {sentence: translation}) for `requests` sent by `clients`
    concurrent clients."""
    queue = list(enumerate(requests))
    latencies: list[float] = []
    translations: dict[str, str] = {}
    errors = 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue:
            _, lines = queue.pop(0)
            started = time.perf_counter()
            try:
                answer = await http.post(url + "/translate", json={"q": lines, "source": "en", "target": "fr"})
                ok = answer.status_code == 200 and len(answer.json()["translatedText"]) == len(lines)
                translations.update(zip(lines, answer.json()["translatedText"], strict=True) if ok else ())
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - started)
            errors += not ok

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        return time.perf_counter() - started, latencies, errors, translations


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def batch_sizes(url: str) -> tuple[float, float]:
    """(calls, lines) the engine decoded so far, from /metrics."""
    metrics = httpx.get(url + "/metrics").text.splitlines()
    value = {line.split()[0]: float(line.split()[1]) for line in metrics if line.startswith("nmt_batch_lines_")}
    return value.get("nmt_batch_lines_count", 0.0), value.get("nmt_batch_lines_sum", 0.0)


def server_seconds(url: str) -> tuple[float, float]:
    """(requests answered, seconds they took in the server), from /metrics' nmt_request_seconds."""
    metrics = httpx.get(url + "/metrics").text.splitlines()
    value = {line.split()[0]: float(line.split()[1]) for line in metrics if line.startswith("nmt_request_seconds_")}
    return value.get("nmt_request_seconds_count", 0.0), value.get("nmt_request_seconds_sum", 0.0)


def one_sentence_rows(url: str, requests: list[list[str]]) -> list[str]:
    """Requests of one sentence each (the first of each request), one at a time: the client's latency and
    the server's own time per request (its histogram's sum over its count)."""
    singles = [[lines[0]] for lines in requests]
    count_before, seconds_before = server_seconds(url)
    _, latencies, errors, _ = asyncio.run(run_load(url, singles, 1))
    count, seconds = server_seconds(url)
    server_ms = 1000 * (seconds - seconds_before) / max(1.0, count - count_before)
    return ["| requests | errors | client p50 ms | client p95 ms | client p99 ms | server mean ms |",
            "|---|---|---|---|---|---|",
            f"| {len(singles)} | {errors} | {1000 * percentile(latencies, 0.5):.1f} | "
            f"{1000 * percentile(latencies, 0.95):.1f} | {1000 * percentile(latencies, 0.99):.1f} | {server_ms:.1f} |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--serve-options", default="", help="Extra options of `nmt serve`, one string.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--single", type=int, default=200, help="One-sentence requests sent one at a time.")
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "nmt_cli.main", "serve", "--port", str(port), "-q", *args.serve_options.split()]
    server = subprocess.Popen(command)
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        requests, references = requests_of(args.requests, args.seed)
        sentences = sum(len(lines) for lines in requests)
        asyncio.run(run_load(url, requests[:20], 4))  # warm-up
        rows = []
        for label, clients in ((f"{args.clients} concurrent clients", args.clients), ("one at a time", 1)):
            calls_before, lines_before = batch_sizes(url)
            seconds, latencies, errors, translations = asyncio.run(run_load(url, requests, clients))
            calls, lines = batch_sizes(url)
            sources = sorted(translations)
            bleu = sacrebleu.corpus_bleu([translations[s] for s in sources], [[references[s] for s in sources]])
            rows.append((label, seconds, latencies, errors, (lines - lines_before) / max(1.0, calls - calls_before),
                         bleu.score, translations))
        singles = one_sentence_rows(url, requests[: args.single])
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    table = ["| load | requests | sentences | seconds | sentences/s | p50 s | p95 s | p99 s | errors | "
             "lines per decoded batch | BLEU |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, seconds, latencies, errors, per_batch, bleu, _ in rows:
        table.append(f"| {label} | {len(requests)} | {sentences} | {seconds:.1f} | {sentences / seconds:.1f} | "
                     f"{percentile(latencies, 0.5):.3f} | {percentile(latencies, 0.95):.3f} | "
                     f"{percentile(latencies, 0.99):.3f} | {errors} | {per_batch:.1f} | {bleu:.2f} |")
    together, alone = rows[0][-1], rows[1][-1]
    same = sum(together[s] == alone.get(s) for s in together)
    speedup = (sentences / rows[0][1]) / (sentences / rows[1][1])
    lines = [f"Machine: {cpu_name()}, {os.cpu_count()} cores; clients and server on it. Command: `python "
             f"benchmarks/serve.py --requests {args.requests} --clients {args.clients}"
             f"{' --serve-options ' + repr(args.serve_options) if args.serve_options else ''}` (`nmt serve` with "
             "its defaults otherwise: the shipped model, its beam, --precision auto). Requests: 1-5 sentences "
             "drawn from multi30k test 2016 and tatoeba dev (seed "
             f"{args.seed}), each as LibreTranslate's `POST /translate` with `q` a list.", "", *table, "",
             f"Throughput at {args.clients} concurrent clients: {speedup:.2f}x one at a time; median latency "
             f"{statistics.median(rows[0][2]):.3f} s. Translations identical in both loads: {same} of "
             f"{len(together)} distinct sentences. BLEU: sacreBLEU's default (cased, 13a) over the distinct sentences "
             "against their references.", "",
             f"One-sentence requests, one at a time (the first sentence of each of the first {args.single} "
             "requests): the client's latency (HTTP on loopback included) and the server's own time per request "
             "(its nmt_request_seconds histogram, sum over count).", "", *singles]
    write_section("Serve: batching across requests", lines, model=model_file(None))  # the server's default
    print("\n".join(lines))


if __name__ == "__main__":
    main()
