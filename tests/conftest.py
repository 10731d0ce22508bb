"""Shared helpers: run the CLI in-process with a pinned width and no colour."""

from __future__ import annotations

import ast
import gc
import itertools
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
JOURNEY = ROOT / "samples" / "journey.json"
SENTENCE = "Your journey starts with one step"


# What starts another process: attncli, a terminal (tmux), a browser (selenium's Chrome) or a
# Jupyter kernel, found by what a test calls, not by the names it uses. A test whose process
# attncli itself starts (scan's worker pool) says so with @pytest.mark.process.
SPAWNING_MODULES = {"subprocess", "multiprocessing", "pexpect", "selenium", "jupyter_client",
                    "pty"}
OS_SPAWNS = ("os.system", "os.popen", "os.fork", "os.exec", "os.spawn", "os.posix_spawn")


def _aliases(nodes: list[ast.AST]) -> dict[str, str]:
    """Each name the module's imports bind (at any depth) → what it is, dotted."""
    out = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                    for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
    return out


def _call_name(call: ast.Call, aliases: dict[str, str]) -> str | None:
    """The dotted name a call calls (`subprocess.run`, `shell`), imported names resolved."""
    parts, func = [], call.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    return ".".join([aliases.get(func.id, func.id), *reversed(parts)]) \
        if isinstance(func, ast.Name) else None


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _summaries(nodes: list[ast.AST], aliases: dict[str, str]) -> dict[int, tuple[set[str],
                                                                               set[str]]]:
    """For each definition (by id): the dotted names it calls and the names it uses, at any
    depth; each nested definition is read once and added to those around it."""
    out: dict[int, tuple[set[str], set[str]]] = {}

    def summarise(definition: ast.AST) -> tuple[set[str], set[str]]:
        calls, names = set(), set()
        stack = list(ast.iter_child_nodes(definition))
        while stack:
            node = stack.pop()
            if isinstance(node, DEFINITIONS):
                inner = out.get(id(node)) or summarise(node)
                calls |= inner[0]
                names |= inner[1]
                continue
            if isinstance(node, ast.Call) and (name := _call_name(node, aliases)) is not None:
                calls.add(name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            stack.extend(ast.iter_child_nodes(node))
        out[id(definition)] = (calls, names)
        return calls, names

    for node in nodes:
        if isinstance(node, DEFINITIONS) and id(node) not in out:
            summarise(node)
    return out


def _spawns(name: str) -> bool:
    """Whether calling name starts a process by itself."""
    return name.split(".")[0] in SPAWNING_MODULES or name.startswith(OS_SPAWNS)


@cache
def _spawning(path: Path) -> frozenset[str]:
    """Names of path's functions and classes (tests, helpers, fixtures) that start a process:
    that call one that does (subprocess, a browser, a kernel), or call or request (as a fixture)
    another of the module's, of tests.conftest's or of a test module's that does."""
    nodes = list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))  # walked once
    aliases = _aliases(nodes)
    calls: dict[str, set[str]] = {}  # what each calls, resolved
    uses: dict[str, set[str]] = {}  # the names each uses: helpers called or handed on, fixtures
    summaries = _summaries(nodes, aliases)
    for node in nodes:
        if isinstance(node, DEFINITIONS):
            calls[node.name], uses[node.name] = set(summaries[id(node)][0]), \
                set(summaries[id(node)][1])
            if not isinstance(node, ast.ClassDef):
                uses[node.name] |= {a.arg for a in node.args.args}  # fixtures it requests
    found = {name for name, called in calls.items() if any(map(_spawns, called))}
    if path.name != "conftest.py":
        found |= set(_spawning(Path(__file__)))
    for node in nodes:  # helpers imported from another test module
        module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
        if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_"):
            other = ROOT.joinpath(*module.split(".")).with_suffix(".py")
            found |= set(_spawning(other)) & {a.name for a in node.names}
    grew = True
    while grew:
        more = {name for name, used in uses.items() if name not in found and used & found}
        found |= more
        grew = bool(more)
    return frozenset(found)


