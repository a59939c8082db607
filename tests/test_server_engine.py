"""The server's engine and limits without a model: turns between clients, cancellation, deadlines, the queue's
characters, long lines in pieces, requests a minute and API key files (nmt.apps.server)."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("fastapi")

from nmt.apps.server.config import ApiKeys  # noqa: E402
from nmt.apps.server.engine import Cancelled, Engine, QueueFull, joined, pieces_of  # noqa: E402
from nmt.apps.server.limits import RateLimits  # noqa: E402
from nmt.decoding.search import SearchOptions  # noqa: E402
from nmt.decoding.translate import Translation  # noqa: E402
from nmt.errors import UsageError  # noqa: E402


class ScriptedTranslator:
    """Translates a line to its upper case, recording each call's lines; `gate` holds each call until set."""

    def __init__(self):
        self.calls: list[list[str]] = []
        self.glossaries: list = []  # each call's glossary
        self.options, self.formality, self.glossary = SearchOptions(), "auto", None
        self.gate = threading.Event()
        self.gate.set()

    @staticmethod
    def cost(line):  # a character a token, as text in a script of bytes would be
        return len(line)

    def with_options(self, options, formality, glossary=None):
        self.options, self.formality, self.glossary = options, formality, glossary
        return self

    def translate_as_ready(self, lines):
        self.calls.append(list(lines))
        self.glossaries.append(self.glossary)
        self.gate.wait(30)
        for index, line in enumerate(lines):
            yield index, Translation(line, line.upper(), -1.0, [(line.upper(), -1.0)], confidence=-0.5)


class Answers:
    def __init__(self):
        self.got = {}
        self.arrived = threading.Event()
        self.count = 0

    def __call__(self, name):
        def done(result):
            self.got[name] = result
            self.arrived.set()
        return done

    def wait(self, *names, timeout=30):
        deadline = time.monotonic() + timeout
        while not all(name in self.got for name in names):
            assert time.monotonic() < deadline, f"no answer for {names}: {self.got}"
            time.sleep(0.01)


def hold_a_call(engine, translator, answers=None) -> None:
    """Client a's line "held" in a translate call that waits on the gate: what comes next queues behind it."""
    translator.gate.clear()
    engine.submit(["held"], SearchOptions(), answers("held") if answers else lambda result: None, client="a")
    deadline = time.monotonic() + 10
    while not translator.calls:
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.fixture
def engine():
    translator = ScriptedTranslator()
    running = Engine(lambda: translator, max_lines=4, wait=0.0, max_queue=1000, max_queue_chars=10_000,
                     call_cost=100)
    running.start()
    running.ready.wait(10)
    yield running, translator
    translator.gate.set()
    running.stop(wait=10)


def test_a_client_s_short_request_waits_one_call_behind_another_s_long_one(engine):
    engine, translator = engine
    answers = Answers()
    translator.gate.clear()  # the first call is held while both requests queue
    engine.submit(["first"], SearchOptions(), answers("first"), client="a")
    deadline = time.monotonic() + 10
    while not translator.calls:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    engine.submit([f"long {i}" for i in range(40)], SearchOptions(), answers("long"), client="a")
    engine.submit(["short"], SearchOptions(), answers("short"), client="b")
    translator.gate.set()
    answers.wait("long", "short")
    calls_before_short = next(i for i, call in enumerate(translator.calls) if "short" in call)
    assert calls_before_short == 1  # the call right after the one under way: a turn of b's beside a's
    assert [t.text for t in answers.got["long"]] == [f"LONG {i}" for i in range(40)]
    assert all(len(call) <= 4 for call in translator.calls)


