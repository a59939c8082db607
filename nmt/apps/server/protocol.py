"""The shapes of the server's API: LibreTranslate's request bodies and nmt's own, a request's formality, its text
cleaned, errors as {"error": message}, download names in any script."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from nmt.text.tokenizer import without_surrogates

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




# Weblate checks a machine-translation service as it is configured by translating "test" from English to German
# (weblate/machinery/base.py, validate_settings), through LibreTranslate's API and DeepL's alike; a refusal fails the
# check and nmt could not be added. That one request is answered with its text unchanged and a header saying it
# was not translated; any other request for a language but French is refused, and /languages lists French alone.
CONNECTION_CHECK = "test"
CHECK_HEADERS = {"X-Nmt-Untranslated": "a connection check: nmt translates English to French only"}


def is_connection_check(texts: list[str]) -> bool:
    """Whether a request for another language than French is the connection check (every text "test")."""
    return bool(texts) and all(text.strip().casefold() == CONNECTION_CHECK for text in texts)


def describe(errors) -> str:
    """Pydantic's validation errors as one line: where, and what was wrong."""
    parts = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        parts.append(f"{where}: {error.get('msg', 'invalid')}" if where else error.get("msg", "invalid"))
    return "; ".join(parts) or "invalid request"


def error(status: int, message: str, **headers: str) -> JSONResponse:
    """LibreTranslate's error shape: {"error": message}."""
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)
