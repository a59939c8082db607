"""DeepL's API (v2) beside LibreTranslate's, so that the tools that speak it with a server URL of their choosing
(Weblate's DeepL machinery, the `deepl` client library, CAT tools' plugins) use nmt unchanged:

    POST /v2/translate        text (a list), target_lang FR, source_lang EN, formality, tag_handling xml or html,
                              ignore_tags, glossary_id -> {"translations": [{"detected_source_language", "text"}]}
    GET  /v2/languages        ?type=source|target
    GET  /v2/usage            characters translated with this key since the server started
    GET  /v2/glossary-language-pairs, POST|GET /v2/glossaries, GET|DELETE /v2/glossaries/{id}, GET .../entries

Requests come as JSON or form fields (a field given twice is a list), in the body or the query; the key as
`Authorization: DeepL-Auth-Key KEY` (or the old `auth_key` field), one of nmt's API keys. Errors have DeepL's
shape, {"message": ...}, and its codes: 400 a bad request, 403 no valid key, 404 no such glossary, 413 too much
text, 429 too many requests (a client backs off), 503 the model could not be loaded or the queue stays full.

A glossary lives in the server's memory (a restart forgets it, as Weblate expects of a service it re-sends its
glossaries to), one set per key, and is used as `nmt translate --glossary` uses its file: each term found in a
sentence must be in its translation (constrained beam search).
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import threading
import uuid
from collections import Counter
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from nmt.apps.server.limits import bearer_key
from nmt.apps.server.protocol import CHECK_HEADERS, cleaned, is_connection_check, requested_formality
from nmt.apps.server.routes import Service
from nmt.apps.webpages import Markup
from nmt.decoding.constraints import Glossary

FORMALITIES = ("default", "more", "less", "prefer_more", "prefer_less")
MAX_GLOSSARIES = 1000  # a key's glossaries; more: 400 (DeepL's accounts have a limit too)
MAX_GLOSSARY_ENTRIES = 100_000
CHARACTER_LIMIT = 10**12  # /v2/usage: nmt counts characters, and sets no limit


def deepl_error(status: int, message: str, **headers: str) -> JSONResponse:
    """DeepL's error shape: {"message": ...}."""
    return JSONResponse({"message": message}, status_code=status, headers=headers or None)


async def fields_of(request: Request) -> dict[str, str | list[str]]:
    """A DeepL request's fields: the query's, then the body's (JSON, or form fields: one given twice is a list)."""
    fields: dict[str, str | list[str]] = {}
    for key in request.query_params:
        values = request.query_params.getlist(key)
        fields[key] = values if len(values) > 1 else values[0]
    kind = request.headers.get("content-type", "")  # a GET may carry a form too (the deepl library's languages)
    if kind.startswith("application/json"):
        try:
            body = await request.json()
        except ValueError:
            raise ValueError("the body is not JSON") from None
        if not isinstance(body, dict):
            raise ValueError("the JSON body must be an object")
        fields.update(body)
    elif kind.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await request.form()
        for key in form:
            values = [value for value in form.getlist(key) if isinstance(value, str)]
            if values:
                fields[key] = values if len(values) > 1 else values[0]
    return fields


def listed(value) -> list[str]:
    """A field that may be one string, a list, or tags joined by commas (ignore_tags) -> its strings."""
    items = value if isinstance(value, list) else [value]
    return [part.strip() for item in items if isinstance(item, str) for part in item.split(",") if part.strip()]


@dataclass
class StoredGlossary:
    glossary_id: str
    name: str
    entries: tuple[tuple[str, str], ...]
    created: str

    def info(self) -> dict:
        return {"glossary_id": self.glossary_id, "name": self.name, "ready": True, "source_lang": "en",
                "target_lang": "fr", "creation_time": self.created, "entry_count": len(self.entries)}


