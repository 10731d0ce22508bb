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
