"""Every command's page in headless Chromium: no console error, its main parts drawn, and the
interactions of explain, heads and a long run's moving window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SENTENCE
from tests.render.test_page_browser import (
    CHROMIUM,
    DRIVER,
    browser,
    focus_lines,
    open_page,
    requests,
)
from tests.tolerance import assert_near

__all__ = ["browser"]  # the fixture, shared with test_page_browser
pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="needs Debian's chromium and chromium-driver")
TOY = str(ROOT / "samples" / "toy-gpt2")
LONG_TEXT = ("Attention lets each token read from the tokens before it, weighted by how well its "
             "query matches their keys. ") * 12
# (command line, CSS selector of what must be drawn, how many at least)
PAGES = [
    (("run", SENTENCE), "figure.heat rect", 36),
    (("run", SENTENCE, "--variant", "multihead", "--num-heads", "2"), "figure.heat", 2),
    (("explain", SENTENCE, "--variant", "multihead", "--num-heads", "2"), "#attncli-stage option",
     8),
    (("compare", SENTENCE), "#attncli-variant option", 4),
    (("heads", "The cat sat on the mat", "--model", TOY), "figure.thumb", 12),
    (("run", SENTENCE, "--model", TOY, "--layer", "1"), "figure.heat", 4),
    (("demo",), "pre", 1),
    (("cost", "--max-tokens", "256"), "#attncli-bars rect.bar", 4),
    (("flash", SENTENCE, "--block", "2"), "figure.heat rect", 6),
    (("permute", "the cat sat on the mat", "the mat sat on the cat"), "#attncli-permute option",
     4),
    (("kvcache", SENTENCE), "figure.heat rect", 36),
    (("kvcache", SENTENCE, "--variant", "multihead", "--num-heads", "2"), "figure.heat", 2),
    (("run", LONG_TEXT, "--impl", "tiled"), "figure.pooled rect", 100),
]


def severe(driver: Any) -> list[Any]:  # noqa: ANN401
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize(("args", "selector", "least"), PAGES,
                         ids=lambda a: a[0] if isinstance(a, tuple) else None)
def test_every_commands_page_loads_without_a_console_error(
        browser, cli, tmp_path: Path, args: tuple[str, ...], selector: str, least: int) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    page = open_page(browser, cli, tmp_path, *args)
    assert severe(browser) == []
    assert len(browser.find_elements(By.CSS_SELECTOR, selector)) >= least
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "undefined" not in body and "NaN" not in body
    assert requests(browser) == [page.as_uri()]
    tokens = browser.find_elements(By.CSS_SELECTOR, "[data-token-index]")
    if tokens:  # clicking any token keeps the page whole
        tokens[-1].click()
        assert severe(browser) == []
        assert "undefined" not in browser.find_element(By.ID, "attncli-focus").text


def test_explain_ranks_only_weight_rows(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    args = ("explain", SENTENCE, "--variant", "causal")
    doc = cli(*args, "--json").json()
    open_page(browser, cli, tmp_path, *args)
    browser.find_element(By.CSS_SELECTOR, '[data-token-index="3"]').click()
    stage = Select(browser.find_element(By.ID, "attncli-stage"))
    for name in ("queries", "scores", "scaled", "masked", "inputs", "context"):
        stage.select_by_visible_text(name)
        focus = browser.find_element(By.ID, "attncli-focus")
        assert focus_lines(browser) == [], name  # nothing ranked
        assert "not weights" in focus.text and "undefined" not in focus.text, focus.text
        assert "query 3" in focus.text and name in focus.text
    width = len(doc["stages"]["queries"][0][0])
    stage.select_by_visible_text("queries")
    values = browser.find_element(By.CSS_SELECTOR, "#attncli-focus .row-values").text
    assert values.split(" · ")[0] == f"d0 {doc['stages']['queries'][0][3][0]:.4f}"
    assert len(values.split(" · ")) == width
    for name in ("softmax", "weights"):
        stage.select_by_visible_text(name)
        want = sorted(doc["weights"][0][3][:4], reverse=True)
        assert [float(line.split()[0]) for line in focus_lines(browser)] == [
            round(w, 4) for w in want]
    assert severe(browser) == []


def test_heads_shows_every_head_and_ranks_the_picked_one(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    text = " ".join(["The cat sat on the mat because it was tired"] * 3)  # past 24 tokens
    open_page(browser, cli, tmp_path, "heads", text, "--model", TOY)
    assert len(browser.find_elements(By.CSS_SELECTOR, "figure.thumb")) == 3 * 4
    assert len(browser.find_elements(By.CSS_SELECTOR, ".grid-row")) == 3
    browser.find_element(By.CSS_SELECTOR, 'figure.thumb[data-layer="2"][data-head="1"]').click()
    browser.find_element(By.CSS_SELECTOR, '[data-token-index="20"]').click()
    lines = focus_lines(browser)
    run = cli("run", text, "--model", TOY, "--layer", "2", "--json").json()
    want = sorted(run["weights"][1][20][:21], reverse=True)
    assert len(lines) == 21
    got = [float(line.split()[0]) for line in lines]
    assert_near(got, want, atol=5e-5 + 1e-5)  # printed to 4 decimals: half a unit, 5e-5
    assert "layer 2 · head 1" in browser.find_element(By.ID, "attncli-focus").text
    assert browser.find_element(By.ID, "attncli-layer").get_attribute("value") == "2"
    assert severe(browser) == []


def _window_label(driver: Any) -> str:  # noqa: ANN401
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, "attncli-win-label").text


def test_long_window_moves_along_the_text(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    args = ("run", LONG_TEXT, "--impl", "tiled")
    open_page(browser, cli, tmp_path, *args)
    count = len(cli(*args, "--json").json()["tokens"])
    assert _window_label(browser) == f"rows and keys 0–63 of {count}"
    browser.find_element(By.ID, "attncli-win-fwd64").click()
    browser.find_element(By.ID, "attncli-win-fwd").click()
    assert _window_label(browser) == f"rows and keys 65–128 of {count}"
    # The page's window holds the exact weights the JSON's --rows/--cols window holds.
    browser.find_element(By.CSS_SELECTOR, '[data-token-index="100"]').click()
    exact = cli(*args, "--rows", "100:101", "--cols", "65:129", "--json").json()["weights"][0][0]
    want = sorted((w for w in exact if w is not None), reverse=True)
    ranked = browser.find_elements(By.CSS_SELECTOR, "#attncli-focus ol:not(.top-k) li")
    got = [float(item.text.split()[0]) for item in ranked]
    assert len(got) == 100 - 65 + 1
    assert_near(got, want, atol=5e-5 + 1e-5)  # printed to 4 decimals: half a unit, 5e-5
    # and the query's top-k over the whole text, from the tiled pass
    top = cli(*args, "--json").json()["stats"]["top_k"]
    listed = browser.find_elements(By.CSS_SELECTOR, "#attncli-focus ol.top-k li")
    assert [int(item.get_attribute("data-key")) for item in listed] == top["index"][0][100]
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_RIGHT)
    assert _window_label(browser) == f"rows and keys 66–129 of {count}"
    body.send_keys(Keys.SHIFT, Keys.ARROW_LEFT)
    assert _window_label(browser) == f"rows and keys 2–65 of {count}"
    body.send_keys(Keys.END)
    assert _window_label(browser) == f"rows and keys {count - 64}–{count - 1} of {count}"
    body.send_keys(Keys.HOME)
    picture = browser.find_element(By.CSS_SELECTOR, "#attncli-maps figure.heat svg")
    ActionChains(browser).move_to_element(picture).click_and_hold().move_by_offset(
        -120, -120).release().perform()
    assert _window_label(browser) == f"rows and keys 10–73 of {count}"  # 240 px / 2 / 12 px
    edges = json.loads(browser.find_element(By.CSS_SELECTOR, "figure.pooled svg")
                       .get_attribute("data-edges"))
    browser.find_element(By.CSS_SELECTOR, 'figure.pooled rect[data-row="5"][data-col="2"]').click()
    assert _window_label(browser) == f"rows and keys {edges[5]}–{edges[5] + 63} of {count}"
    assert browser.find_elements(By.CSS_SELECTOR, "rect.window-mark")
    assert severe(browser) == []


def test_long_pooled_map_on_the_page_is_not_one_colour(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    open_page(browser, cli, tmp_path, "run", LONG_TEXT, "--impl", "tiled")
    fills = browser.execute_script(
        "return [...document.querySelectorAll('figure.pooled rect[data-row]')]"
        ".filter((r) => r.getAttribute('data-row') !== '0' && r.getAttribute('data-col') !== '0'"
        " && r.getAttribute('fill') !== '#d0d0d0').map((r) => r.getAttribute('fill'))")
    most = max(fills.count(f) for f in set(fills))
    assert len(fills) > 100 and len(set(fills)) >= 20 and most / len(fills) < 0.2
    legend = browser.find_element(By.ID, "attncli-pooled-legend").text
    assert "log scale" in legend and "shared by every head" in legend
