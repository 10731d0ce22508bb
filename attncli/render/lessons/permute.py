"""`attncli permute`: A's and B's weights, without and with positions, and the finding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.text import Text

from attncli.render.draw.prose import prose
from attncli.render.draw.tables import Axis, render_matrix
from attncli.render.lessons.fit import fitted_labels
from attncli.render.lessons.lesson_text import diff_text, text

if TYPE_CHECKING:
    from attncli.core.result import Stack, TokenInfo
    from attncli.records.lessons import PermuteCase, PermuteResult


def _masked(matrix: Sequence[Sequence[float | None]], causal: bool) -> list[list[float | None]]:
    """Cells above the diagonal shown as masked for causal variants."""
    return [[None if causal and j > i else v for j, v in enumerate(row)]
            for i, row in enumerate(matrix)]


def _weights(console: Console, title: str, tokens: list[TokenInfo], weights: Stack,
             causal: bool, precision: int) -> RenderableType:
    rows = Axis([t.text for t in tokens], [t.index for t in tokens])
    matrix = _masked(weights[0], causal)
    cols = fitted_labels(console, rows, rows, matrix, precision)
    return render_matrix(console, title, rows, cols, matrix, precision, vmin=0.0, vmax=1.0,
                         show_legend=False)


def _finding(result: PermuteResult, case: PermuteCase, lang: str) -> str:
    diff = diff_text(case.max_abs_diff)
    if case.equivariant:
        return text(lang, "permute.equivariant" if not case.positions else "permute.same",
                    diff=diff)
    if not case.positions and result.masked:
        return text(lang, "permute.masked", diff=diff)
    return text(lang, "permute.differs", diff=diff)


def _case(console: Console, result: PermuteResult, case: PermuteCase, lang: str,
          precision: int) -> list[RenderableType]:
    heads = len(case.weights_a)
    head = text(lang, "permute.head", h=0, n=heads) if heads > 1 else ""
    parts: list[RenderableType] = [
        Text(), Text(text(lang, "permute.with" if case.positions else "permute.without"),
                     style="bold underline")]
    for which, tokens, weights in (("A", result.tokens_a, case.weights_a),
                                   ("B", result.tokens_b, case.weights_b)):
        title = text(lang, "permute.weights", which=which) + head
        parts += [_weights(console, title, tokens, weights, result.masked, precision)]
    parts.append(prose(console, _finding(result, case, lang)))
    return parts


def render_permute(console: Console, result: PermuteResult, lang: str = "en",
                   precision: int = 3) -> RenderableType:
    """Both texts' weights, without then with positions, each case with its finding."""
    title = text(lang, "permute.title", a=f"“{result.text_a}”", b=f"“{result.text_b}”",
                 variant=result.config["variant"])
    parts: list[RenderableType] = [
        Text(title, style="bold"),
        Text(text(lang, "permute.permutation", perm=result.permutation))]
    for case in (result.without_positions, result.with_positions):
        parts += _case(console, result, case, lang, precision)
    return Group(*parts)
