"""The server's routes: LibreTranslate's (`/translate`, `/detect`, `/translate_file`, `/languages`, ...), nmt's
own (`/v1/translate`, `/health`, `/metrics`) and the page, over a started Engine, behind BoundedBodies.

Every translation route first admits the request (Service.admit: its API key, then its client's requests a
minute), then queues its lines under its client (Service.translate_lines): a client that leaves has its lines
dropped, and a request has --max-request-seconds. Files and HTML pages are translated in a pool of their own
(--max-file-jobs), and language detection in another, so neither waits behind the other.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import html
import mimetypes
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from nmt.apps.files import KINDS, SERVER_LIMITS, FileRefused, file_kind, translate_file
from nmt.apps.server.config import ServeSettings
from nmt.apps.server.engine import Cancelled, Engine, NotReady, QueueFull, joined, shares
from nmt.apps.server.limits import BoundedBodies, RateLimits, bearer_key
from nmt.apps.server.protocol import (
    CHECK_HEADERS,
    FORMALITY_FIELD,
    FORMALITY_REQUESTS,
    DetectRequest,
    LibreRequest,
    NmtRequest,
    cleaned,
    content_disposition,
    describe,
    error,
    is_connection_check,
    requested_formality,
)
from nmt.apps.webpages import HTML, Markup, translate_html
from nmt.decoding.alignment import align
from nmt.decoding.constraints import Glossary
from nmt.decoding.search import SearchOptions
from nmt.decoding.translate import Translation
from nmt.errors import NmtError
from nmt.text.language import detect, is_not_english

PAGE = Path(__file__).with_name("page.html")
LANGUAGES = [{"code": "en", "name": "English", "targets": ["fr"]}, {"code": "fr", "name": "French", "targets": []}]
MAX_KEPT_FILES = 64  # translated files /download_file serves: the last ones
LOADING_POLL = 0.05  # seconds between two looks at whether the model is loaded, for a request that waits


class Metrics:
    """The server's Prometheus metrics, in a registry of its own."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("nmt_requests", "HTTP requests by route and status code", ["path", "code"],
                                registry=self.registry)
        self.lines = Counter("nmt_lines", "Lines translated", registry=self.registry)
        self.tokens = Counter("nmt_source_tokens", "Source tokens translated, as the model reads them "
                              "(Translator.cost)", registry=self.registry)
        self.batch = Histogram("nmt_batch_lines", "Lines decoded in one translate call", registry=self.registry,
                               buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.latency = Histogram("nmt_request_seconds", "Time from a translation request to its answer",
                                 registry=self.registry,
                                 buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30))
        self.waiting = Gauge("nmt_queue_lines", "Lines waiting to be translated", registry=self.registry)
        self.call = Histogram("nmt_call_seconds", "Time one translate call held the engine", registry=self.registry,
                              buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))

    def observe_call(self, lines: int, seconds: float) -> None:
        self.batch.observe(lines)
        self.call.observe(seconds)