def test_lines_of_requests_with_other_glossaries_are_never_translated_in_one_call(engine):
    from nmt.decoding.constraints import Glossary

    engine, translator = engine
    answers = Answers()
    pets, tools = Glossary((("dog", "toutou"),)), Glossary((("saw", "scie"),))
    hold_a_call(engine, translator, answers)
    engine.submit(["a dog", "two dogs"], SearchOptions(), answers("pets"), client="b", glossary=pets)
    engine.submit(["a saw"], SearchOptions(), answers("tools"), client="c", glossary=tools)
    engine.submit(["plain"], SearchOptions(), answers("plain"), client="d")
    translator.gate.set()
    answers.wait("held", "pets", "tools", "plain")
    by_line = {line: glossary for call, glossary in zip(translator.calls, translator.glossaries, strict=True)
               for line in call}
    assert by_line["a dog"] is pets and by_line["two dogs"] is pets and by_line["a saw"] is tools
    assert by_line["plain"] is None


def test_a_call_holds_at_most_its_cost_and_a_costlier_line_goes_alone(engine):
    engine, translator = engine
    answers = Answers()
    engine.submit(["x" * 60, "y" * 60, "z" * 150, "w"], SearchOptions(), answers("mixed"), client="a")
    answers.wait("mixed")
    assert [t.text for t in answers.got["mixed"]] == ["X" * 60, "Y" * 60, "Z" * 150, "W"]
    assert all(sum(map(len, call)) <= 100 or len(call) == 1 for call in translator.calls)


def test_a_call_is_bounded_by_the_costs_given_not_the_characters(engine):
    engine, translator = engine
    answers = Answers()
    hold_a_call(engine, translator, answers)
    # four lines of a character each, which cost 60 tokens each (as in a script read as bytes): a call holds one
    engine.submit(["a", "b", "c", "d"], SearchOptions(), answers("dear"), client="b", costs=[60, 60, 60, 60])
    translator.gate.set()
    answers.wait("held", "dear")
    assert [call for call in translator.calls if "a" in call or "b" in call or "c" in call or "d" in call] == [
        ["a"], ["b"], ["c"], ["d"]]


def test_a_cancelled_request_s_lines_are_never_translated_and_it_is_answered(engine):
    engine, translator = engine
    answers = Answers()
    hold_a_call(engine, translator, answers)
    job = engine.submit([f"gone {i}" for i in range(20)], SearchOptions(), answers("gone"), client="b")
    engine.cancel(job, "the client went away")
    assert isinstance(answers.got["gone"], Cancelled) and engine.waiting == 0
    translator.gate.set()
    answers.wait("held")
    assert not any(line.startswith("gone") for call in translator.calls for line in call)


def test_a_request_past_its_time_is_dropped_and_answered_cancelled(engine):
    engine, translator = engine
    answers = Answers()
    hold_a_call(engine, translator, answers)
    engine.submit(["late"], SearchOptions(), answers("late"), client="b", seconds=0.05)
    time.sleep(0.2)
    translator.gate.set()
    answers.wait("held", "late")
    assert isinstance(answers.got["late"], Cancelled)
    assert not any("late" in call for call in translator.calls)


def test_the_queue_counts_characters(engine):
    engine, translator = engine
    hold_a_call(engine, translator)
    engine.submit(["a" * 6_000], SearchOptions(), lambda result: None, client="a")
    with pytest.raises(QueueFull):  # 6,000 + 6,000 waiting characters: over the 10,000
        engine.submit(["b" * 6_000], SearchOptions(), lambda result: None, client="b")
    translator.gate.set()


def test_a_long_line_is_queued_as_its_sentences_and_joined_back():
    sentences = [f"This is sentence number {i} of a very long paragraph that goes on." for i in range(40)]
    line = " ".join(sentences)
    pieces = [piece for piece, _ in pieces_of(line, len, most=200)]
    assert len(pieces) == 40 and pieces == sentences
    assert pieces_of("A short line.", len, most=200) == [("A short line.", 13)]
    run = "word " * 100  # no sentence end: cut after a space
    cut = pieces_of(run, len, most=60)
    assert all(cost == len(piece) <= 60 for piece, cost in cut) and " ".join(piece for piece, _ in cut) == run.strip()
    dense = "字" * 500  # no space: cut anywhere, each run within the cost (three a character)
    cut = pieces_of(dense, lambda text: 3 * len(text), most=60)
    assert "".join(piece for piece, _ in cut) == dense and all(cost <= 60 for _, cost in cut)
    parts = [Translation(s, s.upper(), -1.0, [(s.upper(), -1.0)], confidence=-0.2, flags=["copy"]) for s in pieces]
    whole = joined(line, parts)
    assert whole.source == line and whole.text == line.upper() and whole.flags == ["copy"] and whole.score == -1.0


