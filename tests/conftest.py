"""Shared helpers: run the CLI in-process with a pinned width and no colour."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
JOURNEY = ROOT / "samples" / "journey.json"
SENTENCE = "Your journey starts with one step"


# What starts another process: attncli, a terminal (tmux), a browser (selenium's Chrome) or a
# Jupyter kernel. A test whose process attncli itself starts (scan's worker pool) says so with
# @pytest.mark.process.
SPAWNS = {"subprocess", "attncli_process", "Popen", "webdriver", "tmux", "pexpect",
          "multiprocessing", "system", "start_new_kernel"}


@cache
def _spawning(path: Path) -> frozenset[str]:
    """Names of path's functions and classes (tests, helpers, fixtures) that start a process,
    directly or through another of the module's, of tests.conftest's, or of the test module they
    import it from, that does."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            uses[node.name] = {n.id if isinstance(n, ast.Name) else n.attr
                               for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute)}
            uses[node.name] |= {a.name.split(".")[-1] for n in ast.walk(node)
                                if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
    found = set(SPAWNS) | (set() if path.name == "conftest.py" else
                           set(_spawning(Path(__file__))))
    for node in ast.walk(tree):  # a module that imports a spawning fixture from another test module
        module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
        if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_"):
            other = ROOT.joinpath(*module.split(".")).with_suffix(".py")
            found |= set(_spawning(other)) & {a.name for a in node.names}
    grew = True
    while grew:
        more = {name for name, used in uses.items() if name not in found and used & found}
        found |= more
        grew = bool(more)
    return frozenset(found - SPAWNS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `process` every test that starts a process, itself or through a fixture or helper:
    `make check` (-m "not process") runs the rest, in-process, in seconds."""
    for item in items:
        function = getattr(item, "function", None)
        if function is None:
            continue
        spawning = _spawning(Path(str(item.fspath)))
        names = {function.__name__, *getattr(item, "fixturenames", ())}
        if names & spawning:
            item.add_marker(pytest.mark.process)


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)


@pytest.fixture(autouse=True)
def _own_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No default model from the user's settings file or environment: each test's settings
    file is its own (absent until a test writes it)."""
    monkeypatch.setenv("ATTNCLI_CONFIG", str(tmp_path / "attncli-settings" / "config.toml"))
    monkeypatch.delenv("ATTNCLI_MODEL", raising=False)


@pytest.fixture(autouse=True)
def _own_hidden_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test's hidden-state cache in its own folder: never the user's, never shared."""
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE", str(tmp_path / "hidden-cache"))
    monkeypatch.delenv("ATTNCLI_NO_CACHE", raising=False)
    monkeypatch.delenv("ATTNCLI_HIDDEN_CACHE_MAX", raising=False)


class CliRun:
    """Exit code, stdout and stderr of one in-process CLI run."""

    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> Any:
        return json.loads(self.out, parse_constant=_no_constants)

    def assert_usage_error(self, message: str) -> None:
        """Exit 2, nothing on stdout, and one line on stderr that names the problem."""
        assert self.code == 2, self.err
        assert self.out == ""
        assert self.err.startswith("attncli: error: ") and self.err.count("\n") == 1, self.err
        assert message in self.err, self.err


def _no_constants(name: str) -> None:
    raise ValueError(f"non-strict JSON constant {name}")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):  # noqa: ANN201
    """Call attncli in-process: cli("run", "text", "--json") → CliRun."""
    from attncli.cli.main import execute

    def call(*args: str) -> CliRun:
        code = execute(list(args))
        captured = capsys.readouterr()
        return CliRun(code, captured.out, captured.err)

    return call


def attncli_process(*args: str, input: bytes | None = None,
                    env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run attncli as a real subprocess (python -m attncli)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "attncli", *args], input=input,
                          capture_output=True, env=full_env, timeout=600, check=False)


def make_console(width: int = 100, colour: bool = False):  # noqa: ANN201
    """A console writing to a string: pinned width, colour only when asked."""
    import io

    from rich.console import Console

    return Console(file=io.StringIO(), width=width, force_terminal=colour, no_color=not colour,
                   color_system="truecolor" if colour else None, highlight=False)


def rendered(build, width: int = 100, colour: bool = False) -> str:  # noqa: ANN001
    """What build(console) prints on a console of that width."""
    console = make_console(width, colour)
    console.print(build(console))
    return console.file.getvalue()


def streamed(build, width: int = 100, colour: bool = False) -> str:  # noqa: ANN001
    """What build(console) prints on a console of that width when emitted part by part, as
    the CLI emits it (a listing in chunks of rows)."""
    from attncli.render.draw.streamed import print_streamed

    console = make_console(width, colour)
    print_streamed(console, build(console))
    return console.file.getvalue()


def styled_chars(ansi: str) -> list[tuple[str, str]]:
    """Each character of a terminal output with the style it shows in, however the escape
    codes were grouped."""
    from rich.style import Style
    from rich.text import Text

    text = Text.from_ansi(ansi)
    styles = [Style()] * len(text.plain)
    for span in text.spans:
        for k in range(span.start, span.end):
            styles[k] = styles[k] + (span.style if isinstance(span.style, Style)
                                     else Style.parse(span.style))
    return [(ch, str(style)) for ch, style in zip(text.plain, styles, strict=True)]
