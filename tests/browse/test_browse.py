"""`attncli browse`, driven headless by Textual's Pilot: keys move the selection, the head view
ranks the right row, stages and views switch, saving writes a whole file, q exits 0. Every
number shown is checked against `attncli run`/`heads` JSON or numpy on the same weights."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from textual import events

from attncli.browse import widgets
from attncli.browse.app import BrowseApp
from attncli.browse.head import CompareScreen, HeadScreen
from attncli.browse.screens import Overview
from attncli.browse.source import Source, chapter3_source, model_source
from attncli.core.compare import Shared
from attncli.core.inputs import read_text
from attncli.core.request import Request
from attncli.core.variants import Variant
from tests.conftest import ROOT, SENTENCE
from tests.readme_blocks import prose
from tests.tolerance import assert_near

TOY = ROOT / "samples" / "toy-gpt2"
Script = Callable[[BrowseApp, Any], Awaitable[None]]


def drive(source: Source, script: Script, size: tuple[int, int] = (100, 30),
          saver: Any = None) -> BrowseApp:
    """Run the app headless at size, play script with its pilot, and return the app."""
    app = BrowseApp(source, save=saver)

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            await script(app, pilot)

    asyncio.run(main())
    return app


async def settle(app: BrowseApp, pilot: Any) -> None:
    """Wait until the workers are done and the screen is drawn."""
    for _ in range(600):
        await pilot.pause()
        if not app.results.busy:
            break
        await asyncio.sleep(0.02)
    await pilot.pause()


def screen_text(app: BrowseApp) -> str:
    """What the screen shows, as plain text lines (as `e` then `t` saves it)."""
    return widgets.screen_text(app.screen)


def chapter3(text: str = SENTENCE, **options: Any) -> Source:
    return chapter3_source(Request(text=text, **options), list(Variant), Shared())


def ranked(panel: str) -> list[int]:
    """The key indices the head view's ranking lists, in order."""
    lines = panel.split("attends most to:", 1)[1].splitlines()[1:]
    return [int(m.group(1)) for line in lines if (m := re.match(r"\s+(\d+) ", line))]


def test_keys_move_the_selection_and_the_head_view_ranks_the_query_row(cli: Any) -> None:
    weights = np.array(cli("run", SENTENCE, "--variant", "multihead", "--json").json()["weights"])

    async def script(app: BrowseApp, pilot: Any) -> None:
        await pilot.press("down", "down", "down", "right")  # multihead, head 1
        assert (app.sel.row, app.sel.head) == (3, 1)
        assert "multihead · head 1" in screen_text(app)
        await pilot.press("right")  # multihead has two heads: the selection stays on the grid
        assert app.sel.head == 1
        await pilot.press("enter", "right", "right", "right")
        await settle(app, pilot)
        assert type(app.screen).__name__ == "HeadScreen" and app.sel.query == 3
        shown = screen_text(app)
        row = weights[1, 3]  # (T,) head 1, query 3: keys 0..3 unmasked
        assert ranked(shown) == list(np.argsort(-row[:4], kind="stable"))
        assert "query 3 ' with'" in shown
        await pilot.press("q")

    app = drive(chapter3(), script)
    assert app.return_code == 0


def test_stages_views_find_and_zoom() -> None:
    async def script(app: BrowseApp, pilot: Any) -> None:
        await pilot.press("down", "down", "enter")  # causal
        await settle(app, pilot)
        seen = []
        for _ in range(6):
            await pilot.press("s")
            await settle(app, pilot)
            seen.append(app.sel.stage)
            assert f"· {app.sel.stage} ·" in screen_text(app).splitlines()[0]
        assert seen[:5] == ["scores", "scaled", "masked", "softmax", "weights"]
        await pilot.press("v")
        await settle(app, pilot)
        assert app.sel.view == "norm"
        await pilot.press("slash")
        await pilot.pause()
        await pilot.press(*"step", "enter")
        await settle(app, pilot)
        assert app.sel.query == 5
        exact = app.sel.exact
        await pilot.press("z")
        assert app.sel.exact is not exact and "max-pooled" in screen_text(app)
        await pilot.press("escape")
        assert type(app.screen).__name__ == "Overview"
        await pilot.press("q")

    drive(chapter3(), script)