class Glossaries:
    """Each key's glossaries, by id (the server's memory; one lock)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._owned: dict[str, dict[str, StoredGlossary]] = {}
        self._terms: dict[str, Glossary] = {}  # by id: the Glossary the engine uses, one object per glossary

    def add(self, owner: str, name: str, entries: tuple[tuple[str, str], ...]) -> StoredGlossary:
        with self._lock:
            owned = self._owned.setdefault(owner, {})
            if len(owned) >= MAX_GLOSSARIES:
                raise ValueError(f"too many glossaries: at most {MAX_GLOSSARIES} a key; delete some first")
            stored = StoredGlossary(str(uuid.uuid4()), name, entries,
                                    datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
                                    .replace("+00:00", "Z"))
            owned[stored.glossary_id] = stored
            self._terms[stored.glossary_id] = Glossary(entries)
            return stored

    def find(self, owner: str, glossary_id: str) -> StoredGlossary | None:
        with self._lock:
            return self._owned.get(owner, {}).get(glossary_id)

    def terms(self, owner: str, glossary_id: str) -> Glossary | None:
        with self._lock:
            found = self._owned.get(owner, {}).get(glossary_id)
            return self._terms[glossary_id] if found is not None else None

    def all(self, owner: str) -> list[StoredGlossary]:
        with self._lock:
            return list(self._owned.get(owner, {}).values())

    def remove(self, owner: str, glossary_id: str) -> bool:
        with self._lock:
            found = self._owned.get(owner, {}).pop(glossary_id, None)
            self._terms.pop(glossary_id, None)
            return found is not None


def glossary_entries(text: str, kind: str) -> tuple[tuple[str, str], ...]:
    """DeepL's entries: tsv (source TAB target a line) or csv (source,target[,source_lang,target_lang]);
    ValueError for a malformed or empty list."""
    if kind not in ("tsv", "csv"):
        raise ValueError(f"entries_format {kind!r} is not supported: send tsv or csv")
    rows = ([line.split("\t") for line in text.splitlines() if line.strip()] if kind == "tsv"
            else [row for row in csv.reader(io.StringIO(text)) if row])
    entries: dict[str, str] = {}
    for number, row in enumerate(rows, 1):
        if len(row) not in (2, 4) or not row[0].strip() or not row[1].strip():
            raise ValueError(f"entry {number} is not a source term and a target term")
        entries.setdefault(row[0].strip(), row[1].strip())
    if not entries:
        raise ValueError("the glossary has no entries")
    if len(entries) > MAX_GLOSSARY_ENTRIES:
        raise ValueError(f"the glossary has more than {MAX_GLOSSARY_ENTRIES} entries")
    return tuple(entries.items())


def language_refusal(fields: dict, glossary: bool = False) -> str | None:
    """Why a request's languages are not nmt's (English to French), in DeepL's words; None where they are."""
    target = str(fields.get("target_lang") or "").upper()
    source = str(fields.get("source_lang") or "").upper()
    if not target:
        return "Parameter 'target_lang' not specified."
    if target.split("-")[0] != "FR":
        return f"Value for 'target_lang' not supported: nmt translates English to French, not to {target}."
    if (source or glossary) and source.split("-")[0] != "EN":
        return f"Value for 'source_lang' not supported: nmt translates English to French, not from {source or '-'}."
    return None