class Service:
    """What the routes share: the engine, the settings, the metrics, the rate limits, the pools for files and
    for detection, and the translated files kept for download."""

    def __init__(self, engine: Engine, base_options: SearchOptions, settings: ServeSettings):
        self.engine, self.base_options, self.settings = engine, base_options, settings
        self.metrics = Metrics()
        engine.on_call = self.metrics.observe_call
        self.rates = RateLimits(settings.req_limit, settings.api_keys)
        self.file_pool = ThreadPoolExecutor(settings.max_file_jobs, thread_name_prefix="nmt-file")
        self.file_slots = threading.BoundedSemaphore(settings.max_file_jobs)
        self.detect_pool = ThreadPoolExecutor(2, thread_name_prefix="nmt-detect")
        self.finished_files: collections.OrderedDict[str, tuple[bytes, str]] = collections.OrderedDict()

    def admit(self, request: Request, given: str | None) -> JSONResponse | None:
        """None if the request may go on, else its answer: 401 without a key the server takes (the body's
        `given`, or Authorization: Bearer), 429 over its requests a minute."""
        keys = self.settings.api_keys
        given = given or bearer_key(request.scope)
        key = keys.find(given)
        if keys and key is None:  # counted against the address's requests a minute too: no free guessing
            wait = self.rates.charge(client_address(request), None)
            if wait is not None:
                return error(429, "too many requests: over the requests a minute this client may make (--req-limit)",
                             **{"Retry-After": f"{wait:.0f}"})
            return error(401, "a valid api_key is required")
        wait = self.rates.charge(client_address(request), key)
        if wait is not None:
            return error(429, "too many requests: over the requests a minute this client may make (--req-limit)",
                         **{"Retry-After": f"{wait:.0f}"})
        return None

    def client(self, request: Request, given: str | None = None) -> str:
        """Whose turn a request's lines take in the engine: its API key, else its address."""
        key = self.settings.api_keys.find(given or bearer_key(request.scope))
        return f"key:{key}" if key is not None else f"address:{client_address(request)}"

    async def translate_lines(self, request: Request, texts: list[str], options: SearchOptions,
                              formality: str | None = None, given_key: str | None = None,
                              glossary: Glossary | None = None) -> list[list[Translation]] | JSONResponse:
        """Each text's lines (split at newlines) translated, or the error response; formality as
        requested_formality gives it; glossary, the request's terms (None: the server's). The lines are dropped
        if the client leaves or the time runs out."""
        settings, engine = self.settings, self.engine
        if sum(len(text) for text in texts) > settings.max_chars:
            return error(413, f"the request holds more than {settings.max_chars} characters of text (--char-limit)")
        if waited := await self.until_loaded(request):
            return waited
        lines = [line for text in texts for line in text.split("\n")]
        # a long line as its sentences, which take turns as lines do; counted off the event loop
        pieces = await asyncio.to_thread(lambda: [engine.pieces(line) for line in lines])
        items = [piece for line_pieces in pieces for piece, _ in line_pieces]
        costs = [cost for line_pieces in pieces for _, cost in line_pieces]
        if (tokens := sum(costs)) > settings.max_tokens:
            return error(413, f"the request's text is {tokens} tokens for the model, more than the "
                              f"{settings.max_tokens} one request may hold (--token-limit): send less at a time")
        if len(items) > engine.max_queue:  # would never fit the queue: not a matter of waiting
            return error(413, f"the request holds {len(items)} lines, more than the {engine.max_queue} that may "
                              "wait (--max-queue): send fewer at a time")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()
        started = time.perf_counter()
        try:
            job = engine.submit(items, options, lambda result: loop.call_soon_threadsafe(settle, answer, result),
                                formality, self.client(request, given_key), settings.max_request_seconds, glossary,
                                costs)
        except NotReady:  # not loaded again: the engine stopped meanwhile
            return error(503, "the model is not loaded", **{"Retry-After": "5"})
        except QueueFull:
            return error(503, "the queue is full (--max-queue, --max-queue-chars); try again shortly",
                         **{"Retry-After": "1"})
        self.metrics.waiting.set(engine.waiting)
        while not answer.done():
            await asyncio.wait({answer}, timeout=0.5)
            if not answer.done() and await request.is_disconnected():
                engine.cancel(job, "the client went away")
        result = answer.result()
        if isinstance(result, Cancelled):
            return error(503, f"the translation stopped: {result} (--max-request-seconds "
                              f"{settings.max_request_seconds:g})")
        if isinstance(result, BaseException):
            return error(500, f"translation failed: {result}")
        self.metrics.latency.observe(time.perf_counter() - started)
        self.metrics.lines.inc(len(lines))
        self.metrics.tokens.inc(tokens)
        translations, start = [], 0
        for line, line_pieces in zip(lines, pieces, strict=True):
            translations.append(joined(line, result[start : start + len(line_pieces)]))
            start += len(line_pieces)
        grouped, start = [], 0
        for text in texts:
            count = text.count("\n") + 1
            grouped.append(translations[start : start + count])
            start += count
        return grouped

    async def until_loaded(self, request: Request) -> JSONResponse | None:
        """None once the model is loaded, waited for (a request arriving while the server starts is held, not
        answered 503: Weblate and DeepL's clients read a 503 as "back off", Weblate for 30 minutes); a 503 where
        it is not loaded within --max-request-seconds, or the client leaves first."""
        engine, waited = self.engine, 0.0
        while not engine.ready.is_set():
            if engine.failure is not None or waited >= self.settings.max_request_seconds:
                return error(503, "the model is not loaded" + (f": {engine.failure}" if engine.failure else
                                                               f" after {waited:.0f} s"), **{"Retry-After": "5"})
            if await request.is_disconnected():
                return error(503, "the client went away while the model loaded")
            await asyncio.sleep(LOADING_POLL)
            waited += LOADING_POLL
        return None

    def lines_now(self, texts: list[str], client: str, should_stop: Callable[[], str | None] = lambda: None,
                  formality: str | None = None, glossary: Glossary | None = None) -> list[str]:
        """Translations of `texts` through the engine's queue, waited for (from a worker thread), a share of
        the queue at a time; Cancelled as soon as `should_stop()` says why (checked between shares and while
        waiting: the share queued is dropped). formality: as requested_formality gives it; glossary: the
        request's terms (None: the server's)."""
        engine = self.engine
        translated: list[str] = []
        for lines in shares(texts, max(1, min(engine.max_queue // 2, 4 * engine.max_lines)),
                            engine.max_queue_chars // 2):
            pieces = [engine.pieces(line) for line in lines]  # a long paragraph as its sentences, as translate_lines
            if why := should_stop():
                raise Cancelled(why)
            arrived, box = threading.Event(), []

            def done(result, box=box, arrived=arrived):
                box.append(result)
                arrived.set()

            share = [piece for line_pieces in pieces for piece, _ in line_pieces]
            costs = [cost for line_pieces in pieces for _, cost in line_pieces]
            for _ in range(600):  # a full queue empties as others' requests are answered
                try:
                    job = engine.submit(share, self.base_options, done, formality, client, glossary=glossary,
                                        costs=costs)
                    break
                except QueueFull:
                    time.sleep(0.1)
            else:
                raise QueueFull
            while not arrived.wait(0.25):
                if why := should_stop():
                    engine.cancel(job, why)
            if isinstance(box[0], BaseException):
                raise box[0]
            done_pieces = iter(box[0])
            translated.extend(joined(line, [next(done_pieces) for _ in line_pieces]).text
                              for line, line_pieces in zip(lines, pieces, strict=True))
        return translated

    async def tagged(self, request: Request, texts: list[str], markup: Markup, formality: str | None,
                     given_key: str | None, glossary: Glossary | None = None) -> list[str] | JSONResponse:
        """`texts` holding tags (HTML, or XML: `markup`) translated with their tags kept (nmt.apps.webpages), in
        the file pool, or the error response."""
        settings = self.settings
        if sum(len(text) for text in texts) > settings.max_chars:
            return error(413, f"the request holds more than {settings.max_chars} characters (--char-limit)")
        if waited := await self.until_loaded(request):
            return waited
        gone = threading.Event()
        lines = functools.partial(self.lines_now, client=self.client(request, given_key),
                                  should_stop=lambda: "the client went away" if gone.is_set() else None,
                                  formality=formality, glossary=glossary)
        try:
            return [await self.in_file_pool(functools.partial(translate_html, text, lines, self.aligned, markup), gone,
                                            request) for text in texts]
        except QueueFull:
            return error(503, f"{settings.max_file_jobs} files and pages are being translated (--max-file-jobs); "
                              "try again shortly", **{"Retry-After": "5"})
        except Cancelled as exc:
            return error(503, f"the translation stopped: {exc}")

    def aligned(self, source: str, target: str) -> list[tuple[int, int]]:
        return align(self.engine.translator.model, self.engine.translator.tokenizer, source, target)

    async def in_file_pool(self, work: Callable, gone: threading.Event, request: Request):
        """work() in the file pool, watching for the client to leave (then `gone` is set: the work stops at its
        next check); QueueFull at once when every slot is busy."""
        if not self.file_slots.acquire(blocking=False):
            raise QueueFull
        try:
            running = asyncio.get_running_loop().run_in_executor(self.file_pool, work)
            while not running.done():
                await asyncio.wait({running}, timeout=0.5)
                if not running.done() and await request.is_disconnected():
                    gone.set()
            return running.result()
        finally:
            gone.set()  # cancelled too (the server stopping): the worker thread stops at its next check
            self.file_slots.release()

    async def detected(self, text: str):
        return await asyncio.get_running_loop().run_in_executor(self.detect_pool, detect, text)


def create_app(engine: Engine, base_options: SearchOptions, settings: ServeSettings,
               more_routes: Sequence[Callable[[FastAPI, Service], None]] = ()):
    """The ASGI application over a started Engine: FastAPI's, behind BoundedBodies; `more_routes` add other APIs'
    routes over the same service (nmt.apps.server.deepl)."""
    app = FastAPI(title="nmt", summary="English to French translation", version="1",
                  description="LibreTranslate's API (`/translate`, `/languages`), DeepL's (`/v2/translate`) and "
                              "nmt's own (`/v1/translate`).")
    service = Service(engine, base_options, settings)
    add_handlers(app, service.metrics)
    add_text_routes(app, service)
    add_file_routes(app, service)
    add_information_routes(app, service)
    for add in more_routes:
        add(app, service)
    # the bodies arriving at once: four files, and 64 requests of the largest text
    budget = 4 * (settings.max_file_bytes + 65_536) + 64 * settings.max_body_bytes
    return BoundedBodies(app, settings.max_body_bytes, settings.read_timeout, settings.api_keys,
                         settings.max_file_bytes + 65_536, budget)


def add_handlers(app: FastAPI, metrics: Metrics) -> None:
    """Requests counted by route; every error in LibreTranslate's shape."""
    app.add_middleware(CountedRequests, metrics=metrics)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))  # an unknown path: LibreTranslate's shape too

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, describe(exc.errors()))


