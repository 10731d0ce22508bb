"""The layout is the architecture: arrows point down, render/ never computes, no import loops."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "attncli"
# Lower ranks sit below higher ones; a module imports its own part or parts ranked lower.
# records/ (the records renderers read that the parts above core return) sits between core and
# the parts that draw or compute on it.
RANKS = {"errors": 0, "i18n": 0, "version": 0, "activity": 0, "opt": 0.5, "machine": 0.5,
         "core": 1,
         "records": 1.5, "long": 2, "render": 2, "models": 3, "scan": 4, "saved": 4, "lessons": 4,
         "catalog": 4, "browse": 5, "checker": 5, "api": 6, "cli": 6}
# render/ receives results: of core it reads only these torch-free records.
RENDER_READS = {"attncli.core.result", "attncli.core.display", "attncli.core.variants",
                "attncli.core.pieces"}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _modules() -> dict[str, Path]:
    return dict(_package_modules())


@cache
def _package_modules() -> dict[str, Path]:
    """The package's modules by dotted name, found once (every file's imports are checked
    against them)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        found[name] = path
    return found


def _imports(path: Path, runtime_only: bool) -> set[str]:
    """attncli modules imported by path (at any depth, in functions too); with runtime_only,
    leaving out `if TYPE_CHECKING:` blocks."""
    return set(_imports_once(path, runtime_only))


@cache
def _imports_once(path: Path, runtime_only: bool) -> frozenset[str]:
    return frozenset(_imports_in(_tree(path), runtime_only))


