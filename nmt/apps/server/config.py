"""What `nmt serve` is asked for, as one typed value checked where it is built: where it listens, what one request
and one client may cost, how the engine batches, what it serves; and the API keys it takes. `nmt serve`'s options
give it (their defaults are its defaults); the engine, the connections and the routes read it. Light to import:
the command reads its defaults at start.

    settings = ServeSettings(port=5000, max_chars=20_000)    # UsageError naming the option for a wrong value
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from nmt.errors import UsageError

if TYPE_CHECKING:
    from nmt.apps.files import FileLimits

# the option that gives each field, for the messages that name it
OPTIONS = {"max_chars": "--char-limit", "max_tokens": "--token-limit", "max_batch_lines": "--max-batch-lines",
           "batch_wait_ms": "--batch-wait-ms"}


@dataclass(frozen=True)
class ApiKeys:
    """The keys a server takes, each with its requests a minute (None: the server's --req-limit)."""

    limits: dict[str, int | None]

    @classmethod
    def read(cls, path: Path | None, single: str | None = None) -> ApiKeys:
        """The keys of `path` (one a line: the key, then optionally its requests a minute; # starts a
        comment) and `single` (--api-key). UsageError for a file that cannot be read or a line that is wrong."""
        limits: dict[str, int | None] = {}
        if path is not None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"cannot read the API keys in {path}: {exc}") from None
            for number, line in enumerate(text.splitlines(), 1):
                fields = line.split("#", 1)[0].split()
                if not fields:
                    continue
                if len(fields) > 2 or (len(fields) == 2 and not fields[1].isdigit()):
                    raise UsageError(f"{path}:{number}: write an API key, then optionally its requests a minute")
                limits[fields[0]] = int(fields[1]) if len(fields) == 2 else None
            if not limits:
                raise UsageError(f"{path} holds no API key")
        if single is not None:
            limits.setdefault(single, None)
        return cls(limits)

    def __bool__(self) -> bool:
        return bool(self.limits)

    def find(self, given: str | None) -> str | None:
        """The key `given` matches, compared in constant time, or None."""
        if given is None:
            return None
        found = None
        for key in self.limits:
            if secrets.compare_digest(given.encode(), key.encode()):
                found = key
        return found


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 5000
    max_chars: int = 20_000  # characters of text in one request (--char-limit)
    max_tokens: int = 10_000  # tokens the model reads of one request (--token-limit; Translator.cost)
    batch_limit: int | None = None  # texts in one /translate request (None: any)
    req_limit: int | None = None  # requests a minute of a client without a key of its own limit (None: any)
    max_queue: int = 2_000  # lines that may wait
    max_queue_chars: int = 200_000  # characters that may wait
    max_batch_lines: int = 64  # lines of queued requests decoded together
    batch_wait_ms: float = 5.0  # how long the first request waits for company
    max_request_seconds: float = 60.0  # a request's lines still queued after this long are dropped (503)
    read_timeout: float = 30.0  # seconds a client may take to send its headers, and then its whole body
    max_connections: int = 256  # connections served at once
    max_client_connections: int = 32  # connections one address may hold
    max_file_bytes: int = 10_000_000  # the largest file /translate_file takes
    max_file_jobs: int = 4  # files and HTML pages translated at once; more get a 503
    max_file_seconds: float = 600.0  # a file's translation stops after this long (checked between batches)
    drain_timeout: float = 60.0  # on SIGTERM, seconds the requests in flight have before the server exits anyway
    # what one file may cost (characters, nesting, a zip's inflation); None: nmt.apps.files.SERVER_LIMITS
    file_limits: FileLimits | None = None
    api_keys: ApiKeys = ApiKeys({})  # none: no key asked for
    quiet: bool = False  # only errors on stderr
    # of the model served, known once it is read
    model_name: str = ""
    decoding: dict | None = None  # the resolved decoding configuration (nmt.decoding.configuration), shown by /health
    registers: bool = False  # whether the model knows the register tags (a request may ask for formality)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port must be a TCP port, 0 to 65535, not {self.port}")
        for field in fields(self):
            value, option = getattr(self, field.name), OPTIONS.get(field.name, "--" + field.name.replace("_", "-"))
            if field.name != "port" and field.type in ("int", "int | None") and value is not None and value < 1:
                raise UsageError(f"{option} must be at least 1, not {value}")
            if field.type == "float" and field.name != "batch_wait_ms" and value <= 0:
                raise UsageError(f"{option} must be positive, not {value:g}")
        if self.batch_wait_ms < 0:
            raise UsageError("--batch-wait-ms must not be negative")
        if self.max_queue_chars < self.max_chars:
            raise UsageError(f"--max-queue-chars ({self.max_queue_chars}) must be at least --char-limit "
                             f"({self.max_chars}): a request of the limit must fit the queue")

    @property
    def max_body_bytes(self) -> int:
        """The largest body a request may have: max_chars of text at the most bytes JSON can spend on a
        character (6, as \\uXXXX), and room for the rest of the request."""
        return 6 * self.max_chars + 65_536
