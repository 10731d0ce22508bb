"""Options declared once, on the records they fill: a command names the records it takes.

A record is a frozen dataclass whose fields carry attncli/opt.py's marker (flags, help, bounds,
heading) with their defaults. `command()` expands each record parameter of a command's body into
the record's marked fields, each under its heading (the marker's, else the record's `panel`),
gives Typer that expanded signature through `__signature__`, and calls the body with the records
built from what Typer parsed, so a record checks its own values. `Annotated[Record,
Fields("name", ...)]` takes only the fields named; the others keep their defaults. A marker's
`alias` (an old spelling of a renamed flag) is accepted, hidden, with a one-line note on stderr,
unless another option of the command owns that flag (show's --view): the command resolves it.
Every command also takes --quiet, and runs with its status line on stderr (cli/progress.py),
which --quiet silences.
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable
from dataclasses import Field, fields, is_dataclass
from enum import Enum
from functools import cache
from typing import Annotated, Any, ClassVar, TypeVar

import typer
from typer.core import TyperCommand

from attncli.cli.app import HelpContext, app
from attncli.errors import AttnCliError
from attncli.opt import Opt, flag, marker

Body = TypeVar("Body", bound=Callable[..., None])
DEFAULT_PANEL = "Options"
QuietOpt = Annotated[bool, typer.Option(
    "--quiet", "-q", help="Show no progress on stderr (shown only on a terminal, once a step has "
    "taken half a second: what it is doing, and a bar for each counted pass).",
    rich_help_panel="Output")]
ALIAS = "_alias_"  # the prefix of a renamed flag's hidden old spelling


class Group:
    """Options the CLI reads and records below do not (the input's source, the output's files):
    shown under one heading of --help; subclasses are frozen dataclasses of marked fields."""

    panel: ClassVar[str] = DEFAULT_PANEL
    # A field offered only with another (--open with --save): a command names both or neither.
    needs: ClassVar[dict[str, str]] = {}


class Fields:
    """In `Annotated[Record, Fields(...)]`: the record's fields this command offers."""

    def __init__(self, *names: str) -> None:
        self.names = names


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """An annotation's type and its Annotated metadata."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *extra = typing.get_args(hint)
        return base, tuple(extra)
    return hint, ()


def offered(cls: type) -> list[Field[Any]]:
    """cls's fields that the command line offers (those with a marker), in their order."""
    return [f for f in fields(cls) if marker(f) is not None]


def _record_of(hint: Any) -> tuple[Any, list[Field[Any]]] | None:
    """The record a parameter takes and the fields it offers, or None for a plain option."""
    base, extra = _split(hint)
    if not (isinstance(base, type) and is_dataclass(base) and offered(base)):
        return None
    named = [name for item in extra if isinstance(item, Fields) for name in item.names]
    known = {f.name: f for f in offered(base)}
    unknown = sorted(set(named) - set(known))
    assert not unknown, f"{base.__name__} offers no option {unknown}"
    taken = [f for f in offered(base) if f.name in named] if named else offered(base)
    needs = getattr(base, "needs", {})
    alone = [f.name for f in taken if f.name in needs and needs[f.name] not in named + (
        [] if named else list(known))]
    assert not alone, f"{base.__name__}: {alone} need {[needs[n] for n in alone]}"
    return base, taken


def typer_option(mark: Opt, panel: str, hidden: bool = False) -> Any:
    """Typer's Option (or Argument) for a marker, under panel."""
    if mark.argument:
        return typer.Argument(help=mark.help, metavar=mark.metavar,
                              show_default=mark.show_default, rich_help_panel=panel)
    option = typer.Option(*mark.flags, help=mark.help or None, min=mark.min, max=mark.max,
                          metavar=mark.metavar, show_default=mark.show_default,
                          envvar=mark.envvar, rich_help_panel=panel, hidden=hidden)
    option.parser = mark.parse  # what reads the typed text, where the field holds another type
    return option


@cache
def _choice(choices: tuple[str, ...]) -> type[Enum]:
    """A str Enum of choices: Typer offers an Enum's values as the option's choices."""
    return Enum("Choice", {value: value for value in choices}, type=str)  # type: ignore[return-value]


def _typed(mark: Opt, hint: Any, default: Any) -> tuple[Any, Any]:
    """The type Typer reads for a field and its default as that type (a choice as its Enum)."""
    if not mark.choices:
        return hint, default
    kind = _choice(mark.choices)
    return kind | None, None if default is None else kind(default)