@cache
def _tree(path: Path) -> ast.Module:
    """path's syntax tree, parsed once for every check that walks it (read, never changed)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports_in(tree: ast.AST, runtime_only: bool) -> set[str]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if runtime_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attncli"):
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("attncli")}
    modules = _package_modules()
    return {n for n in names if n in modules}


def test_arrows_point_down() -> None:
    """Every import points down, `if TYPE_CHECKING:` imports included: a type a renderer names
    is a record it reads, and that record lives below it."""
    wrong = []
    for module, path in _modules().items():
        part = _part(module)
        if part not in RANKS:
            continue
        for target in _imports(path, runtime_only=False):
            other = _part(target)
            if other == part or other in ("__init__",):
                continue
            if part == "render" and other == "core" and target not in RENDER_READS:
                wrong.append(f"{module} → {target} (render/ never imports the computation)")
            elif RANKS.get(other, 0) >= RANKS[part] and not (part == "render" and other == "core"):
                wrong.append(f"{module} → {target}")
    assert wrong == []


def _imports_torch(path: Path) -> bool:
    """Whether path imports torch anywhere (in functions and `if TYPE_CHECKING:` too)."""
    for node in ast.walk(_tree(path)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if any(name.split(".")[0] == "torch" for name in names):
            return True
    return False


def test_the_records_render_reads_never_import_torch() -> None:
    """records/ and the core records render/ reads are plain data: no torch, even for a type."""
    modules = _modules()
    read = sorted(m for m in modules if m.startswith("attncli.records") or m in RENDER_READS)
    assert "attncli.records.generation" in read  # the check is not vacuous
    assert [m for m in read if _imports_torch(modules[m])] == []
    assert _imports_torch(modules["attncli.lessons.flash"])


def _loops(graph: dict[str, set[str]]) -> list[str]:
    """Each import circle found by a depth-first walk of graph, as `a → b → a`."""
    state: dict[str, int] = {}
    loops: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                loops.append(" → ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return loops


def test_no_import_loops() -> None:
    """No circle among the package's modules, `if TYPE_CHECKING:` imports included: a circle
    that only the type checker follows still ties the modules into one."""
    graph = {m: {t for t in _imports(p, runtime_only=False) if t != m}
             for m, p in _modules().items()}
    assert _loops(graph) == []


def test_the_loop_check_sees_type_checking_imports() -> None:
    """The checks above are not vacuous: a circle closed only under TYPE_CHECKING is found."""
    app = ast.parse("from attncli.browse.screens import Overview")
    screens = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    from attncli.browse.app import BrowseApp")
    graph = {"attncli.browse.app": _imports_in(app, runtime_only=False),
             "attncli.browse.screens": _imports_in(screens, runtime_only=False)}
    assert _loops(graph) == ["attncli.browse.app → attncli.browse.screens → attncli.browse.app"]
    assert _imports_in(screens, runtime_only=True) == set()


def test_nothing_inside_imports_the_package_root() -> None:
    """`attncli/__init__.py` is the door from outside (it lazily imports attncli.api, which
    imports everything): a module that imports the root, even for __version__, closes a
    circle through it."""
    found = sorted(m for m, p in _modules().items()
                   if m != "attncli" and "attncli" in _imports(p, runtime_only=False))
    assert found == []


FOLDERS = sorted(str(p.parent.relative_to(PACKAGE)) for p in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("folder", FOLDERS)
def test_parts_stay_small(folder: str) -> None:
    """At most 14 modules in any folder, none over 300 lines."""
    modules = [p for p in (PACKAGE / folder).glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= 14, f"{folder}/ has {len(modules)} modules"
    long = {p.name: n for p in modules if (n := len(p.read_text().splitlines())) > 300}
    assert long == {}


def test_core_stays_the_chapter_3_core() -> None:
    """core/ holds the pipeline and its records in at most 2,500 lines (#48): what the parts
    above need of it alone lives with them, and what every part needs of the machine in
    machine.py."""
    lines = sum(len(p.read_text().splitlines()) for p in (PACKAGE / "core").rglob("*.py"))
    assert lines <= 2500, f"core/ has {lines:,} lines"


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["tokens", "one two"],
                                  ["run", "--help"]])
def test_these_never_import_torch(args: list[str]) -> None:
    """A fresh interpreter's --help, --version, tokens and run --help load neither torch nor the
    pipeline, and exit 0."""
    code = ("import sys; from attncli.cli.main import execute; execute(sys.argv[1:]); "
            "print('torch' in sys.modules, 'attncli.core.pipeline' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False False"


def test_refusals_before_a_model_is_read_never_import_torch() -> None:
    """Bad input refused before anything is computed (an empty text, a choice not offered, a
    name pull cannot fetch, a JSON show cannot draw): exit 2 each, and one fresh interpreter
    that refused them all has loaded neither torch nor the pipeline."""
    cases = [["run", ""], ["run", "x", "--variant", "bogus"], ["pull", "nosuchthing"],
             ["show", "samples/journey.json"]]
    code = ("import json, sys; from attncli.cli.main import execute; "
            "codes = [execute(args) for args in json.loads(sys.argv[1])]; "
            "print(codes, 'torch' in sys.modules, 'attncli.core.pipeline' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(cases)], capture_output=True,
                          text=True, timeout=600, check=False, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[2, 2, 2, 2] False False", proc.stderr
    assert proc.stderr.count("attncli: error: ") == len(cases), proc.stderr


def _named_architectures(node: ast.AST, names: set[str]) -> bool:
    """Whether node is an architecture name, or a tuple, list or set holding one."""
    values = list(node.elts) if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return any(isinstance(v, ast.Constant) and v.value in names for v in values)


def test_only_the_registry_asks_which_family() -> None:
    """No `== "llama"`, `in ("qwen2", "qwen3")` or `case "gpt2":` outside models/family.py:
    families declare traits, and code above them reads the traits."""
    from attncli.models.family import REGISTRY

    names, found = set(REGISTRY), []
    for module, path in _modules().items():
        if module == "attncli.models.family":
            continue
        for node in ast.walk(_tree(path)):
            sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else \
                [node.value] if isinstance(node, ast.MatchValue) else []
            if any(_named_architectures(side, names) for side in sides):
                found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def test_the_check_catches_a_family_comparison() -> None:
    """The check above is not vacuous: it flags the comparisons it is meant to."""
    tree = ast.parse('a == "llama"\nb in ("qwen2", "x")\nc != "mistral3"')
    flagged = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)
               and any(_named_architectures(s, {"llama", "qwen2"})
                       for s in [n.left, *n.comparators])]
    assert [ast.unparse(n) for n in flagged] == ["a == 'llama'", "b in ('qwen2', 'x')"]


def test_sources_never_import_a_family() -> None:
    """sources/ knows file formats only: no module under it imports a family's folder or the
    family registry, `if TYPE_CHECKING:` imports included (families are handed to it)."""
    models = PACKAGE / "models"
    folders = {p.parent.name for p in models.glob("*/family.py")}
    assert {"llama", "gpt2", "gemma"} <= folders  # the check is not vacuous
    banned = tuple(f"attncli.models.{name}" for name in (*sorted(folders), "family"))
    found = sorted(f"{module} → {target}" for module, path in _modules().items()
                   if module.startswith("attncli.models.sources")
                   for target in _imports(path, runtime_only=False)
                   if target == "attncli.models" or target.startswith(banned))
    assert found == []


TESTS = PACKAGE.parent / "tests"
# Folders of tests/ that cross the parts: whole commands and the pages (e2e), hostile inputs
# (redteam), the scripts and benchmarks (tools).
ACROSS = {"e2e", "redteam", "tools"}


def test_the_tests_mirror_the_package() -> None:
    """Each test module sits in the folder of the part it tests (tests/core/, tests/models/gguf/,
    ...) or in one of ACROSS, never at the top beside this file; each folder is a package, so
    two modules may share a file name."""
    flat = sorted(p.name for p in TESTS.glob("test_*.py") if p.name != Path(__file__).name)
    assert flat == [], "move them into the folder of the part they test"
    folders = {p.parent for p in TESTS.rglob("test_*.py")} - {TESTS}
    assert sorted(str(f.relative_to(TESTS)) for f in folders
                  if not (f / "__init__.py").is_file()) == []
    parts = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert sorted({f.relative_to(TESTS).parts[0] for f in folders} - parts - ACROSS) == []


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _named_files(page: str) -> set[str]:
    """The source files a page names: `a/b.py`, `app.py`, `_fused.c`, `browse.tcss`, ..."""
    return {name for name in re.findall(r"[\w./*-]*\w\.(?:py|c|h|tcss)\b", page)
            if not name.startswith((".", "/")) and "*" not in name}  # not `*_fixtures.py`


def _missing(names: set[str]) -> list[str]:
    """The names that are no file: a path from the repository or the package, or a bare name
    that no file of the package, tests, bench or scripts has."""
    root = PACKAGE.parent
    every = {p.name for folder in ("attncli", "tests", "bench", "scripts")
             for p in (root / folder).rglob("*") if p.is_file()}
    return sorted(name for name in names
                  if not ((root / name).exists() or (PACKAGE / name).exists()
                          or ("/" not in name and name in every)))


def test_the_modules_the_architecture_page_names_exist() -> None:
    """docs/architecture.md names only modules, scripts and folders that exist: a module moved
    or renamed fails here until the page follows."""
    page = ARCHITECTURE.read_text(encoding="utf-8")
    files = _named_files(page)
    assert {"attncli/cli/main.py", "app.py", "_fused.c", "bench/bench.py"} <= files  # not vacuous
    assert _missing(files) == []
    parts = "|".join(RANKS)
    dotted = set(re.findall(rf"`(?:attncli\.)?((?:{parts})(?:\.\w+)+)", page))
    modules = _modules()
    assert "core.request.Request" in dotted
    # A name is a module, a module's attribute, or an attribute of a top module (errors).
    named = {m.removeprefix("attncli.") for m, p in modules.items() if p.name != "__init__.py"}
    wrong = sorted(d for d in dotted if d.rpartition(".")[2] not in ("json", "py", "tcss")
                   and not any(".".join(d.split(".")[:k]) in named for k in (3, 2, 1)))
    assert wrong == []
    folders = set(re.findall(rf"`((?:{parts})/[\w/]*)`", page))
    assert sorted(f for f in folders if not (PACKAGE / f).is_dir()) == []


def test_the_page_check_catches_a_missing_module() -> None:
    """The check above is not vacuous: a name that is no file is found."""
    names = _named_files("the kernel (tiled.py), `long/nowhere.py` and `bench/nothing.py`")
    assert _missing(names) == ["bench/nothing.py", "long/nowhere.py"]


def test_the_page_names_the_bench_scripts_make_runs() -> None:
    """The `make bench` line of docs/architecture.md lists the scripts the Makefile runs."""
    makefile = (PACKAGE.parent / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    page = ARCHITECTURE.read_text(encoding="utf-8")
    line = page.split("- `make bench` runs", 1)[1].split("\n- ", 1)[0].split("\n\n", 1)[0]
    ran = re.findall(r"bench/\w+\.py", target)
    assert len(ran) > 5
    assert [s for s in re.findall(r"bench/\w+\.py", line) if s != "bench/agreement.py"] == ran


def test_the_pages_count_the_c_extensions_setup_builds() -> None:
    """README.md, docs/install.md and docs/performance.md say as many C extensions as setup.py
    declares."""
    root = PACKAGE.parent
    count = (root / "setup.py").read_text(encoding="utf-8").count("Extension(\"attncli.")
    words = {2: "two", 3: "three", 4: "four", 5: "five"}
    assert count >= 3
    for page in ("README.md", "docs/install.md", "docs/performance.md"):
        text = (root / page).read_text(encoding="utf-8")
        said = re.findall(r"\b(one|two|three|four|five) small C (?:extension|file)s?\b", text)
        assert said == [words[count]], page
