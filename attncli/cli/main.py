"""The entry point: run the app, and map errors to one stderr line and an exit code.

torch is imported only by the commands that compute attention, so --help stays fast.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import typer

import attncli.cli.commands  # noqa: F401  (registers every command on the app)
from attncli.cli.app import app
from attncli.cli.streams import (
    interruption,
    quiet_stdout,
    setup_streams,
    signals_held,
    was_interrupted,
    write_error,
)
from attncli.errors import WRITE_ERRNOS, AttnCliError

# What OpenMP (libgomp) takes for OMP_NUM_THREADS: positive whole numbers, comma-separated.
_THREADS = re.compile(r"\s*\+?0*[1-9][0-9]{0,8}\s*(,\s*\+?0*[1-9][0-9]{0,8}\s*)*", re.ASCII)


# What dlopen, mmap, torch's CPU allocator and a thread's start say when they find no room.
_NO_ROOM = ("failed to map segment", "cannot allocate memory", "can't allocate memory",
            "can't start new thread")
# torch's allocator says what one allocation asked for among its own source lines and codes.
_ASKED = re.compile(r"tried to allocate (\d+) bytes")


def _no_room_cause(text: str) -> str:
    """What a library's out-of-memory error says, in a few words: the size asked for where
    torch's allocator names it, else its first 160 characters on one line."""
    from attncli.machine import size_text

    asked = _ASKED.search(text)
    if asked:
        return f"one allocation of {size_text(int(asked.group(1)))} did not fit"
    return " ".join(text.split())[:160]


def check_threads_setting() -> None:
    """A bad OMP_NUM_THREADS is this one line, before torch loads (where OpenMP would print
    its own warning and run on every core)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.strip() and not _THREADS.fullmatch(value):
        raise AttnCliError(f"OMP_NUM_THREADS must be a number of threads such as 2 (got "
                           f"{value!r}); unset it to use every core")


def fail(message: str, code: int = 2) -> int:
    """The one place an error becomes a line on stderr and an exit code."""
    from attncli.core.tokens import visible

    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass  # the error being reported may be this very stream's
    try:
        sys.stderr.write(f"attncli: error: {visible(message)}\n")  # escaped: one line, no ESC
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # no stderr: the exit code still tells
    return code


def _pipe_closed(err: SystemExit) -> bool:
    return err.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper"


def execute(argv: list[str] | None = None) -> int:
    """Run the CLI on argv and return the exit code; no traceback for bad input."""
    try:
        check_threads_setting()
        command = typer.main.get_command(app)  # inside: Ctrl-C while it is built exits 130 too
        code = command.main(args=argv, prog_name="attncli", standalone_mode=False)
        if code == 130 and was_interrupted():
            # typer turns Ctrl-C inside a command into a silent exit 130: say why, as for the rest.
            return fail(*interruption())
        return code if isinstance(code, int) else 0
    except AttnCliError as err:
        return fail(str(err), err.exit_code)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly.
        quiet_stdout()
        return 0
    except KeyboardInterrupt:
        return fail(*interruption())
    except SystemExit as err:
        # Click ends a closed pipe with sys.exit(1); like any closed pipe, it ends quietly here.
        if _pipe_closed(err) or err.code is None:
            return 0
        return err.code if isinstance(err.code, int) else 1
    except OSError as err:  # a failed write to stdout: closed, disk full (files raise ours)
        if err.errno not in WRITE_ERRNOS:
            if was_interrupted():
                return fail(*interruption())
            raise
        return fail(write_error(err), 1)
    except MemoryError:
        return fail("out of memory: the input or the sizes asked for are too large for this "
                    "machine", 2)
    except (ImportError, RuntimeError) as err:  # a library or buffer that does not fit
        if not any(words in str(err).lower() for words in _NO_ROOM):
            if was_interrupted():  # Ctrl-C or a hang-up that a library turned into this
                return fail(*interruption())
            raise
        return fail("out of memory: the address-space limit (ulimit -v) or the machine's "
                    f"memory is too small for this run ({_no_room_cause(str(err))})", 2)
    except Exception as err:
        if was_interrupted():
            # Ctrl-C that a library swallowed, leaving it half-loaded: still an interruption.
            return fail(*interruption())
        # Typer raises its own copy of click's exceptions, so they are known by class name.
        names = {cls.__name__ for cls in type(err).__mro__}
        if "NoArgsIsHelpError" in names:
            err.show()  # type: ignore[attr-defined]  # bare `attncli`: the help, plainly
            return 2
        if "ClickException" in names:
            if "NoSuchOption" in names:
                _unsuggest_hidden(err)
            message = err.format_message()  # type: ignore[attr-defined]
            return fail(message, getattr(err, "exit_code", 2))
        raise


def _unsuggest_hidden(err: Any) -> None:
    """A mistyped option's "Possible options" without the hidden ones (a renamed flag's old
    spelling, such as --heads for --num-heads): the help never shows them either."""
    command = getattr(getattr(err, "ctx", None), "command", None)
    hidden = {name for param in getattr(command, "params", ()) if getattr(param, "hidden", False)
              for name in (*param.opts, *param.secondary_opts)}
    if err.possibilities:
        err.possibilities = [name for name in err.possibilities if name not in hidden]


def main() -> None:
    """Console-script entry point: run, flush, and exit without Python's own flush of stdout,
    which would print an "Exception ignored" block and exit 120 after a failed write."""
    setup_streams()
    code = execute()
    with signals_held():  # the outcome is decided: a late Ctrl-C must not break the flush
        code = finish(code)
        # Exit here: nothing is left to clean up, the interpreter's shutdown costs ~0.3 s after
        # torch, and its flush of a stdout that already failed would say so a second time.
        os._exit(code)


def finish(code: int) -> int:
    """Flush stdout and stderr; the exit code, 1 when stdout's last write fails."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
    except OSError as err:
        code = code or fail(write_error(err), 1)
    except ValueError:  # stdout closed by the program itself: nothing can reach it
        code = code or 1
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code

