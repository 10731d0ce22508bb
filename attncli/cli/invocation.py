"""From a command's options to a pipeline Request and display settings, and back to output.

The glue the CLI's commands share; like the CLI, it imports torch only when a run needs it.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attncli.cli.options import View
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.cli.output import Page
    from attncli.core.display import DisplaySpec
    from attncli.core.pipeline import Request
    from attncli.core.result import LongResult, Result
    from attncli.render.views import ViewOptions


def build_request(text: str | None, file: Path | None, inputs: Path | None,
                  **settings: Any) -> Request:
    """Read the input (text or vectors) and gather the settings into a Request."""
    from attncli.core.inputs import load_inputs, read_text
    from attncli.core.pipeline import Request

    if inputs is not None:
        if text is not None or file is not None:
            raise AttnCliError("give TEXT, --file or --inputs, not more than one")
        return Request(inputs=load_inputs(inputs), **settings)
    return Request(text=read_text(text, file), **settings)


REQUEST_FIELDS = ("variant", "encoding", "allow_special", "seed", "emb_dim", "context_length",
                  "d_out", "heads", "dropout", "qkv_bias", "device", "model", "layer", "impl",
                  "top_k", "pool", "full", "positions")


def request_from(options: dict[str, Any], keep: tuple[str, ...] | None = None) -> Request:
    """The Request for a command's options (its locals()): the input read, enums as values.

    keep names the stages the command shows (None: all of them), so no others are converted.
    """
    settings: dict[str, Any] = {
        key: value.value if isinstance(value, Enum) else value
        for key, value in options.items() if key in REQUEST_FIELDS and value is not None}
    settings["keep"] = keep
    if options.get("model") is not None and options.get("variant") is not None:
        raise AttnCliError("--variant does not apply with --model: the checkpoint's own "
                           "attention is shown")
    return build_request(options.get("text"), options.get("file"), options.get("inputs"),
                         **settings)


def display_spec(precision: int, view: View, rows: str | None, cols: str | None,
                 head: int | None = None, query: str | None = None, show: str | None = None,
                 lang: str = "en") -> DisplaySpec:
    """The display options, syntax-checked before any work."""
    from attncli.core.display import display_spec as parse
    from attncli.core.result import STAGES

    return parse(precision, view.value, rows, cols, head, query, show, lang, STAGES)


def view_options(spec: DisplaySpec, result: Result | LongResult) -> ViewOptions:
    """The display options checked against the result (head, windows, query, stages)."""
    from attncli.core.display import check_head, resolve

    check_head(spec.head, result.num_heads)
    return resolve(spec, result)


def run_output(result: Result | LongResult, spec: DisplaySpec,
               options: ViewOptions) -> tuple[dict[str, Any], Page]:
    """The JSON and the renderer of a naive or a tiled run."""
    from attncli.core.result import LongResult

    if isinstance(result, LongResult):
        from attncli.render.long import render_long

        return result.to_dict(), lambda out: render_long(out, result, options)
    from attncli.render.run import render_run

    doc = result.to_dict(stages=list(options.stages or ()), query=options.query,
                         window=spec.window(len(result.tokens)))
    return doc, lambda out: render_run(out, result, options)
