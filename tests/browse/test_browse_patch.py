"""`browse --patch FILE`: a saved patch's layer × head grid, one cell a head; opening a head
shows its cell's value, the JSON's own; a file of another kind is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from attncli.browse.causal import saved_patch
from attncli.errors import AttnCliError
from tests.browse.test_browse import drive, screen_text, settle
from tests.conftest import ROOT

TOY = str(ROOT / "samples" / "toy-gpt2")


def test_the_overview_is_the_grid_and_a_head_shows_its_value(cli: Any, tmp_path: Path) -> None:
    doc = cli("patch", "the cat sat on the mat", "the dog sat on the hat", "--model", TOY,
              "--tokens", " mat", " hat", "--json").json()
    path = tmp_path / "patch.json"
    path.write_text(json.dumps(doc))
    source = saved_patch(str(path))
    assert [row.label for row in source.rows] == [f"L{k}" for k in range(len(doc["grid"]))]
    assert source.cells is None  # no --per-position: Enter opens the head view
    shown: list[str] = []

    async def script(app: Any, pilot: Any) -> None:
        for _ in range(2):  # down to layer 1, right to head 2
            await pilot.press("down" if not shown else "right")
            shown.append("")
        await pilot.press("right")
        await pilot.press("enter")
        await settle(app, pilot)
        shown.append(screen_text(app))

    drive(source, script)
    assert "layer 1 · head 2" in shown[-1]
    assert f"{doc['grid'][1][2]:.4f}" in shown[-1]
    cells = sorted(((abs(v), -(k * len(row) + h), k, h, v) for k, row in enumerate(doc["grid"])
                    for h, v in enumerate(row)), reverse=True)[:5]  # the JSON's own top five
    assert source.title.endswith("top heads: " + " · ".join(
        f"L{k}.{h} {v:+.3f}" for _, _, k, h, v in cells))


def test_another_kind_is_refused(cli: Any, tmp_path: Path) -> None:
    doc = cli("ablate", "the cat sat on the mat", "--model", TOY, "--heads", "1.2",
              "--json").json()
    path = tmp_path / "ablate.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(AttnCliError, match="--patch takes `attncli patch --json` output"):
        saved_patch(str(path))


def test_a_per_position_file_opens_a_heads_cells_by_position(cli: Any, tmp_path: Path) -> None:
    """Enter on a head of a --per-position file: its layer's heads × positions; the arrows
    move the head and the position, [ ] the layer, and the selected cell's number is the
    JSON's own, named with its token (clean / corrupted where they differ); Esc goes back."""
    doc = cli("patch", "the cat sat on the mat", "the dog sat on the hat", "--model", TOY,
              "--tokens", " mat", " hat", "--per-position", "--json").json()
    path = tmp_path / "patch.json"
    path.write_text(json.dumps(doc))
    source = saved_patch(str(path))
    assert source.cells is not None and source.cells.values.shape == (
        len(doc["grid"]), len(doc["grid"][0]), len(doc["clean"]))
    shown: list[str] = []

    async def script(app: Any, pilot: Any) -> None:
        await pilot.press("enter")  # layer 0, head 0
        await settle(app, pilot)
        shown.append(screen_text(app))
        for key in ("right", "down", "right_square_bracket", "right"):  # position 2, head 1,
            await pilot.press(key)  # layer 1
        await settle(app, pilot)
        shown.append(screen_text(app))
        await pilot.press("escape")
        await settle(app, pilot)
        shown.append(screen_text(app))

    drive(source, script)
    clean, corrupt = doc["clean"], doc["corrupt"]
    assert clean[1] != corrupt[1] and clean[2] == corrupt[2]
    assert source.cells.labels[1:3] == [f"{clean[1]} / {corrupt[1]}", clean[2]]
    assert (f"layer 0 · head 0 · position 0 {clean[0]!r}: "
            f"{doc['positions'][0][0][0]:.4f}") in shown[0]
    assert "L0.3" in shown[0] and "each head patched at one position" in shown[0]
    assert "L1.3" in shown[1]
    assert (f"layer 1 · head 1 · position 2 {clean[2]!r}: "
            f"{doc['positions'][1][1][2]:.4f}") in shown[1]
    assert "layer 1 · head 1 · weights" in shown[2] and "open head" in shown[2]  # back

