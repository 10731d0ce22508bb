"""What the commands share between reading their options and printing: the input source, the
request built from their groups, and the display record. Like the commands, it imports torch
only where a run needs it."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from attncli.core.display import display_of
from attncli.core.request import Request
from attncli.errors import AttnCliError

__all__ = ["display_of", "read_source", "request_of"]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from attncli.core.inputs import InputVectors

REQUEST_FIELDS = {f.name for f in fields(Request)}


def read_source(text: str | None, file: str | None, inputs: str | None = None,
                settle: bool = True) -> tuple[str | None, InputVectors | None]:
    """The run's input: text (TEXT, '-', --file or piped stdin), or --inputs vectors.

    settle: the command's imports are done by now (else it calls after_imports itself, once
    the input has been checked and the computation imported: bad input never imports torch)."""
    from attncli.cli.streams import after_imports
    from attncli.core.inputs import load_inputs, read_text

    if settle:
        after_imports()
    if inputs is not None:
        if text is not None or file is not None:
            raise AttnCliError("give TEXT, --file or --inputs, not more than one")
        return None, load_inputs(inputs)
    return read_text(text, file), None


def request_of(source: tuple[str | None, InputVectors | None], *groups: DataclassInstance,
               **given: Any) -> Request:
    """The run's Request: the input, each group's fields that are Request's, then given."""
    settings = {f.name: getattr(group, f.name) for group in groups for f in fields(group)
                if f.name in REQUEST_FIELDS}
    return Request(text=source[0], inputs=source[1], **(settings | given))
