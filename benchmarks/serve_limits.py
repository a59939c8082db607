"""What one bad client costs `nmt serve` (issue 83's cases), measured against the real server on loopback: other
loopback addresses (127.0.0.x) stand for other clients. Figures of failures, order, memory and size, no timings
(they may run beside other work). Prints a Markdown table.

    python benchmarks/serve_limits.py [--model general] > table.md
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import platform
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


class Served:
    def __init__(self, model: str, *options: str, env: dict | None = None):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "nmt_cli.main", "serve", "--model", model, "--port",
                                         str(self.port), "--quiet", *options],
                                        env={**__import__("os").environ, **(env or {})})
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise SystemExit("the server did not start")

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024

    def calls(self) -> int:
        text = httpx.get(self.url + "/metrics").text
        return int(float(re.search(r"^nmt_batch_lines_count (\S+)$", text, re.M).group(1)))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(120)


def client(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=600)


def surrogates(model: str) -> str:
    served = Served(model)
    try:
        def ask(number: int) -> int:
            text = "\\ud800 broken" if number % 50 == 0 else f"The museum opens at {number % 12 + 1} o'clock."
            body = '{"q": "' + text + '", "source": "en", "target": "fr"}'  # \\ud800: JSON's escape, as sent
            with client(f"127.0.0.{2 + number % 8}") as each:
                return each.post(served.url + "/translate", content=body,
                                 headers={"Content-Type": "application/json"}).status_code
        with ThreadPoolExecutor(100) as pool:
            codes = list(pool.map(ask, range(100)))
        others = [code for number, code in enumerate(codes) if number % 50]
        bad = [code for number, code in enumerate(codes) if not number % 50]
        return (f"| a lone surrogate (2 clients) among 100 concurrent clients | {sum(c != 200 for c in others)} of "
                f"{len(others)} others failed; the 2 answered {sorted(set(bad))} |")
    finally:
        served.stop()


def long_beside_short(model: str) -> str:
    served = Served(model, "--char-limit", "200000", "--max-batch-lines", "8")
    try:
        finished = {}

        def long():
            with client("127.0.0.2") as one:
                finished["long_code"] = one.post(served.url + "/translate", json={
                    "q": "\U0001f600" * 30_000, "source": "en", "target": "fr"}).status_code
            finished["long"] = time.monotonic()

        thread = threading.Thread(target=long)
        start = served.calls()
        thread.start()
        while served.calls() == start and thread.is_alive():
            time.sleep(0.05)
        before = served.calls()
        with client("127.0.0.3") as other:
            code = other.post(served.url + "/translate", json={"q": "Where is the station?", "source": "en",
                                                                "target": "fr"}).status_code
        finished["short"], waited = time.monotonic(), served.calls() - before
        thread.join()
        total = served.calls() - start
        return (f"| one 120 KB request of emoji (30,000 characters) and a short one of another client | the short one "
                f"({code}) answered {'before' if finished['short'] < finished['long'] else 'after'} the long one "
                f"({finished['long_code']}), after {waited} of the long one's {total} calls |")
    finally:
        served.stop()


def slow_bodies(model: str) -> str:
    served = Served(model, "--read-timeout", "5")
    held, refused = [], 0
    try:
        for _ in range(256):
            connection = socket.create_connection(("127.0.0.1", served.port), source_address=("127.0.0.2", 0))
            connection.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 1000\r\n\r\n{")
            held.append(connection)
        time.sleep(1)
        for connection in held:
            connection.setblocking(False)
            try:
                refused += connection.recv(64).startswith(b"HTTP/1.1 503")
            except BlockingIOError:
                pass
        with client("127.0.0.3") as normal:
            code = normal.post(served.url + "/translate", json={"q": "A normal request.", "source": "en",
                                                                 "target": "fr"}).status_code
        time.sleep(6)
        timed_out = 0
        for connection in held:
            try:
                connection.sendall(b" ")
                timed_out += connection.recv(64).startswith(b"HTTP/1.1 408")
            except OSError:
                timed_out += 1
        return (f"| 256 connections of one address sending a body a byte at a time (--read-timeout 5) | "
                f"{refused} refused at once (503, --max-client-connections 32), a normal client answered {code}, "
                f"the rest closed by the body deadline ({timed_out} of 256 gone 6 s later) |")
    finally:
        for connection in held:
            connection.close()
        served.stop()


def slow_from_many_addresses(model: str) -> str:
    """Issue 96's probe: 8 addresses x 32 connections sending a body a byte a second for 40 s (--read-timeout 60:
    the deadline never saves the others), and a one-liner of a ninth address every half second."""
    served = Served(model, "--read-timeout", "60")
    held: list[socket.socket] = []
    stop = time.monotonic() + 40
    try:
        for number in range(256):
            connection = socket.create_connection(("127.0.0.1", served.port),
                                                  source_address=(f"127.0.0.{10 + number % 8}", 0))
            connection.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 1000\r\n\r\n{")
            held.append(connection)

        def trickle():
            while time.monotonic() < stop:
                for index, connection in enumerate(held):
                    try:
                        connection.sendall(b" ")
                    except OSError:  # given way: the slow client comes back, as an attacker would
                        held[index] = socket.create_connection(("127.0.0.1", served.port),
                                                               source_address=(f"127.0.0.{10 + index % 8}", 0))
                        held[index].sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                            b"application/json\r\nContent-Length: 1000\r\n\r\n{")
                time.sleep(1)

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        codes = []
        with client("127.0.0.3") as probe:
            while time.monotonic() < stop:
                codes.append(probe.post(served.url + "/translate", json={"q": "Where is the station?", "source":
                                                                         "en", "target": "fr"}).status_code)
                time.sleep(0.5)
        thread.join()
        return (f"| 8 addresses x 32 connections sending a body a byte a second for 40 s, coming back when closed "
                f"(--read-timeout 60), and a one-liner of another address every half second | "
                f"{sum(code != 200 for code in codes)} of {len(codes)} one-liners refused |")
    finally:
        for connection in held:
            connection.close()
        served.stop()


def stalled_uploads(model: str) -> str:
    served = Served(model, "--read-timeout", "120", env={"NMT_API_KEY": "s3cret"})
    uploads = []
    try:
        before = served.rss_mb()
        head = (b"POST /translate_file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                b"Content-Length: 10000000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; "
                b"filename=\"a.txt\"\r\n\r\n")
        for number in range(250):
            upload = socket.create_connection(("127.0.0.1", served.port),
                                              source_address=(f"127.0.0.{10 + number % 8}", 0))
            upload.sendall(head + b"a" * 1_000_000)
            uploads.append(upload)
        time.sleep(3)
        during = served.rss_mb()
        for upload in uploads:
            upload.close()
        uploads.clear()
        time.sleep(3)
        after = served.rss_mb()
        return (f"| 250 uploads of a declared 10 MB, stalled after 1 MB, without a key (--api-key set) | "
                f"{during - before:+.0f} MB of memory while stalled, {after - before:+.0f} MB after they closed "
                f"(bodies spooled to disk past 64 KiB) |")
    finally:
        for upload in uploads:
            upload.close()
        served.stop()


def metrics_and_names(model: str) -> list[str]:
    served = Served(model, "--req-limit", "60")
    try:
        before = len(httpx.get(served.url + "/metrics").content)
        with client("127.0.0.2") as one:
            for number in range(10_000):
                one.get(f"{served.url}/no/such/path/{number}")
        after = len(httpx.get(served.url + "/metrics").content)
        names = ["John’s report.txt", "Отчёт.txt", "\U0001f600.txt", 'say "hi".txt']
        codes = []
        with client("127.0.0.3") as other:
            for name in names:
                link = other.post(served.url + "/translate_file", files={"file": (name, b"Good morning.\n")})
                codes.append(other.get(link.json()["translatedFileUrl"]).status_code)
        with client("127.0.0.4") as limited:
            answered = [limited.post(served.url + "/translate", json={"q": "Hello.", "source": "en",
                                                                      "target": "fr"}).status_code for _ in range(70)]
        return [f"| 10,000 requests to distinct unknown paths | /metrics {before:,} bytes before, {after:,} after "
                "(labels are route templates) |",
                f"| translated files named {', '.join(names)} | /download_file answered {codes} |",
                f"| 70 requests in a minute from one address, --req-limit 60 | {answered.count(200)} answered, "
                f"{answered.count(429)} refused with 429 and Retry-After |"]
    finally:
        served.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "data" / "models" / "general.pt"))
    model = parser.parse_args().model
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    digest = hashlib.sha256(Path(model).read_bytes()).hexdigest()[:12]
    print(f"{datetime.date.today()}, {cpu}, {Path(model).name} ({digest}), "
          f"`python benchmarks/serve_limits.py --model {Path(model).name}`\n")
    print("| case | what happened |\n|---|---|")
    for row in (surrogates(model), long_beside_short(model), slow_bodies(model), slow_from_many_addresses(model),
                stalled_uploads(model),
                *metrics_and_names(model)):
        print(row, flush=True)


if __name__ == "__main__":
    main()
