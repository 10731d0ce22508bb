"""Options declared once, on the records they fill (attncli/opt.py, cli/groups.py): records
expand into a command's options under their panels, commands name the records (or fields) they
take instead of restating options, and one Request is built from them."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import Annotated, Any

import pytest
import typer

import attncli.cli.commands  # noqa: F401  (registers every command)
from attncli.cli.app import app
from attncli.cli.groups import CONTEXT, Fields, PanelledCommand, expand
from attncli.cli.options import (
    Chapter3,
    Checkpoint,
    Compute,
    Encoding,
    Group,
    Look,
    Output,
    Source,
    request_of,
)
from attncli.core.request import Request, Route
from attncli.opt import marker, of, opt

GROUPS = [Source, Encoding, Checkpoint, Chapter3, Compute, Look, Output]


@dataclass(frozen=True)
class Pair(Group):
    panel = "Pair"
    first: int = opt(1, help="The first.")
    second: str = opt("b", help="The second.")


def _commands() -> dict[str, Any]:
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _panel_of(command: Any, name: str) -> str | None:
    ctx = typer.Context(command)
    return next(getattr(p, "rich_help_panel", None) for p in command.get_params(ctx)
                if p.name == name)


def test_expand_spreads_groups_into_keyword_options_and_calls_with_them_built() -> None:
    seen: dict[str, Any] = {}

    def body(pair: Pair, own: Annotated[int, typer.Option()] = 7) -> None:
        seen.update(pair=pair, own=own)

    call = expand(body)
    params = inspect.signature(call).parameters
    # --quiet: every command's; and the context Typer hands it (which options were typed)
    assert list(params) == ["first", "second", "own", "quiet", CONTEXT]
    assert [p.default for p in params.values()][:4] == [1, "b", 7, False]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    call(first=3, second="x", own=9, quiet=False)
    assert seen == {"pair": Pair(first=3, second="x"), "own": 9}


def test_fields_names_the_options_taken_and_the_others_defaults_stand() -> None:
    seen: list[Pair] = []

    def body(pair: Annotated[Pair, Fields("first")]) -> None:
        seen.append(pair)

    call = expand(body)
    assert list(inspect.signature(call).parameters) == ["first", "quiet", CONTEXT]
    call(first=5, quiet=True)
    assert seen == [Pair(first=5, second="b")]


def test_a_group_field_goes_under_its_panel_and_the_shared_option_is_left_alone() -> None:
    def body(pair: Pair) -> None:
        pass

    param = inspect.signature(expand(body)).parameters["first"]
    info = param.annotation.__metadata__[0]
    assert info.rich_help_panel == "Pair" and info.help == "The first."
    declared = marker(fields(Pair)[0])
    assert declared is not None and declared.panel is None  # the record's panel stands in


def test_the_body_runs_with_the_status_line_listening_and_quiet_silences_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command's steps reach its status line (cli/progress.py); --quiet gives it no
    console, so nothing is ever drawn, even on a terminal."""
    from attncli import activity
    from attncli.cli import progress

    heard: list[tuple[bool, str]] = []

    def body(pair: Pair) -> None:
        assert progress._current is not None
        heard.append((progress._current._console is None, activity._listener.__class__.__name__))
        activity.doing("a step")

    monkeypatch.setattr(progress, "_is_terminal", lambda: True)
    call = expand(body)
    call(first=1, second="b", quiet=False)
    call(first=1, second="b", quiet=True)
    assert heard == [(False, "ProgressBar"), (True, "ProgressBar")]
    assert activity._listener is None and progress._current is None  # gone after the command


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_takes_quiet(name: str) -> None:
    command = _commands()[name]
    ctx = typer.Context(command, info_name=name)
    quiet = [p for p in command.get_params(ctx) if p.name == "quiet"]
    assert len(quiet) == 1 and quiet[0].opts == ["--quiet", "-q"]
    assert _panel_of(command, "quiet") == "Output"


def test_a_field_that_needs_another_is_left_out_with_it() -> None:
    """--open opens what --save wrote: a command without --save has no --open either."""
    def body(output: Annotated[Output, Fields("as_json")]) -> None:
        pass

    def whole(output: Output) -> None:
        pass

    def alone(output: Annotated[Output, Fields("as_json", "open_page")]) -> None:
        pass

    assert Output.needs == {"open_page": "save"}
    assert list(inspect.signature(expand(body)).parameters) == ["as_json", "quiet", CONTEXT]
    assert "open_page" in inspect.signature(expand(whole)).parameters
    with pytest.raises(AssertionError):
        expand(alone)


