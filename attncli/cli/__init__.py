"""The command line: the Typer app, its options, and where output goes."""

import gc
import sys


def main() -> None:
    """Console-script entry point; Ctrl-C while the CLI is still loading exits 130 quietly."""
    # Importing torch makes about a million objects, and the cycle collector walks them all
    # several times (~0.2 s); it is back on, with those objects frozen, once the input is read
    # (cli.streams.after_imports).
    gc.disable()
    try:
        from attncli.cli.streams import catch_interrupts

        catch_interrupts()
        from attncli.cli.main import main as run
    except KeyboardInterrupt:
        sys.stderr.write("attncli: error: interrupted\n")
        sys.exit(130)
    run()


__all__ = ["main"]
