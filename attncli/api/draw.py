"""attncli.show and attncli.view: draw attention weights a user computed themselves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attncli.api.args import checked, in_range, numbers_of, token_texts
from attncli.api.notebook import print_out, shell_kind
from attncli.api.results import Result
from attncli.core.display import Display
from attncli.errors import AttnCliError


def _nested(weights: Any) -> Any:
    """A tensor (any device, with grad), an array or nested lists, as nested lists: [N][N] or
    [H][N][N]; a leading batch of one, [1][H][N][N], is dropped."""
    data = weights
    if isinstance(data, str | bytes | dict) or not (hasattr(data, "tolist")
                                                   or isinstance(data, list | tuple)):
        raise AttnCliError(f"weights must be a tensor, an array or nested lists (got "
                           f"{type(data).__name__}); `attncli show FILE` reads a saved file")
    shape = getattr(data, "shape", None)
    if shape is not None and 0 in tuple(shape):
        raise AttnCliError(f"weights are empty (shape {tuple(shape)})")
    data = numbers_of(data, "weights", floats=True)  # bool and integer weights as numbers
    data = _lists(data)
    depth, probe = 0, data
    while isinstance(probe, list) and probe:
        depth, probe = depth + 1, probe[0]
    if depth == 4:
        if len(data) != 1:
            raise AttnCliError(f"weights hold a batch of {len(data)}: pass one of them, "
                               "weights[0], as [H][N][N]")
        data = data[0]
    elif depth not in (2, 3):
        raise AttnCliError(f"weights must be [N][N] or [H][N][N] (got {depth} dimensions)")
    return data


def _lists(data: Any) -> Any:
    """Tuples as lists, as the JSON they stand for; a row of numbers is taken whole (the
    checks after read each cell)."""
    if not isinstance(data, tuple | list):
        return data
    if data and not isinstance(data[0], tuple | list):
        return data if isinstance(data, list) else list(data)
    return [_lists(v) for v in data]


@checked
def view(weights: Any, tokens: Sequence[str] | None = None, precision: int = 4) -> Result:
    """Weights as a Result that shows itself: the page in a notebook, tables in a terminal."""
    from attncli.saved.weights import weights_result

    in_range("view", "precision", precision, 0, 8)
    record = weights_result(_nested(weights), token_texts(tokens, "row"))
    return Result(record, Display(precision=precision), mode="weights")


@checked
def show(weights: Any, tokens: Sequence[str] | None = None, precision: int = 4) -> None:
    """Draw weights ([N][N] or [H][N][N]: a tensor, an array or lists) with their tokens: as
    the interactive page in Jupyter or VS Code, as coloured tables in IPython or a terminal."""
    shown = view(weights, tokens, precision)
    if shell_kind() is not None:
        from IPython.display import display

        display(shown)
    else:
        print_out(shown.renderable)
