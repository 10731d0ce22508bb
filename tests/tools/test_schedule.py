"""make test's schedule: the longest files, handed out first, are files of this suite, and the
collection puts them first in that order."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST, ROOT, _longest_first


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
