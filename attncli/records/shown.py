"""A generation's view as drawn: --at's answer token and --layers resolved against the result,
and a view that names what the result does not hold refused in one line."""

from __future__ import annotations

from attncli.errors import AttnCliError
from attncli.records.asking import AUTO, GenerateView, GenerationRequest
from attncli.records.generation import GenerationResult


def answer_index(result: GenerationResult, at: str | int | None) -> int | None:
    """--at as an answer token's index: a whole number is the index, other text names the first
    answer token with that text (its leading space optional)."""
    if at is None or isinstance(at, int):
        return at
    digits = at.strip().removeprefix("-")
    if digits.isascii() and digits.isdigit():  # '²' and '--3' are texts, not numbers
        return int(at)
    texts = [t.text for t in result.answer]
    for wanted in (lambda text: text == at, lambda text: text.lstrip() == at.lstrip()):
        found = next((s for s, text in enumerate(texts) if wanted(text)), None)
        if found is not None:
            return found
    shown = ", ".join(repr(text) for text in texts[:LISTED])
    more = f", ... ({len(texts)} in all)" if len(texts) > LISTED else ""
    raise AttnCliError(f"--at {at!r} is not the text of an answer token (the answer's tokens: "
                       f"{shown or 'none'}{more})")


LISTED = 8  # answer tokens named when --at's text is not one of them


def check_view(result: GenerationResult, view: GenerateView) -> None:
    """Refuse a view that names an answer token, layer or head the result does not hold."""
    if view.kind == "value" and result.norms is None or (
            view.kind == "occlusion" and result.occlusion is None):
        raise AttnCliError(f"the {view.kind} view needs what this result did not compute "
                           "(a saved generation holds it only when made with that view)")
    n = len(result.answer)
    if view.at is not None and not 0 <= view.at < n:
        raise AttnCliError(f"--at {view.at} is not an answer token (the answer has {n} token"
                           f"{'' if n == 1 else 's'}: 0 to {n - 1})")
    held = result.layers_kept or (0, result.model.layers)
    if view.layers is not None:
        a, b = view.layers
        if not (held[0] <= a < b <= held[1]):
            raise AttnCliError(f"--layers {a}:{b} is outside the layers held, {held[0]}:"
                               f"{held[1]}")
    heads = result.model.heads
    if view.head is not None and (not 0 <= view.head < heads or (
            result.head_kept is not None and view.head != result.head_kept)):
        kept = "" if result.head_kept is None else f", kept: {result.head_kept}"
        raise AttnCliError(f"--head {view.head} is not a head held (the model has {heads} "
                           f"heads{kept})")


def shown_view(result: GenerationResult, request: GenerationRequest,
               kind: str | None = None) -> GenerateView:
    """The view of result that request asks for (kind: the request's unless given; auto: the
    one result was made with), --at and --layers resolved against it, and checked."""
    layers = request.layers
    span = None if layers is None else layers.resolve(result.model.layers, "layers")
    wanted = request.view if kind is None else kind
    view = GenerateView(at=answer_index(result, request.at), layers=span, head=request.head,
                        combine=request.combine, exclude_sinks=request.exclude_sinks,
                        kind=result.view if wanted == AUTO else wanted, occlude=request.occlude)
    check_view(result, view)
    return view