class CountedRequests:
    """An ASGI wrapper that counts each request by its route's template and status: a label per route, never per
    raw path. (Starlette's BaseHTTPMiddleware would hide the client's going away from the route.)"""

    def __init__(self, app, metrics: Metrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = [500]

        async def noted(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noted)
        finally:
            route = scope.get("route")
            self.metrics.requests.labels(getattr(route, "path", "unmatched"), str(status[0])).inc()


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
        return error(422, describe(exc.errors()) if isinstance(exc, ValidationError) else "the body is not JSON")
    except RecursionError:
        return error(400, "the body nests too deeply")


def libre_schema(model: type[BaseModel]) -> dict:
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema},
                                                          "application/x-www-form-urlencoded": {"schema": schema}}}}


def add_text_routes(app: FastAPI, service: Service) -> None:
    """/translate, /detect and /v1/translate."""
    settings = service.settings

    @app.post("/translate", openapi_extra=libre_schema(LibreRequest))
    async def translate(request: Request):
        """LibreTranslate's translate: `q` a string or a list of strings, English (or "auto": refused when
        the text is confidently in another language) to French."""
        body = await libre_body(request, LibreRequest)
        if isinstance(body, JSONResponse):
            return body
        if refused := service.admit(request, body.api_key) or refused_translation(body, settings):
            texts = [body.q] if isinstance(body.q, str) else body.q
            if body.target and body.target != "fr" and refused.status_code == 400 and is_connection_check(texts):
                return JSONResponse({"translatedText": body.q}, headers=CHECK_HEADERS)
            return refused
        formality = requested_formality(body.formality, settings.registers)
        texts = [cleaned(text) for text in ([body.q] if isinstance(body.q, str) else body.q)]
        if sum(len(text) for text in texts) > settings.max_chars:  # before detecting its language, which takes time
            return error(413, f"the request holds more than {settings.max_chars} characters of text (--char-limit)")
        detected = []
        if body.source == "auto":
            for text in texts:
                guesses = await service.detected(re.sub(r"<[^>]*>", " ", text) if body.format == "html" else text)
                if is_not_english(guesses):
                    return error(400, f"the text looks {guesses[0].language}, not English "
                                      f"({guesses[0].confidence:g}% sure): nmt translates English to French")
                english = next((guess.confidence for guess in guesses if guess.language == "en"), 0.0)
                detected.append({"language": "en", "confidence": english})
        one = isinstance(body.q, str)
        if body.format == "html" or (body.alternatives == 0 and any(map(has_inline_markup, texts))):
            answer = await translated_pages(service, request, texts, body, formality)
        elif body.alternatives == 0 and any(GLUED_MARKER.search(text) for text in texts):
            answer = await translated_with_markers(service, request, texts, body, formality)
        else:
            answer = await translated_texts(service, request, texts, body, formality)
        if isinstance(answer, JSONResponse):
            return answer
        answer = {field: value[0] if one else value for field, value in answer.items()}
        if detected:
            answer["detectedLanguage"] = detected[0] if one else detected
        return answer

    @app.post("/detect", openapi_extra=libre_schema(DetectRequest))
    async def detect_language(request: Request):
        """LibreTranslate's detect: the likeliest languages of `q`, with their confidence in percent."""
        body = await libre_body(request, DetectRequest)
        if isinstance(body, JSONResponse):
            return body
        if refused := service.admit(request, body.api_key):
            return refused
        if len(body.q) > settings.max_chars:
            return error(413, f"the request holds more than {settings.max_chars} characters of text (--char-limit)")
        return [guess.to_dict() for guess in await service.detected(cleaned(body.q))]

    @app.post("/v1/translate")
    async def translate_v1(body: NmtRequest, request: Request):
        """nmt's translate: one record per line, as `nmt translate --format jsonl` prints them."""
        if refused := service.admit(request, body.api_key):
            return refused
        if any("\n" in text for text in body.text):
            return error(422, "text: each item is one line, without newlines")
        chosen = {"beam_size": body.beam, "lenpen": body.lenpen, "no_repeat_ngram": body.no_repeat_ngram}
        try:
            options = dataclasses.replace(service.base_options, nbest=body.nbest,
                                          **{key: value for key, value in chosen.items() if value is not None})
            formality = requested_formality(body.formality, settings.registers)
        except ValueError as exc:
            return error(422, str(exc))
        found = await service.translate_lines(request, [cleaned(text) for text in body.text], options, formality,
                                              body.api_key)
        if isinstance(found, JSONResponse):
            return found
        return {"translations": [lines[0].to_dict() for lines in found]}


