"""`nmt serve`: an HTTP translation server that decodes the lines of concurrent requests together.

Requests put their lines on one queue; one engine thread owns the Translator and takes from the queue as
many lines as the batch budget holds, waiting at most a few milliseconds for other requests to join, then
translates them as one call (the Translator cuts that call into batches by padded tokens, and on a CPU can
decode them in forked workers, as `nmt translate` does). A request is answered as soon as its own lines are
done. The API speaks LibreTranslate's shapes (`POST /translate`, `GET /languages`), so its clients work
unchanged, and nmt's own (`POST /v1/translate`, answering what `nmt translate --format jsonl` prints).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import html
import json
import logging
import mimetypes
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from nmt.apps.files import KINDS, SERVER_LIMITS, FileLimits, FileRefused, file_kind, translate_file
from nmt.apps.webpages import translate_html
from nmt.decoding.alignment import align
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translation, Translator
from nmt.errors import NmtError
from nmt.text.language import detect, is_not_english
from nmt.text.tokenizer import without_surrogates

log = logging.getLogger("nmt")

PAGE = Path(__file__).with_name("serve_page.html")
LANGUAGES = [{"code": "en", "name": "English", "targets": ["fr"]}, {"code": "fr", "name": "French", "targets": []}]
MAX_KEPT_FILES = 64  # translated files /download_file serves: the last ones


class QueueFull(Exception):
    """More lines wait than the queue holds."""


class NotReady(Exception):
    """The model is still loading."""


@dataclass
class Job:
    """One request's lines on the engine's queue: `taken` of them are being or have been translated."""

    lines: list[str]
    options: SearchOptions
    done: Callable[[list[Translation] | BaseException], None]
    formality: str | None = None  # formal, informal or auto; None: the server's
    results: list[Translation | None] = field(default_factory=list)
    taken: int = 0
    left: int = 0

    def __post_init__(self):
        self.results = [None] * len(self.lines)
        self.left = len(self.lines)


class Cancelled(Exception):
    """A file's translation stopped before its end: its client went away, its time ran out, or the server is
    stopping."""


class Engine:
    """The thread that owns the Translator and decodes the queued lines of all requests together."""

    def __init__(self, load: Callable[[], Translator], *, max_lines: int = 64, wait: float = 0.005,
                 max_queue: int = 2000):
        """load: builds the Translator (in the engine's thread, so the server answers while it loads).
        max_lines: lines in one translate call; wait: seconds the first request waits for company;
        max_queue: lines that may wait before new requests are turned away."""
        self._load = load
        self.max_lines, self.wait, self.max_queue = max_lines, wait, max_queue
        self.on_batch: Callable[[int], None] = lambda lines: None  # told the size of each translate call
        self._jobs: collections.deque[Job] = collections.deque()
        self._waiting = 0  # lines queued and not yet taken
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
            dropped = list(self._jobs) if drop_queued else []
            if drop_queued:
                self._jobs.clear()
                self._waiting = 0
            self._lock.notify_all()
        for job in dropped:
            job.done(Cancelled("the server is stopping"))
        self._thread.join(wait)

    def submit(self, lines: list[str], options: SearchOptions,
               done: Callable[[list[Translation] | BaseException], None], formality: str | None = None) -> None:
        """Queue `lines`; done(translations in order) is called from the engine thread once all are done,
        or done(exception) if their translation failed. formality: the register asked for (None: the
        server's). Raises NotReady or QueueFull."""
        if not self.ready.is_set():
            raise NotReady
        if not lines:
            done([])
            return
        with self._lock:
            if self._waiting + len(lines) > self.max_queue:
                raise QueueFull
            self._jobs.append(Job(lines, options, done, formality))
            self._waiting += len(lines)
            self._lock.notify_all()

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

    def _take(self) -> tuple[SearchOptions, str | None, list[tuple[Job, int, int]]] | None:
        """The next call's (options, formality, [(job, start, end)]): lines of the queued jobs with the first
        job's options and formality, in queue order, up to max_lines, after waiting up to `wait` for more to
        come. None once stopping with nothing queued."""
        with self._lock:
            while not self._jobs:
                if self._stopping:
                    return None
                self._lock.wait()
            deadline = time.monotonic() + self.wait
            while self._waiting < self.max_lines and not self._stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(remaining)
            options, formality = self._jobs[0].options, self._jobs[0].formality
            spans, room = [], self.max_lines
            for job in list(self._jobs):
                if room == 0:
                    break
                if job.options != options or job.formality != formality:
                    continue
                start = job.taken
                job.taken = min(len(job.lines), start + room)
                spans.append((job, start, job.taken))
                room -= job.taken - start
                if job.taken == len(job.lines):
                    self._jobs.remove(job)
            self._waiting -= self.max_lines - room
            return options, formality, spans

    def _translate(self, options: SearchOptions, formality: str | None, spans: list[tuple[Job, int, int]]) -> None:
        lines = [line for job, start, end in spans for line in job.lines[start:end]]
        owners = [(job, index) for job, start, end in spans for index in range(start, end)]
        self.on_batch(len(lines))
        self.translator.options = options
        self.translator.formality = formality or self.default_formality
        try:
            for position, translation in self.translator.translate_as_ready(lines):
                job, index = owners[position]
                job.results[index] = translation
                job.left -= 1
                if job.left == 0:
                    job.done(job.results)
        except Exception as exc:  # noqa: BLE001 - each waiting request answers with the error
            jobs = [job for job in {id(job): job for job, _, _ in spans}.values() if job.left]
            if len(jobs) > 1:  # one request's lines must not fail the others': each on its own
                for job, start, end in spans:
                    if job.left:
                        self._translate(options, formality, [(job, start, end)])
                return
            log.error("translation failed: %s", exc)
            for job in jobs:
                job.left = 0
                job.done(exc)


@dataclass(frozen=True)
class ServeSettings:
    max_chars: int = 20_000  # characters of text in one request
    api_key: str | None = None
    model_name: str = ""
    decoding: dict | None = None  # the resolved decoding configuration (nmt.decoding.configuration), shown by /health
    read_timeout: float = 30.0  # seconds a client may take to send its headers, and each part of its body
    max_file_bytes: int = 10_000_000  # the largest file /translate_file takes
    file_limits: FileLimits = SERVER_LIMITS  # what one file may cost (characters, nesting, a zip's inflation)
    max_file_seconds: float = 600.0  # a file's translation stops after this long (checked between batches)
    registers: bool = False  # whether the model knows the register tags (a request may ask for formality)

    @property
    def max_body_bytes(self) -> int:
        """The largest body a request may have: max_chars of text at the most bytes JSON can spend on a
        character (6, as \\uXXXX), and room for the rest of the request."""
        return 6 * self.max_chars + 65_536


# A request's formality: DeepL's values (prefer_*: where the model cannot, its own choice instead of an error)
# and nmt's own (`nmt translate --formality`), and the register each asks for (None: the server's)
FORMALITY_REQUESTS = {"default": None, "more": "formal", "less": "informal", "prefer_more": "formal",
                      "prefer_less": "informal", "formal": "formal", "informal": "informal", "auto": "auto"}
Formality = Literal["default", "more", "less", "prefer_more", "prefer_less", "formal", "informal", "auto"]


def requested_formality(value: str | None, registers: bool) -> str | None:
    """The register a request's formality asks for (None: the server's); ValueError where the model cannot give
    it and the request does not say prefer_."""
    register = FORMALITY_REQUESTS[value] if value else None
    if register in (None, "auto") or registers:
        return register
    if value.startswith("prefer_"):
        return "auto"
    raise ValueError(f"formality {value!r}: this model was not trained with register tags; send prefer_more, "
                     "prefer_less or default")


# The page's choice of register, where the model has register tags: "default" is the server's (--formality)
FORMALITY_FIELD = ('<label>Register <select id="formality"><option value="default">default</option>'
                   '<option value="more">formal (vous)</option><option value="less">informal (tu)</option>'
                   '</select></label>')


def content_disposition(filename: str) -> str:
    """An attachment header for any file name: an ASCII one quoted, any other (John’s report, Cyrillic, emoji)
    also in RFC 5987's filename* (the header itself must be Latin-1)."""
    from urllib.parse import quote

    ascii_name = "".join(char if 32 <= ord(char) < 127 and char not in '"\\' else "_" for char in filename)
    if ascii_name == filename:
        return f'attachment; filename="{filename}"'
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}"


def cleaned(text: str) -> str:
    """A request's text as the model may read it and an answer may hold it: a lone surrogate (JSON's "\\ud800",
    which no UTF-8 holds; nmt.text.tokenizer.without_surrogates) and the C0 controls but tab and newline replaced by
    U+FFFD."""
    return CONTROLS.sub("\ufffd", without_surrogates(text))


CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


class LibreRequest(BaseModel):
    """LibreTranslate's request body."""

    q: str | list[str]
    source: str = "auto"
    target: str | None = None
    format: str = "text"
    api_key: str | None = None
    alternatives: Annotated[int, Field(ge=0, le=8)] = 0
    formality: Formality | None = None


class DetectRequest(BaseModel):
    """LibreTranslate's detect body."""

    q: str
    api_key: str | None = None


class NmtRequest(BaseModel):
    """nmt's own request body: lines and decoding options over the server's."""

    model_config = ConfigDict(extra="forbid")

    text: list[str]
    beam: Annotated[int, Field(ge=1, le=32)] | None = None
    lenpen: Annotated[float, Field(ge=0, le=5)] | None = None
    nbest: Annotated[int, Field(ge=1, le=32)] = 1
    no_repeat_ngram: Annotated[int, Field(ge=0, le=16)] | None = None
    formality: Formality | None = None
    api_key: str | None = None


class Metrics:
    """The server's Prometheus metrics, in a registry of its own."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("nmt_requests", "HTTP requests by path and status code", ["path", "code"],
                                registry=self.registry)
        self.lines = Counter("nmt_lines", "Lines translated", registry=self.registry)
        self.tokens = Counter("nmt_source_tokens", "Source tokens (sentencepiece pieces) translated",
                              registry=self.registry)
        self.batch = Histogram("nmt_batch_lines", "Lines decoded in one translate call", registry=self.registry,
                               buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.latency = Histogram("nmt_request_seconds", "Time from a translation request to its answer",
                                 registry=self.registry,
                                 buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30))
        self.waiting = Gauge("nmt_queue_lines", "Lines waiting to be translated", registry=self.registry)


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


class BoundedBodies:
    """An ASGI wrapper that reads each request's body before the application sees any of it, within bounds:
    a wrong API key in the Authorization header is a 401 and a Content-Length over the limit a 413 before a
    byte of the body is read; a body that grows past it
    while read (chunked) is a 413 as soon as it does; a client that takes longer than `timeout` seconds to
    send the next part of its body is a 408. The application then reads the body from memory."""

    def __init__(self, app, limit: int, timeout: float, api_key: str | None = None, file_limit: int | None = None):
        self.app, self.limit, self.timeout, self.api_key = app, limit, timeout, api_key
        self.file_limit = file_limit or limit  # for /translate_file's uploads

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        bearer = headers.get(b"authorization", b"")
        if self.api_key is not None and bearer[:7].lower() == b"bearer " and not secrets.compare_digest(
                bearer[7:], self.api_key.encode()):  # a wrong key in the header: before the body is read
            return await self._refuse(send, 401, "a valid api_key is required")
        limit = self.file_limit if scope["path"] == "/translate_file" else self.limit
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await self._refuse(send, 413, f"the request body is over {limit} bytes")
        parts, size = [], 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), self.timeout)
            except asyncio.TimeoutError:
                return await self._refuse(send, 408, f"the request body did not arrive within {self.timeout:g} s")
            if message["type"] == "http.disconnect":
                return None
            parts.append(message.get("body", b""))
            size += len(parts[-1])
            if size > limit:
                return await self._refuse(send, 413, f"the request body is over {limit} bytes")
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(parts), False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()  # the disconnect, when the client goes
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(send, status: int, message: str) -> None:
        payload = json.dumps({"error": message}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload})


def create_app(engine: Engine, base_options: SearchOptions, settings: ServeSettings):
    """The ASGI application over a started Engine: FastAPI's, behind BoundedBodies."""
    app = FastAPI(title="nmt", summary="English to French translation", version="1",
                  description="LibreTranslate's API (`/translate`, `/languages`) and nmt's own (`/v1/translate`).")
    metrics = Metrics()
    engine.on_batch = metrics.batch.observe

    @app.middleware("http")
    async def count(request: Request, call_next):
        response = await call_next(request)
        route = request.scope.get("route")  # the route's template: a label per route, never per raw path
        metrics.requests.labels(getattr(route, "path", "unmatched"), str(response.status_code)).inc()
        return response

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))  # an unknown path: LibreTranslate's shape too

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, _describe(exc.errors()))

    def authorized(request: Request, given: str | None) -> bool:
        if settings.api_key is None:
            return True
        header = request.headers.get("authorization", "")
        given = given or (header[7:] if header.lower().startswith("bearer ") else None)
        return given is not None and secrets.compare_digest(given.encode(), settings.api_key.encode())

    async def translate_lines(texts: list[str], options: SearchOptions,
                              formality: str | None = None) -> list[list[Translation]] | JSONResponse:
        """Each text's lines (split at newlines) translated, or the error response; formality as
        requested_formality gives it."""
        if sum(len(text) for text in texts) > settings.max_chars:
            return _error(413, f"the request holds more than {settings.max_chars} characters of text (--max-chars)")
        lines = [line for text in texts for line in text.split("\n")]
        if len(lines) > engine.max_queue:  # would never fit the queue: not a matter of waiting
            return _error(413, f"the request holds {len(lines)} lines, more than the {engine.max_queue} that may "
                               "wait (--max-queue): send fewer at a time")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()

        def done(result):
            loop.call_soon_threadsafe(_settle, answer, result)

        started = time.perf_counter()
        try:
            engine.submit(lines, options, done, formality)
        except NotReady:
            return _error(503, "the model is still loading", **{"Retry-After": "1"})
        except QueueFull:
            return _error(503, f"more than {engine.max_queue} lines are waiting (--max-queue); try again shortly",
                          **{"Retry-After": "1"})
        metrics.waiting.set(engine.waiting)
        result = await answer
        if isinstance(result, BaseException):
            return _error(500, f"translation failed: {result}")
        metrics.latency.observe(time.perf_counter() - started)
        metrics.lines.inc(len(lines))
        metrics.tokens.inc(sum(len(engine.translator.tokenizer.encode(line)) for line in lines))
        grouped, start = [], 0
        for text in texts:
            count = text.count("\n") + 1
            grouped.append(result[start : start + count])
            start += count
        return grouped

    async def libre_body(request: Request, model: type[BaseModel]) -> BaseModel | JSONResponse:
        """A LibreTranslate request's body, JSON or form-encoded, or the error response."""
        try:
            if request.headers.get("content-type", "").startswith("application/json"):
                return model.model_validate(await request.json())
            form = await request.form()
            fields = {key: form.getlist(key) if key == "q" and len(form.getlist(key)) > 1 else value
                      for key, value in form.items()}
            return model.model_validate(fields)
        except ValueError as exc:  # ValidationError, and JSON that does not parse
            return _error(422, _describe(exc.errors()) if isinstance(exc, ValidationError) else "the body is not JSON")
        except RecursionError:
            return _error(400, "the body nests too deeply")

    def libre_schema(model: type[BaseModel]) -> dict:
        schema = model.model_json_schema()
        return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema},
                                                              "application/x-www-form-urlencoded": {"schema": schema}}}}

    @app.post("/translate", openapi_extra=libre_schema(LibreRequest))
    async def translate(request: Request):
        """LibreTranslate's translate: `q` a string or a list of strings, English (or "auto": refused when
        the text is confidently in another language) to French."""
        body = await libre_body(request, LibreRequest)
        if isinstance(body, JSONResponse):
            return body
        if not authorized(request, body.api_key):
            return _error(401, "a valid api_key is required")
        if body.target is None:
            return _error(400, "Invalid request: missing target parameter")
        if body.source not in ("en", "auto") or body.target != "fr":
            return _error(400, f"nmt translates en to fr, not {body.source} to {body.target}")
        if body.format not in ("text", "html"):
            return _error(400, f"format {body.format!r} is not supported; send text or html")
        try:
            formality = requested_formality(body.formality, settings.registers)
        except ValueError as exc:
            return _error(400, str(exc))
        texts = [cleaned(text) for text in ([body.q] if isinstance(body.q, str) else body.q)]
        detected = []
        if body.source == "auto":
            for text in texts:
                plain = re.sub(r"<[^>]*>", " ", text) if body.format == "html" else text
                guesses = await asyncio.to_thread(detect, plain)
                if is_not_english(guesses):
                    return _error(400, f"the text looks {guesses[0].language}, not English "
                                       f"({guesses[0].confidence:g}% sure): nmt translates English to French")
                english = next((guess.confidence for guess in guesses if guess.language == "en"), 0.0)
                detected.append({"language": "en", "confidence": english})
        if body.format == "html":  # each text a fragment of a page: its markup kept (nmt.apps.webpages)
            if sum(len(text) for text in texts) > settings.max_chars:
                return _error(413, f"the request holds more than {settings.max_chars} characters (--max-chars)")
            if not engine.ready.is_set():
                return _error(503, "the model is still loading", **{"Retry-After": "1"})
            lines = functools.partial(lines_now, formality=formality)
            pages = [await asyncio.to_thread(translate_html, text, lines, aligned) for text in texts]
            answer = {"translatedText": pages[0] if isinstance(body.q, str) else pages}
            if detected:
                answer["detectedLanguage"] = detected[0] if isinstance(body.q, str) else detected
            return answer
        nbest = min(body.alternatives + 1, base_options.beam_size) if body.alternatives else 1
        found = await translate_lines(texts, dataclasses.replace(base_options, nbest=nbest), formality)
        if isinstance(found, JSONResponse):
            return found
        translated = ["\n".join(t.text for t in lines) for lines in found]
        answer = {"translatedText": translated[0] if isinstance(body.q, str) else translated}
        if body.alternatives:  # a translation memory's fuzzy match first, then the model's other hypotheses
            alternatives = [([lines[0].memory["translation"]] if lines[0].memory and lines[0].memory["match"] == "fuzzy"
                             else []) + [text for text, _ in lines[0].nbest[1:]] if len(lines) == 1 else []
                            for lines in found]
            alternatives = [texts[:body.alternatives] for texts in alternatives]
            answer["alternatives"] = alternatives[0] if isinstance(body.q, str) else alternatives
        if detected:
            answer["detectedLanguage"] = detected[0] if isinstance(body.q, str) else detected
        return answer

    @app.post("/detect", openapi_extra=libre_schema(DetectRequest))
    async def detect_language(request: Request):
        """LibreTranslate's detect: the likeliest languages of `q`, with their confidence in percent."""
        body = await libre_body(request, DetectRequest)
        if isinstance(body, JSONResponse):
            return body
        if not authorized(request, body.api_key):
            return _error(401, "a valid api_key is required")
        if len(body.q) > settings.max_chars:
            return _error(413, f"the request holds more than {settings.max_chars} characters of text (--max-chars)")
        return [guess.to_dict() for guess in await asyncio.to_thread(detect, cleaned(body.q))]

    finished_files: collections.OrderedDict[str, tuple[bytes, str]] = collections.OrderedDict()

    def lines_now(texts: list[str], should_stop: Callable[[], str | None] = lambda: None,
                  formality: str | None = None) -> list[str]:
        """Translations of `texts` through the engine's queue, waited for (from a worker thread), a share of
        the queue at a time; Cancelled as soon as `should_stop()` says why (checked between shares and while
        waiting: what is queued is translated, no more). formality: as requested_formality gives it."""
        translated: list[str] = []
        step = max(1, min(engine.max_queue // 2, 4 * engine.max_lines))
        for start in range(0, len(texts), step):
            if why := should_stop():
                raise Cancelled(why)
            arrived, box = threading.Event(), []

            def done(result, box=box, arrived=arrived):
                box.append(result)
                arrived.set()

            for _ in range(600):  # a full queue empties as others' requests are answered
                try:
                    engine.submit(texts[start : start + step], base_options, done, formality)
                    break
                except QueueFull:
                    time.sleep(0.1)
            else:
                raise QueueFull
            while not arrived.wait(0.25):
                if (why := should_stop()) and engine.stopping:
                    raise Cancelled(why)
            if isinstance(box[0], BaseException):
                raise box[0]
            translated.extend(t.text for t in box[0])
        return translated

    def aligned(source: str, target: str) -> list[tuple[int, int]]:
        return align(engine.translator.model, engine.translator.tokenizer, source, target)

    @app.post("/translate_file")
    async def translate_a_file(request: Request):
        """LibreTranslate's translate_file: a multipart `file` (.txt, .srt, .html, .docx) translated with its
        structure kept; the answer is the URL to download it from."""
        try:
            form = await request.form(max_files=1, max_fields=8, max_part_size=settings.max_file_bytes)
        except Exception as exc:  # noqa: BLE001 - Starlette's multipart errors: a bad or oversized form
            return _error(400, f"the request is not a form with one file: {exc}")
        upload = form.get("file")
        if not authorized(request, form.get("api_key")):
            return _error(401, "a valid api_key is required")
        if upload is None or isinstance(upload, str):
            return _error(400, "send the file to translate as the form field 'file'")
        if form.get("source", "auto") not in ("en", "auto") or form.get("target", "fr") != "fr":
            return _error(400, f"nmt translates en to fr, not {form.get('source')} to {form.get('target')}")
        asked = form.get("formality") or None
        try:
            if asked is not None and asked not in FORMALITY_REQUESTS:
                raise ValueError(f"formality must be one of {', '.join(FORMALITY_REQUESTS)}, not {asked!r}")
            formality = requested_formality(asked, settings.registers)
        except ValueError as exc:
            return _error(400, str(exc))
        kind = file_kind(upload.filename or "")
        if kind is None:
            return _error(400, f"cannot translate {upload.filename!r}: send one of {', '.join(sorted(KINDS))}")
        if not engine.ready.is_set():
            return _error(503, "the model is still loading", **{"Retry-After": "1"})
        data = await upload.read()
        gone, deadline = threading.Event(), time.monotonic() + settings.max_file_seconds

        def should_stop() -> str | None:
            if gone.is_set():
                return "the client went away"
            if engine.stopping:
                return "the server is stopping"
            if time.monotonic() > deadline:
                return f"the file took longer than {settings.max_file_seconds:g} s (--max-file-seconds)"
            return None

        work = asyncio.ensure_future(asyncio.to_thread(
            translate_file, kind, data, functools.partial(lines_now, should_stop=should_stop, formality=formality),
            aligned, settings.file_limits))
        try:
            while not work.done():  # the client may leave: its file's translation stops at the next share
                await asyncio.wait({work}, timeout=0.5)
                if not work.done() and await request.is_disconnected():
                    gone.set()
            translated = work.result()
        except FileRefused as exc:
            return _error(413 if exc.limit else 400, str(exc))
        except Cancelled as exc:
            return _error(503, f"the file's translation stopped: {exc}")
        except NmtError as exc:
            return _error(400, str(exc))
        except QueueFull:
            return _error(503, "the server is too busy to take a file now", **{"Retry-After": "10"})
        finally:
            gone.set()  # cancelled too (the server stopping): the worker thread stops at its next check
        token = secrets.token_urlsafe(16)
        stem, suffix = Path(upload.filename).stem, Path(upload.filename).suffix
        finished_files[token] = (translated, f"{stem}.fr{suffix}")
        while len(finished_files) > MAX_KEPT_FILES:
            finished_files.popitem(last=False)
        return {"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{token}/{stem}.fr{suffix}"}

    @app.get("/download_file/{token}/{name}")
    async def download_file(token: str, name: str):
        """A file /translate_file translated (the last MAX_KEPT_FILES are kept)."""
        if token not in finished_files:
            return _error(404, "no such translated file (the server keeps the last few only)")
        data, filename = finished_files[token]
        media = mimetypes.guess_type(filename)[0] or "application/octet-stream"
        return Response(data, media_type=media, headers={"Content-Disposition": content_disposition(filename)})

    @app.post("/suggest")
    async def suggest():
        """LibreTranslate's suggestions, which this server does not take."""
        return _error(403, "Suggestions are disabled on this server.")

    @app.get("/frontend/settings")
    async def frontend_settings() -> dict:
        """LibreTranslate's settings for its web client."""
        return {"charLimit": settings.max_chars, "frontendTimeout": 500, "suggestions": False,
                "filesTranslation": True, "supportedFilesFormat": sorted(KINDS),
                "apiKeys": settings.api_key is not None, "keyRequired": settings.api_key is not None,
                "language": {"source": {"code": "en", "name": "English"}, "target": {"code": "fr", "name": "French"}}}

    @app.get("/languages")
    async def languages() -> list[dict]:
        """LibreTranslate's list of languages: English, translated to French."""
        return LANGUAGES

    @app.post("/v1/translate")
    async def translate_v1(body: NmtRequest, request: Request):
        """nmt's translate: one record per line, as `nmt translate --format jsonl` prints them."""
        if not authorized(request, body.api_key):
            return _error(401, "a valid api_key is required")
        if any("\n" in text for text in body.text):
            return _error(422, "text: each item is one line, without newlines")
        chosen = {"beam_size": body.beam, "lenpen": body.lenpen, "no_repeat_ngram": body.no_repeat_ngram}
        try:
            options = dataclasses.replace(base_options, nbest=body.nbest,
                                          **{key: value for key, value in chosen.items() if value is not None})
            formality = requested_formality(body.formality, settings.registers)
        except ValueError as exc:
            return _error(422, str(exc))
        found = await translate_lines([cleaned(text) for text in body.text], options, formality)
        if isinstance(found, JSONResponse):
            return found
        return {"translations": [lines[0].to_dict() for lines in found]}

    @app.get("/health")
    async def health():
        """200 once the model is loaded and the server translates; 503 before."""
        if engine.ready.is_set():
            return {"status": "ok", "model": settings.model_name, "decoding": settings.decoding}
        if engine.failure is not None:
            return _error(503, f"the model could not be loaded: {engine.failure}")
        return _error(503, "the model is loading", **{"Retry-After": "1"})

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        """Prometheus metrics: requests, lines, tokens, batch sizes, latency."""
        metrics.waiting.set(engine.waiting)
        return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> str:
        key_field = "" if settings.api_key is None else '<input id="key" type="password" placeholder="API key">'
        model = html.escape(settings.model_name or "a checkpoint")
        formality = FORMALITY_FIELD if settings.registers else ""
        return (PAGE.read_text(encoding="utf-8").replace("{{API_KEY_FIELD}}", key_field).replace("{{MODEL}}", model)
                .replace("{{FORMALITY_FIELD}}", formality))

    return BoundedBodies(app, settings.max_body_bytes, settings.read_timeout, settings.api_key,
                         settings.max_file_bytes + 65_536)


class TimedHeaders(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a bound on the time a request's line and headers may take to arrive
    (uvicorn has none: a client that sends a header a minute holds its connection for ever). The headers
    have `timeout` seconds from the connection's start, or on a kept-alive connection from the next
    request's first byte (uvicorn's keep-alive timeout closes one left idle). A client late with them gets a
    408 and the connection is closed; one that sent nothing is closed. The body has its own bound, in
    BoundedBodies. uvicorn.Config(http=functools.partial(TimedHeaders, timeout=30))."""

    def __init__(self, *args, timeout: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.headers_timeout = timeout
        self.headers_timer: asyncio.TimerHandle | None = None
        self.heard = False  # whether a byte of the request awaited has come

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._wait_for_headers()

    def data_received(self, data: bytes) -> None:
        if self.headers_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._wait_for_headers()  # the next request on a kept-alive connection begins
        self.heard = True
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request's headers arrived
            self._stop_waiting()

    def connection_lost(self, exc) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _wait_for_headers(self) -> None:
        self._stop_waiting()
        self.heard = False
        self.headers_timer = self.loop.call_later(self.headers_timeout, self._headers_late)

    def _stop_waiting(self) -> None:
        if self.headers_timer is not None:
            self.headers_timer.cancel()
            self.headers_timer = None

    def _headers_late(self) -> None:
        self.headers_timer = None
        if self.transport.is_closing():
            return
        if self.heard:
            body = json.dumps({"error": f"the request headers did not arrive within {self.headers_timeout:g} s"})
            self.transport.write(f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                 f"content-length: {len(body)}\r\nconnection: close\r\n\r\n{body}".encode())
        self.transport.close()


class Server(uvicorn.Server):
    """uvicorn's server, which after a graceful stop on SIGTERM or SIGINT returns instead of raising the
    signal again: `nmt serve` then exits 0 once the requests in flight are answered. `on_exit` is told of the
    signal first (the engine: a file job in flight stops at its next batch instead of holding the drain)."""

    on_exit: Callable[[], None] = staticmethod(lambda: None)

    def handle_exit(self, sig, frame) -> None:
        self.on_exit()
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _settle(future: asyncio.Future, result) -> None:
    if not future.done():  # the client may have gone
        future.set_result(result)


def _describe(errors) -> str:
    """Pydantic's validation errors as one line: where, and what was wrong."""
    parts = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        parts.append(f"{where}: {error.get('msg', 'invalid')}" if where else error.get("msg", "invalid"))
    return "; ".join(parts) or "invalid request"
