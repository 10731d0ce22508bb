"""The page in a real headless Chromium, from file:// with the network off."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import JOURNEY, ROOT, SENTENCE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="needs Debian's chromium and chromium-driver")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium with every network path closed, recording each request it makes."""
    from selenium import webdriver  # the test extra has it: a missing selenium is a failure
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for drivers online
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--proxy-server=127.0.0.1:9",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    yield driver
    driver.quit()


def requests(driver: Any) -> list[str]:
    """Every URL the page asked for since the last call."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def open_page(driver: Any, cli: Any, tmp_path: Path, *args: str) -> Path:  # noqa: ANN401
    page = tmp_path / f"{args[0]}-{len(list(tmp_path.iterdir()))}.html"
    assert cli(*args, "--save", str(page)).code == 0
    requests(driver)
    driver.get_log("browser")  # forget earlier pages' messages
    driver.get(page.as_uri())
    return page


def focus_lines(driver: Any) -> list[str]:  # noqa: ANN401
    from selenium.webdriver.common.by import By

    items = driver.find_element(By.ID, "attncli-focus").find_elements(By.TAG_NAME, "li")
    return [item.text for item in items]


def test_the_request_log_sees_a_page_that_reaches_out(browser, tmp_path: Path) -> None:  # noqa: ANN001
    # The check below is only worth something if a request from a page would show up.
    page = tmp_path / "reaching.html"
    page.write_text('<!DOCTYPE html><img src="http://attncli.invalid/x.png">')
    requests(browser)
    browser.get(page.as_uri())
    assert "http://attncli.invalid/x.png" in requests(browser)


def test_click_a_token_focuses_its_row_offline(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    page = open_page(browser, cli, tmp_path, "run", "--inputs", str(JOURNEY), "--variant",
                     "simple")
    browser.find_element(By.CSS_SELECTOR, '[data-token-index="1"]').click()
    lines = focus_lines(browser)
    # The book's weights of "journey" (x^(2)), heaviest first: 0.2379 on itself.
    assert lines[0].startswith("0.2379") and "journey" in lines[0]
    assert [line.split()[0] for line in lines] == ["0.2379", "0.2333", "0.1581", "0.1385",
                                                   "0.1240", "0.1082"]
    assert requests(browser) == [page.as_uri()]  # nothing but the page itself
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert browser.find_elements(By.CSS_SELECTOR, "rect.focus")
    assert browser.find_elements(By.CSS_SELECTOR, "#attncli-lines line")


def test_switching_heads_changes_the_focus(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    page = open_page(browser, cli, tmp_path, "run", SENTENCE, "--variant", "multihead",
                     "--num-heads", "2")
    doc = json.loads(cli("run", SENTENCE, "--variant", "multihead", "--num-heads", "2",
                         "--json").out)
    browser.find_element(By.CSS_SELECTOR, '[data-token-index="2"]').click()
    head0 = focus_lines(browser)
    Select(browser.find_element(By.ID, "attncli-head")).select_by_value("1")
    head1 = focus_lines(browser)
    assert head0 != head1
    for lines, head in ((head0, 0), (head1, 1)):
        expected = sorted(doc["weights"][head][2][:3], reverse=True)
        assert [float(line.split()[0]) for line in lines] == [round(w, 4) for w in expected]
    assert len(browser.find_elements(By.CSS_SELECTOR, "figure.heat")) == 1
    assert requests(browser) == [page.as_uri()]


def test_stage_and_layer_selectors(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(browser, cli, tmp_path, "explain", SENTENCE, "--variant", "causal")
    stage = Select(browser.find_element(By.ID, "attncli-stage"))
    assert "scores" in [o.text for o in stage.options]
    stage.select_by_visible_text("scores")
    assert "diverging" in browser.find_element(By.CSS_SELECTOR, ".legend").text
    toy = str(ROOT / "samples" / "toy-gpt2")
    open_page(browser, cli, tmp_path, "heads", "The cat sat on the mat", "--model", toy)
    layer = Select(browser.find_element(By.ID, "attncli-layer"))
    assert len(layer.options) >= 2
    assert browser.find_elements(By.CSS_SELECTOR, "figure.heat")


def test_a_scan_summary_page_draws_its_grids_offline(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    corpus = tmp_path / "docs.txt"
    corpus.write_text("one two three one two three\nthe cat sat on the mat\n", encoding="utf-8")
    out = tmp_path / "atlas"
    assert cli("scan", str(corpus), "--model", "samples/toy-gpt2", "--out", str(out),
               "--workers", "1").code == 0
    page = open_page(browser, cli, tmp_path, "show", str(out / "summary.json"))
    summary = json.loads((out / "summary.json").read_text())
    tables = browser.find_elements(By.CSS_SELECTOR, "table.scores")
    assert len(tables) == 7  # 3 scores' means, 3 scores' shares, the top heads
    mean = summary["heads"][0]["induction"]
    assert f"{mean:.2f}" in tables[2].find_elements(By.TAG_NAME, "td")[0].text
    share = summary["heads"][0]["share"]["induction"]
    assert tables[5].find_elements(By.TAG_NAME, "td")[0].text.startswith(f"{share:.2f}")
    assert "2 documents scored" in browser.find_element(By.ID, "attncli-maps").text
    assert requests(browser) == [page.as_uri()]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_patch_and_ablate_pages_draw_their_grids_offline(browser, cli, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    toy = ("--model", "samples/toy-gpt2")
    page = open_page(browser, cli, tmp_path, "patch", "the cat sat on the mat",
                     "the dog sat on the hat", *toy, "--tokens", " mat", " hat", "--attribution")
    doc = cli("patch", "the cat sat on the mat", "the dog sat on the hat", *toy, "--tokens",
              " mat", " hat", "--attribution", "--json").json()
    grids = browser.find_elements(By.CSS_SELECTOR, "table.causal-grid")
    assert len(grids) == 2  # the exact grid and the attribution estimate
    cells = grids[0].find_elements(By.TAG_NAME, "td")
    assert [c.text for c in cells] == [f"{v:+.3f}" for row in doc["grid"] for v in row]
    assert requests(browser) == [page.as_uri()]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    open_page(browser, cli, tmp_path, "ablate", "the cat sat on the mat", *toy)
    ranking = cli("ablate", "the cat sat on the mat", *toy, "--json").json()["ranking"]
    cells = browser.find_element(By.CSS_SELECTOR, "table.causal-grid").find_elements(
        By.TAG_NAME, "td")
    effect = {(r["layer"], r["head"]): r["effect"] for r in ranking}
    heads = 1 + max(h for _, h in effect)
    assert [c.text for c in cells] == [f"{effect[(k // heads, k % heads)]:+.3f}"
                                       for k in range(len(effect))]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
