"""The command line: the Typer app, its options, and where output goes."""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing is not imported before the signal handlers are in place
if TYPE_CHECKING:
    from typing import NoReturn


def quiet_threads() -> None:
    """Idle OpenMP threads sleep at once instead of spinning (unless OMP_WAIT_POLICY is set).

    A model run alternates torch's OpenMP regions with the GGUF dequantizer's own threads;
    torch's workers, spinning after each region, took the cores the dequantizer needed, and
    small ops then waited on them: `heads` on a 1B Q8_0 file ran 6.6-8.7 s with the default
    policy, 3.6-3.8 s with PASSIVE (2 cores). libgomp reads it once, when torch is imported.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not os.environ.get("OMP_NUM_THREADS", "x").strip():
        del os.environ["OMP_NUM_THREADS"]  # set but blank: unset, not an OpenMP warning


def main() -> None:
    """Console-script entry point; a signal while the CLI is still loading exits with one line."""
    try:  # from the first line: Ctrl-C while anything loads is one line, exit 130
        quiet_threads()
        # Importing torch makes about a million objects, and the cycle collector walks them all
        # several times (~0.2 s); it is back on, with those objects frozen, once the input is
        # read (cli.streams.after_imports).
        gc.disable()
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