# An inline element around words, closed ("Click <strong>all</strong> files", as Weblate sends a string through
# LibreTranslate's API with format text): such a text is translated as HTML is, the words inside translated and the
# tags put back around their French, rather than the tags and their words copied as they are
INLINE_MARKUP = re.compile(r"<(a|b|strong|em|i|u|span|code|kbd|mark|small|sub|sup)(?:\s[^<>]*)?>[^<>]*</\1>",
                           re.IGNORECASE)


def has_inline_markup(text: str) -> bool:
    return INLINE_MARKUP.search(text) is not None


# Weblate sends a string's tags and formats through LibreTranslate's API as placeholders, "[X6X]": where one is glued
# to a word ("Click [X6X]all[X14X] files"), it marks a tag's place, and the words between two are translated and
# the placeholders put back around their French, as XML's empty elements are (nmt.apps.webpages)
MARKER = re.compile(r"\[X\d+X\]")
GLUED_MARKER = re.compile(r"\[X\d+X\](?=\w)|(?<=\w)\[X\d+X\]")
MARKER_ELEMENT = re.compile(r'<x id="(\d+)"></x>')


async def translated_with_markers(service: Service, request: Request, texts: list[str], body: LibreRequest,
                                  formality: str | None) -> dict | JSONResponse:
    """/translate's answer for texts holding Weblate's placeholders glued to words (GLUED_MARKER)."""
    markers: list[list[str]] = []
    documents = []
    for text in texts:
        found = MARKER.findall(text)
        markers.append(found)
        pieces = MARKER.split(html.escape(text, quote=False))
        documents.append("".join(piece + (f'<x id="{n}"></x>' if n < len(found) else "")
                                 for n, piece in enumerate(pieces)))
    translated = await service.tagged(request, documents, Markup(xml=True, kept=frozenset({"x"})), formality,
                                      body.api_key)
    if isinstance(translated, JSONResponse):
        return translated
    return {"translatedText": [html.unescape(MARKER_ELEMENT.sub(lambda m, own=own: own[int(m.group(1))], french))
                               for french, own in zip(translated, markers, strict=True)]}


