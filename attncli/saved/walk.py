"""One reader for what a saved document holds: it walks a record's annotations (a dataclass, or a
TypedDict for the objects kept as dicts) and reads each field from its JSON key, checked for its
type and for what its Key declares (bounds and shapes named by the document's sizes: N tokens,
P prompt tokens, ...), naming the path in the document where a part fails. A TypedDict keeps
the keys it does not declare, printable, as the file has them."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from functools import cache
from typing import Any, TypeVar

from attncli.errors import AttnCliError
from attncli.saved.parts import (
    choice,
    flag,
    integer,
    items,
    need,
    number,
    obj,
    printable,
    ranged,
    row,
    string,
)

T = TypeVar("T")
Size = float | str | None  # a number, or a sum of the document's sizes and numbers ("P-1")


@dataclass(frozen=True)
class Key:
    """How one field is read (a list's items, for a list), where its name and type do not say
    it all. A size is a number or a sum of names ("P-1"): the reader's sizes, or whole-number
    fields read before it in the same record (a list: its length)."""

    name: str | None = None  # its JSON key; a.b: key b of the object at key a
    low: Size = 0  # a whole number's bounds, both included (a number's, where means says)
    high: Size = None
    means: str = ""  # what a number held to low..high is, for the line that refuses another
    choices: tuple[str, ...] | Mapping[str, Any] = ()  # a mapping: each choice's value
    check: Callable[[Any, str], Any] | None = None  # its own reader, instead of its type's
    shape: str = ""  # nested lists of numbers, a size per dimension (*: as its first; ?: nulls)
    span: str = ""  # [a, b), half-open, inside 0..span
    length: Size = None  # a list's
    counts: str = ""  # "field=size …": item k of the list holds field = size + k
    inline: str | None = None  # a record whose keys sit in this same object, there with this
    skip: bool = False  # not in the JSON: its default, or what the caller works out
    needed: bool = False  # in the JSON, though the field has a default


SLACK = 1e-3  # a share or probability from float32 weights may pass 0 or 1 by rounding (n·eps)
SHARE = Key(low=-SLACK, high=1 + SLACK, means="a share from 0 to 1")
PROBABILITY = Key(low=0, high=1 + SLACK, means="a probability (0 to 1)")


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


@dataclass
class Reader:
    """A walk over one document: the table of keys, and the sizes its bounds and shapes name
    (added to as the document is read: a per-kind reader puts in what it has worked out)."""

    table: Table
    sizes: dict[str, int | None] = field(default_factory=dict)

    def size(self, size: Size, found: Mapping[str, Any] = types.MappingProxyType({})) -> Any:
        """A size's number: a sum of numbers, the reader's sizes and the fields found before (a
        list: its length); None where a size it names is unknown."""
        if not isinstance(size, str):
            return size
        terms: list[tuple[str, Any]] = [
            (sign, int(name) if name.isdigit() else _count(found[name]) if name in found
             else self.sizes[name]) for sign, name in re.findall(r"([+-]?)(\w+)", size)]
        if any(part is None for _, part in terms):
            return None
        return sum(-part if sign == "-" else part for sign, part in terms)

    def cells(self, data: Any, at: str, dims: list[int | None], nulls: bool) -> Any:
        """Nested lists of dims[0] items, each of dims[1:], finite numbers at the bottom (null too
        where nulls); a None size: as many as the first item holds, which must not be empty."""
        if len(dims) == 1:
            return row(data, at, dims[0], nulls)
        data = items(data, at, dims[0])
        inner = dims[1] if dims[1] is not None or not data else len(items(data[0], f"{at}[0]"))
        if inner == 0 and dims[1] is None:
            raise AttnCliError(f"saved file: {at}[0] is empty")
        return [self.cells(part, f"{at}[{i}]", [inner, *dims[2:]], nulls)
                for i, part in enumerate(data)]

    def shaped(self, data: Any, at: str, shape: str) -> Any:
        """data as shape says (a Key's shape)."""
        dims = shape.split()
        return self.cells(data, at, [None if d == "*" else self.size(d)
                                     for d in dims if d != "?"], "?" in dims)

    def value(self, hint: Any, data: Any, at: str, key: Key,
              found: Mapping[str, Any] = types.MappingProxyType({})) -> Any:
        """data read as hint says: a scalar, a list or dict of them, or a record."""
        if key.check is not None:
            return key.check(data, at)
        if key.shape:
            return self.shaped(data, at, key.shape)
        if key.span:
            a, b = items(data, at, 2)
            top = self.size(key.span)
            integer(b, f"{at}[1]", integer(a, f"{at}[0]", 0, top - 1) + 1, top)
            return [a, b]
        origin = typing.get_origin(hint)
        if origin is list:
            (item,) = typing.get_args(hint)
            each = dataclasses.replace(key, length=None, counts="")
            out = [self.value(item, v, f"{at}[{i}]", each, found)
                   for i, v in enumerate(items(data, at, self.size(key.length, found)))]
            for name, size in (part.split("=") for part in key.counts.split()):
                first = self.size(size, found)
                for k, part in enumerate(out):
                    got = part[name] if isinstance(part, dict) else getattr(part, name)
                    integer(got, f"{at}[{k}].{name}", first + k, first + k)
            return out
        if origin is tuple:
            args = typing.get_args(hint)
            pairs = zip(args, items(data, at, len(args)), strict=True)
            return tuple(self.value(t, v, f"{at}[{i}]", key) for i, (t, v) in enumerate(pairs))
        if origin is dict:
            _, item = typing.get_args(hint)
            return {string(k, at): self.value(item, v, f"{at}[{k!r}]", key)
                    for k, v in obj(data, at).items()}
        if isinstance(key.choices, Mapping):
            return key.choices[choice(data, at, tuple(key.choices))]
        if key.choices:
            return choice(data, at, key.choices)
        if hint is bool:
            return flag(data, at)
        if hint is int:
            return integer(data, at, self.size(key.low, found), self.size(key.high, found))
        if hint is float and key.means:
            return ranged(data, at, self.size(key.low), self.size(key.high), key.means)
        if hint is float:
            return number(data, at)
        if hint is str:
            return string(data, at)
        if dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
            return self.read(hint, data, at)
        return printable(data)  # Any: kept as the file has it

    def read(self, record: type[T], data: Any, at: str = "") -> T:
        """The record from the JSON object data at path at ("" for the document itself), each
        field from its key; an absent field that may be, None or its default (a TypedDict: left
        out), as is a null one where the field may be None (a TypedDict's optional key: any).
        A record that refuses its values is one line naming where it was read from."""
        keys = self.table.get(record, {})
        doc = obj(data, at or "the file")
        found: dict[str, Any] = {}
        typed = typing.is_typeddict(record)
        for name, hint, nullable, optional, fill in _fields(typing.cast(Any, record)):
            key = keys.get(name, Key())
            if key.skip:
                continue
            holder, json, within = _holder(doc, key.name or name, at,
                                           optional and not key.needed)
            absent = json not in holder
            null = not absent and holder[json] is None
            if key.inline is not None:
                found[name] = self.read(hint, doc, at) if key.inline in doc else None
            elif (absent and optional and not key.needed) or (
                    null and (nullable or (typed and optional))):  # not read: None or left out
                if fill or (typed and nullable and null):
                    found[name] = None
            else:
                where = f"{within}.{json}" if within else json
                found[name] = self.value(hint, need(holder, json, within or "the file"), where,
                                         key, found)
        if typed:  # in the document's order, as the command that wrote it wrote it
            declared = keys_of(typing.cast(Any, record))
            return typing.cast(T, {string(k, at or "the file"): found[k] if k in found
                                   else printable(v) for k, v in doc.items()
                                   if k in found or k not in declared})
        try:
            return record(**found)
        except AttnCliError as err:
            raise AttnCliError(f"saved file: {at}: {err}") from None


def _count(found: Any) -> int:
    """A field read before as a size: a whole number, or a list's length."""
    return len(found) if isinstance(found, list) else int(found)


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

