"""`nmt serve` against clients that cost it: bodies a byte at a time, many connections from one address, stalled
uploads, requests over the limit a minute. The real server on a loopback port (other loopback addresses,
127.0.0.x, stand for other clients); no assertion on how fast the machine is. Turns between clients, a client
that leaves and detection beside a busy file pool: tests/test_server_turns.py."""

from __future__ import annotations

import re
import select
import socket
import time
from pathlib import Path

import pytest

from tests.test_serve import Server, httpx

pytestmark = pytest.mark.slow  # servers started, requests of many calls

def rss_kib(server: Server) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))


@pytest.fixture(scope="module")
def narrow(tiny_checkpoint):
    """A server that gives a body one second to arrive."""
    running = Server(tiny_checkpoint, "--read-timeout", "1")
    yield running
    assert running.stop() == 0


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


def test_one_address_holds_at_most_its_connections_and_others_are_served(tiny_checkpoint):
    capped = Server(tiny_checkpoint, "--max-client-connections", "4", "--read-timeout", "60")
    held = []
    try:
        for _ in range(5):  # headers never finished: each holds its connection until the read timeout
            connection = socket.create_connection(("127.0.0.1", capped.port), timeout=10,
                                                  source_address=("127.0.0.3", 0))
            connection.sendall(b"GET /languages HTTP/1.1\r\nHost: x\r\n")
            held.append(connection)
        answered, _, _ = select.select(held, [], [], 30)  # the one the server counted fifth is answered at once
        assert len(answered) == 1
        refused = answered[0].recv(4096)
        assert refused.startswith(b"HTTP/1.1 503") and b"--max-client-connections" in refused
        assert not select.select([c for c in held if c is not answered[0]], [], [], 0.5)[0]  # four still held
        assert httpx.get(capped.url + "/languages").status_code == 200  # another address
    finally:
        for connection in held:
            connection.close()
        capped.stop()


def test_slow_clients_of_many_addresses_give_way_to_a_new_one_oldest_first(tiny_checkpoint):
    full = Server(tiny_checkpoint, "--max-connections", "6", "--max-client-connections", "3", "--read-timeout", "60")
    held = []
    try:
        for n in range(6):  # three bodies, then three headers, never finished, from two addresses
            connection = socket.create_connection(("127.0.0.1", full.port), timeout=10,
                                                  source_address=(f"127.0.0.{3 + n % 2}", 0))
            connection.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 100\r\n\r\n{" if n < 3 else b"GET /languages HTTP/1.1\r\nHost: x\r\n")
            held.append(connection)
            time.sleep(0.2)  # in order of age
        assert httpx.get(full.url + "/languages", timeout=30).status_code == 200  # a seventh: room is made
        answered, _, _ = select.select(held, [], [], 10)
        assert answered == [held[0]]  # the oldest, a body still arriving, gave way
        refused = held[0].recv(4096)
        assert refused.startswith(b"HTTP/1.1 503") and b"--max-connections" in refused
    finally:
        for connection in held:
            connection.close()
        full.stop()


def test_stalled_uploads_without_a_key_cost_little_memory_and_bounded_disk(tiny_checkpoint):
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
        answered, _, _ = select.select(uploads, [], [], 5)
        refused = [upload.recv(4096) for upload in answered]
        # the bodies arriving at once hold 4 files and 64 texts: 52 MB, so that 26 uploads of 2 MB fit on disk
        assert len(refused) >= 40 - 26 and all(answer.startswith(b"HTTP/1.1 503") for answer in refused)
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


def test_a_forwarding_header_does_not_make_one_client_many(tiny_checkpoint):
    limited = Server(tiny_checkpoint, "--req-limit", "2")
    try:
        body = {"q": "A dog.", "source": "en", "target": "fr"}
        codes = [limited.post("/translate", json=body, headers={"X-Forwarded-For": f"10.9.8.{n}"}).status_code
                 for n in range(3)]
        assert codes == [200, 200, 429]  # the connection's own address counts, not what a header claims
    finally:
        limited.stop()


def test_wrong_keys_count_against_the_address_s_requests_a_minute(tiny_checkpoint):
    limited = Server(tiny_checkpoint, "--req-limit", "2", "--api-key", "right")
    try:
        body = {"q": "A dog.", "source": "en", "target": "fr"}
        codes = [limited.post("/translate", json={**body, "api_key": f"guess-{n}"}).status_code for n in range(3)]
        assert codes == [401, 401, 429]
    finally:
        limited.stop()
