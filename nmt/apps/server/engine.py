"""The server's engine: one thread that owns the Translator and decodes the queued lines of all requests together.

Requests put their lines on the queue, each under its client (an API key, or the address it came from). The
engine takes the lines of one translate call in turns, one line of each client a round, until the call holds
`max_lines` lines or costs `call_cost` tokens (what the model reads: Translator.cost), so one client's large
request cannot make another's short one wait for more than a call, and no call holds the engine long, whatever
the script or the length of its lines; a client with lines left comes after the others at the next call. A line
costing more than LONG_LINE tokens enters the queue as its sentences (pieces_of), and is answered as their
translations joined (joined). A request whose client left, or whose time ran out, is cancelled: its lines
still queued are dropped, and it is answered with Cancelled.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nmt.decoding.constraints import Glossary
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translation, Translator
from nmt.text.segment import split_sentences

log = logging.getLogger("nmt")

# A line costing more tokens than this is queued as its sentences (a sentence costlier still as runs of words
# that cost at most this): the engine's turns are lines, and one line of 100,000 characters would hold a call
# for minutes. The Translator translates a line sentence by sentence too, so a sentence comes back as it would.
LONG_LINE = 256
# Tokens one translate call reads: 64 one-line requests of 16 tokens. With beam 5 on a 2-core Zen 3, 46 one-line news
# sentences of 1,005 tokens took 2.8 s, the longest calls up to 5 s (benchmarks/SERVE_LIMITS.md)
CALL_COST = 1_024


class QueueFull(Exception):
    """More lines or characters wait than the queue holds."""


class NotReady(Exception):
    """The model is still loading."""


class Cancelled(Exception):
    """A request's translation stopped before its end: its client went away, its time ran out, or the server is
    stopping."""


@dataclass(eq=False)
class Job:
    """One request's lines on the engine's queue: `taken` of them are being or have been translated."""

    lines: list[str]
    costs: list[int]  # tokens the model reads of each line (Translator.cost)
    options: SearchOptions
    done: Callable[[list[Translation] | BaseException], None]  # called once, from the engine's thread or cancel()
    formality: str | None = None  # formal, informal or auto; None: the server's
    glossary: Glossary | None = None  # the request's own (DeepL's glossary_id); None: the server's --glossary
    client: str = ""  # whose turn the lines take (nmt.apps.server.limits.client_of)
    deadline: float = float("inf")  # time.monotonic() after which the lines not yet translated are dropped
    results: list[Translation | None] = field(default_factory=list)
    taken: int = 0
    left: int = 0
    answered: bool = False

    def __post_init__(self):
        self.results = [None] * len(self.lines)
        self.left = len(self.lines)

    @property
    def chars(self) -> int:
        """Characters of the lines not yet taken."""
        return sum(len(line) for line in self.lines[self.taken:])

    def answer(self, result: list[Translation] | BaseException) -> None:
        if not self.answered:
            self.answered = True
            self.done(result)


class Engine:
    """The thread that owns the Translator and decodes the queued lines of all requests together, in turns."""

    def __init__(self, load: Callable[[], Translator], *, max_lines: int = 64, wait: float = 0.005,
                 max_queue: int = 2000, max_queue_chars: int = 200_000, call_cost: int = CALL_COST):
        """load: builds the Translator (in the engine's thread, so the server answers while it loads).
        max_lines, call_cost: lines and tokens in one translate call (a costlier line goes alone); wait: seconds
        the first request waits for company; max_queue, max_queue_chars: lines and characters that may wait
        before new requests are turned away."""
        self._load = load
        self.max_lines, self.wait, self.max_queue = max_lines, wait, max_queue
        self.max_queue_chars, self.call_cost = max_queue_chars, call_cost
        # told the lines of each translate call and the seconds it held the engine
        self.on_call: Callable[[int, float], None] = lambda lines, seconds: None
        self._clients: collections.OrderedDict[str, collections.deque[Job]] = collections.OrderedDict()
        self._waiting = 0  # lines queued and not yet taken
        self._last_served: list[str] = []  # the clients the last call took lines of, in order
        self._waiting_chars = 0
        self._lock = threading.Condition()
        self._stopping = False
        self.draining = False  # set on SIGTERM, before the requests in flight are waited for
        self.ready = threading.Event()
        self.failure: str | None = None  # why the Translator could not be built
        self.translator: Translator | None = None
        self.default_formality = "auto"  # the loaded Translator's
        self.on_failure: Callable[[], None] = lambda: None  # told when the Translator cannot be built
        self._thread = threading.Thread(target=self._run, name="nmt-engine", daemon=True)

    @property
    def waiting(self) -> int:
        """Lines queued and not yet taken."""
        return self._waiting

    def start(self) -> None:
        self._thread.start()

    @property
    def stopping(self) -> bool:
        """Whether the server is stopping (SIGTERM): long jobs give up at their next check."""
        return self._stopping or self.draining

    def stop(self, drop_queued: bool = False, wait: float | None = None) -> None:
        """Finish the queued lines (or, `drop_queued`, answer each queued request with Cancelled), then end
        the thread; wait for it at most `wait` seconds (it is a daemon: the process may exit without it)."""
        with self._lock:
            self._stopping = True
            dropped = [job for jobs in self._clients.values() for job in jobs] if drop_queued else []
            for job in dropped:
                self._unqueue(job)
            self._lock.notify_all()
        for job in dropped:
            job.answer(Cancelled("the server is stopping"))
        self._thread.join(wait)

    def cost(self, text: str) -> int:
        """Tokens the model reads to translate `text` (Translator.cost); the model loaded."""
        return self.translator.cost(text)

    def pieces(self, line: str) -> list[tuple[str, int]]:
        """`line` as the (piece, cost) it is queued as (pieces_of); the model loaded."""
        return pieces_of(line, self.cost)

    def submit(self, lines: list[str], options: SearchOptions,
               done: Callable[[list[Translation] | BaseException], None], formality: str | None = None,
               client: str = "", seconds: float | None = None, glossary: Glossary | None = None,
               costs: list[int] | None = None) -> Job:
        """Queue `lines` for `client`; done(translations in order) is called from the engine thread once all
        are done, or done(exception) if their translation failed or was cancelled (cancel, or `seconds` after
        now). formality: the register asked for (None: the server's); glossary: the terms asked for (None: the
        server's); costs: each line's (None: counted here). Raises NotReady or QueueFull."""
        if not self.ready.is_set():
            raise NotReady
        deadline = time.monotonic() + seconds if seconds is not None else float("inf")
        costs = [self.cost(line) for line in lines] if costs is None else costs
        job = Job(lines, costs, options, done, formality, glossary, client, deadline)
        if not lines:
            job.answer([])
            return job
        with self._lock:
            chars = job.chars
            if self._waiting + len(lines) > self.max_queue or self._waiting_chars + chars > self.max_queue_chars:
                raise QueueFull
            arriving = client not in self._clients
            self._clients.setdefault(client, collections.deque()).append(job)
            if arriving:  # ahead of who the last call served: its turn comes with the next call
                for served in self._last_served:
                    if served in self._clients:
                        self._clients.move_to_end(served)
            self._waiting += len(lines)
            self._waiting_chars += chars
            self._lock.notify_all()
        return job

    def cancel(self, job: Job, why: str) -> None:
        """Drop what `job` still has queued and answer it with Cancelled(why); lines of it in the call under way
        are translated and forgotten."""
        with self._lock:
            self._unqueue(job)
        job.answer(Cancelled(why))

    def _unqueue(self, job: Job) -> None:
        """Take `job` off the queue (the lock held)."""
        jobs = self._clients.get(job.client)
        if jobs is None or job not in jobs:
            return
        jobs.remove(job)
        if not jobs:
            del self._clients[job.client]
        self._waiting -= len(job.lines) - job.taken
        self._waiting_chars -= job.chars
        job.taken = len(job.lines)

    def _run(self) -> None:
        try:
            self.translator = self._load()
        except Exception as exc:  # noqa: BLE001 - reported by /health and by `nmt serve`'s exit
            self.failure = str(exc) or type(exc).__name__
            self.on_failure()
            return
        self.default_formality = self.translator.formality
        self.ready.set()
        while True:
            taken = self._take()
            if taken is None:
                return
            self._translate(*taken)

    def _take(self) -> tuple[SearchOptions, str | None, Glossary | None, list[tuple[Job, int, int]]] | None:
        """The next call's (options, formality, glossary, [(job, start, end)]), after waiting up to `wait` for
        more lines to come: one line of each client in turn, of jobs with the first one's options, formality and
        glossary, until the call is full. None once stopping with nothing queued."""
        with self._lock:
            while True:
                while not self._clients:
                    if self._stopping:
                        break
                    self._lock.wait()
                if not self._clients:
                    break
                deadline = time.monotonic() + self.wait
                while self._waiting < self.max_lines and not self._stopping:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._lock.wait(remaining)
                for job in self._drop_late():  # answered at once: its lines are not worth waiting for
                    job.answer(Cancelled("its time ran out"))
                if self._clients:
                    break
            if not self._clients:  # stopping
                return None
            spans = self._fill()
        first = spans[0][0]
        return first.options, first.formality, first.glossary, spans

    def _drop_late(self) -> list[Job]:
        """Take the jobs whose deadline has passed off the queue (the lock held)."""
        now = time.monotonic()
        late = [job for jobs in self._clients.values() for job in jobs if job.deadline < now]
        for job in late:
            self._unqueue(job)
        return late

    def _fill(self) -> list[tuple[Job, int, int]]:
        """The lines of one call, in turns (the lock held, a job queued)."""
        first = next(iter(self._clients.values()))[0]
        options, formality, glossary = first.options, first.formality, first.glossary
        starts: dict[Job, int] = {}  # job -> its first line in this call (its last: job.taken, after)
        lines, cost, served = 0, 0, []
        while lines < self.max_lines:
            took = False
            for client, jobs in list(self._clients.items()):
                job = next((job for job in jobs if job.options == options and job.formality == formality
                            and job.glossary is glossary), None)
                if job is None:
                    continue
                if lines and cost + job.costs[job.taken] > self.call_cost:
                    continue
                starts.setdefault(job, job.taken)
                cost += job.costs[job.taken]
                lines, took = lines + 1, True
                self._waiting -= 1
                self._waiting_chars -= len(job.lines[job.taken])
                job.taken += 1
                if client not in served:
                    served.append(client)
                if job.taken == len(job.lines):
                    jobs.remove(job)
                    if not jobs:
                        del self._clients[client]
                if lines == self.max_lines:
                    break
            if not took:
                break
        for client in served:  # who was served waits behind who was not, and behind who comes next
            if client in self._clients:
                self._clients.move_to_end(client)
        self._last_served = served
        return [(job, start, job.taken) for job, start in starts.items()]

    def _translate(self, options: SearchOptions, formality: str | None, glossary: Glossary | None,
                   spans: list[tuple[Job, int, int]]) -> None:
        spans = [(job, start, end) for job, start, end in spans if not job.answered]
        if not spans:
            return
        lines = [line for job, start, end in spans for line in job.lines[start:end]]
        owners = [(job, index) for job, start, end in spans for index in range(start, end)]
        started = time.perf_counter()
        translator = self.translator.with_options(options, formality or self.default_formality, glossary)
        try:
            for position, translation in translator.translate_as_ready(lines):
                job, index = owners[position]
                job.results[index] = translation
                job.left -= 1
                if job.left == 0:
                    job.answer(job.results)
            self.on_call(len(lines), time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - each waiting request answers with the error
            jobs = list({job: None for job, _, _ in spans if job.left and not job.answered})
            if len(jobs) > 1:  # one request's lines must not fail the others': each on its own
                for job, start, end in spans:
                    if job.left and not job.answered:
                        self._translate(options, formality, glossary, [(job, start, end)])
                return
            log.error("translation failed: %s", exc)
            for job in jobs:
                job.answer(exc)


def pieces_of(line: str, cost: Callable[[str], int], most: int = LONG_LINE) -> list[tuple[str, int]]:
    """`line` as the (piece, cost) it is queued as: itself if it costs at most `most`, else its sentences, and a
    sentence costlier still in runs that cost at most `most`, cut after a space where there is one."""
    whole = cost(line)
    if whole <= most:
        return [(line, whole)]
    pieces = []
    for sentence in split_sentences(line):
        pieces.extend(_runs(sentence, cost(sentence), cost, most))
    return pieces or [(line, whole)]


def _runs(text: str, spent: int, cost: Callable[[str], int], most: int) -> list[tuple[str, int]]:
    """`text` (costing `spent`) in runs costing at most `most` (a single character however much it costs)."""
    if spent <= most or len(text) < 2:
        return [(text, spent)] if text else []
    fits = max(1, min(len(text) - 1, len(text) * most // spent))  # characters that cost about `most`
    cut = text.rfind(" ", fits // 2, fits) + 1 or fits
    head, tail = text[:cut].strip(), text[cut:].strip()
    return _runs(head, cost(head), cost, most) + _runs(tail, cost(tail), cost, most)


def joined(line: str, parts: list[Translation]) -> Translation:
    """The Translation of `line` from those of its pieces (pieces_of), in order."""
    if len(parts) == 1:
        return parts[0]
    text = " ".join(part.text for part in parts if part.text)
    scores = [part.score for part in parts if part.score is not None]
    score = sum(scores) / len(scores) if scores else None
    confidences = [part.confidence for part in parts if part.confidence is not None]
    flags = list(dict.fromkeys(flag for part in parts for flag in part.flags))
    return Translation(line, text, score, [(text, score)] if score is not None else [],
                       confidence=sum(confidences) / len(confidences) if confidences else None, flags=flags)


def shares(texts: list[str], most_lines: int, most_chars: int) -> list[list[str]]:
    """`texts` in runs of at most `most_lines` texts and `most_chars` characters (a text longer than that alone):
    the shares of a file's text that wait in the queue at once, each of which always fits it."""
    runs: list[list[str]] = []
    chars = 0
    for text in texts:
        if not runs or len(runs[-1]) == most_lines or (runs[-1] and chars + len(text) > most_chars):
            runs.append([])
            chars = 0
        runs[-1].append(text)
        chars += len(text)
    return runs