def test_requests_a_minute_per_address_and_per_key(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# our clients\nalpha 3\nbeta   # the server's limit\n", encoding="utf-8")
    read = ApiKeys.read(keys, "gamma")
    assert read.limits == {"alpha": 3, "beta": None, "gamma": None}
    assert read.find("alpha") == "alpha" and read.find("alphx") is None and read.find(None) is None
    limits = RateLimits(2, read)
    assert [limits.charge("10.0.0.1", None) for _ in range(2)] == [None, None]
    wait = limits.charge("10.0.0.1", None)
    assert wait is not None and 1 <= wait <= 60
    assert limits.charge("10.0.0.2", None) is None  # another address has its own count
    assert [limits.charge("10.0.0.1", "alpha") for _ in range(3)] == [None] * 3  # the key's own limit
    assert limits.charge("10.0.0.1", "alpha") is not None
    assert RateLimits(None, read).charge("10.0.0.1", None) is None


@pytest.mark.parametrize("text, message", [("alpha three\n", "requests a minute"), ("\n# nothing\n", "no API key"),
                                           ("a 1 2\n", "requests a minute")])
def test_a_wrong_api_keys_file_is_one_usage_error(tmp_path, text, message):
    keys = tmp_path / "keys.txt"
    keys.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        ApiKeys.read(keys)


def test_a_file_s_shares_always_fit_the_queue():
    """A file's texts wait in the queue a share at a time: at most so many texts and so many characters (a text
    longer than that alone), so that no share is refused for ever by a queue it can never fit."""
    from nmt.apps.server.engine import shares

    texts = ["a" * 600, "b" * 600, "c" * 100, "d" * 5000, "e"]
    runs = shares(texts, most_lines=3, most_chars=1000)
    assert runs == [["a" * 600], ["b" * 600, "c" * 100], ["d" * 5000], ["e"]]
    assert [text for run in runs for text in run] == texts
    assert shares(["x"] * 7, most_lines=3, most_chars=1000) == [["x"] * 3, ["x"] * 3, ["x"]]


def test_an_accepted_connection_sends_without_waiting_for_the_client_s_delayed_ack():
    import socket
    import types

    from nmt.apps.server.limits import no_delay

    with socket.create_server(("127.0.0.1", 0)) as listener, socket.create_connection(listener.getsockname()):
        accepted, _ = listener.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # as the server is handed it
            no_delay(types.SimpleNamespace(get_extra_info=lambda name: accepted if name == "socket" else None))
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


@pytest.mark.parametrize("given, message", [
    ({"port": 70_000}, "--port must be a TCP port"), ({"max_tokens": 0}, "--token-limit must be at least 1"),
    ({"req_limit": 0}, "--req-limit must be at least 1"), ({"read_timeout": 0.0}, "--read-timeout must be positive"),
    ({"batch_wait_ms": -1.0}, "--batch-wait-ms must not be negative"),
    ({"max_chars": 500, "max_queue_chars": 400}, "--max-queue-chars \\(400\\) must be at least --char-limit"),
])
def test_serve_settings_are_checked_where_they_are_built_naming_the_option(given, message):
    from nmt.apps.server.config import ServeSettings

    with pytest.raises(UsageError, match=message):
        ServeSettings(**given)
    assert ServeSettings(port=0, batch_limit=None).max_body_bytes == 6 * 20_000 + 65_536
