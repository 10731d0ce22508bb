"""Options owned by the records they fill: a typer-free marker on a dataclass field.

`opt(default, "--flag", help=...)` is a dataclass field whose metadata says how the command line
offers it: its flags, help, bounds, metavar and heading. The record states the default and the
bounds once; cli/groups.py builds Typer's options from the markers, and a command names the
records (or their fields) it takes. `of(Record, "name")` is the same field on another record
that carries it across a layer (a CLI group that parses what the record receives). A message
names an option with said() (or check_bounds, by its field): the flag on the command line, the
keyword inside the Python API's calls (keywords(), which attncli/api's checked calls enter).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

KEY = "attncli.opt"
# True inside a Python API call: its messages name max_new_tokens, not --max-new-tokens
_KEYWORDS: ContextVar[bool] = ContextVar("attncli.opt.keywords", default=False)


@dataclass(frozen=True)
class Opt:
    """How the command line offers one field; flags () means --field-name."""

    flags: tuple[str, ...] = ()
    help: str = ""
    min: float | None = None
    max: float | None = None
    metavar: str | None = None
    show_default: bool = True
    panel: str | None = None  # the --help heading; None: the group's
    envvar: str | None = None
    argument: bool = False  # a positional argument (TEXT), not an option
    alias: str | None = None  # an old spelling, hidden, accepted with a note on stderr
    parse: Callable[[str], Any] | None = None  # the typed text as the field holds it
    choices: tuple[str, ...] = ()  # the values a str field takes


def opt(default: Any, *flags: str, help: str = "", min: float | None = None,  # noqa: A002
        max: float | None = None, metavar: str | None = None,  # noqa: A002
        show_default: bool = True, panel: str | None = None, envvar: str | None = None,
        argument: bool = False, alias: str | None = None,
        parse: Callable[[str], Any] | None = None, choices: tuple[str, ...] = ()) -> Any:
    """A dataclass field with its default and the marker that offers it on the command line
    (parse: what turns the typed text into the field's value; choices: a str field's values)."""
    marker = Opt(flags, help, min, max, metavar, show_default, panel, envvar, argument, alias,
                 parse, choices)
    return dataclasses.field(default=default, metadata={KEY: marker})


def marker(field: dataclasses.Field[Any]) -> Opt | None:
    """The field's marker, None for a field the command line does not offer."""
    found = field.metadata.get(KEY)
    return found if isinstance(found, Opt) else None


def of(record: type, name: str, convert: Callable[[Any], Any] | None = None, **changes: Any) -> Any:
    """record's field name, default and marker, for a record that carries it (convert: the
    default as this record holds it, such as a str Enum's member; changes: the marker's)."""
    source = {f.name: f for f in dataclasses.fields(record)}[name]
    found = marker(source)
    assert found is not None, f"{record.__name__}.{name} is not an option"
    default = source.default if convert is None or source.default is None \
        else convert(source.default)
    return dataclasses.field(default=default,
                             metadata={KEY: dataclasses.replace(found, **changes)})


def flag(field: dataclasses.Field[Any]) -> str:
    """The field's long flag, as a message names it (--top-k)."""
    found = marker(field)
    longs = [f.split("/")[0] for f in (found.flags if found else ()) if f.startswith("--")]
    return longs[0] if longs else "--" + field.name.replace("_", "-")


@contextmanager
def keywords() -> Iterator[None]:
    """Inside: messages name each option as the Python API's keyword (said, check_bounds)."""
    token = _KEYWORDS.set(True)
    try:
        yield
    finally:
        _KEYWORDS.reset(token)


def said(option: str, keyword: str | None = None) -> str:
    """How a message names an option: its flag (--top-k) on the command line; inside the Python
    API its keyword (keyword, else the flag's name: top_k)."""
    if not _KEYWORDS.get():
        return option
    return keyword if keyword is not None else option.lstrip("-").replace("-", "_")


def check_bounds(record: Any) -> None:
    """Refuse a marked field of record outside its marker's bounds, in one line naming it."""
    from attncli.errors import AttnCliError

    for field in dataclasses.fields(record):
        found, value = marker(field), getattr(record, field.name)
        if found is None or value is None or isinstance(value, bool) or (
                found.min is None and found.max is None):
            continue
        low = -math.inf if found.min is None else found.min
        high = math.inf if found.max is None else found.max
        if not isinstance(value, int | float) or not low <= value <= high:
            span = f"from {found.min:g} to {found.max:g}" if found.min is not None and \
                found.max is not None else f"at least {found.min:g}" if found.min is not None \
                else f"at most {found.max:g}"
            raise AttnCliError(f"{said(flag(field), field.name)} must be {span} (got {value!r})")
