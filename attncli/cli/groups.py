"""Options declared once: a command names the option groups it takes, never their options.

A group is a frozen dataclass whose fields are `Annotated[..., typer.Option(...)]` with their
defaults (cli/options.py). `command()` expands each group parameter of a command's body into the
group's fields, each under the group's help panel, gives Typer that expanded signature through
`__signature__`, and calls the body with the groups built from what Typer parsed.
`Annotated[Group, Without("name", ...)]` takes a group less the options a command has no use
for; those fields keep their defaults. Every command also takes --quiet, and runs with its status
line on stderr (cli/progress.py), which --quiet silences.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from copy import copy
from dataclasses import fields, is_dataclass
from typing import Annotated, Any, ClassVar, TypeVar

import typer
from typer.core import TyperCommand

from attncli.cli.app import app

Body = TypeVar("Body", bound=Callable[..., None])
DEFAULT_PANEL = "Options"
QuietOpt = Annotated[bool, typer.Option(
    "--quiet", "-q", help="Show no progress on stderr (shown only on a terminal, once a step has "
    "taken half a second: what it is doing, and a bar for each counted pass).",
    rich_help_panel="Output")]


class Group:
    """A group of options shown under one heading of --help; subclasses are frozen dataclasses."""

    panel: ClassVar[str] = DEFAULT_PANEL
    # A field offered only with another (--open with --save): left out wherever that one is.
    needs: ClassVar[dict[str, str]] = {}


class Without:
    """In `Annotated[Group, Without(...)]`: the group's fields this command does not offer."""

    def __init__(self, *names: str) -> None:
        self.names = names


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """An annotation's type and its Annotated metadata."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *extra = typing.get_args(hint)
        return base, tuple(extra)
    return hint, ()


def _group_of(hint: Any) -> tuple[Any, tuple[str, ...]] | None:
    """The group a parameter takes and the fields it leaves out, or None for a plain option."""
    base, extra = _split(hint)
    if not (isinstance(base, type) and issubclass(base, Group) and is_dataclass(base)):
        return None
    left_out = tuple(name for item in extra if isinstance(item, Without) for name in item.names)
    left_out += tuple(name for name, other in base.needs.items() if other in left_out)
    known = {f.name for f in fields(base)}
    unknown = sorted(set(left_out) - known)
    assert not unknown, f"{base.__name__} has no option {unknown}"
    return base, left_out


def _in_panel(hint: Any, panel: str) -> Any:
    """The field's annotation with a copy of its typer.Option placed under panel."""
    base, extra = _split(hint)
    placed = []
    for item in extra:
        if hasattr(item, "rich_help_panel"):  # typer's OptionInfo or ArgumentInfo
            item = copy(item)
            item.rich_help_panel = panel
        placed.append(item)
    return typing.Annotated[(base, *placed)] if placed else hint


def expand(body: Body) -> Callable[..., None]:
    """body with each group parameter spread into its options, as Typer reads a signature."""
    hints = typing.get_type_hints(body, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[Any, list[str]]] = {}
    for param in inspect.signature(body).parameters.values():
        group = _group_of(hints[param.name])
        if group is None:
            params.append(param.replace(annotation=hints[param.name],
                                        kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        cls, left_out = group
        taken = [f for f in fields(cls) if f.name not in left_out]
        field_hints = typing.get_type_hints(cls, include_extras=True)
        groups[param.name] = (cls, [f.name for f in taken])
        params += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                     annotation=_in_panel(field_hints[f.name], cls.panel))
                   for f in taken]
    params.append(inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, default=False,
                                    annotation=QuietOpt))
    names = [p.name for p in params]
    assert len(names) == len(set(names)), f"{body.__name__}: an option is declared twice"

    def call(**parsed: Any) -> None:
        from attncli.cli.progress import showing

        quiet = parsed.pop("quiet")
        built = {name: cls(**{n: parsed.pop(n) for n in taken})
                 for name, (cls, taken) in groups.items()}
        with showing(quiet):
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
