"""Errors a user can cause and fix. The CLI turns each into one `error: ...` line and its exit code."""

import contextlib
import os
import signal
from collections.abc import Iterator

# The signals that ask a command to stop: Ctrl-C, `kill`, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class NmtError(Exception):
    """A known failure with a message meant for the user; `exit_code` 1 is a runtime failure."""

    exit_code = 1


class UsageError(NmtError):
    """Bad options or bad input files: exit code 2."""

    exit_code = 2


class FileRefused(UsageError):
    """A file over one of its limits (nmt.apps.files.FileLimits; `limit` names the field), or one its parser cannot
    read: exit code 2, or HTTP 413 (a limit) and 400 from the server."""

    def __init__(self, message: str, limit: str | None = None):
        super().__init__(message)
        self.limit = limit


class CheckpointError(UsageError):
    """A model file that is missing, unreadable, foreign, unsafe or of a newer format."""


class DataError(UsageError):
    """A corpus or dataset that cannot be found or read."""


class Interrupted(NmtError):
    """The user stopped a command with a signal (Ctrl-C, SIGTERM, SIGHUP): exit code 128 + its number, as
    a shell reports a process that the signal ended. `lines_written`: output lines finished before it."""

    def __init__(self, signal_number: int, lines_written: int = 0, where: str = "", message: str = ""):
        self.signal_number, self.lines_written, self.where = signal_number, lines_written, where
        self.exit_code = 128 + signal_number
        super().__init__(message or f"interrupted by {signal_name(signal_number)} after {lines_written} lines{where}")

    def after(self, lines: int, where: str = "") -> "Interrupted":
        """The same interruption with `lines` more written before it (and where they are)."""
        return Interrupted(self.signal_number, self.lines_written + lines, where or self.where)


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (its first), or its type's name where it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def signal_name(signal_number: int) -> str:
    return "Ctrl-C" if signal_number == signal.SIGINT else signal.Signals(signal_number).name


@contextlib.contextmanager
def stop_signals_handled_by(handler) -> Iterator[None]:
    """STOP_SIGNALS go to `handler(signal_number, frame)` inside the block; the previous handlers after it.

    A process forked inside the block (a worker pool's) keeps `handler` until it sets its own, and a raise from
    it can land where Python drops it (a fork hook): a pool's terminate then waited for ever on a worker that
    lived on. There, SIGINT is left to the parent (the terminal sends it to both) and SIGTERM and SIGHUP end the
    process as their default does."""
    owner = os.getpid()

    def handled(signal_number: int, frame) -> None:
        if os.getpid() == owner:
            handler(signal_number, frame)
        elif signal_number != signal.SIGINT:
            os._exit(128 + signal_number)

    previous = {each: signal.signal(each, handled) for each in STOP_SIGNALS}
    try:
        yield
    finally:
        for each, old in previous.items():
            signal.signal(each, old)


class _Held:
    """Whether a stop signal must wait (inside held_stops), and the one that came meanwhile."""

    depth = 0
    pending: int | None = None


def stop_now_or_later(signal_number: int) -> None:
    """What a stop signal's handler does: raise Interrupted, or inside held_stops, note the signal for the
    end of the block."""
    if _Held.depth:
        _Held.pending = signal_number
        return
    raise Interrupted(signal_number)


@contextlib.contextmanager
def held_stops() -> Iterator[None]:
    """A stop signal arriving in the block (to a handler that calls stop_now_or_later) is raised as Interrupted
    when the block ends: the block's writes and its count of them are never separated."""
    _Held.depth += 1
    try:
        yield
    finally:
        _Held.depth -= 1
        if not _Held.depth and _Held.pending is not None:
            signal_number, _Held.pending = _Held.pending, None
            raise Interrupted(signal_number)
