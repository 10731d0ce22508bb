"""A notebook's view of results: two _repr_html_ outputs in one page, in headless Chromium with
the network off, each page working inside its sandboxed iframe and touching no other."""

from __future__ import annotations

from pathlib import Path

import attncli
from tests.conftest import JOURNEY
from tests.render.test_page_browser import browser, focus_lines, pytestmark, requests

__all__ = ["browser", "pytestmark"]


def test_two_results_work_side_by_side_in_one_notebook(browser, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    simple = attncli.run(inputs=str(JOURNEY), variant="simple")
    heads = attncli.run("The cat sat on the mat", variant="multihead", heads=2)
    notebook = tmp_path / "notebook.html"
    notebook.write_text("<!DOCTYPE html><html><body><h1>cells</h1>"
                        f"<div class='cell'>{simple._repr_html_()}</div>"
                        f"<div class='cell'>{heads._repr_html_()}</div></body></html>",
                        encoding="utf-8")
    requests(browser)
    browser.get_log("browser")
    browser.get(notebook.as_uri())
    frames = browser.find_elements(By.TAG_NAME, "iframe")
    assert len(frames) == 2
    browser.switch_to.frame(frames[0])
    browser.find_element(By.CSS_SELECTOR, '[data-token-index="1"]').click()
    lines = focus_lines(browser)
    # The book's weights of "journey" (x^(2)), heaviest first, as the saved page shows them.
    assert [line.split()[0] for line in lines] == ["0.2379", "0.2333", "0.1581", "0.1385",
                                                   "0.1240", "0.1082"]
    browser.switch_to.default_content()
    browser.switch_to.frame(frames[1])
    tokens = browser.find_elements(By.CSS_SELECTOR, "[data-token-index]")
    assert len({t.get_attribute("data-token-index") for t in tokens}) == len(heads.tokens)
    browser.switch_to.default_content()
    assert browser.find_element(By.TAG_NAME, "h1").text == "cells"  # the notebook's own
    assert requests(browser) == [notebook.as_uri()]  # the srcdoc pages ask for nothing
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