# The files that take longest (a durations run of the whole suite, minutes each on 2 cores),
# longest first: make test hands them to its workers first (--dist loadfile with
# --no-loadscope-reorder, which would otherwise order files by their number of tests and leave a
# one-test file of minutes, such as a fresh venv's install, to the end, alone on one worker).
LONGEST_FIRST = (
    "tests/e2e/test_install_sdist.py", "tests/e2e/test_install_wheel.py",
    "tests/scan/test_scan.py", "tests/cli/test_cli_streams.py",
    "tests/redteam/test_gguf_hostile.py", "tests/e2e/test_readme.py",
    "tests/redteam/test_redteam.py", "tests/models/generate/test_generate_real.py",
    "tests/models/test_decoder_families.py", "tests/models/gguf/test_gguf_qmatmul_asan.py",
    "tests/models/test_memory.py", "tests/cli/test_generate_interrupt.py",
    "tests/browse/test_browse.py", "tests/cli/test_signals.py", "tests/scan/test_cluster.py",
    "tests/models/generate/test_generate_given_real.py", "tests/cli/test_progress_tmux.py",
    "tests/render/test_page_commands.py", "tests/models/gguf/test_gguf_counts_properties.py",
    "tests/models/test_hidden_cache.py",
)


def check_slow() -> frozenset[str]:
    """tests/check_slow.txt's functions (file::name, without parameters), which make check's
    lane leaves to make test."""
    lines = (ROOT / "tests" / "check_slow.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(line.split("#", 1)[0].strip() for line in lines
                     if line.split("#", 1)[0].strip())


def _longest_first(items: list[pytest.Item]) -> None:
    """items reordered in place: LONGEST_FIRST's files first, in its order; the rest as
    collected."""
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(rank))

    items.sort(key=key)  # stable: each file's tests stay in their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config) -> None:
    """Before xdist starts its workers: the test modules rewritten once, for all of them."""
    from tests.rewrite_once import rewrite_test_modules

    rewrite_test_modules(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `process` every test that starts a process, itself or through a fixture or helper:
    `make check` (-m "not process") runs the rest, in-process, in seconds; and hand the longest
    files out first."""
    _longest_first(items)
    slow = check_slow()
    for item in items:
        if item.nodeid.split("[", 1)[0] in slow:
            item.add_marker(pytest.mark.slow)
        function = getattr(item, "function", None)
        if function is None:
            continue
        spawning = _spawning(Path(str(item.fspath)))
        names = {function.__name__, *getattr(item, "fixturenames", ())}
        if names & spawning:
            item.add_marker(pytest.mark.process)


THAW_EVERY = 30  # modules; see _frozen_heap
_MODULES_STARTED = itertools.count(1)


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap() -> None:
    """Each module starts with what the worker holds (imports, earlier modules' caches) out of
    the cycle collector's reach, as attncli's processes freeze their imports (cli/streams.py):
    each full collection walked 350,000-800,000 objects again. The collection before the freeze
    walks what the last module left; every THAW_EVERY modules, all (garbage made while frozen)."""
    if next(_MODULES_STARTED) % THAW_EVERY == 0:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _own_threads() -> Iterator[None]:
    """torch's thread count as the test found it: one that sets it (a scan worker's Scorer takes
    one thread) left every later in-process run on it, whose BLAS sums then differ in bits from
    a fresh process's (test_cli_given's piped run, after tests/scan in the same worker)."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


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


def full_device() -> Path:
    """/dev/full, the device whose every write fails (ENOSPC). The test skips, saying so, where
    it is missing or not a device: opening it to write would leave a regular file there, which
    every later run would write into."""
    try:
        node = os.stat("/dev/full")
    except OSError:
        node = None
    if node is None or not stat.S_ISCHR(node.st_mode):
        pytest.skip("/dev/full is not a character device on this machine")
    return Path("/dev/full")


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
