"""The command line: the Typer app, its options, and where output goes."""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing is not imported before the signal handlers are in place
if TYPE_CHECKING:
    from typing import NoReturn


def main() -> None:
    """Console-script entry point; a signal while the CLI is still loading exits with one line."""
    # Importing torch makes about a million objects, and the cycle collector walks them all
    # several times (~0.2 s); it is back on, with those objects frozen, once the input is read
    # (cli.streams.after_imports).
    gc.disable()
    try:
        from attncli.cli import streams
    except KeyboardInterrupt:
        _exit("interrupted", 130)
    try:
        streams.catch_interrupts()
        from attncli.cli.main import main as run
    except KeyboardInterrupt:
        _exit(*streams.interruption())
    run()


def _exit(message: str, code: int) -> NoReturn:
    try:
        sys.stderr.write(f"attncli: error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


__all__ = ["main"]