def test_the_norm_view_is_runs_measure_norm(cli: Any) -> None:
    source = chapter3()
    norm = source.get(2, "norm").window(0, range(6), range(6))
    want = np.array(cli("run", SENTENCE, "--variant", "causal", "--measure", "norm", "--json")
                    .json()["weights"], dtype=float)[0]
    want[np.triu_indices(6, 1)] = np.nan  # masked keys are shown masked
    assert_near(norm, want, equal_nan=True)  # NaN where masked, on both sides


def test_the_model_grid_is_heads_json(cli: Any) -> None:
    text = read_text(None, str(TOY / "probe.txt"))  # as --file reads it
    source = model_source(Request(text=text, model=str(TOY), allow_special=True))
    doc = cli("heads", "--file", str(TOY / "probe.txt"), "--model", str(TOY),
              "--allow-special", "--json").json()
    layers = len(source.rows)
    for row in doc["heads"]:
        data = source.get(row["layer"])
        for name in ("first", "prev", "induction", "previous_token"):
            assert_near(data.scores[row["head"]][name], row[name])
    one = cli("run", "--file", str(TOY / "probe.txt"), "--model", str(TOY),
              "--allow-special", "--layer", str(layers - 1), "--json").json()
    got = source.get(layers - 1).window(1, range(len(source.tokens)), range(len(source.tokens)))
    want = np.array(one["weights"][1], dtype=float)
    want[np.triu_indices(len(want), 1)] = np.nan
    assert_near(got, want, equal_nan=True)  # NaN where masked, on both sides


def test_compare_puts_two_heads_on_one_scale() -> None:
    async def script(app: BrowseApp, pilot: Any) -> None:
        await pilot.press("down", "down", "c", "down", "right", "c")
        await settle(app, pilot)
        shown = screen_text(app)
        assert type(app.screen).__name__ == "CompareScreen"
        assert "causal head 0" in shown and "multihead head 1" in shown
        a = app.source.get(2).row(0, 0)
        b = app.source.get(3).row(1, 0)
        gap = np.abs(np.nan_to_num(a) - np.nan_to_num(b))
        assert f"largest difference {gap.max():.4f}" in shown
        await pilot.press("q")

    drive(chapter3(), script)


@pytest.mark.parametrize("key, ending", [("s", ".svg"), ("t", ".txt"), ("h", ".html")])
def test_e_saves_the_screen_and_says_where(tmp_path: Path, key: str, ending: str) -> None:
    from attncli.cli.commands.browse import Saver

    async def script(app: BrowseApp, pilot: Any) -> None:
        await pilot.press("e", key)
        await settle(app, pilot)
        await pilot.press("q")

    app = drive(chapter3(), script, saver=Saver(tmp_path))
    (saved,) = tmp_path.iterdir()
    assert saved.suffix == ending
    body = saved.read_text()
    assert "simple" in body
    assert not re.search(r"(src|href)=\"https?:|@import|url\(https?:", body)
    if ending == ".svg":
        assert "fonts.googleapis" not in body and "cdnjs" not in body
        assert "font-face" not in body and "<svg" in body  # Textual's export, made offline
    del app


