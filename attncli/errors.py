"""The one error type attncli raises for bad usage or bad input."""


class AttnCliError(Exception):
    """A user-facing problem: the CLI prints its message on one line and exits 2."""

    exit_code = 2