def _params(cls: type, taken: list[Field[Any]], owned: set[str]) -> list[inspect.Parameter]:
    """The keyword parameters Typer reads for the taken fields of cls (old spellings too, but
    for one that is an owned flag: another option's of the command)."""
    hints = typing.get_type_hints(cls)
    params = []
    for f in taken:
        mark = marker(f)
        assert mark is not None
        panel = mark.panel or str(getattr(cls, "panel", DEFAULT_PANEL))
        hint, default = _typed(mark, hints[f.name], f.default)
        params.append(inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
            annotation=Annotated[hint, typer_option(mark, panel)]))
        if mark.alias is not None and mark.alias not in owned:
            old = Opt(flags=(mark.alias,), show_default=False)
            params.append(inspect.Parameter(
                ALIAS + f.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                annotation=Annotated[hints[f.name] | None, typer_option(old, panel, True)]))
    return params


def _values(taken: list[Field[Any]], parsed: dict[str, Any]) -> dict[str, Any]:
    """The taken fields' values as the record holds them (a choice as its str); an old
    spelling's value stands for the new one's, with a note on stderr."""
    values = {}
    for f in taken:
        value, mark = parsed.pop(f.name), marker(f)
        assert mark is not None
        old = parsed.pop(ALIAS + f.name, None)
        if old is not None:
            if value != f.default:
                raise AttnCliError(f"{mark.alias} is the old spelling of {flag(f)}: give one")
            sys.stderr.write(f"attncli: {mark.alias} is now {flag(f)} (the old spelling goes in "
                             "the next release)\n")
            value = old
        values[f.name] = value.value if mark.choices and isinstance(value, Enum) else value
    return values


def expand(body: Body) -> Callable[..., None]:
    """body with each record parameter spread into its options, as Typer reads a signature."""
    hints = typing.get_type_hints(body, include_extras=True)
    signature = inspect.signature(body).parameters.values()
    records = {param.name: record for param in signature
               if (record := _record_of(hints[param.name])) is not None}
    owned = {name for _, taken in records.values() for f in taken
             for name in (flag(f), *(marker(f) or Opt()).flags)}
    params: list[inspect.Parameter] = []
    for param in signature:
        if param.name in records:
            params += _params(*records[param.name], owned)
        else:
            params.append(param.replace(annotation=hints[param.name],
                                        kind=inspect.Parameter.KEYWORD_ONLY))
    params.append(inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, default=False,
                                    annotation=QuietOpt))
    names = [p.name for p in params]
    assert len(names) == len(set(names)), f"{body.__name__}: an option is declared twice"

    def call(**parsed: Any) -> None:
        from attncli.cli.progress import showing

        quiet = parsed.pop("quiet")
        with showing(quiet):
            built = {name: cls(**_values(taken, parsed))
                     for name, (cls, taken) in records.items()}
            body(**built, **parsed)

    call.__name__, call.__doc__ = body.__name__, body.__doc__
    call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params}
    return call


def command(name: str | None = None, needs_model: bool = False) -> Callable[[Body], Body]:
    """Register body on the app as a command whose groups are expanded (see the module); with
    needs_model, its --help shows the default model that stands in for --model."""

    def register(body: Body) -> Body:
        app.command(name, cls=ModelCommand if needs_model else PanelledCommand)(expand(body))
        return body

    return register


class PanelledCommand(TyperCommand):
    """Plain (markup-free) --help with the options under their groups' headings."""

    context_class = HelpContext

    def format_options(self, ctx: Any, formatter: Any) -> None:  # typer's own click's types
        """Arguments, then options by panel: the command's own first, then each group's."""
        args: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {DEFAULT_PANEL: []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append(record)
            else:
                panel = getattr(param, "rich_help_panel", None) or DEFAULT_PANEL
                panels.setdefault(panel, []).append(record)
        for heading, records in (("Arguments", args), *panels.items()):
            if records:
                with formatter.section(heading):
                    formatter.write_dl([self.record(*r) for r in records])

    def record(self, options: str, help_text: str) -> tuple[str, str]:
        """One option's line of --help, as the command shows it."""
        return options, help_text


class ModelCommand(PanelledCommand):
    """A command that needs a model: --model's help ends with the default model, if one is set
    ($ATTNCLI_MODEL or attncli's settings file), read when the help is printed."""

    def record(self, options: str, help_text: str) -> tuple[str, str]:
        from attncli.cli.settings import default_note

        note = default_note() if options.startswith("-m, --model") else None
        return options, help_text if note is None else f"{help_text} [default: {note}]"