def test_q_exits_0_and_ctrl_c_130() -> None:
    async def stop(app: BrowseApp, pilot: Any) -> None:
        await pilot.press("ctrl+c")

    assert drive(chapter3(), stop).return_code == 130


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
def test_the_overview_fits_the_terminal(size: tuple[int, int]) -> None:
    """The main screens at each size: every line within the width, the grid's parts in order."""
    text = (TOY / "probe.txt").read_text()
    source = model_source(Request(text=text, model=str(TOY), allow_special=True))
    screens: list[str] = []

    async def script(app: BrowseApp, pilot: Any) -> None:
        screens.append(screen_text(app))
        await pilot.press("enter")
        await settle(app, pilot)
        screens.append(screen_text(app))
        await pilot.press("q")

    drive(source, script, size)
    overview, head = (s.splitlines() for s in screens)
    assert len(overview) == size[1] and all(len(line) <= size[0] for line in overview)
    assert overview[0].startswith("gpt2") or "layers" in overview[0]
    assert re.match(r"\s+h0\s+h1", overview[1])
    assert overview[2].startswith("L0") and any(line.startswith("L1") for line in overview)
    assert any("layer 0 · head 0" in line for line in overview[-4:])
    assert head[0].startswith("layer 0 · head 0") and "exact weights" in head[1]
    assert all(len(line) <= size[0] for line in head)


@pytest.mark.slow
def test_a_long_input_is_tiled_and_exact_on_demand() -> None:
    """Tiled rows: windows, a query's row and pooled blocks equal the naive weights."""
    # 1,107 tokens: past 1,000 (row 999 below), three key tiles of 512 and nine query tiles of
    # 128, the last of each partial, as 1,500 words (3,264 tokens) had; the naive side, the
    # reference, costs N² in every stage it keeps.
    words = prose().split()[:600]
    text = " ".join(words)
    tiled = chapter3_source(Request(text=text, variant=Variant.causal, impl="tiled"),
                            [Variant.causal], Shared())
    naive = chapter3_source(Request(text=text, variant=Variant.causal, impl="naive"),
                            [Variant.causal], Shared())
    assert tiled.long and not naive.long
    t, n = tiled.get(0), naive.get(0)
    assert not t.exact and n.exact and t.size == n.size > 1000
    rows, cols = range(700, 740), range(650, 720)
    # NaN where masked, on both sides
    assert_near(t.window(0, rows, cols), n.window(0, rows, cols), equal_nan=True)
    assert_near(t.row(0, 999), n.row(0, 999), equal_nan=True)
    assert_near(t.thumbs[0], n.thumbs[0], equal_nan=True)  # pooled inside the pass
    edges, blocks = t.pooled(0, 40)
    want_edges, want = n.pooled(0, 40)
    assert edges == want_edges
    assert_near(blocks, want, equal_nan=True)
    for name in ("first", "prev", "self", "entropy"):
        assert_near(t.scores[0][name], n.scores[0][name])


def test_not_on_a_terminal_it_exits_2_pointing_to_run() -> None:
    piped = subprocess.run([sys.executable, "-m", "attncli", "browse", SENTENCE], cwd=ROOT,
                           capture_output=True, text=True, timeout=600, check=False)
    assert piped.returncode == 2 and piped.stdout == ""
    assert piped.stderr.count("\n") == 1 and "terminal" in piped.stderr
    assert "attncli run" in piped.stderr
    leader, follower = pty.openpty()
    try:
        no_stdin = subprocess.run([sys.executable, "-m", "attncli", "browse", SENTENCE],
                                  cwd=ROOT, stdin=subprocess.DEVNULL, stdout=follower,
                                  stderr=subprocess.PIPE, text=True, timeout=600, check=False)
    finally:
        os.close(follower)
        os.close(leader)
    assert no_stdin.returncode == 2 and "standard input" in no_stdin.stderr
    assert no_stdin.stderr.count("\n") == 1


def test_inputs_without_ids_and_a_variant_that_cannot_split_them() -> None:
    """journey.json's 3-wide vectors: multihead's 2 heads cannot split them, so the overview of
    every variant leaves it out and says why; asked for by name, it is refused in one line."""
    from attncli.core.inputs import load_inputs
    from attncli.errors import AttnCliError

    vectors = load_inputs(str(ROOT / "samples" / "journey.json"))
    source = chapter3_source(Request(inputs=vectors), list(Variant), Shared())
    assert [r.name for r in source.rows] == ["simple", "qkv", "causal"]
    assert "multihead left out: its 2 heads do not divide d_out=3" in source.title
    assert "previous_token" not in source.get(0).scores[0]  # no token ids, no head scores
    with pytest.raises(AttnCliError, match="heads must divide d_out"):
        chapter3_source(Request(inputs=vectors, variant=Variant.multihead), [Variant.multihead],
                        Shared())


