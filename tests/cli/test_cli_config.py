"""`attncli config` (get, set, unset, list) and the default model it sets: heads, generate, scan
and browse --generate use it without --model, and --help shows it; run keeps the book's
chapter-3 variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT

TOY = str(ROOT / "samples" / "toy-gpt2")
TEXT = "The cat sat on the mat because it was tired"


def test_set_get_list_unset(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "attncli-settings" / "config.toml"  # conftest's: this test's own
    listed = cli("config")
    assert (listed.code, listed.out) == (0, f"# {path} (no file yet)\n")
    missing = cli("config", "get", "model")
    assert (missing.code, missing.out, missing.err) == (1, "", "")
    done = cli("config", "set", "model", TOY)
    assert done.code == 0 and done.out == ""
    assert done.err == f"set model = {TOY} in {path}\n"  # the model is found: no note
    assert cli("config", "get", "model").out == f"{TOY}\n"
    assert cli("config", "list").out == f'# {path}\nmodel = "{TOY}"\n'
    assert cli("config", "list", "--json").json() == {
        "kind": "config", "path": str(path), "settings": {"model": TOY},
        "model": {"model": TOY, "from": str(path)}}
    assert cli("config", "get", "model", "--json").json() == TOY
    unset = cli("config", "unset", "model")
    assert unset.code == 0 and unset.err == f"unset model in {path}\n"
    assert cli("config", "get", "model").code == 1


@pytest.mark.parametrize(("args", "message"), [
    (("get",), "config get takes KEY: attncli config get KEY"),
    (("set", "model"), "config set takes KEY and VALUE: attncli config set KEY VALUE"),
    (("list", "model"), "config list takes nothing: attncli config list"),
    (("set", "colour", "red"), "unknown setting 'colour' (known: model)"),
    (("get", "colour"), "unknown setting 'colour' (known: model)"),
    (("frob",), "'frob' is not one of"),
])  # fmt: skip
def test_wrong_use_is_one_line(cli, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    cli("config", *args).assert_usage_error(message)


def test_setting_a_model_not_found_here_sets_it_and_says_so(cli) -> None:  # noqa: ANN001
    done = cli("config", "set", "model", "nosuch-model-zz")
    assert done.code == 0
    assert done.err.splitlines()[1].startswith("note: nosuch-model-zz is not found here yet: ")
    assert cli("config", "get", "model").out == "nosuch-model-zz\n"


def test_a_broken_settings_file_is_one_line_for_the_commands_that_read_it(
        cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "attncli-settings" / "config.toml"
    path.parent.mkdir()
    path.write_text("model = [", encoding="utf-8")
    cli("heads", TEXT).assert_usage_error(f"attncli's settings {path} is not TOML")
    assert cli("run", TEXT, "--json").code == 0  # run never reads a default model


@pytest.mark.slow  # heads three times
def test_heads_without_model_uses_the_default_as_if_given(cli,  # noqa: ANN001
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    given = cli("heads", TEXT, "--model", TOY, "--json").json()
    cli("heads", TEXT).assert_usage_error(
        "heads needs --model, or a default model: ATTNCLI_MODEL=NAME, or `attncli config set "
        "model NAME`")
    assert cli("config", "set", "model", TOY).code == 0
    assert cli("heads", TEXT, "--json").json() == given
    monkeypatch.setenv("ATTNCLI_MODEL", TOY)
    assert cli("config", "unset", "model").code == 0
    assert cli("heads", TEXT, "--json").json() == given


def test_run_keeps_the_chapter_3_variant_without_model(cli,  # noqa: ANN001
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNCLI_MODEL", TOY)
    assert json.loads(cli("run", TEXT, "--json").out)["variant"] == "causal"


@pytest.mark.parametrize("command", ["heads", "generate", "scan", "browse"])
def test_help_shows_the_default_model_where_it_stands_in(cli, command: str,  # noqa: ANN001
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    assert "[default: " not in _model_help(cli(command, "--help").out)
    monkeypatch.setenv("ATTNCLI_MODEL", "smollm2")
    assert _model_help(cli(command, "--help").out).endswith(
        "[default: smollm2 (from ATTNCLI_MODEL)]")
    assert "[default: smollm2" not in cli("run", "--help").out


def _model_help(text: str) -> str:
    """--model's help in a --help page, its lines joined."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.lstrip().startswith("-m, --model"))
    indent = len(lines[start + 1]) - len(lines[start + 1].lstrip())
    block = [lines[start]]
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) != indent or not line.strip():
            break
        block.append(line)
    return " ".join(part.strip() for part in block)
