"""How much a chat template may build. Every value a render makes is weighed (characters, items
or bytes, a part held twice counted twice, as writing it out counts it) against the render's
bound; a call that could build far more than its operands from a small argument (a width, a
count, a repeated field, a separator between many items) is weighed before it runs.

The weights are estimates within a small factor of the memory a value takes, never exact: the
bound is on the order of magnitude, so that a hostile template is one line, not a full machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from jinja2.utils import Namespace

WORK_LIMIT = 50_000_000  # element copies one call may make (adding up sequences copies each)


class Stop(Exception):
    """Raised inside a render that went past a bound."""


def weight(value: Any, limit: int) -> int:
    """About how many characters value holds written out, or items, or bytes of a number;
    counting stops once it passes limit."""
    total, stack = 0, [value]
    while stack and total <= limit:
        v = stack.pop()
        if isinstance(v, str | bytes | bytearray):
            total += len(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            total += v.bit_length() // 8 + 1
        elif isinstance(v, dict):
            total += len(v) + 1
            if total <= limit:
                stack.extend(v.keys())
                stack.extend(v.values())
        elif isinstance(v, list | tuple | set | frozenset):
            total += len(v) + 1
            if total <= limit:
                stack.extend(v)
        elif isinstance(v, Namespace):
            stack.append(getattr(v, "_Namespace__attrs", None))
        else:
            total += 1
    return total


def check(value: Any, limit: int, what: str) -> Any:
    """value, if it weighs at most limit; else Stop naming what built it."""
    if weight(value, limit) > limit:
        raise Stop(f"{what} builds a value larger than {limit:,} (characters, items or bytes)")
    return value


def refuse_past(estimate: int, limit: int, what: str) -> None:
    """Stop before a call whose result would weigh about estimate, when that passes limit."""
    if estimate > limit:
        raise Stop(f"{what} would build a value larger than {limit:,} (characters, items or "
                   "bytes)")


def _int(value: Any) -> int:
    """A size argument as a number (a string or anything else counts for nothing)."""
    return abs(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def binop(operator: str, left: Any, right: Any, limit: int) -> None:
    """Stop before left operator right builds more than limit (or a number of more than limit
    bytes)."""
    sized = (str, bytes, list, tuple)
    estimate = 0
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, sized):
                estimate = weight(seq, limit) * _int(n)
        if _int(left) and _int(right):
            estimate = (_int(left).bit_length() + _int(right).bit_length()) // 8
    elif operator == "+" and isinstance(left, sized) and isinstance(right, sized):
        estimate = weight(left, limit) + weight(right, limit)
    elif operator == "**" and _int(left) and isinstance(right, int | float):
        estimate = int(min(abs(right), 8 * limit + 8) * max(_int(left), 2).bit_length()) // 8
    elif operator == "%" and isinstance(left, str | bytes):
        estimate = percent(left, right, limit)
    refuse_past(estimate, limit, f"an expression ({operator})")


# One %-conversion: a mapping key, flags, a width and a precision (each a number or *).
PERCENT = re.compile(r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                     r"[hlL]?(?P<type>.)", re.DOTALL)


def percent(template: str | bytes, values: Any, limit: int) -> int:
    """About how long template % values is: each conversion at most its width and precision
    (a * takes its number from the values) and the whole of the values (ten times that as a
    repr, whose escapes are longer than the characters)."""
    text = template if isinstance(template, str) else template.decode("latin-1")
    args = values if isinstance(values, tuple) else (values,)
    whole, stars = weight(values, limit), sum(_int(a) for a in args)
    total = len(text)
    for match in PERCENT.finditer(text):
        for part in ("width", "prec"):
            given = match[part]
            total += stars if given == "*" else _number(given, limit) if given else 0
        total += whole * (10 if match["type"] in "ra" else 1)
        if total > limit:
            break
    return total


def _number(digits: str, limit: int) -> int:
    """A width written in digits; past a dozen of them, more than any bound."""
    return int(digits) if len(digits) < 12 else 8 * limit + 8


# The greatest width or precision in a format spec: [[fill]align][sign][z][#][0][width]...
SPEC_NUMBERS = re.compile(r"\d+")


def spec_size(spec: str, limit: int) -> int:
    """The largest width or precision a format spec ('>20', '.3f', '0>1000') asks for."""
    sizes = [_number(n, limit) for n in SPEC_NUMBERS.findall(spec[1:])]
    first = SPEC_NUMBERS.match(spec)
    if first:
        sizes.append(_number(first[0], limit))
    return max(sizes, default=0)


def _replaced(s: Any, old: Any, new: Any, count: Any = -1) -> int:
    if not isinstance(s, str | bytes) or not isinstance(new, str | bytes) or \
            type(old) is not type(s):
        return 0
    text: Any = s  # str or bytes, old of the same type
    found = len(s) + 1 if not old else int(text.count(old))
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * len(new)


def _joined(limit: int, separator: Any, items: Any) -> int:
    if not isinstance(items, list | tuple | set | frozenset | dict):
        return 0
    return weight(items, limit) + weight(separator, limit) * len(items)


def _summed(limit: int, items: Any, start: Any = 0) -> int:
    """Stop before adding up sequences copies more than WORK_LIMIT elements (each step copies
    the sum so far), or numbers whose digits make as much work; else 0."""
    if not isinstance(items, list | tuple):
        return 0
    sizes = [weight(v, limit) for v in items[:limit]]
    if isinstance(start, str | bytes | list | tuple) or any(
            isinstance(v, str | bytes | list | tuple) for v in items):
        work = len(items) * (sum(sizes) + weight(start, limit))
    else:
        work = len(items) * max(sizes, default=0)
    if work > WORK_LIMIT:
        raise Stop(f"the filter sum would copy about {work:,} elements adding up "
                   f"{len(items):,} items (the bound is {WORK_LIMIT:,})")
    return 0


def _indented(s: Any, width: Any = 4, *_: Any, **__: Any) -> int:
    lines = s.count("\n") + 1 if isinstance(s, str) else 0
    step = len(width) if isinstance(width, str) else _int(width)
    return (len(s) if isinstance(s, str) else 0) + lines * step


def _wrapped(s: Any, width: Any = 79, break_long_words: Any = True, wrapstring: Any = None,
             *_: Any, **__: Any) -> int:
    n = len(s) if isinstance(s, str) else 0
    return n + n * (len(wrapstring) if isinstance(wrapstring, str) else 2)


def _translated(s: Any, table: Any) -> int:
    if not isinstance(s, str) or not isinstance(table, dict):
        return 0
    longest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
    return len(s) * longest


Estimate = Callable[..., int]
# Methods of strings, bytes and numbers that build from a size: (limit, self, *args) -> weight.
METHODS: dict[str, Estimate] = {
    "center": lambda limit, s, width=0, *_: _int(width),
    "ljust": lambda limit, s, width=0, *_: _int(width),
    "rjust": lambda limit, s, width=0, *_: _int(width),
    "zfill": lambda limit, s, width=0: _int(width),
    "expandtabs": lambda limit, s, tabsize=8: len(s) + s.count(
        "\t" if isinstance(s, str) else b"\t") * _int(tabsize),
    "replace": lambda limit, s, *args: _replaced(s, *args),
    "translate": lambda limit, s, table: _translated(s, table),
    "join": lambda limit, s, items: _joined(limit, s, items),
    "to_bytes": lambda limit, n, length=1, *_, **__: _int(length),
}
# Filters that build from a size, their value first: (limit, value, *args) -> weight.
FILTERS: dict[str, Estimate] = {
    "center": lambda limit, s, width=80: _int(width),
    "indent": lambda limit, s, *args, **kwargs: _indented(s, *args, **kwargs),
    "wordwrap": lambda limit, s, *args, **kwargs: _wrapped(s, *args, **kwargs),
    "replace": lambda limit, s, old, new, count=None: _replaced(
        s, old, new, -1 if count is None else count),
    "join": lambda limit, items, d="", attribute=None: _joined(limit, d, items),
    "sum": lambda limit, items, attribute=None, start=0: _summed(limit, items, start),
    "batch": lambda limit, items, linecount, fill_with=None: _int(linecount),
    "slice": lambda limit, items, slices, fill_with=None: _int(slices),
    "format": lambda limit, s, *args, **kwargs: percent(s, kwargs or args, limit)
    if isinstance(s, str) else 0,
}
MATERIALISED = frozenset({"join", "sum"})  # filters and methods whose items are listed first


def json_size(value: Any, indent: Any, limit: int) -> int:
    """About how long json.dumps(value, indent=indent) is: each item on its own line, indented
    once for each level it is nested in (escapes, a few times longer, are weighed after)."""
    width = len(indent) if isinstance(indent, str) else _int(indent)
    items, deepest, stack = 0, 0, [(value, 0)]
    while stack and items <= limit:
        v, depth = stack.pop()
        items, deepest = items + 1, max(deepest, depth)
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list | tuple):
            stack.extend((x, depth + 1) for x in v)
    return weight(value, limit) + items * deepest * width
