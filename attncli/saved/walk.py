"""One reader for the records a saved document holds: it walks a record class's annotations and
reads each field from its JSON key, checked for its type (and its bounds or choices), naming the
path in the document where a part fails."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from functools import cache
from typing import Any, TypeVar

from attncli.saved.parts import bad, choice, flag, integer, need, number, obj, string

T = TypeVar("T")


@dataclass(frozen=True)
class Key:
    """How one field is read: its JSON key, bounds or choices, or its own check.

    inline: the field is a record whose keys sit in this same object, present when this key is;
    skip: the field is not in the JSON (its default, or what the caller works out).
    """

    name: str | None = None
    low: int = 0
    high: int | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any, str], Any] | None = None
    inline: str | None = None
    skip: bool = False


Keys = dict[str, Key]
Table = dict[type, Keys]  # each record's keys that are not simply its fields' names and types


@cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional(hint: Any) -> tuple[Any, bool]:
    """The type inside `X | None`, and whether None is allowed."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1:
            return inner[0], len(inner) < len(typing.get_args(hint))
    return hint, False


def value(hint: Any, data: Any, at: str, key: Key, table: Table) -> Any:
    """data read as hint says (a scalar, a list or dict of them, or a record)."""
    if key.check is not None:
        return key.check(data, at)
    if key.choices:
        return choice(data, at, key.choices)
    if hint is bool:
        return flag(data, at)
    if hint is int:
        return integer(data, at, key.low, key.high)
    if hint is float:
        return number(data, at)
    if hint is str:
        return string(data, at)
    if dataclasses.is_dataclass(hint):
        return read(typing.cast(type, hint), data, at, table)
    if typing.get_origin(hint) is list:
        if not isinstance(data, list):
            raise bad(at, data, "a list")
        (item,) = typing.get_args(hint)
        return [value(item, v, f"{at}[{i}]", Key(), table) for i, v in enumerate(data)]
    return data  # Any, and dicts a renderer reads as they are


def read(cls: type[T], data: Any, at: str, table: Table) -> T:
    """The record cls from the JSON object data at path at ("" for the document itself): each
    field from its key (table[cls] names those that differ), a field that may be None absent as
    None, one with a default as its default."""
    keys = table.get(cls, {})
    doc = obj(data, at or "the file")
    found: dict[str, Any] = {}
    record: Any = cls
    for f in dataclasses.fields(record):
        key = keys.get(f.name, Key())
        hint, nullable = _optional(_hints(record)[f.name])
        name = key.name or f.name
        defaulted = f.default is not MISSING or f.default_factory is not MISSING
        if key.skip or not f.init:
            continue
        if key.inline is not None:
            found[f.name] = read(hint, doc, at, table) if key.inline in doc else None
        elif doc.get(name) is None and (nullable or defaulted):
            if not defaulted:  # absent or null: None, or the field's default
                found[f.name] = None
        else:
            where = f"{at}.{name}" if at else name
            found[f.name] = value(hint, need(doc, name, at or "the file"), where, key, table)
    return cls(**found)
