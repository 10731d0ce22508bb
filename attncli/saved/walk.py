"""One reader for what a saved document holds: it walks a record's annotations (a dataclass, or a
TypedDict for the objects kept as dicts) and reads each field from its JSON key, checked for its
type (and its bounds or choices), naming the path in the document where a part fails. A
TypedDict keeps the keys it does not declare, printable, as the file has them."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from functools import cache
from typing import Any, TypeVar

from attncli.saved.parts import (
    choice,
    flag,
    integer,
    items,
    need,
    number,
    obj,
    printable,
    string,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Key:
    """How one field is read (a list's items, for a list): its JSON key (a.b: key b of the
    object at key a; the field absent where a is, when it may be), its bounds or choices, or its
    own check. inline: a record whose keys sit in this same object, there when this key is;
    skip: not in the JSON (the field's default, or what the caller works out)."""

    name: str | None = None
    low: int = 0
    high: int | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any, str], Any] | None = None
    inline: str | None = None
    skip: bool = False


Keys = dict[str, Key]
Table = dict[Any, Keys]  # each record's keys that are not simply its fields' names and types


@cache
def keys_of(record: Any) -> frozenset[str]:
    """The JSON keys a record declares (left out when absent: not kept as the file's extras)."""
    return frozenset(name for name, *_ in _fields(record))


@cache
def _fields(record: Any) -> list[tuple[str, Any, bool, bool, bool]]:
    """Each field's name, type, whether it may be null, whether it may be absent (a TypedDict's
    optional key; a dataclass's field that may be None or has a default), and whether None is
    passed for it when absent (a dataclass's field that may be None and has no default)."""
    hints = typing.get_type_hints(record)
    if typing.is_typeddict(record):
        return [(name, *_optional(hint), name not in record.__required_keys__, False)
                for name, hint in hints.items()]
    out = []
    for f in dataclasses.fields(record):
        hint, nullable = _optional(hints[f.name])
        bare = f.default is MISSING and f.default_factory is MISSING
        out.append((f.name, hint, nullable, nullable or not bare, nullable and bare))
    return out


def _optional(hint: Any) -> tuple[Any, bool]:
    """The type inside `X | None`, and whether None is allowed."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1:
            return inner[0], len(inner) < len(typing.get_args(hint))
    return hint, False


def value(hint: Any, data: Any, at: str, key: Key, table: Table) -> Any:
    """data read as hint says: a scalar, a list or dict of them, or a record."""
    if key.check is not None:
        return key.check(data, at)
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        return [value(item, v, f"{at}[{i}]", key, table) for i, v in enumerate(items(data, at))]
    if origin is tuple:
        args = typing.get_args(hint)
        pairs = zip(args, items(data, at, len(args)), strict=True)
        return tuple(value(item, v, f"{at}[{i}]", key, table) for i, (item, v) in enumerate(pairs))
    if origin is dict:
        _, item = typing.get_args(hint)
        return {string(k, at): value(item, v, f"{at}[{k!r}]", key, table)
                for k, v in obj(data, at).items()}
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
    if dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
        return read(hint, data, at, table)
    return printable(data)  # Any: kept as the file has it


def _holder(doc: dict[str, Any], json: str, at: str,
            optional: bool) -> tuple[dict[str, Any], str, str]:
    """The object that holds a dotted key's last part, that part, and the object's path (an
    empty object where a part on the way is absent or null and the field may be absent)."""
    *outer, last = json.split(".")
    for part in outer:
        if doc.get(part) is None and optional:
            return {}, last, at
        where = f"{at}.{part}" if at else part
        doc, at = obj(need(doc, part, at or "the file"), where), where
    return doc, last, at


def read(record: type[T], data: Any, at: str, table: Table) -> T:
    """The record from the JSON object data at path at ("" for the document itself), each field
    from its key (table[record] names those that differ); an absent field that may be, None or
    its default (a TypedDict: left out), as is a null one where the field may be None (a
    TypedDict's optional key: any)."""
    keys = table.get(record, {})
    doc = obj(data, at or "the file")
    found: dict[str, Any] = {}
    typed = typing.is_typeddict(record)
    for name, hint, nullable, optional, fill in _fields(typing.cast(Any, record)):
        key = keys.get(name, Key())
        if key.skip:
            continue
        holder, json, within = _holder(doc, key.name or name, at, optional)
        if key.inline is not None:
            found[name] = read(hint, doc, at, table) if key.inline in doc else None
        elif holder.get(json) is None and typed and json in holder and nullable:
            found[name] = None
        elif holder.get(json) is None and optional and (typed or nullable or json not in holder):
            if fill:
                found[name] = None
        else:
            where = f"{within}.{json}" if within else json
            found[name] = value(hint, need(holder, json, within or "the file"), where, key,
                                table)
    if typed:  # in the document's order, as the command that wrote it wrote it
        declared = keys_of(typing.cast(Any, record))
        return typing.cast(T, {string(k, at or "the file"): found[k] if k in found
                               else printable(v) for k, v in doc.items()
                               if k in found or k not in declared})
    return record(**found)
