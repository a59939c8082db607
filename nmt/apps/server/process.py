"""`nmt serve`'s process: the listening socket, uvicorn with the server's limits, the engine, and a stop on
SIGTERM or Ctrl-C that answers the requests in flight first."""

from __future__ import annotations

import contextlib
import functools
import signal
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import uvicorn

from nmt.apps.server.config import ServeSettings
from nmt.apps.server.deepl import add_deepl_routes
from nmt.apps.server.engine import Engine
from nmt.apps.server.limits import ClientConnections, TimedHeaders
from nmt.apps.server.routes import create_app
from nmt.decoding.search import SearchOptions
from nmt.errors import NmtError, UsageError

if TYPE_CHECKING:
    from nmt.decoding.translate import Translator


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


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to host:port; UsageError in one line where it cannot be."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return listener


def keep_large_buffers_returnable() -> None:
    """glibc's malloc serves a block over 128 KiB from its own mapping, returned on free, until a free raises that
    threshold: after a burst of uploads (asyncio reads 256 KiB at a time) the heap then kept 70 MB it no longer
    used. A fixed threshold keeps it at 128 KiB. Elsewhere than glibc: nothing."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "mallopt"):
            libc.mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    except OSError:
        pass


M_MMAP_THRESHOLD = -3  # mallopt(3)


def serve(load: Callable[[], Translator], options: SearchOptions, settings: ServeSettings,
          listener: socket.socket) -> None:
    """Serve the Translator `load` builds (in the engine's thread, while the server answers) on `listener`
    (listening(settings.host, settings.port)) until SIGTERM or Ctrl-C, then answer the requests in flight (at
    most drain_timeout seconds) and return; NmtError if the model could not be loaded."""
    keep_large_buffers_returnable()
    engine = Engine(load, max_lines=settings.max_batch_lines, wait=settings.batch_wait_ms / 1000,
                    max_queue=settings.max_queue, max_queue_chars=settings.max_queue_chars)
    server = server_for(engine, options, settings)
    engine.start()
    server.run(sockets=[listener])  # returns once the requests in flight are answered, or drain_timeout passed
    engine.stop(drop_queued=True, wait=5)  # what a file job still had queued is dropped: the process exits
    if engine.failure is not None:
        raise NmtError(f"the model could not be loaded: {engine.failure}")


def server_for(engine: Engine, options: SearchOptions, settings: ServeSettings) -> Server:
    """The uvicorn server of `nmt serve` over `engine`, with settings' limits on connections and headers; it stops
    when the engine cannot load its model, and the engine drains when it is told to stop."""
    connections = ClientConnections(settings.max_client_connections)
    app = create_app(engine, options, settings, (add_deepl_routes,))
    # proxy_headers off: uvicorn would otherwise take a client's address from X-Forwarded-For when the connection
    # comes from 127.0.0.1, and any local client could pose as many to pass --req-limit
    server = Server(uvicorn.Config(app, log_level="error" if settings.quiet else "warning", proxy_headers=False,
                                   lifespan="off", timeout_graceful_shutdown=settings.drain_timeout,
                                   http=functools.partial(TimedHeaders, timeout=settings.read_timeout,
                                                          connections=connections, most=settings.max_connections),
                                   # uvicorn counts the one arriving
                                   limit_concurrency=settings.max_connections + 1))
    engine.on_failure = lambda: setattr(server, "should_exit", True)
    server.on_exit = lambda: setattr(engine, "draining", True)
    return server