@pytest.mark.parametrize("wrong", [
    "def body(pair: Pair, first: int = 1) -> None: pass",  # an option declared twice
    "def body(pair: Annotated[Pair, Fields('third')]) -> None: pass",  # no such option
])
def test_mistakes_in_a_command_declaration_fail_at_import(wrong: str) -> None:
    space: dict[str, Any] = {"Pair": Pair, "Annotated": Annotated, "Fields": Fields}
    exec(wrong, space)  # noqa: S102  (a fixed declaration, to see expand refuse it)
    with pytest.raises(AssertionError):
        expand(space["body"])


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_prints_its_help_with_options_under_headings(name: str) -> None:
    command = _commands()[name]
    assert isinstance(command, PanelledCommand)
    ctx = typer.Context(command, info_name=name)
    text = command.get_help(ctx)
    headings = [line[:-1] for line in text.splitlines() if line and line[0] != " "
                and line.endswith(":") and not line.startswith("Usage")]
    panels = {getattr(p, "rich_help_panel", None) or "Options"
              for p in command.get_params(ctx) if p.param_type_name == "option"}
    assert set(headings) - {"Arguments"} == panels
    assert len(headings) == len(set(headings))
    for param in command.get_params(ctx):  # each option's line is under exactly one heading
        if param.param_type_name == "option" and param.get_help_record(ctx) is not None:
            assert text.count(f"  {param.get_help_record(ctx)[0]}  ") + text.count(
                f"  {param.get_help_record(ctx)[0]}\n") == 1


def test_no_command_restates_an_option_of_a_group() -> None:
    """An option named as a group's field is that group's, in every command that offers it,
    unless the command gives it another meaning (its own help)."""
    by_name = {f.name: (group, f) for group in GROUPS for f in fields(group)}
    for name, command in _commands().items():
        ctx = typer.Context(command, info_name=name)
        for param in command.get_params(ctx):
            if param.name not in by_name:
                continue
            group, field = by_name[param.name]
            declared = marker(field)
            assert declared is not None
            panel = declared.panel or getattr(group, "panel", "Options")
            if _panel_of(command, param.name) == panel:
                continue
            assert param.help != declared.help, (name, param.name)


def test_request_of_takes_each_groups_request_fields_and_the_given_ones_last() -> None:
    settings = Chapter3(seed=7, heads=2, variant=None)
    request = request_of(("one two", None), Encoding(), settings, Compute(), Look(), Output(),
                         heads=None)
    assert request == Request(text="one two", seed=7)
    assert request_of(("a", None), Checkpoint(model="m")).route is Route.checkpoint
    assert request_of(("a", None), Checkpoint()).route is Route.chapter3


def test_group_defaults_are_the_requests() -> None:
    request = Request(text="x")
    for group in (Encoding, Checkpoint, Chapter3, Compute):
        for f in fields(group):
            assert f.default == getattr(request, f.name), (group.__name__, f.name)
            assert marker(f) == marker({g.name: g for g in fields(Request)}[f.name])


def test_of_carries_a_records_default_and_marker_once() -> None:
    """A record that carries another's field (a CLI group that parses what the record takes)
    gets its default, converted where asked, and its marker, changed where asked."""

    @dataclass(frozen=True)
    class Carried:
        first: int = of(Pair, "first")
        second: str = of(Pair, "second", str.upper, help="Changed.")

    first, second = fields(Carried)
    assert (first.default, second.default) == (1, "B")
    assert marker(first) == marker(fields(Pair)[0])
    declared = marker(second)
    assert declared is not None and declared.help == "Changed."


def test_models_help_names_every_family_the_registry_reads() -> None:
    """--model's help names the model_types of models/family.py's REGISTRY, no more and no fewer
    (it cannot import the registry: --help imports no model code), for every command that takes
    it; docs/reference/*.md is that help, generated."""
    import re

    from attncli.core.request import MODEL_HELP
    from attncli.models.family import REGISTRY

    help_text = MODEL_HELP
    named = re.search(r"model_type ([^)]*)\)", help_text)
    assert named is not None
    assert sorted(re.split(r", | or ", named.group(1))) == sorted(REGISTRY)
