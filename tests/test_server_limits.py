"""`nmt serve` against clients that cost it: a long request beside a short one, a client that leaves, bodies a
byte at a time, many connections from one address, stalled uploads, requests over the limit a minute, detection
beside file jobs. The real server on a loopback port (other loopback addresses, 127.0.0.x, stand for other
clients); no assertion on how fast the machine is, only on what comes first."""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.test_serve import Server, httpx

pytestmark = pytest.mark.slow  # servers started, requests of many calls

LONG = "\U0001f600" * 8_000  # one line of emoji, no sentence end: 8 pieces of 1,000 characters, 4 bytes each


def timed_post(server: Server, body: dict, finished: dict, name: str) -> None:
    answer = server.post("/translate", json=body, timeout=600)
    finished[name] = (time.monotonic(), answer.status_code)


def batches(server: Server) -> int:
    """Translate calls the engine has made (nmt_batch_lines_count)."""
    text = httpx.get(server.url + "/metrics").text
    return int(float(re.search(r"^nmt_batch_lines_count (\S+)$", text, re.M).group(1)))


def rss_kib(server: Server) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))


@pytest.fixture(scope="module")
def narrow(tiny_checkpoint):
    """A server that decodes one line a call: a long request makes many calls."""
    running = Server(tiny_checkpoint, "--char-limit", "50000", "--max-batch-lines", "1", "--read-timeout", "1",
                     "--max-client-connections", "4")
    yield running
    assert running.stop() == 0


def test_a_long_request_does_not_hold_a_short_one_of_another_client(narrow):
    finished: dict = {}
    long = threading.Thread(target=timed_post, args=(narrow, {"q": LONG, "source": "en", "target": "fr"}, finished,
                                                      "long"))
    start = batches(narrow)
    long.start()
    deadline = time.monotonic() + 60
    while batches(narrow) == start:  # the long one is being translated
        assert time.monotonic() < deadline and long.is_alive()
        time.sleep(0.02)
    short = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    answer = short.post(narrow.url + "/translate", json={"q": "A dog runs.", "source": "en", "target": "fr"},
                        timeout=600)
    finished["short"] = (time.monotonic(), answer.status_code)
    long.join(600)
    assert finished["short"][1] == 200 and finished["long"][1] == 200
    assert finished["short"][0] < finished["long"][0]  # answered between the long one's calls


def test_a_client_that_leaves_has_its_lines_dropped(narrow):
    body = ('{"q": "%s", "source": "en", "target": "fr"}' % ("\U0001f600" * 32_000)).encode()
    start = batches(narrow)
    with socket.create_connection(("127.0.0.1", narrow.port), timeout=30) as client:
        client.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
        deadline = time.monotonic() + 60
        while batches(narrow) == start:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    time.sleep(3)  # the server sees the client gone at its next check (every half second) and drops the rest
    settled = batches(narrow)
    time.sleep(2)
    assert batches(narrow) == settled and settled - start < 32  # 32 pieces, one a call: most never translated


def test_a_body_sent_a_byte_at_a_time_gets_a_408_at_the_body_s_deadline(narrow):
    with socket.create_connection(("127.0.0.1", narrow.port), timeout=30) as client:
        client.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 200\r\n\r\n")
        started, answer = time.monotonic(), b""
        for _ in range(100):  # a byte every 0.2 s: each part in time, the whole body not (--read-timeout 1)
            try:
                client.sendall(b" ")
            except OSError:
                break
            client.settimeout(0.2)
            try:
                answer += client.recv(4096)
                break
            except TimeoutError:
                continue
        client.settimeout(10)
        while b"\r\n\r\n" not in answer and (chunk := client.recv(4096)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 10


def test_one_address_holds_at_most_its_connections_and_others_are_served(narrow):
    held = []
    try:
        for _ in range(4):
            connection = socket.create_connection(("127.0.0.1", narrow.port), timeout=10,
                                                  source_address=("127.0.0.3", 0))
            connection.sendall(b"GET /languages HTTP/1.1\r\nHost: x\r\n")  # headers never finished
            held.append(connection)
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", narrow.port), timeout=10,
                                      source_address=("127.0.0.3", 0)) as fifth:
            answer = fifth.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503") and b"--max-client-connections" in answer
        assert httpx.get(narrow.url + "/languages").status_code == 200  # another address
    finally:
        for connection in held:
            connection.close()


def test_stalled_uploads_without_a_key_cost_little_memory(tiny_checkpoint):
    keyed = Server(tiny_checkpoint, "--read-timeout", "120", "--max-client-connections", "64",
                   env={"NMT_API_KEY": "s3cret"})
    uploads = []
    try:
        before = rss_kib(keyed)
        head = (b"POST /translate_file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                b"Content-Length: 5000000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; "
                b"filename=\"a.txt\"\r\n\r\n")
        for number in range(40):  # 2 MB each, then silence: 80 MB that a buffering server would hold
            upload = socket.create_connection(("127.0.0.1", keyed.port), timeout=60,
                                              source_address=(f"127.0.0.{10 + number % 4}", 0))
            upload.sendall(head + b"a" * 2_000_000)
            uploads.append(upload)
        time.sleep(2)
        grown = rss_kib(keyed) - before
        assert grown < 30_000, f"{grown} KiB more for 40 stalled uploads"
        assert httpx.get(keyed.url + "/languages").status_code == 200
    finally:
        for upload in uploads:
            upload.close()
        keyed.stop()


def test_requests_over_the_limit_a_minute_get_429_with_retry_after(tiny_checkpoint, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("generous 4\nplain\n", encoding="utf-8")
    limited = Server(tiny_checkpoint, "--req-limit", "2", "--api-keys", str(keys))
    try:
        body = {"q": "A dog.", "source": "en", "target": "fr"}
        generous = [limited.post("/translate", json={**body, "api_key": "generous"}).status_code for _ in range(5)]
        plain = [limited.post("/translate", json={**body, "api_key": "plain"}).status_code for _ in range(3)]
        assert generous == [200] * 4 + [429] and plain == [200, 200, 429]
        refused = limited.post("/translate", json={**body, "api_key": "plain"})
        assert refused.status_code == 429 and 1 <= int(refused.headers["Retry-After"]) <= 60
        assert "--req-limit" in refused.json()["error"]
        assert limited.post("/translate", json={**body, "api_key": "unknown"}).status_code == 401
    finally:
        limited.stop()


def test_detection_does_not_wait_behind_file_jobs_and_a_busy_pool_is_a_503(tiny_checkpoint, tmp_path):
    busy = Server(tiny_checkpoint, "--max-file-jobs", "1")
    try:
        text = "\n".join(f"Line {i}: a man walks his dog along the river in the morning." for i in range(300))
        finished: dict = {}

        def upload(name):
            answer = httpx.post(busy.url + "/translate_file", files={"file": (f"{name}.txt", text.encode())},
                                timeout=600)
            finished[name] = (time.monotonic(), answer.status_code, answer.json())

        first = threading.Thread(target=upload, args=("first",))
        start = batches(busy)
        first.start()
        deadline = time.monotonic() + 60
        while batches(busy) == start:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        upload("second")
        detected = httpx.post(busy.url + "/detect", json={"q": "Where is the station?"}, timeout=60)
        detected_at = time.monotonic()
        first.join(600)
        assert detected.status_code == 200 and detected.json()[0]["language"] == "en"
        assert detected_at < finished["first"][0] and finished["first"][1] == 200
        assert finished["second"][1] == 503 and "--max-file-jobs" in finished["second"][2]["error"]
    finally:
        busy.stop()
