"""`nmt serve`'s turns over HTTP, decided by a translator that holds each call until the test lets it go: a short
request between a long one's calls, a client that leaves, detection beside a busy file pool. The server's own
app, limits and engine on a loopback port in this process; what comes first never depends on how fast the
machine translates (a real model on a fast machine could finish a long request before the short one arrived)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from nmt.apps.server.config import ServeSettings  # noqa: E402
from nmt.apps.server.engine import Engine  # noqa: E402
from nmt.apps.server.process import listening, server_for  # noqa: E402
from nmt.decoding.search import SearchOptions  # noqa: E402
from tests.test_server_engine import ScriptedTranslator  # noqa: E402

LONG = "\U0001f600" * 2_048  # one line, no sentence end, a token a character: 8 pieces of 256 tokens


class Gated:
    """A server whose engine decodes one line a call with a ScriptedTranslator (its gate held from the start)."""

    def __init__(self):
        self.translator = ScriptedTranslator()
        self.translator.gate.clear()
        self.engine = Engine(lambda: self.translator, max_lines=1, wait=0.0)
        listener = listening("127.0.0.1", 0)
        self.port = listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = server_for(self.engine, SearchOptions(), ServeSettings(
            max_chars=50_000, max_file_jobs=1, max_connections=64, max_client_connections=8, drain_timeout=5,
            quiet=True))
        self.engine.start()
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [listener]}, daemon=True)
        self.thread.start()
        until(lambda: self.server.started and self.engine.ready.is_set(), "the server to start")

    def stop(self) -> None:
        self.translator.gate.set()
        self.server.should_exit = True
        self.thread.join(30)
        self.engine.stop(drop_queued=True, wait=10)


def until(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.01)


def in_thread(work, finished: dict, name: str) -> threading.Thread:
    def run():
        finished[name] = work()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def gated():
    running = Gated()
    yield running
    running.stop()


def test_a_short_request_is_translated_right_after_the_call_under_way_of_a_long_one(gated):
    finished: dict = {}
    body = {"q": LONG, "source": "en", "target": "fr"}
    long = in_thread(lambda: httpx.post(gated.url + "/translate", json=body, timeout=60), finished, "long")
    until(lambda: gated.translator.calls, "the long request's first call")
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))  # another client's address
    short = in_thread(lambda: other.post(gated.url + "/translate", json={"q": "A dog runs.", "source": "en",
                                                                          "target": "fr"}, timeout=60),
                      finished, "short")
    until(lambda: gated.engine.waiting == 7 + 1, "the short request to queue behind the long one's 7 pieces")
    gated.translator.gate.set()
    long.join(60), short.join(60)
    assert finished["long"].status_code == 200 and finished["short"].status_code == 200
    assert finished["short"].json()["translatedText"] == "A DOG RUNS."
    assert gated.translator.calls[1] == ["A dog runs."] and len(gated.translator.calls) == 9


def test_a_client_that_leaves_has_its_waiting_lines_dropped(gated):
    body = ('{"q": "%s", "source": "en", "target": "fr"}' % ("\U0001f600" * 32 * 256)).encode()
    with socket.create_connection(("127.0.0.1", gated.port), timeout=30) as client:
        client.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
        until(lambda: gated.translator.calls, "the first of 32 pieces to be taken")
        assert gated.engine.waiting == 31
    until(lambda: gated.engine.waiting == 0, "the server to see the client gone and drop its lines")
    gated.translator.gate.set()
    answered = httpx.post(gated.url + "/translate", json={"q": "Next.", "source": "en", "target": "fr"}, timeout=60)
    assert answered.json()["translatedText"] == "NEXT."
    assert len(gated.translator.calls) == 2  # the piece under way and the next client's line, nothing more


def test_detection_does_not_wait_behind_a_file_and_a_busy_file_pool_is_a_503(gated):
    finished: dict = {}
    text = "\n".join(f"Line {i}: a man walks his dog along the river." for i in range(5)).encode()
    first = in_thread(lambda: httpx.post(gated.url + "/translate_file", files={"file": ("first.txt", text)},
                                         timeout=60), finished, "first")
    until(lambda: gated.translator.calls, "the first file's first call")
    second = httpx.post(gated.url + "/translate_file", files={"file": ("second.txt", text)}, timeout=60)
    assert second.status_code == 503 and "--max-file-jobs" in second.json()["error"]
    detected = httpx.post(gated.url + "/detect", json={"q": "Where is the station?"}, timeout=60)
    assert detected.status_code == 200 and detected.json()[0]["language"] == "en"
    assert first.is_alive()  # the file's first line is still held: detection did not wait for it
    gated.translator.gate.set()
    first.join(60)
    assert finished["first"].status_code == 200 and len(gated.translator.calls) == 5
