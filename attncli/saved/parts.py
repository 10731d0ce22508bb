"""The checks every part of a saved document is made of: each names where in the file it failed."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from attncli.core.sizes import LIST_CELL_BYTES
from attncli.core.tokens import visible
from attncli.errors import AttnCliError
from attncli.machine import check_fits

_HEX = re.compile(r"(?:[0-9a-f]{2})*")


def shown(value: Any) -> str:
    """A short, one-line, escaped form of a bad value for a message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return visible(text if len(text) <= 40 else text[:37] + "...")


def bad(where: str, value: Any, expected: str) -> AttnCliError:
    """The one-line error for a part that is not what it must be."""
    return AttnCliError(f"saved file: {where} is {shown(value)}, not {expected}")


def obj(value: Any, where: str) -> dict[str, Any]:
    """An object."""
    if not isinstance(value, dict):
        raise bad(where, value, "an object")
    return value


def need(doc: dict[str, Any], key: str, where: str) -> Any:
    """doc[key], which must be there."""
    if key not in doc:
        raise AttnCliError(f"saved file: {where} has no {key!r}")
    return doc[key]


def integer(value: Any, where: str, low: int = 0, high: int | None = None) -> int:
    """A whole number in low..high (high included), not a bool or a float."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad(where, value, "a whole number")
    if value < low or (high is not None and value > high):
        span = f"{low} to {high}" if high is not None else f"{low} or more"
        raise AttnCliError(f"saved file: {where} is {value}, outside {span}")
    return value


def number(value: Any, where: str) -> float:
    """A finite number (an int counts), not a bool."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise bad(where, value, "a finite number")
    return float(value)


def ranged(value: Any, where: str, low: float, high: float, expected: str) -> float:
    """A finite number from low to high, else the line that it is not the expected one."""
    if not low <= (found := number(value, where)) <= high:
        raise bad(where, value, expected)
    return found


def maybe(value: Any, check: Any, *args: Any) -> Any:
    """None, or what check makes of value."""
    return None if value is None else check(value, *args)


def string(value: Any, where: str) -> str:
    """A string, as a terminal may show it: control characters and lone surrogates escaped."""
    if not isinstance(value, str):
        raise bad(where, value, "a string")
    return visible(value)


def printable(value: Any) -> Any:
    """A part no renderer reads, kept as the file has it but printable: every string in it (keys
    too) with its control characters and lone surrogates escaped, as a checked string's are (a
    lone surrogate from a JSON escape cannot be written out again)."""
    if isinstance(value, dict):
        return {string(str(k), "key"): printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable(v) for v in value]
    return string(value, "") if isinstance(value, str) else value


def choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    """One of choices."""
    if value not in choices:
        raise bad(where, value, f"one of {', '.join(choices)}")
    return str(value)


def flag(value: Any, where: str) -> bool:
    """true or false."""
    if not isinstance(value, bool):
        raise bad(where, value, "true or false")
    return value


def hex_bytes(value: Any, where: str) -> str:
    """Bytes written as lowercase hex pairs."""
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise bad(where, value, "bytes as hex digits")
    return value


def items(value: Any, where: str, length: int | None = None) -> list[Any]:
    """A list, of exactly length items when length is given."""
    if not isinstance(value, list):
        raise bad(where, value, "a list")
    if length is not None and len(value) != length:
        raise AttnCliError(f"saved file: {where} has {len(value):,} items, expected {length:,}")
    return value


def row(value: Any, where: str, length: int | None, nulls: bool) -> list[float | None]:
    """A list of finite numbers (null too where nulls), of length items when given."""
    out: list[float | None] = []
    for j, v in enumerate(items(value, where, length)):
        if v is None and nulls:
            out.append(None)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
        else:
            raise bad(f"{where}[{j}]", v, "a finite number or null" if nulls
                      else "a finite number")
    return out


def check_cells(cells: int, what: str) -> None:
    """Refuse, before the copies are made, numbers whose copies would not fit in memory."""
    check_fits(4 * LIST_CELL_BYTES * cells, f"{what} ({cells:,} numbers)",
               "show a smaller file")
