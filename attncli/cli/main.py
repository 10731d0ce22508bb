"""The entry point: run the app, and map errors to one stderr line and an exit code.

torch is imported only by the commands that compute attention, so --help stays fast.
"""

from __future__ import annotations

import os
import sys

import typer

import attncli.cli.commands  # noqa: F401  (registers every command on the app)
from attncli.cli.app import app
from attncli.errors import AttnCliError


def _is_click_error(err: BaseException) -> bool:
    return any(cls.__name__ == "ClickException" for cls in type(err).__mro__)


def fail(message: str, code: int = 2) -> int:
    """The one place an error becomes a line on stderr and an exit code."""
    sys.stdout.flush()
    sys.stderr.write(f"attncli: error: {message}\n")
    sys.stderr.flush()
    return code


def execute(argv: list[str] | None = None) -> int:
    """Run the CLI on argv and return the exit code; no traceback for bad input."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="attncli", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except AttnCliError as err:
        return fail(str(err), err.exit_code)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as err:
        if _is_click_error(err):
            return fail(err.format_message(), getattr(err, "exit_code", 2))  # type: ignore[attr-defined]
        raise


def main() -> None:
    """Console-script entry point."""
    code = execute()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    sys.stderr.flush()
    if "torch" in sys.modules:
        # Interpreter shutdown after importing torch costs ~0.3 s; nothing is left to clean up.
        os._exit(code)
    sys.exit(code)
