"""`attncli config`."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Output
from attncli.cli.output import emit_json
from attncli.cli.settings import (
    KEYS,
    MODEL_ENV,
    check_key,
    config_path,
    default_model,
    read_settings,
    toml_line,
    write_setting,
)
from attncli.errors import AttnCliError, escaped


class Action(str, Enum):
    """What `attncli config` does."""

    list = "list"
    get = "get"
    set = "set"
    unset = "unset"


@command()
def config(
    *,
    action: Annotated[Action, typer.Argument(help="list, get KEY, set KEY VALUE or unset KEY.",
                                             show_default=False)] = Action.list,
    key: Annotated[str | None, typer.Argument(help=f"The setting: {', '.join(KEYS)}.",
                                              show_default=False)] = None,
    value: Annotated[str | None, typer.Argument(help="Its value (set).",
                                                show_default=False)] = None,
    output: Annotated[Output, Fields("as_json")],
) -> None:
    """Read and write attncli's settings: a TOML file in the XDG config folder.

    The file is $ATTNCLI_CONFIG, else $XDG_CONFIG_HOME/attncli/config.toml, else
    ~/.config/attncli/config.toml; set and unset write it whole and rename it into place. get
    prints a setting's value, or nothing and exits 1 when it is not set. Settings: model, the
    model heads, generate, scan and browse --generate use without --model ($ATTNCLI_MODEL
    comes first).

    Examples:

      attncli config set model smollm2

      attncli config get model

      attncli config list --json

      attncli config unset model
    """
    wanted = {Action.list: (), Action.get: ("KEY",), Action.unset: ("KEY",),
              Action.set: ("KEY", "VALUE")}[action]
    given = tuple(name for name, arg in (("KEY", key), ("VALUE", value)) if arg is not None)
    if given != wanted:
        usage = " ".join([action.value, *wanted])
        raise AttnCliError(f"config {action.value} takes {' and '.join(wanted) or 'nothing'}: "
                           f"attncli config {usage}")
    if action is Action.list:
        _list(output.as_json)
    elif action is Action.get:
        found = read_settings().get(check_key(key or ""))
        if found is None:
            raise typer.Exit(1)
        _say(found, output.as_json)
    else:
        path = write_setting(key or "", value if action is Action.set else None)
        done = f"set {key} = {value}" if action is Action.set else f"unset {key}"
        typer.echo(escaped(f"{done} in {path}"), err=True)
        if action is Action.set and key == "model" and value is not None:
            _note_unknown_model(value)


def _list(as_json: bool) -> None:
    """Every setting of the file, and where the default model comes from."""
    path, settings = config_path(), read_settings()
    found = default_model()
    if as_json:
        emit_json({"kind": "config", "path": str(path), "settings": settings,
                   "model": None if found is None else {"model": found[0], "from": found[1]}})
        return
    lines = [f"# {escaped(str(path))}{'' if path.exists() else ' (no file yet)'}",
             *(escaped(toml_line(k, v).rstrip("\n")) for k, v in settings.items())]
    if found is not None and found[1] == MODEL_ENV:
        lines.append(f"# {MODEL_ENV}={escaped(found[0])} comes first: the default model is it")
    typer.echo("\n".join(lines))


def _say(value: str, as_json: bool) -> None:
    if as_json:
        emit_json(value)
    else:
        sys.stdout.write(escaped(value) + "\n")


def _note_unknown_model(model: str) -> None:
    """A line on stderr when the model set is not found here (yet): set anyway."""
    from attncli.models.stores.locate import resolve_path

    try:
        resolve_path(model)
    except AttnCliError as err:
        typer.echo(f"note: {escaped(model)} is not found here yet: {err}", err=True)
