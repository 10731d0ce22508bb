"""The suite's one numeric comparison: |actual - ref| <= atol + rtol * |ref|, elementwise.

The house bound is atol = rtol = 1e-5 (float32 maths checked against an independent reference,
on any CPU level and thread count). A test that needs another bound passes it and says why in a
comment beside the call. Tensors, numpy arrays, nested lists, scalars and mappings of them are
compared; None (a masked cell in JSON) reads as NaN, and NaN passes only with equal_nan=True,
where it must sit in the same places on both sides. atol may be an array (row_atol: a bound per
row, for vectors made by sums).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

ATOL = 1e-5
RTOL = 1e-5


def _array(value: Any) -> np.ndarray:
    """value as a float64 numpy array (tensors detached and moved to the CPU, None as NaN)."""
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu()
        if value.dtype.is_complex:
            raise TypeError("complex values are not compared")
        return np.asarray(value.double().numpy(), dtype=np.float64)
    if isinstance(value, (list, tuple)):
        return np.asarray(_none_as_nan(value), dtype=np.float64)
    return np.asarray(np.nan if value is None else value, dtype=np.float64)


def _none_as_nan(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_none_as_nan(v) for v in value]
    if hasattr(value, "detach"):
        return value.detach().cpu().double().tolist()
    return np.nan if value is None else value


def _at(where: tuple[int, ...], a: np.ndarray, r: np.ndarray) -> str:
    return f"index {where}: a={float(a[where])!r}, ref={float(r[where])!r}"


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _bound_text(atol: Any, rtol: float) -> str:
    if np.ndim(atol):
        low, high = float(np.min(atol)), float(np.max(atol))
        return f"|a - ref| <= atol + {rtol:g}*|ref| (atol per row, {low:g} to {high:g})"
    return f"|a - ref| <= {atol:g} + {rtol:g}*|ref|"


def row_atol(ref: Any, atol: float = ATOL) -> np.ndarray:
    """atol scaled by each last-axis row's size, max(1, max|ref row|): the bound for a vector made
    by sums, whose float32 rounding is relative to Σ|w·x| over the row, not to each element (an
    element near 0.1 in a context row reaching 25 carries the row's rounding)."""
    r = np.abs(np.nan_to_num(_array(ref)))
    return atol * np.maximum(1.0, r.max(axis=-1, keepdims=True) if r.ndim else r)


def mismatch(actual: Any, ref: Any, *, atol: Any = ATOL, rtol: float = RTOL,
             equal_nan: bool = False) -> str | None:
    """Why actual is not within atol + rtol*|ref| of ref (the worst element named), else None."""
    if isinstance(ref, Mapping) or isinstance(actual, Mapping):
        if not (isinstance(ref, Mapping) and isinstance(actual, Mapping)):
            other = ref if isinstance(actual, Mapping) else actual
            return f"a mapping compared with a {type(other).__name__}"
        if set(actual) != set(ref):
            return f"keys differ: {sorted(map(str, actual))} against {sorted(map(str, ref))}"
        for key in ref:
            why = mismatch(actual[key], ref[key], atol=atol, rtol=rtol, equal_nan=equal_nan)
            if why is not None:
                return f"[{key!r}] {why}"
        return None
    a, r = _array(actual), _array(ref)
    try:
        shape = np.broadcast_shapes(a.shape, r.shape)
    except ValueError:
        return f"shapes differ: {a.shape} against ref {r.shape}"
    if shape != a.shape:  # ref may be a scalar or broadcast over actual, never the other way
        return f"shapes differ: {a.shape} against ref {r.shape}"
    r = np.broadcast_to(r, shape)
    a_nan, r_nan = np.isnan(a), np.isnan(r)
    if (a_nan | r_nan).any() and not equal_nan:
        return (f"NaN (or a masked None) at {_at(_first(a_nan | r_nan), a, r)} "
                "(pass equal_nan=True where masked cells are expected)")
    if (a_nan != r_nan).any():
        return f"NaN in one side only at {_at(_first(a_nan != r_nan), a, r)}"
    both = ~(a_nan | r_nan)
    with np.errstate(invalid="ignore", over="ignore"):
        infinite = both & (np.isinf(a) | np.isinf(r))
        wrong_inf = infinite & (a != r)
        if wrong_inf.any():
            return f"infinite value differs at {_at(_first(wrong_inf), a, r)}"
        finite = both & ~infinite
        diff = np.where(finite, np.abs(a - r), 0.0)
        bound = np.broadcast_to(atol + rtol * np.abs(np.where(finite, r, 0.0)), shape)
    bad = diff > bound
    if not bad.any():
        return None
    excess = np.where(bad, diff - bound, -np.inf)
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), shape))
    return (f"{int(bad.sum())} of {a.size} elements outside {_bound_text(atol, rtol)}; worst at "
            f"{_at(where, a, r)}, |a - ref|={diff[where]:.6g} > bound {bound[where]:.6g}")


def near(actual: Any, ref: Any, *, atol: Any = ATOL, rtol: float = RTOL,
         equal_nan: bool = False) -> bool:
    """Whether every element of actual is within atol + rtol*|ref| of ref."""
    return mismatch(actual, ref, atol=atol, rtol=rtol, equal_nan=equal_nan) is None


def assert_near(actual: Any, ref: Any, *, atol: Any = ATOL, rtol: float = RTOL,
                equal_nan: bool = False, msg: object = None) -> None:
    """Fail, naming the worst element, its values and the bound, unless actual is near ref
    (msg, or msg(why) where it is callable, says which comparison it was)."""
    why = mismatch(actual, ref, atol=atol, rtol=rtol, equal_nan=equal_nan)
    if why is not None:
        raise AssertionError(why if msg is None else msg(why) if callable(msg) else f"{msg}: {why}")
