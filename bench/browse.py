"""#25's targets for `attncli browse`, driven headless by Textual's Pilot at 100 × 30:

- the first screen within 1.0 s of the result being computed (30 layers × 9 heads: the real
  SmolLM2 when it is in the cache, else a random checkpoint of its shape);
- a key press that moves the selection redrawn within 50 ms at 30 × 9 heads: the press to the
  screen settled, less an unbound key's (Pilot's own waiting), and the move with every grid
  line drawn, timed directly;
- a head of an 8,000-token run opened (its pooled blocks computed) within 1 s.

    .venv/bin/python bench/browse.py [--repeats 15]

Beside the head's opening: one torch SDPA call over the same
head's 8,000 × 8,000 weights, as the reference of what one head's attention costs on this
machine. Results go to bench/results/browse.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from attncli.browse.app import BrowseApp  # noqa: E402
from attncli.browse.source import Source, chapter3_source, model_source  # noqa: E402
from attncli.browse.state import moved  # noqa: E402
from attncli.browse.widgets import GridLines  # noqa: E402
from attncli.core.compare import Shared  # noqa: E402
from attncli.core.request import Request  # noqa: E402
from attncli.core.variants import Variant  # noqa: E402

SIZE = (100, 30)


def _prose() -> str:
    """The project's English prose: the README, then each docs page (the README before it moved
    into docs/)."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md")
                                         if "_build" not in p.parts)]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def real_model() -> str | None:
    from subprocess import run

    done = run([sys.executable, str(ROOT / "scripts" / "fetch_model.py"), "smollm2"],
               capture_output=True, text=True, check=False)
    return done.stdout.strip() or None if done.returncode == 0 else None


async def settle(app: BrowseApp, pilot: Any) -> None:
    while True:
        await pilot.pause()
        if not app.results.busy:
            return
        await asyncio.sleep(0.005)


def overview(source: Source, repeats: int) -> dict[str, Any]:
    """First screen after the source's rows are computed, then key presses at 30 × 9."""
    for row in range(len(source.rows)):
        source.get(row)
    out: dict[str, Any] = {"rows": len(source.rows), "heads": source.rows[0].heads}
    app = BrowseApp(source)

    async def main() -> None:
        start = time.perf_counter()
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            out["first_screen_s"] = time.perf_counter() - start
            times: dict[str, list[float]] = {"move": [], "idle": [], "lines": []}
            for k in range(repeats * 4):
                for kind, key in (("move", ("down", "right", "down", "left")[k % 4]),
                                  ("idle", "x")):  # x: no binding, Pilot's own cost
                    t0 = time.perf_counter()
                    await pilot.press(key)
                    await settle(app, pilot)
                    times[kind].append(time.perf_counter() - t0)
            grid = app.screen.query_one(GridLines)
            for k in range(repeats * 4):  # the redraw itself: the move and every grid line
                t0 = time.perf_counter()
                app.sel = moved(app.sel, source, 1 if k % 2 else -1)
                for y in range(grid.size.height):
                    grid.render_line(y)
                times["lines"].append(time.perf_counter() - t0)
            out["key_ms_median"] = 1000 * statistics.median(times["move"])
            out["key_ms_max"] = 1000 * max(times["move"])
            out["unbound_key_ms_median"] = 1000 * statistics.median(times["idle"])
            out["redraw_ms_median"] = out["key_ms_median"] - out["unbound_key_ms_median"]
            out["grid_lines_ms_median"] = 1000 * statistics.median(times["lines"])
            out["grid_lines_ms_max"] = 1000 * max(times["lines"])
            await pilot.press("q")

    asyncio.run(main())
    return out


def long_head(repeats: int) -> dict[str, Any]:
    """An 8,000-token run's head opened: Enter to the pooled blocks drawn."""
    words = _prose().split()
    text, tokens = " ".join(words[:4500]), 0
    source = chapter3_source(Request(text=text, variant=Variant.multihead, heads=2,
                                     emb_dim=64), [Variant.multihead], Shared(heads=2))
    tokens = len(source.tokens)
    t0 = time.perf_counter()
    source.get(0)
    out: dict[str, Any] = {"tokens": tokens, "tiled_pass_s": time.perf_counter() - t0}
    times = []
    for k in range(repeats):
        data = source.get(0)
        data._pooled.clear()  # type: ignore[attr-defined]
        app = BrowseApp(source)

        async def main(app: BrowseApp, head: int) -> None:
            async with app.run_test(size=SIZE) as pilot:
                await settle(app, pilot)
                app.sel = replace(app.sel, head=head)
                t1 = time.perf_counter()
                await pilot.press("enter")
                await settle(app, pilot)
                times.append(time.perf_counter() - t1)
                await pilot.press("q")

        asyncio.run(main(app, k % 2))
    out["open_head_s_median"] = statistics.median(times)
    out["open_head_s_max"] = max(times)
    q = torch.randn(1, 1, tokens, 32)
    sdpa = []
    for _ in range(repeats):
        t2 = time.perf_counter()
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        sdpa.append(time.perf_counter() - t2)
    out["sdpa_one_head_s_median"] = statistics.median(sdpa)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    path = real_model()
    text = (ROOT / "samples" / "induction.txt").read_text()
    results: dict[str, Any] = {"threads": torch.get_num_threads()}
    if path is not None:
        results["model"] = "SmolLM2-135M-Instruct (GGUF)"
        results["overview"] = overview(model_source(Request(text=text, model=path)),
                                       args.repeats)
    results["long"] = long_head(max(3, args.repeats // 3))
    print(json.dumps(results, indent=2))
    target = ROOT / "bench" / "results" / "browse.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