def test_one_token_has_no_measures_but_opens() -> None:
    source = chapter3("a")
    assert source.get(3).scores == [{}, {}] and source.get(3).row(1, 0).tolist() == [1.0]


def test_a_long_models_layers_are_tiled_and_equal_the_naive_run(tmp_path: Path,
                                                               cli: Any) -> None:
    """A Llama-family checkpoint forced onto the tiled path: each layer's window and rows equal
    `run --layer L --impl naive`, whether its input came from its own pass or from one pass
    that kept the next layers' inputs too, within the float32 bound the tiled path keeps
    everywhere (1e-5 + 1e-5·|ref|; measured 3.7e-6 here)."""
    from tests.llama_fixtures import save_family

    folder = tmp_path / "llama"
    save_family(folder, "llama", seed=3)
    text = " ".join(["the cat sat on the mat and the dog ran after it"] * 12)
    source = model_source(Request(text=text, model=str(folder), impl="tiled"))
    assert source.long and len(source.tokens) > 100
    size = len(source.tokens)
    for layer in (1, 0, 2):  # 1 computes 2's input on the way; 0 needs a pass of its own
        data = source.get(layer)
        assert not data.exact
        doc = cli("run", text, "--model", str(folder), "--layer", str(layer), "--impl", "naive",
                  "--json").json()
        want = np.array(doc["weights"], dtype=float)  # (heads, T, T), 0 where masked
        want[:, np.triu(np.ones((size, size), dtype=bool), 1)] = np.nan  # browse shows masked
        for head in range(data.heads):
            got = data.window(head, range(size), range(size))
            assert_near(got, want[head], equal_nan=True)
            assert_near(data.row(head, size - 1), want[head, -1])


def test_the_overview_computes_the_tiled_rows_it_shows(tmp_path: Path) -> None:
    """A long text's layers are computed as their rows are shown: each row in view is asked for
    once, in a worker, and drawn with its scores (the grid's request once stopped at its screen,
    and the rows said `computing…` for ever)."""
    from tests.llama_fixtures import save_family

    folder = tmp_path / "llama"
    save_family(folder, "llama", seed=3)
    text = " ".join(["the cat sat on the mat and the dog ran after it"] * 12)
    source = model_source(Request(text=text, model=str(folder), impl="tiled"))

    async def script(app: BrowseApp, pilot: Any) -> None:
        shown = screen_text(app)
        assert "computing" not in shown
        for row in range(len(source.rows)):
            data = app.results.row(row, "weights")
            assert data is not None and not data.exact and data is source.ready(row)
            scores = " ".join(f"{s['first']:.2f}" for s in data.scores)
            assert scores in " ".join(shown.split())  # the row's line of scores
        await pilot.press("q")

    assert drive(source, script).return_code == 0


def test_pooled_rows_step_by_block_and_a_click_picks_the_query() -> None:
    from attncli.long.pooling import block_edges

    text = " ".join(prose().split()[:300])
    source = chapter3_source(Request(text=text, variant=Variant.causal), [Variant.causal],
                             Shared())

    async def script(app: BrowseApp, pilot: Any) -> None:
        await pilot.press("enter", "z")  # pooled blocks
        await settle(app, pilot)
        shown = screen_text(app)
        assert "max-pooled:" in shown
        blocks = int(re.search(r"max-pooled: (\d+)×", shown).group(1))  # type: ignore[union-attr]
        edges = block_edges(len(source.tokens), blocks)
        await pilot.press("down", "down")
        assert app.sel.query == edges[2]
        await pilot.press("up")
        assert app.sel.query == edges[1]
        picture = app.screen.query_one("#map")
        await pilot.click(picture, offset=(2, 2 + 5))  # the sixth row of blocks
        assert app.sel.query == edges[5]
        await pilot.press("q")

    drive(source, script)


