"""`nmt`: each command parses its options and calls one library function.

Results go to stdout, progress and warnings to stderr. `main()` is the one place where known errors
become a one-line `error: ...` and an exit code: 2 for bad usage or input, 1 for runtime failures.
"""

from __future__ import annotations

import os
import sys

import typer

from nmt import __version__
from nmt.errors import NmtError
from nmt_cli import decoding, models, training

app = typer.Typer(
    help="English-to-French neural machine translation with the Transformer.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nmt {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """English-to-French neural machine translation with the Transformer."""


# The commands by family, in the order `nmt --help` lists them
for command, name in ((decoding.translate, None), (decoding.serve, None), (decoding.score, None),
                      (decoding.attention, None), (models.models, None), (models.info, None), (training.train, None),
                      (training.prepare, None), (decoding.evaluate, "eval"), (training.average, None),
                      (training.grow, None), (training.tune, None), (training.build_shortlist, "shortlist"),
                      (training.plot, None), (models.export, None)):
    app.command(name)(command)


# Commands that leave nothing to clean up once they return: their output is written, flushed and closed
# and their worker processes are gone. The interpreter's teardown with torch loaded is a noticeable share of
# a short translation, so these end the process at once.
EXIT_AT_ONCE = ("translate",)


def main() -> None:
    """Bad usage as one line (exit 2), Ctrl-C outside `interruptible` as "Aborted!" (exit 1), nmt's own errors,
    and any other exception as one line too."""
    try:
        try:
            code = app(standalone_mode=False)  # click's errors come here, to be written in one line
        except typer.TyperException as exc:  # click's (typer's copy): a usage error, or help asked by no arguments
            context = getattr(exc, "ctx", None)
            if context is None or type(exc).__name__ == "NoArgsIsHelpError":
                exc.show()
            else:
                print(f"error: {exc.format_message()} (see {context.command_path} --help)", file=sys.stderr)
            sys.exit(exc.exit_code)
        except typer.Abort:
            print("Aborted!", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)
    except SystemExit as exc:
        if exc.code in (None, 0) and len(sys.argv) > 1 and sys.argv[1] in EXIT_AT_ONCE:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BrokenPipeError:
                pass  # the reader went away: nothing more to write, as below
            os._exit(0)
        raise
    except NmtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: still one line, with the way to the traceback
        if os.environ.get("NMT_DEBUG"):
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc} (NMT_DEBUG=1 shows where; please report it)",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