def refused_translation(body: LibreRequest, settings: ServeSettings) -> JSONResponse | None:
    """The 400 a LibreTranslate request gets for what it asks (a language pair, a format, a formality, more
    texts than --batch-limit), or None."""
    if body.target is None:
        return error(400, "Invalid request: missing target parameter")
    if body.source not in ("en", "auto") or body.target != "fr":
        return error(400, f"nmt translates en to fr, not {body.source} to {body.target}")
    if body.format not in ("text", "html"):
        return error(400, f"format {body.format!r} is not supported; send text or html")
    if settings.batch_limit is not None and isinstance(body.q, list) and len(body.q) > settings.batch_limit:
        return error(400, f"Invalid request: request ({len(body.q)}) exceeds text limit ({settings.batch_limit})")
    try:
        requested_formality(body.formality, settings.registers)
    except ValueError as exc:
        return error(400, str(exc))
    return None


async def translated_texts(service: Service, request: Request, texts: list[str], body: LibreRequest,
                           formality: str | None) -> dict | JSONResponse:
    """/translate's answer for plain texts, each field a list with one value per text: the translation, and
    the alternatives asked for (a translation memory's fuzzy match first, then the model's other hypotheses)."""
    nbest = min(body.alternatives + 1, service.base_options.beam_size) if body.alternatives else 1
    found = await service.translate_lines(request, texts, dataclasses.replace(service.base_options, nbest=nbest),
                                          formality, body.api_key)
    if isinstance(found, JSONResponse):
        return found
    answer = {"translatedText": ["\n".join(t.text for t in lines) for lines in found]}
    if body.alternatives:
        alternatives = [([lines[0].memory["translation"]] if lines[0].memory and lines[0].memory["match"] == "fuzzy"
                         else []) + [text for text, _ in lines[0].nbest[1:]] if len(lines) == 1 else []
                        for lines in found]
        answer["alternatives"] = [texts[: body.alternatives] for texts in alternatives]
    return answer


