"""The command line: the Typer app, its options, and where output goes."""

import sys


def main() -> None:
    """Console-script entry point; Ctrl-C while the CLI is still loading exits 130 quietly."""
    try:
        from attncli.cli.main import main as run
    except KeyboardInterrupt:
        sys.stderr.write("attncli: error: interrupted\n")
        sys.exit(130)
    run()


__all__ = ["main"]
