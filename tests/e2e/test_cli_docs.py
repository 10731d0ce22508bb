"""The command reference (docs/reference/<command>.md) is each command's real --help, written by
scripts/gen_cli_docs.py: a page that differs from --help fails here, naming the command."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

BIN = Path(sys.executable).parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs",
                                                  ROOT / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
COMMANDS = GEN.commands()


def test_every_command_has_one_page_and_every_page_a_command() -> None:
    pages = {p.stem for p in GEN.REFERENCE.glob("*.md")} - {"index"}
    assert len(COMMANDS) >= 15
    assert sorted(pages) == sorted(COMMANDS)
    index = (GEN.REFERENCE / "index.md").read_text(encoding="utf-8")
    assert [c for c in COMMANDS if f"]({c}.md)" not in index] == [], "a command the index omits"


@pytest.mark.parametrize("command", COMMANDS)
def test_the_page_shows_the_commands_help(command: str) -> None:
    page = (GEN.REFERENCE / f"{command}.md").read_text(encoding="utf-8")
    start, end = page.index(GEN.BEGIN), page.index(GEN.END) + len(GEN.END)
    assert page[start:end] == GEN.generated(command), (
        f"docs/reference/{command}.md differs from `attncli {command} --help`: "
        f"run {GEN.REGENERATE}")
    assert page.count(GEN.BEGIN) == 1 and page.startswith("# ")


def test_the_help_is_what_the_installed_attncli_prints() -> None:
    """The generator's in-process help against the real command's, for every command."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    differing = []
    for command in COMMANDS:
        proc = subprocess.run([str(BIN / "attncli"), command, "--help"], cwd=ROOT, env=env,
                              capture_output=True, timeout=120, check=False)
        if (proc.returncode, proc.stdout.decode()) != (0, GEN.help_text(command)):
            differing.append(command)
    assert differing == []


def test_the_generator_leaves_the_environment_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = GEN.help_text("tokens")
    assert os.environ["COLUMNS"] == "37" and "NO_COLOR" not in os.environ
    assert text.startswith("Usage: attncli tokens") and max(map(len, text.splitlines())) > 37


def _copy_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "reference"
    folder.mkdir()
    for page in GEN.REFERENCE.glob("*.md"):
        (folder / page.name).write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(GEN, "REFERENCE", folder)
    return folder


def test_a_drifted_page_is_named_and_regenerated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy_pages(tmp_path, monkeypatch)
    page = folder / "run.md"
    original = page.read_text(encoding="utf-8")
    page.write_text(original.replace("[default: causal]", "[default: simple]"), encoding="utf-8")
    assert page.read_text(encoding="utf-8") != original
    assert GEN.stale() == ["run"]
    monkeypatch.setattr(sys, "argv", ["gen_cli_docs.py", "--check"])
    assert GEN.main() == 1
    err = capsys.readouterr().err
    assert "docs/reference/run.md differs from `attncli run --help`" in err
    assert GEN.REGENERATE in err
    monkeypatch.setattr(sys, "argv", ["gen_cli_docs.py"])
    assert GEN.main() == 0
    assert page.read_text(encoding="utf-8") == original and GEN.stale() == []


def test_a_page_without_markers_or_a_missing_page_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy_pages(tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="has no"):
        GEN.with_help("# `attncli cost`\n\nno markers here\n", "cost")
    (folder / "cost.md").unlink()
    assert GEN.stale() == ["cost"]
    monkeypatch.setattr(sys, "argv", ["gen_cli_docs.py"])
    assert GEN.main() == 1
    assert "docs/reference/cost.md is missing" in capsys.readouterr().err


def test_the_picture_is_what_attncli_draws(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/_static/causal.svg, the README's picture, drawn again by attncli --save."""
    monkeypatch.setenv("NO_COLOR", "1")  # the picture is in colour whatever the terminal says
    drawn = tmp_path / "causal.svg"
    GEN.picture(drawn)
    assert drawn.read_bytes() == GEN.PICTURE.read_bytes(), (
        f"docs/_static/causal.svg differs from what attncli draws: run {GEN.REGENERATE}")
    svg = drawn.read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "http" not in svg.replace("http://www.w3.org/2000/svg", "")
    assert "0.6087" in svg and "#fde725" in svg  # the book's weight, in viridis' top colour
    assert os.environ["NO_COLOR"] == "1"