def test_a_models_stages_are_the_ones_its_layers_have(cli: Any) -> None:
    """GPT-2 has no soft-cap: `s` offers only the stages `explain --json` holds, each equal."""
    text = "The cat sat on the mat because it was tired"
    source = model_source(Request(text=text, model=str(TOY)))
    stages = source.rows[1].stages
    doc = cli("explain", text, "--model", str(TOY), "--layer", "1", "--json").json()
    assert "capped" not in stages and stages[-1] == "weights"
    low = np.tril_indices(3)  # cells no stage masks
    for stage in stages[:-1]:
        got = source.get(1, stage).window(0, range(3), range(3))
        want = np.array(doc["stages"][stage], dtype=float)[0][:3, :3]
        assert_near(got[low], want[low])


# Every key the app and its screens bind, and the keys a person reaches for: the save prompt's
# s/t/h, a letter nothing binds, and backspace for the find prompt.
BOUND = sorted({key.strip() for owner in (BrowseApp, Overview, HeadScreen, CompareScreen)
                for binding in owner.BINDINGS if hasattr(binding, "key")
                for key in binding.key.split(",")})
KEYS = sorted({*BOUND, "enter", "escape", "tab", "up", "down", "left", "right", "q",
               "question_mark", "s", "t", "h", "x", "backspace"})
CHARS = {"question_mark": "?", "slash": "/", "left_square_bracket": "[",
         "right_square_bracket": "]", "enter": "\r", "tab": "\t", "escape": "\x1b"}
# Bursts of keys, each posted at once (faster than any screen handles them), then a few turns
# of the event loop (0: the next burst lands on top of this one).
BURSTS = st.lists(st.tuples(st.lists(st.sampled_from(KEYS), min_size=1, max_size=6),
                            st.integers(0, 4)), min_size=1, max_size=6)


def test_the_bursts_draw_on_every_bound_key() -> None:
    assert {"enter", "escape", "c", "o", "v", "s", "z", "e", "slash", "question_mark", "q",
            "ctrl+c", "left_square_bracket", "right_square_bracket"} <= set(KEYS)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(bursts=BURSTS)
@example(bursts=[(["question_mark"], 3), (["escape", "tab", "j", "k", "l", "h"], 0),
                 (["enter", "enter", "escape", "down", "up"], 0)])  # the keys
@example(bursts=[(["e"], 2), (["ctrl+c", "s"], 0)])  # a save chosen after Ctrl-C ended the app
@example(bursts=[(["e"], 1), (["ctrl+c"], 0), (["s"], 1)])
@example(bursts=[(["e"], 3), (["ctrl+c"], 1), (["s"], 3)])
def test_any_burst_of_keys_leaves_browse_usable_or_exits_cleanly(
        bursts: list[tuple[list[str], int]]) -> None:
    """Keys typed faster than the screens handle them (`? Esc Tab j k l h Enter Enter Esc`
    once popped the last screen): afterwards the app either exited 0 (q) or 130 (Ctrl-C), or
    still shows the overview under its screens, Esc closes them one at a time, and q exits 0."""
    sent = [key for keys, _ in bursts for key in keys]
    saved: list[str] = []

    async def script(app: BrowseApp, pilot: Any) -> None:
        for keys, turns in bursts:
            for key in keys:
                app.post_message(events.Key(key, CHARS.get(key, key if len(key) == 1 else None)))
            for _ in range(turns):
                await asyncio.sleep(0)
        await settle(app, pilot)
        if app.return_code is not None:
            return
        stack = app.screen_stack
        assert isinstance(stack[1], Overview) and len(stack) >= 2
        while not isinstance(app.screen, Overview):
            before = len(app.screen_stack)
            await pilot.press("escape")
            await settle(app, pilot)
            assert len(app.screen_stack) == before - 1
        await pilot.press("q")

    app = drive(chapter3("one two three four"), script,
                saver=lambda kind, console, page: saved.append(kind) or f"out.{kind}")
    assert app.return_code in (0, 130)
    if app.return_code == 130:
        assert "ctrl+c" in sent
    assert set(saved) <= {"svg", "txt"}
