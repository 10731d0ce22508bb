"""The API's arguments checked before any work, each against the type its option has, so a
wrong type is one AttnCliError naming it (never a TypeError from deep inside)."""

from __future__ import annotations

import math
import os
import types
import typing
from collections.abc import Callable, Sequence
from enum import Enum
from functools import cache
from typing import Any

from attncli.errors import AttnCliError

if typing.TYPE_CHECKING:
    from attncli.core.display import Window


@cache
def request_types() -> dict[str, Any]:
    """Request's fields and their types, read from its annotations."""
    from attncli.core.request import Request

    return typing.get_type_hints(Request)


def _names(hint: Any) -> list[Any]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return list(typing.get_args(hint))
    return [hint]


def _fits(value: Any, kind: Any) -> bool:
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return isinstance(value, str | kind)
    if kind in (list, dict, tuple):
        return isinstance(value, kind)
    if typing.get_origin(kind) is tuple:  # a fixed pair such as (RIGHT, WRONG): a list too
        parts = typing.get_args(kind)
        return isinstance(value, tuple | list) and len(value) == len(parts) and all(
            _fits(v, part) for v, part in zip(value, parts, strict=True))
    return True  # a record (InputVectors): built by attncli itself


def _said(kind: Any) -> str:
    if isinstance(kind, type) and issubclass(kind, Enum):
        return "one of " + ", ".join(repr(m.value) for m in kind)
    if typing.get_origin(kind) is tuple:
        parts = typing.get_args(kind)
        return ("a pair" if len(parts) == 2 else f"a tuple of {len(parts)}") + " (" + ", ".join(
            _said(part) for part in parts) + ")"
    return {type(None): "None", bool: "True or False", int: "an integer", float: "a number",
            str: "a string", list: "a list", dict: "a dict", tuple: "a tuple"}.get(
                kind, getattr(kind, "__name__", str(kind)))


def typed(call: str, name: str, value: Any, hint: Any) -> Any:
    """value, checked against hint (a type or a union); a path may be any os.PathLike."""
    if isinstance(value, os.PathLike) and str in _names(hint):
        value = os.fspath(value)
    kinds = _names(hint)
    if not any(_fits(value, kind) for kind in kinds):
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise AttnCliError(f"attncli.{call}(): {name} must be "
                           f"{' or '.join(_said(k) for k in kinds)} (got "
                           f"{type(value).__name__} {shown})")
    return value


def options(call: str, given: dict[str, Any], apart: tuple[str, ...] = ()) -> dict[str, Any]:
    """The Request options of a call (apart: those its command does not offer), each checked
    by its field's type."""
    import difflib

    hints = request_types()
    names = [n for n in hints if n not in ("text", "inputs", *apart)]
    out = {}
    for name, value in given.items():
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise AttnCliError(f"attncli.{call}() has no option {name!r}{hint}; its options: "
                               f"{', '.join(names)}")
        out[name] = typed(call, name, value, hints[name])
    return out


def record_options(call: str, record: type, given: dict[str, Any]) -> dict[str, Any]:
    """given, each value checked against the type of record's field of its name (the record
    then checks its bounds and choices, as for the command line)."""
    hints = typing.get_type_hints(record)
    return {name: typed(call, name, value, hints[name]) for name, value in given.items()}


def checked(function: Callable[..., Any]) -> Callable[..., Any]:
    """function, its arguments bound first: an unknown keyword or a wrong count is one
    AttnCliError naming it (with the keyword it was likely meant to be); run with its messages
    naming options as keywords (max_new_tokens, not --max-new-tokens)."""
    import difflib
    import functools
    import inspect

    from attncli.opt import keywords

    signature = inspect.signature(function)
    known = [name for name in signature.parameters if not name.startswith("_")]

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as err:
            unknown = [k for k in kwargs if k not in signature.parameters]
            if unknown:
                close = difflib.get_close_matches(unknown[0], known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise AttnCliError(f"attncli.{function.__name__}() has no option "
                                   f"{unknown[0]!r}{hint}; its options: {', '.join(known)}"
                                   ) from None
            raise AttnCliError(f"attncli.{function.__name__}(): {err}") from None
        with keywords():
            return function(*args, **kwargs)

    return call


def window(value: Any, name: str) -> Window | None:
    """--rows, --cols or --layers as "a:b" (the CLI's grammar) or a pair (a, b)."""
    from attncli.core.display import parse_window

    if value is None:
        return None
    if not isinstance(value, str):
        # bytes are a Sequence of ints too, but no window: b"\x01\x03" is not (1, 3)
        pair = isinstance(value, Sequence) and not isinstance(value, bytes | bytearray) \
            and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value)
        if not pair:
            raise AttnCliError(f"{name} must be 'a:b' or a pair of integers (got {value!r:.60})")
        value = f"{value[0]}:{value[1]}"
    return parse_window(value, f"{name}=")


def in_range(call: str, name: str, value: int, low: int, high: int) -> int:
    """An integer argument within [low, high], as the CLI's option bounds it."""
    typed(call, name, value, int)
    if not low <= value <= high:
        raise AttnCliError(f"attncli.{call}(): {name} must be in {low}..{high} (got {value})")
    return value


def numbers_of(data: Any, what: str, floats: bool = False) -> Any:
    """A tensor's or an array's numbers as nested lists (anything else as it is), its size
    estimated before the copy and complex numbers refused; floats: a tensor as float32 first."""
    from attncli.saved.parts import check_cells

    shape = getattr(data, "shape", None)
    if shape is None or not hasattr(data, "tolist"):
        if isinstance(data, list | tuple):  # from the outer lengths, before a walk of every cell
            outer = _outer_shape(data)
            check_cells(math.prod(outer), f"{what} of shape {outer}")
        return data
    check_cells(math.prod(int(n) for n in shape), f"{what} of shape {tuple(shape)}")
    if "complex" in str(getattr(data, "dtype", "")):
        raise AttnCliError(f"{what} must be real numbers (got complex ones)")
    try:
        if hasattr(data, "detach"):  # any device, with grad
            data = data.detach().cpu().float() if floats else data.detach().cpu()
        return data.tolist()
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as err:
        raise AttnCliError(f"cannot read the {what}: {str(err).splitlines()[0]}") from None


def _outer_shape(data: Any) -> tuple[int, ...]:
    """The lengths of nested lists along their first items (the shape, when rectangular)."""
    lengths: list[int] = []
    while isinstance(data, list | tuple) and len(lengths) < 8:
        lengths.append(len(data))
        if not data:
            break
        data = data[0]
    return tuple(lengths)


def token_texts(tokens: Any, per: str) -> list[str] | None:
    """tokens= as a list of strings, one per row or vector (one string is not a list)."""
    if tokens is None:
        return None
    if isinstance(tokens, str) or not isinstance(tokens, Sequence) or not all(
            isinstance(t, str) for t in tokens):
        raise AttnCliError(f"tokens must be a list of strings, one per {per} (got "
                           f"{tokens!r:.60})")
    return list(tokens)
