"""attncli.run, attncli.explain and attncli.heads: the CLI's commands as functions.

Each builds the same typed Request (and Extract) as its command, from keyword arguments named
as the command's options (--d-out is d_out), and returns the same result contract.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from attncli.api.args import (
    checked,
    in_range,
    numbers_of,
    options,
    token_texts,
    typed,
    window,
)
from attncli.api.results import HeadsResult, Result
from attncli.core.display import Display, View, display_of, parse_stages
from attncli.core.request import Extract, Request
from attncli.core.result import STAGES
from attncli.errors import AttnCliError
from attncli.records.heads import HeadsOptions


def _stages(show: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if show is None or isinstance(show, str):
        return parse_stages(show, STAGES)
    if not isinstance(show, Sequence) or not all(isinstance(n, str) for n in show):
        raise AttnCliError(f"show must be 'scores,weights' or a list of stage names (got "
                           f"{show!r})")
    return parse_stages(",".join(show), STAGES)


def _extract(call: str, head: Any, query: Any) -> tuple[int | None, str | None]:
    typed(call, "head", head, int | None)
    typed(call, "query", query, str | int | None)
    return head, None if query is None else str(query)


def _source(text: str | None, file: str | os.PathLike[str] | None,
            inputs: Any, tokens: Sequence[str] | None) -> dict[str, Any]:
    """The request's text or vectors: a string, a file, or vectors (a JSON path, a nested list,
    a tensor or an array of (T, d_in))."""
    from attncli.core.inputs import input_vectors, load_inputs, read_text

    if sum(v is not None for v in (text, file, inputs)) != 1:
        raise AttnCliError("give text, file= or inputs=, exactly one")
    if inputs is None:
        if tokens is not None:
            raise AttnCliError("tokens= names the rows of inputs= vectors; text is tokenised")
        if file is not None:
            return {"text": read_text(None, typed("run", "file", file, str))}
        return {"text": _text(text)}
    labels = token_texts(tokens, "vector")
    if isinstance(inputs, str | os.PathLike):
        if tokens is not None:
            raise AttnCliError("tokens= goes with vectors; a JSON file gives its own \"tokens\"")
        return {"inputs": load_inputs(inputs)}
    shape = getattr(inputs, "shape", None)
    if shape is not None and (len(shape) not in (2, 3) or (len(shape) == 3 and shape[0] != 1)):
        raise AttnCliError(f"inputs must be (T, d_in) vectors, or a batch of one, (1, T, d_in) "
                           f"(got shape {tuple(shape)})")
    data = numbers_of(inputs, "inputs")
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], list) and data[0] \
            and isinstance(data[0][0], list):
        data = data[0]  # a batch of one, (1, T, d_in)
    return {"inputs": input_vectors(data, labels)}


def _text(text: str | None) -> str:
    if not isinstance(text, str):
        raise AttnCliError(f"text must be a string (got {type(text).__name__})")
    if not text.strip():
        raise AttnCliError("the input text is empty (or only whitespace)")
    return text


# The Request options `attncli explain` does not offer: the tiled path's, and run's --measure
# (explain shows every N × N stage of the weights); a test keeps this equal to its --help.
NOT_EXPLAINS = ("top_k", "pool", "full", "measure")


def _request(call: str, text: str | None, file: Any, inputs: Any, tokens: Any,
             given: dict[str, Any]) -> Request:
    apart = NOT_EXPLAINS if call == "explain" else ()
    return Request(**_source(text, file, inputs, tokens), **options(call, given, apart))


@checked
def run(text: str | None = None, *, file: str | os.PathLike[str] | None = None,
        inputs: Any = None, tokens: Sequence[str] | None = None,
        show: str | Sequence[str] | None = None, rows: str | Sequence[int] | None = None,
        cols: str | Sequence[int] | None = None, query: str | int | None = None,
        head: int | None = None, precision: int = 4, **options: Any) -> Result:
    """Run one attention variant (or a checkpoint's layer) as `attncli run` does.

    options are `run`'s: variant, model, layer, seed, emb_dim, d_out, heads, dropout,
    qkv_bias, context_length, positions, encoding, allow_special, impl, top_k, pool, full,
    measure, predict, device. Example: attncli.run("Your journey starts with one step",
    variant="multihead", heads=2).weights
    """
    from attncli.models.run import run_request
    from attncli.render.page import page_extra

    in_range("run", "precision", precision, 0, 8)
    head, query = _extract("run", head, query)
    request = _request("run", text, file, inputs, tokens, options)
    windows = window(rows, "rows"), window(cols, "cols")
    stages = _stages(show)
    extract = Extract(stages=stages or (), rows=windows[0], cols=windows[1], query=query,
                      head=head, maps=True, page=True)
    record = run_request(request, extract)
    return Result(record, display_of(record, precision, View.auto, *windows, stages),
                  extra=page_extra(record))


@checked
def explain(text: str | None = None, *, file: str | os.PathLike[str] | None = None,
            inputs: Any = None, tokens: Sequence[str] | None = None,
            show: str | Sequence[str] | None = None, query: str | int | None = None,
            head: int | None = None, lang: str = "en", precision: int = 4,
            **options: Any) -> Result:
    """Every stage of one run, as `attncli explain` does: result.stages holds them by name
    ("scores", "scaled", "masked", "softmax", ...), and it displays as the walk-through."""
    from attncli.models.run import run_request

    if lang not in ("en", "zh"):
        raise AttnCliError(f"unknown lang {lang!r} (choose from en, zh)")
    in_range("explain", "precision", precision, 0, 8)
    head, query = _extract("explain", head, query)
    request = _request("explain", text, file, inputs, tokens, options)
    stages = _stages(show)
    extract = Extract(stages=stages, query=query, head=head, lens=request.predict is not None)
    record = run_request(request, extract, naive_only=True)
    display = Display(precision=precision, stages=stages, lang=lang)
    return Result(record, display, mode="explain")


@checked
def heads(text: str | None = None, model: str | os.PathLike[str] | None = None, *,
          file: str | os.PathLike[str] | None = None, sort: str = HeadsOptions.sort,
          layers: str | Sequence[int] | None = None, probe: str | None = HeadsOptions.probe,
          probe_length: int = HeadsOptions.probe_length,
          probe_seed: int = HeadsOptions.probe_seed, threshold: float = HeadsOptions.threshold,
          measure: str = Request.measure.value, allow_special: bool = Request.allow_special,
          num_heads: int | None = None, precision: int = 3) -> HeadsResult:
    """Every layer × head of a checkpoint, as `attncli heads` does: measures, TransformerLens's
    head scores (previous_token, duplicate_token, induction), sinks and thumbnails. model comes
    second, by position or keyword, as generate's."""
    from attncli.models.run import run_heads
    from attncli.render.page import page_extra

    if model is None:
        raise AttnCliError("attncli.heads(): missing a required argument: 'model'")

    for name, value, hint in (("sort", sort, str), ("probe", probe, str | None),
                              ("probe_seed", probe_seed, int), ("threshold", threshold, float),
                              ("measure", measure, str), ("allow_special", allow_special, bool),
                              ("num_heads", num_heads, int | None), ("model", model, str)):
        typed("heads", name, value, hint)
    in_range("heads", "probe_length", probe_length, 1, 4096)
    in_range("heads", "precision", precision, 0, 8)
    if not 0.0 <= threshold <= 1.0:
        raise AttnCliError(f"attncli.heads(): threshold must be in [0, 1] (got {threshold})")
    if probe not in (None, "induction", "previous", "duplicate"):
        raise AttnCliError(f"unknown probe {probe!r} (choose from induction, previous, "
                           "duplicate)")
    if probe is not None and (text is not None or file is not None):
        raise AttnCliError(f"probe={probe!r} runs on its own random tokens: give no text or file")
    source = "" if probe is not None else _source(text, file, None, None)["text"]
    request = Request(text=source, model=os.fspath(model), heads=num_heads,
                      allow_special=allow_special, measure=measure)  # type: ignore[arg-type]
    options = HeadsOptions(sort=sort, layers=window(layers, "layers"), probe=probe,
                           probe_length=probe_length, probe_seed=probe_seed, threshold=threshold)
    record = run_heads(request, options)
    return HeadsResult(record, precision, extra=page_extra(record))
