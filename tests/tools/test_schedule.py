"""make test's schedule: the longest files, handed out first, are files of this suite, and the
collection puts them first in that order."""

from __future__ import annotations

import ast

from tests.conftest import LONGEST_FIRST, ROOT, _longest_first, check_slow


def test_every_longest_file_is_a_test_file_here() -> None:
    assert [name for name in LONGEST_FIRST if not (ROOT / name).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_the_longest_files_come_first_in_their_order_and_the_rest_as_collected() -> None:
    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    ids = ["tests/a.py::x", f"{LONGEST_FIRST[1]}::y", "tests/b.py::z",
           f"{LONGEST_FIRST[0]}::w", f"{LONGEST_FIRST[1]}::v"]
    items = [Item(i) for i in ids]
    _longest_first(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [ids[3], ids[1], ids[4], ids[0], ids[2]]


def test_every_function_make_check_leaves_out_is_a_test_here() -> None:
    """tests/check_slow.txt names test functions that exist (a renamed or deleted test would
    otherwise come back into make check's lane unnoticed, or linger in the list)."""
    missing = []
    for name in sorted(check_slow()):
        path, _, function = name.partition("::")
        file = ROOT / path
        tree = ast.parse(file.read_text(encoding="utf-8")) if file.is_file() else ast.parse("")
        names = {node.name for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        if function not in names:
            missing.append(name)
    assert missing == []
