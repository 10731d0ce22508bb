"""What the commands share between reading their options and printing: the input source and
the display record. Like the commands, it imports torch only where a run needs it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.core.display import Display, Scale, View, Window
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.core.inputs import InputVectors
    from attncli.core.result import Result


def read_source(text: str | None, file: str | None,
                inputs: str | None = None) -> tuple[str | None, InputVectors | None]:
    """The run's input: text (TEXT, '-', --file or piped stdin), or --inputs vectors."""
    from attncli.cli.streams import after_imports
    from attncli.core.inputs import load_inputs, read_text

    after_imports()  # the command's imports are done by now
    if inputs is not None:
        if text is not None or file is not None:
            raise AttnCliError("give TEXT, --file or --inputs, not more than one")
        return None, load_inputs(inputs)
    return read_text(text, file), None


def display_of(result: Result, precision: int, view: View, rows: Window | None = None,
               cols: Window | None = None, stages: tuple[str, ...] | None = None,
               lang: str = "en", scale: Scale = Scale.shared) -> Display:
    """The display record for a result: --rows/--cols resolved against its tokens."""
    size = len(result.tokens)
    return Display(precision=precision, view=view,
                   rows=None if rows is None else rows.resolve(size),
                   cols=None if cols is None else cols.resolve(size), stages=stages, lang=lang,
                   scale=scale.value)