def add_deepl_routes(app: FastAPI, service: Service) -> None:
    """DeepL's v2 routes over the service of LibreTranslate's."""
    glossaries = Glossaries()
    usage: Counter[str] = Counter()
    settings = service.settings

    def owner(request: Request, fields: dict) -> str:
        """Whose glossaries and usage: the request's key (any where the server takes any)."""
        return service.client(request, key_of(request, fields))

    def key_of(request: Request, fields: dict) -> str | None:
        given = fields.get("auth_key")
        return given if isinstance(given, str) else bearer_key(request.scope)

    def admitted(request: Request, fields: dict) -> JSONResponse | None:
        refused = service.admit(request, key_of(request, fields))
        if refused is None:
            return None
        if refused.status_code == 401:
            return deepl_error(403, "Authorization failure, check auth_key: the key is not one this server takes")
        return deepl_error(refused.status_code, "Too many requests: over the requests a minute this key may make "
                           "(--req-limit)", **{"Retry-After": refused.headers.get("retry-after", "60")})

    async def opened(request: Request) -> dict | JSONResponse:
        """The request's fields, or DeepL's answer to a malformed body (400), a wrong key (403) or one too many
        requests (429)."""
        try:
            fields = await fields_of(request)
        except ValueError as exc:
            return deepl_error(400, f"Bad request: {exc}")
        return admitted(request, fields) or fields

    @app.api_route("/v2/translate", methods=["GET", "POST"])
    async def translate(request: Request):
        """DeepL's translate: each text of `text` (a string or a list) into French."""
        fields = await opened(request)
        if isinstance(fields, JSONResponse):
            return fields
        texts = fields.get("text")
        texts = [texts] if isinstance(texts, str) else texts
        if not texts or not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            return deepl_error(400, "Parameter 'text' not specified.")
        if why := language_refusal(fields, glossary=bool(fields.get("glossary_id"))):
            if "target_lang" in why and is_connection_check(texts):  # Weblate's check: "test" to German
                return JSONResponse({"translations": [{"detected_source_language": "EN", "text": text,
                                                       "billed_characters": 0} for text in texts]},
                                    headers=CHECK_HEADERS)
            return deepl_error(400, why)
        formality = str(fields.get("formality") or "default")
        if formality not in FORMALITIES:
            return deepl_error(400, f"Value for 'formality' not supported: send one of {', '.join(FORMALITIES)}.")
        try:
            register = requested_formality(formality, settings.registers)
        except ValueError as exc:
            return deepl_error(400, f"'formality' is not supported: {exc}")
        tagged = fields.get("tag_handling")
        if tagged not in (None, "", "xml", "html"):
            return deepl_error(400, "Value for 'tag_handling' not supported: send xml or html.")
        glossary = None
        if glossary_id := fields.get("glossary_id"):
            glossary = glossaries.terms(owner(request, fields), str(glossary_id))
            if glossary is None:
                return deepl_error(404, "Glossary not found.")
        texts = [cleaned(text) for text in texts]
        if sum(len(text) for text in texts) > settings.max_chars:
            return deepl_error(413, f"Request Entity Too Large: more than {settings.max_chars} characters of text "
                               "(--char-limit)")
        if tagged:
            markup = Markup(xml=tagged == "xml", kept=frozenset(tag.lower() for tag in listed(
                fields.get("ignore_tags", []))))
            found = await service.tagged(request, texts, markup, register, key_of(request, fields), glossary)
            if isinstance(found, JSONResponse):
                return deepl_error(found.status_code, _message(found), **_retry(found))
            french = found
        else:
            found = await service.translate_lines(request, texts, service.base_options, register,
                                                  key_of(request, fields), glossary)
            if isinstance(found, JSONResponse):
                return deepl_error(found.status_code, _message(found), **_retry(found))
            french = ["\n".join(line.text for line in lines) for lines in found]
        usage[owner(request, fields)] += sum(len(text) for text in texts)
        return {"translations": [{"detected_source_language": "EN", "text": text, "billed_characters": len(source)}
                                 for source, text in zip(texts, french, strict=True)]}

    @app.api_route("/v2/languages", methods=["GET", "POST"])
    async def languages(request: Request):
        fields = await opened(request)
        if isinstance(fields, JSONResponse):
            return fields
        if fields.get("type") == "target":
            return [{"language": "FR", "name": "French", "supports_formality": settings.registers}]
        return [{"language": "EN", "name": "English"}]

    @app.api_route("/v2/usage", methods=["GET", "POST"])
    async def character_usage(request: Request):
        fields = await opened(request)
        if isinstance(fields, JSONResponse):
            return fields
        return {"character_count": usage[owner(request, fields)], "character_limit": CHARACTER_LIMIT}

    @app.get("/v2/glossary-language-pairs")
    async def glossary_pairs(request: Request):
        if isinstance(fields := await opened(request), JSONResponse):
            return fields
        return {"supported_languages": [{"source_lang": "en", "target_lang": "fr"}]}

    @app.post("/v2/glossaries", status_code=201)
    async def create_glossary(request: Request):
        fields = await opened(request)
        if isinstance(fields, JSONResponse):
            return fields
        name, entries = fields.get("name"), fields.get("entries")
        if not isinstance(name, str) or not name.strip():
            return deepl_error(400, "Parameter 'name' not specified.")
        if not isinstance(entries, str):
            return deepl_error(400, "Parameter 'entries' not specified.")
        if str(fields.get("source_lang") or "").lower() != "en" or str(fields.get("target_lang") or "").lower() != "fr":
            return deepl_error(400, "Unsupported glossary source and target language pair: nmt takes en to fr.")
        try:
            stored = glossaries.add(owner(request, fields), name.strip(),
                                    glossary_entries(entries, str(fields.get("entries_format") or "tsv")))
        except ValueError as exc:
            return deepl_error(400, f"Invalid glossary entries provided: {exc}")
        return JSONResponse(stored.info(), status_code=201)

    @app.get("/v2/glossaries")
    async def list_glossaries(request: Request):
        if isinstance(fields := await opened(request), JSONResponse):
            return fields
        return {"glossaries": [each.info() for each in glossaries.all(owner(request, fields))]}

    @app.get("/v2/glossaries/{glossary_id}")
    async def glossary_info(glossary_id: str, request: Request):
        if isinstance(fields := await opened(request), JSONResponse):
            return fields
        found = glossaries.find(owner(request, fields), glossary_id)
        return found.info() if found is not None else deepl_error(404, "Glossary not found.")

    @app.get("/v2/glossaries/{glossary_id}/entries")
    async def glossary_terms(glossary_id: str, request: Request):
        if isinstance(fields := await opened(request), JSONResponse):
            return fields
        found = glossaries.find(owner(request, fields), glossary_id)
        if found is None:
            return deepl_error(404, "Glossary not found.")
        return PlainTextResponse("".join(f"{english}\t{french}\n" for english, french in found.entries),
                                 media_type="text/tab-separated-values")

    @app.delete("/v2/glossaries/{glossary_id}")
    async def delete_glossary(glossary_id: str, request: Request):
        if isinstance(fields := await opened(request), JSONResponse):
            return fields
        if not glossaries.remove(owner(request, fields), glossary_id):
            return deepl_error(404, "Glossary not found.")
        return Response(status_code=204)


def _message(answer: JSONResponse) -> str:
    """The message of one of LibreTranslate's error answers."""
    return json.loads(answer.body).get("error", "")


def _retry(answer: JSONResponse) -> dict:
    retry = answer.headers.get("retry-after")
    return {"Retry-After": retry} if retry else {}