async def translated_pages(service: Service, request: Request, texts: list[str], body: LibreRequest,
                           formality: str | None) -> dict | JSONResponse:
    """/translate's answer for HTML fragments, their markup kept (nmt.apps.webpages), in the file pool."""
    found = await service.tagged(request, texts, HTML, formality, body.api_key)
    return found if isinstance(found, JSONResponse) else {"translatedText": found}


def add_file_routes(app: FastAPI, service: Service) -> None:
    """/translate_file and /download_file."""
    settings = service.settings

    @app.post("/translate_file")
    async def translate_a_file(request: Request):
        """LibreTranslate's translate_file: a multipart `file` (.txt, .srt, .html, .docx, ...) translated with its
        structure kept; the answer is the URL to download it from."""
        try:
            form = await request.form(max_files=1, max_fields=8, max_part_size=settings.max_file_bytes)
        except Exception as exc:  # noqa: BLE001 - Starlette's multipart errors: a bad or oversized form
            return error(400, f"the request is not a form with one file: {exc}")
        upload, given = form.get("file"), form.get("api_key")
        if refused := service.admit(request, given if isinstance(given, str) else None):
            return refused
        if upload is None or isinstance(upload, str):
            return error(400, "send the file to translate as the form field 'file'")
        if form.get("source", "auto") not in ("en", "auto") or form.get("target", "fr") != "fr":
            return error(400, f"nmt translates en to fr, not {form.get('source')} to {form.get('target')}")
        asked = form.get("formality") or None
        try:
            if asked is not None and asked not in FORMALITY_REQUESTS:
                raise ValueError(f"formality must be one of {', '.join(FORMALITY_REQUESTS)}, not {asked!r}")
            formality = requested_formality(asked, settings.registers)
        except ValueError as exc:
            return error(400, str(exc))
        kind = file_kind(upload.filename or "")
        if kind is None:
            return error(400, f"cannot translate {upload.filename!r}: send one of {', '.join(sorted(KINDS))}")
        if waited := await service.until_loaded(request):
            return waited
        encoding = form.get("encoding")  # the file's character encoding, where no mark or declaration says it
        translated = await translated_file(service, request, kind, await upload.read(), formality,
                                           service.client(request, given if isinstance(given, str) else None),
                                           encoding if isinstance(encoding, str) and encoding else None)
        if isinstance(translated, JSONResponse):
            return translated
        token = secrets.token_urlsafe(16)
        stem, suffix = Path(upload.filename).stem, Path(upload.filename).suffix
        service.finished_files[token] = (translated, f"{stem}.fr{suffix}")
        while len(service.finished_files) > MAX_KEPT_FILES:
            service.finished_files.popitem(last=False)
        # the name percent-encoded: a URL holds no space, quote or non-ASCII letter as it is (curl and urllib refuse)
        return {"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{token}/"
                                     f"{urllib.parse.quote(f'{stem}.fr{suffix}', safe='')}"}

    @app.get("/download_file/{token}/{name}")
    async def download_file(token: str, name: str):
        """A file /translate_file translated (the last MAX_KEPT_FILES are kept)."""
        if token not in service.finished_files:
            return error(404, "no such translated file (the server keeps the last few only)")
        data, filename = service.finished_files[token]
        media = mimetypes.guess_type(filename)[0] or "application/octet-stream"
        return Response(data, media_type=media, headers={"Content-Disposition": content_disposition(filename)})



