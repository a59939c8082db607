"""What one client may cost the server: connections, the time to send a request, bodies, requests a minute.

TimedHeaders (uvicorn's HTTP/1.1 protocol with a deadline on a request's headers and a cap on the connections of
one address), BoundedBodies (an ASGI wrapper: a deadline and a size limit on the whole body, an API key in the
Authorization header checked before a byte of it is read, uploads spooled to disk), RateLimits (requests a
minute per address and per API key, LibreTranslate's --req-limit and --api-keys).
"""

from __future__ import annotations

import asyncio
import collections
import json
import math
import socket
import tempfile
import time

from uvicorn.protocols.http.h11_impl import H11Protocol

from nmt.apps.server.config import ApiKeys

SPOOL_BYTES = 1 << 16  # an upload's body is kept in memory up to this size, then in a temporary file
TRACKED_CLIENTS = 65_536  # addresses and keys whose recent requests RateLimits remembers: the least recent go


def refusal(status: int, message: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response with {"error": message}, the connection closed after it."""
    body = json.dumps({"error": message})
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    reason = {408: "Request Timeout", 429: "Too Many Requests", 503: "Service Unavailable"}.get(status, "Error")
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"{extra}connection: close\r\n\r\n{body}").encode()


class ClientConnections:
    """Open connections by client address, at most `most` each."""

    def __init__(self, most: int):
        self.most = most
        self.open: collections.Counter[str] = collections.Counter()

    def admit(self, address: str) -> bool:
        if self.open[address] >= self.most:
            return False
        self.open[address] += 1
        return True

    def release(self, address: str) -> None:
        self.open[address] -= 1
        if self.open[address] <= 0:
            del self.open[address]


def no_delay(transport) -> None:
    """TCP_NODELAY on a connection's socket: each response goes at once, not after the client's delayed ACK (40 ms
    on Linux for a second write on a kept-alive connection). asyncio sets it only on a socket whose protocol number
    is IPPROTO_TCP, which an accepted socket's is not (0)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # the client is gone already
            pass


class TimedHeaders(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a bound on the time a request's line and headers may take to arrive
    (uvicorn has none: a client that sends a header a minute holds its connection for ever), on the
    connections one address holds at once, and on those all clients hold. The headers have `timeout` seconds
    from the connection's start, or on a kept-alive connection from the next request's first byte (uvicorn's
    keep-alive timeout closes one left idle). A client late with them gets a 408 and the connection is closed;
    one that sent nothing is closed. A connection over its address's cap gets a 503 at once. One that finds
    `most` connections open makes room (make_room): slow clients from many addresses cannot take every place.
    The body has its own bound, in BoundedBodies.
    uvicorn.Config(http=functools.partial(TimedHeaders, timeout=30, connections=..., most=256))."""

    def __init__(self, *args, timeout: float, connections: ClientConnections | None = None, most: int | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.headers_timeout = timeout
        self.headers_timer: asyncio.TimerHandle | None = None
        self.heard = False  # whether a byte of the request awaited has come
        self.per_address = connections
        self.counted: str | None = None  # the address this connection is counted under
        self.most = most
        self.since = time.monotonic()  # when it opened or last went idle, or its request's first byte came

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        no_delay(transport)
        address = self.client[0] if self.client else ""
        if self.per_address is not None:
            if not self.per_address.admit(address):
                transport.write(refusal(503, f"this address has {self.per_address.most} connections open "
                                             "(--max-client-connections)", {"Retry-After": "1"}))
                transport.close()
                return
            self.counted = address
        self._wait_for_headers()
        self.make_room()

    def make_room(self) -> None:
        """With more than `most` connections open, close the other that has held its place longest without a
        request to answer: idle since its last answer, or with a request that has not all arrived (a 503: it
        may try again). Requests that have arrived are never closed; with nothing to close, uvicorn answers the
        new one 503."""
        if self.most is None or len(self.connections) <= self.most:
            return
        waiting = [connection for connection in self.connections
                   if connection is not self and isinstance(connection, TimedHeaders) and connection.closable()]
        if waiting:
            min(waiting, key=lambda connection: connection.since).give_way()

    def closable(self) -> bool:
        """Whether no request of this connection is being answered: it is idle, or its request is arriving."""
        if self.transport is None or self.transport.is_closing():
            return False
        return self.cycle is None or self.cycle.response_complete or self.cycle.more_body

    def give_way(self) -> None:
        """Close this connection for another's sake (make_room)."""
        if self.heard:  # a request was arriving: it is answered
            self.transport.write(refusal(503, f"the server is full: a request still arriving after "
                                              f"{time.monotonic() - self.since:.0f} s gave way to a new connection "
                                              "(--max-connections)", {"Retry-After": "1"}))
        self.transport.close()

    def on_response_complete(self) -> None:
        self.heard, self.since = False, time.monotonic()  # idle from now, until a pipelined request goes on
        super().on_response_complete()

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        if self.headers_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._wait_for_headers()  # the next request on a kept-alive connection begins
        if not self.heard:
            self.since = time.monotonic()
        self.heard = True
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request's headers arrived
            self._stop_waiting()

    def connection_lost(self, exc) -> None:
        self._stop_waiting()
        if self.counted is not None:
            self.per_address.release(self.counted)
            self.counted = None
        super().connection_lost(exc)

    def _wait_for_headers(self) -> None:
        self._stop_waiting()
        self.heard = False
        self.since = time.monotonic()
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
            self.transport.write(refusal(408, f"the request headers did not arrive within {self.headers_timeout:g} s"))
        self.transport.close()


class BoundedBodies:
    """An ASGI wrapper that reads each request's body before the application sees any of it, within bounds:
    a wrong API key in the Authorization header is a 401 and a Content-Length over the limit a 413 before a
    byte of the body is read; a body that grows past the limit while read (chunked) is a 413 as soon as it
    does; a body not all arrived `timeout` seconds after the headers is a 408 (a deadline on the whole body:
    a client sending a byte a second cannot hold a connection longer). The bodies arriving at once hold at most
    `budget` bytes together: past it, a body's request is a 503 (250 uploads stalled after 1 MB each took 2.4 GB of
    /tmp). The application then reads the body from memory, or for /translate_file from a temporary file past
    SPOOL_BYTES."""

    def __init__(self, app, limit: int, timeout: float, keys: ApiKeys | None = None, file_limit: int | None = None,
                 budget: int | None = None):
        self.app, self.limit, self.timeout, self.keys = app, limit, timeout, keys or ApiKeys({})
        self.file_limit = file_limit or limit  # for /translate_file's uploads
        self.budget = budget if budget is not None else 4 * self.file_limit
        self.held = 0  # bytes of the bodies arriving now

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        bearer = bearer_key(scope)
        field = "message" if scope["path"].startswith("/v2/") else "error"  # DeepL's API, or LibreTranslate's
        if self.keys and bearer is not None and self.keys.find(bearer) is None:  # before the body is read
            if field == "message":  # DeepL's code for it
                return await refuse(send, 403, "Authorization failure, check auth_key", field=field)
            return await refuse(send, 401, "a valid api_key is required")
        upload = scope["path"] == "/translate_file"
        limit = self.file_limit if upload else self.limit
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await refuse(send, 413, f"the request body is over {limit} bytes", field=field)
        body = tempfile.SpooledTemporaryFile(SPOOL_BYTES if upload else limit + 1)
        size, arriving = 0, 0  # arriving: bytes of this body counted in self.held
        try:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    return await refuse(send, 408, f"the request body did not arrive within {self.timeout:g} s",
                                        field=field)
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                arriving += len(chunk)
                self.held += len(chunk)
                if size > limit:
                    return await refuse(send, 413, f"the request body is over {limit} bytes", field=field)
                if self.held > self.budget:
                    return await refuse(send, 503, "the server is receiving as many bodies as it holds at once; try "
                                                   "again shortly", {"Retry-After": "5"}, field=field)
                body.write(chunk)
                if not message.get("more_body", False):
                    break
            self.held -= arriving  # arrived: what it costs from now on is its request's, bounded elsewhere
            arriving = 0
            body.seek(0)
            return await self.app(scope, replayed(body, size, receive), send)
        finally:
            self.held -= arriving
            body.close()


def replayed(body, size: int, receive):
    """An ASGI receive that gives `body` (a file of `size` bytes) in chunks, then what `receive` gives (the
    disconnect, when the client goes)."""
    sent = 0
    finished = False

    async def replay():
        nonlocal sent, finished
        if finished:
            return await receive()
        chunk = body.read(1 << 16)
        sent += len(chunk)
        finished = sent >= size
        return {"type": "http.request", "body": chunk, "more_body": not finished}

    return replay


async def refuse(send, status: int, message: str, headers: dict[str, str] | None = None, field: str = "error") -> None:
    """An answer {field: message} (LibreTranslate's "error", DeepL's "message") that closes the connection."""
    payload = json.dumps({field: message}).encode()
    extra = [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close"), *extra]})
    await send({"type": "http.response.body", "body": payload})


def bearer_key(scope) -> str | None:
    """The key of an `Authorization: Bearer KEY` header (or DeepL's `DeepL-Auth-Key KEY`), or None."""
    header = dict(scope["headers"]).get(b"authorization", b"")
    for scheme in (b"bearer ", b"deepl-auth-key "):
        if header[: len(scheme)].lower() == scheme:
            return header[len(scheme):].strip().decode("latin-1")
    return None


class RateLimits:
    """Requests a minute, counted over the last 60 seconds: per API key (its own limit, or `per_minute`) and
    per client address without one (`per_minute`; None: no limit). Remembers the TRACKED_CLIENTS most recent
    clients."""

    WINDOW = 60.0

    def __init__(self, per_minute: int | None, keys: ApiKeys):
        self.per_minute, self.keys = per_minute, keys
        self.recent: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()

    def charge(self, client: str, key: str | None) -> float | None:
        """Count one request of `client` (an address) or of `key` (a key ApiKeys.find found); the seconds to
        wait before the next would be taken if this one is over the limit (not counted), else None."""
        own = self.keys.limits.get(key) if key is not None else None
        limit = own if own is not None else self.per_minute
        if limit is None:
            return None
        who = f"key:{key}" if key is not None else f"address:{client}"
        now = time.monotonic()
        times = self.recent.pop(who, None) or collections.deque()
        self.recent[who] = times
        while times and times[0] <= now - self.WINDOW:
            times.popleft()
        while len(self.recent) > TRACKED_CLIENTS:
            self.recent.popitem(last=False)
        if len(times) >= limit:
            return max(1.0, math.ceil(times[0] + self.WINDOW - now)) if times else self.WINDOW
        times.append(now)
        return None
