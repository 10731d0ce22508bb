"""saved/walk.py: the reader that walks a record's annotations, each field checked as its Key
declares, against sizes it is handed and fields read before it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, TypedDict

import pytest

from attncli.errors import AttnCliError
from attncli.saved.walk import SHARE, Key, Reader


class Item(TypedDict):
    index: int
    share: float


@dataclass(frozen=True)
class Part:
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start == 3:
            raise AttnCliError("start 3 is refused by the record itself")


@dataclass(frozen=True)
class Doc:
    mode: bool
    items: list[Item]
    part: Part
    grid: Any
    span: list[int]
    picked: int | None = None
    note: str = "none"
    tags: list[int] = field(default_factory=list)


TABLE = {Doc: {"mode": Key(name="config.mode", choices={"on": True, "off": False}),
               "items": Key(counts="index=P"), "grid": Key(shape="P * ?"), "span": Key(span="N"),
               "picked": Key(high="N-1", needed=True), "tags": Key(length="P+1", high="N")},
         Item: {"share": SHARE},
         Part: {"end": Key(low="start", high="N")}}
GOOD = {"config": {"mode": "on"}, "items": [{"index": 2, "share": 0.5, "extra": "\x1b"},
                                            {"index": 3, "share": 1.0}],
        "part": {"start": 1, "end": 4}, "grid": [[0.5, None], [1, 0]], "span": [1, 3],
        "picked": None, "tags": [0, 5, 5]}


def read(doc: dict[str, Any]) -> Doc:
    return Reader(TABLE, {"N": 5, "P": 2}).read(Doc, doc)


def test_a_document_is_read_as_its_keys_declare() -> None:
    doc = read(GOOD)
    assert doc == Doc(mode=True, items=[{"index": 2, "share": 0.5, "extra": "\\x1b"},
                                        {"index": 3, "share": 1.0}],
                      part=Part(1, 4), grid=[[0.5, None], [1.0, 0.0]], span=[1, 3],
                      picked=None, note="none", tags=[0, 5, 5])


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """GOOD with the part at path set to value (absent: dropped)."""
    doc = copy.deepcopy(GOOD)
    holder = doc
    for step in path[:-1]:
        holder = holder[step]
    if value is _with:
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "message"), [
    (("config", "mode"), "maybe", 'config.mode is "maybe", not one of on, off'),
    (("items", 1, "index"), 4, "items[1].index is 4, outside 3 to 3"),
    (("items", 0, "share"), 1.5, "items[0].share is 1.5, not a share from 0 to 1"),
    (("part", "end"), 0, "part.end is 0, outside 1 to 5"),
    (("part", "start"), 3, "saved file: part: start 3 is refused by the record itself"),
    (("grid",), [[0.5, None]], "grid has 1 items, expected 2"),
    (("grid",), [[], []], "grid[0] is empty"),
    (("grid", 1), [1, 0, 0], "grid[1] has 3 items, expected 2"),
    (("span",), [3, 3], "span[1] is 3, outside 4 to 5"),
    (("picked",), _with, "the file has no 'picked'"),
    (("picked",), 5, "picked is 5, outside 0 to 4"),
    (("tags",), [0, 1], "tags has 2 items, expected 3"),
    (("tags", 2), 6, "tags[2] is 6, outside 0 to 5"),
])
def test_each_declaration_refuses_in_one_line_naming_the_path(path: tuple[Any, ...], value: Any,
                                                              message: str) -> None:
    with pytest.raises(AttnCliError) as raised:
        read(_with(path, value))
    assert str(raised.value) == f"saved file: {message.removeprefix('saved file: ')}"


def test_a_field_with_a_default_may_be_absent_unless_needed() -> None:
    doc = read(_with(("tags",), _with))
    assert doc.tags == [] and doc.note == "none"
    assert read(_with(("picked",), 4)).picked == 4


def test_sizes_sum_names_numbers_and_fields_read_before() -> None:
    reader = Reader({}, {"N": 5, "G": None})
    assert reader.size("N-1") == 4 and reader.size("N+N-3") == 7 and reader.size(3) == 3
    assert reader.size("bos+length+length", {"bos": True, "length": 4}) == 9
    assert reader.size("rows-1", {"rows": [1, 2, 3]}) == 2
    assert reader.size("G") is None and reader.shaped([[1], [2]], "g", "* G") == [[1.0], [2.0]]


class Probe(TypedDict):
    bos: bool
    length: int
    ids: list[int]


def test_a_lists_length_may_sum_fields_read_before_it() -> None:
    """A probe's ids: BOS (a bool counts 1) and its tokens twice (a KeyError once, by the
    list's length looked up among the reader's sizes only)."""
    reader = Reader({Probe: {"ids": Key(length="bos+length+length")}})
    assert reader.read(Probe, {"bos": True, "length": 2, "ids": [9, 1, 2, 1, 2]})["ids"] == [
        9, 1, 2, 1, 2]
    with pytest.raises(AttnCliError, match=r"^saved file: probe.ids has 4 items, expected 5$"):
        reader.read(Probe, {"bos": True, "length": 2, "ids": [9, 1, 2, 1]}, "probe")