async def translated_file(service: Service, request: Request, kind: str, data: bytes, formality: str | None,
                          client: str, encoding: str | None = None) -> bytes | JSONResponse:
    """An uploaded file translated in the file pool, or the error response; it stops when its client leaves,
    its time runs out or the server stops."""
    settings, engine = service.settings, service.engine
    gone, deadline = threading.Event(), time.monotonic() + settings.max_file_seconds

    def should_stop() -> str | None:
        if gone.is_set():
            return "the client went away"
        if engine.stopping:
            return "the server is stopping"
        if time.monotonic() > deadline:
            return f"the file took longer than {settings.max_file_seconds:g} s (--max-file-seconds)"
        return None

    lines = functools.partial(service.lines_now, client=client, should_stop=should_stop, formality=formality)
    try:
        return await service.in_file_pool(
            functools.partial(translate_file, kind, data, lines, service.aligned,
                              settings.file_limits or SERVER_LIMITS, encoding=encoding), gone, request)
    except FileRefused as exc:
        return error(413 if exc.limit else 400, str(exc))
    except Cancelled as exc:
        return error(503, f"the file's translation stopped: {exc}")
    except NmtError as exc:
        return error(400, str(exc))
    except QueueFull:
        return error(503, f"the server is too busy to take a file now (--max-file-jobs {settings.max_file_jobs})",
                     **{"Retry-After": "10"})


def add_information_routes(app: FastAPI, service: Service) -> None:
    """/languages, /frontend/settings, /suggest, /health, /metrics and the page."""
    settings, engine, metrics = service.settings, service.engine, service.metrics

    @app.post("/suggest")
    async def suggest():
        """LibreTranslate's suggestions, which this server does not take."""
        return error(403, "Suggestions are disabled on this server.")

    @app.get("/frontend/settings")
    async def frontend_settings() -> dict:
        """LibreTranslate's settings for its web client."""
        return {"charLimit": settings.max_chars, "frontendTimeout": 500, "suggestions": False,
                "filesTranslation": True, "supportedFilesFormat": sorted(KINDS),
                "apiKeys": bool(settings.api_keys), "keyRequired": bool(settings.api_keys),
                "language": {"source": {"code": "en", "name": "English"}, "target": {"code": "fr", "name": "French"}}}

    @app.get("/languages")
    async def languages() -> list[dict]:
        """LibreTranslate's list of languages: English, translated to French."""
        return LANGUAGES

    @app.get("/health")
    async def health():
        """200 once the model is loaded and the server translates; 503 before."""
        if engine.ready.is_set():
            return {"status": "ok", "model": settings.model_name, "decoding": settings.decoding}
        if engine.failure is not None:
            return error(503, f"the model could not be loaded: {engine.failure}")
        return error(503, "the model is loading", **{"Retry-After": "1"})

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        """Prometheus metrics: requests, lines, tokens, batch sizes, latency."""
        metrics.waiting.set(engine.waiting)
        return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> str:
        key_field = '<input id="key" type="password" placeholder="API key">' if settings.api_keys else ""
        model = html.escape(settings.model_name or "a checkpoint")
        formality = FORMALITY_FIELD if settings.registers else ""
        return (PAGE.read_text(encoding="utf-8").replace("{{API_KEY_FIELD}}", key_field).replace("{{MODEL}}", model)
                .replace("{{FORMALITY_FIELD}}", formality).replace("{{CHAR_LIMIT}}", str(settings.max_chars)))



def client_address(request: Request) -> str:
    return request.client.host if request.client else ""


def settle(future: asyncio.Future, result) -> None:
    if not future.done():  # the client may have gone
        future.set_result(result)
