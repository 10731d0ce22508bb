"""browse's app in Textual's own idioms: state on the app, handed to screens that never reach
for it; results as messages from workers that never hold up leaving; Rich and Textual (both
unpinned) read through their public names only."""

from __future__ import annotations

import ast
import asyncio
import threading
from pathlib import Path

import numpy as np

from attncli.browse.app import WORKER, BrowseApp
from attncli.browse.patterns import ExactRow
from attncli.browse.source import RowInfo, Source
from attncli.browse.state import Results
from attncli.browse.widgets import StatusLine
from tests.conftest import ROOT

BROWSE = ROOT / "attncli" / "browse"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _own_private_names(tree: ast.Module) -> set[str]:
    """The `_name`s a module defines itself: assigned on self, or declared in a class body."""
    names = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Attribute):
                names.add(target.attr)
            elif isinstance(target, ast.Name):
                names.add(target.id)
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
    return {name for name in names if name.startswith("_")}


def _library_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """The module's subclasses of a Rich or Textual class: any `_name` on them is the library's."""
    library = {alias.asname or alias.name for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                   "rich", "textual") for alias in node.names}
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and any(
        isinstance(base, ast.Name) and base.id in library for base in node.bases)]


def _private(node: ast.Attribute) -> bool:
    return node.attr.startswith("_") and not node.attr.startswith("__")


def private_uses(path: Path) -> list[str]:
    """Where path touches a private name it does not define (another library's `_name`, or
    any `_name` in a subclass of Rich's or Textual's), or imports a private module of either."""
    tree, found = _tree(path), set()
    own = _own_private_names(tree)
    inside = {id(node) for cls in _library_classes(tree) for node in ast.walk(cls)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node) and (
                node.attr not in own or id(node) in inside):
            found.add(f"{path.name}:{node.lineno} .{node.attr}")
        modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
            a.name for a in node.names] if isinstance(node, ast.Import) else []
        for module in modules:
            parts = module.split(".")
            if parts[0] in ("rich", "textual") and any(p.startswith("_") for p in parts):
                found.add(f"{path.name}:{node.lineno} import {module}")
    return sorted(found)


def test_no_private_name_of_textual_or_rich() -> None:
    """browse (and the saver that writes its screens) use no private attribute of another
    object, so an upgrade of Textual or Rich cannot break them silently; and nothing in attncli
    imports a private module of either."""
    used = [hit for path in [*sorted(BROWSE.glob("*.py")), ROOT / "attncli" / "cli" / "output.py",
                             ROOT / "attncli" / "cli" / "export.py"] for hit in private_uses(path)]
    assert used == []
    imports = [hit for path in sorted((ROOT / "attncli").rglob("*.py"))
               for hit in private_uses(path) if " import " in hit]
    assert imports == []


def test_the_private_name_check_sees_a_private_attribute(tmp_path: Path) -> None:
    source = tmp_path / "hook.py"
    source.write_text("from rich._export_format import X\nclass A:\n    def f(self):\n"
                      "        self._mine = 1\n"
                      "        return self._mine, self.screen._compositor\n"
                      "from textual.drivers.linux_driver import LinuxDriver\n"
                      "class D(LinuxDriver):\n    def __init__(self):\n"
                      "        self._file = None\n")
    assert private_uses(source) == ["hook.py:1 import rich._export_format",
                                    "hook.py:5 ._compositor", "hook.py:9 ._file"]


def test_screens_take_their_state_and_nothing_polls() -> None:
    """The screens read the state handed to them, never the app; no timer polls the workers
    (the spinner is the status line's own refresh while something is computed)."""
    for name in ("screens.py", "head.py", "widgets.py", "views.py", "state.py"):
        tree = _tree(BROWSE / name)
        reach = [node.lineno for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and node.attr == "app" and name != "widgets.py"]
        assert reach == [], f"{name} reaches for the app at lines {reach}"
    text = "".join(path.read_text() for path in BROWSE.glob("*.py"))
    assert "set_interval" not in text and "_tick" not in text and "call_from_thread" not in text


def test_leaving_never_waits_for_a_computation() -> None:
    """q while a row is computed: the app ends at once, the computation left on its daemon
    thread (Textual's thread workers run on the loop's executor, which leaving waits for)."""
    release, finished = threading.Event(), threading.Event()

    def compute(row: int, what: str) -> ExactRow:
        release.wait(120)
        finished.set()
        return ExactRow(np.full((1, 2, 2), 0.5, dtype=np.float32), [{}])

    source = Source("slow", ["a", "b"], [RowInfo("slow", "S", 1)], compute)
    app = BrowseApp(source)

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            while not app.results.busy:
                await pilot.pause()
            assert "computing…" in str(app.screen.query_one("#status", StatusLine).render())
            await pilot.press("q")

    try:
        asyncio.run(main())
        assert app.return_code == 0 and not finished.is_set()
        assert any(t.name == WORKER and t.is_alive() for t in threading.enumerate())
    finally:
        release.set()


def test_what_the_source_holds_is_drawn_without_a_worker() -> None:
    source = Source("held", ["a", "b"], [RowInfo("held", "H", 1)], lambda row, what: ExactRow(
        np.full((1, 2, 2), 0.5, dtype=np.float32), [{}]))
    data = source.get(0)
    assert BrowseApp(source).results.done == {(0, "weights"): data}


def test_results_are_new_records_and_a_released_pass_is_asked_again() -> None:
    class Pass:
        alive = True

    held, results = Pass(), Results()
    started = results.started("k")
    assert results.busy == frozenset() and not started.wants("k")
    done = started.finished("k", {"k": held, "other": 1})
    assert done.busy == frozenset() and done.done == {"k": held, "other": 1}
    assert not done.wants("k")
    held.alive = False  # released: its pictures still draw, its windows need the pass again
    assert done.wants("k") and not done.wants("k", pictures=True)
    failed = done.started("x").failed("x", "out of memory")
    assert failed.errors == {"x": "out of memory"} and not failed.wants("x")
    gone = done.started("x").failed("x", None)
    assert gone.errors == {} and gone.wants("x")
    assert all(isinstance(r, Results) for r in (started, done, failed, gone))
