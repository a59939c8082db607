"""Errors a user can cause and fix. The CLI turns each into one `error: ...` line and its exit code."""


class NmtError(Exception):
    """A known failure with a message meant for the user; `exit_code` 1 is a runtime failure."""

    exit_code = 1


class UsageError(NmtError):
    """Bad options or bad input files: exit code 2."""

    exit_code = 2


class CheckpointError(UsageError):
    """A model file that is missing, unreadable, foreign, unsafe or of a newer format."""


class DataError(UsageError):
    """A corpus or dataset that cannot be found or read."""
