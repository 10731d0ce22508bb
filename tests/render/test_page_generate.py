"""`generate --save page.html` in a real headless Chromium, offline: clicking or hovering an
answer token ranks the prompt tokens as the JSON's weights do, with the layer, head, combine
and sinks pickers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.llama_fixtures import save_family
from tests.render.test_page_browser import (
    CHROMIUM,
    DRIVER,
    browser,
    focus_lines,
    open_page,
    requests,
)
from tests.tolerance import near

pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="needs Debian's chromium and chromium-driver")
__all__ = ["browser"]  # the fixture, shared with test_page_browser

TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
            "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
            "{{ '<|im_start|>assistant\\n' }}{% endif %}")
ARGS = ("--max-new-tokens", "5", "--view", "raw")  # the raw weights expected() ranks


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("page-generate") / "llama"
    save_family(folder, "llama", seed=21)
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": TEMPLATE, "eos_token": "<|im_end|>"}))
    return folder


def expected(doc: dict[str, Any], step: int, layer: int | None = None, head: int | None = None,
             combine: str = "mean", sinks: bool = False) -> list[tuple[int, float]]:
    """The prompt keys answer token step looked at, heaviest first, from the JSON's raw weights."""
    weights = np.asarray(doc["steps"][step]["weights"], dtype=np.float64)  # (L, H, P + step)
    chosen = weights[slice(None) if layer is None else slice(layer, layer + 1),
                     slice(None) if head is None else slice(head, head + 1)]
    flat = chosen.reshape(-1, weights.shape[-1])
    row = flat.mean(axis=0) if combine == "mean" else flat.max(axis=0)
    prompt = range(len(doc["prompt"]))
    if not sinks:
        row[doc["sinks"]] = 0.0
        row = row / row.sum()
        prompt = [j for j in prompt if j not in doc["sinks"]]
    return sorted(((j, float(row[j])) for j in prompt), key=lambda kw: (-kw[1], kw[0]))


def shown(driver: Any) -> list[tuple[int, float]]:  # noqa: ANN401
    """The focus panel's ranked keys: (index, weight as shown)."""
    return [(int(line.split()[1]), float(line.split()[0])) for line in focus_lines(driver)]


def heading(driver: Any, step: int, doc: dict[str, Any]) -> bool:  # noqa: ANN401
    """The focus panel names answer token step as the terminal does: numbered from 0 (the `#`
    column, --at), its text as JSON writes it."""
    from selenium.webdriver.common.by import By

    text = driver.find_element(By.CSS_SELECTOR, "#attncli-focus h3").text
    return text.startswith(f"answer token {step} {json.dumps(doc['answer'][step]['text'])} · ")


def agrees(page: list[tuple[int, float]], reference: list[tuple[int, float]]) -> bool:
    # The page prints four decimals: half a unit (5e-5) beyond the house bound.
    return [k for k, _ in page[:5]] == [k for k, _ in reference[:5]] and near(
        [w for _, w in page[:5]], [r for _, r in reference[:5]], atol=5e-5 + 1e-5)


def test_clicking_an_answer_token_ranks_the_prompt_as_the_json(browser, cli, tiny: Path,  # noqa: ANN001
                                                               tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page = open_page(browser, cli, tmp_path, "generate", "the cat", "--model", str(tiny), *ARGS)
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), *ARGS, "--json").out)
    p, n = len(doc["prompt"]), len(doc["answer"])
    assert n >= 3
    assert agrees(shown(browser), expected(doc, 0))  # the first answer token, focused at first
    assert heading(browser, 0, doc)
    for step in (2, n - 1):
        token = browser.find_element(By.CSS_SELECTOR,
                                     f'#attncli-tokens [data-token-index="{p + step}"]')
        assert token.get_attribute("title") == f"answer token {step} " + json.dumps(
            doc["answer"][step]["text"])
        token.click()
        assert agrees(shown(browser), expected(doc, step)), step
        assert heading(browser, step, doc)
    text = browser.find_element(By.ID, "attncli-conversation").text
    assert text.endswith("".join(t["text"] for t in doc["answer"]))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert requests(browser) == [page.as_uri()]


def test_the_default_view_ranks_the_json_occlusion_drops(browser, cli, tiny: Path,  # noqa: ANN001
                                                         tmp_path: Path) -> None:
    command = ("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "5")
    open_page(browser, cli, tmp_path, *command)
    doc = json.loads(cli(*command, "--json").out)
    assert doc["config"]["view"] == "occlusion"  # a short prompt: occlusion is cheap
    left_out = set(doc["sinks"])
    row = doc["occlusion"][0]
    assert agrees(shown(browser), sorted(((j, row[j]) for j in range(len(doc["prompt"]))
                                          if j not in left_out), key=lambda kw: (-kw[1], kw[0])))


def test_the_pickers_and_hover_change_what_is_ranked(browser, cli, tiny: Path,  # noqa: ANN001
                                                     tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(browser, cli, tmp_path, "generate", "the cat", "--model", str(tiny), *ARGS)
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), *ARGS, "--json").out)
    p = len(doc["prompt"])
    answer = browser.find_element(By.CSS_SELECTOR, f'#attncli-conversation [data-index="{p + 1}"]')
    ActionChains(browser).move_to_element(answer).perform()
    assert agrees(shown(browser), expected(doc, 1))
    Select(browser.find_element(By.ID, "attncli-combine")).select_by_value("max")
    assert agrees(shown(browser), expected(doc, 1, combine="max"))
    Select(browser.find_element(By.ID, "attncli-layer")).select_by_value("2")
    Select(browser.find_element(By.ID, "attncli-head")).select_by_value("3")
    assert agrees(shown(browser), expected(doc, 1, layer=2, head=3, combine="max"))
    Select(browser.find_element(By.ID, "attncli-sinks")).select_by_value("keep")
    assert agrees(shown(browser), expected(doc, 1, layer=2, head=3, combine="max", sinks=True))
    assert "sinks kept" in browser.find_element(By.ID, "attncli-focus").text
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_a_given_answer_carries_its_turns_view_and_receipt(browser, cli, tiny: Path,  # noqa: ANN001
                                                           tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "the cat"},
                                {"role": "assistant", "content": "sat on the mat"}]))
    given = ("--messages", str(chat), "--explain-last", "--model", str(tiny), "--view", "value")
    doc = json.loads(cli("generate", *given, "--json").out)
    # The runtime's file: attncli's own log-probs, the last token's moved by 2 nats (flagged).
    moved = [step["logprob"] - (2.0 if k == len(doc["steps"]) - 1 else 0.0)
             for k, step in enumerate(doc["steps"])]
    logprobs = tmp_path / "logprobs.json"
    logprobs.write_text(json.dumps({"logprobs": [
        {"token": bytes.fromhex(t["bytes"]).decode(), "logprob": lp, "bytes":
         list(bytes.fromhex(t["bytes"]))} for t, lp in zip(doc["answer"], moved, strict=True)]}))
    open_page(browser, cli, tmp_path, "generate", *given, "--logprobs", str(logprobs))
    assert Select(browser.find_element(By.ID, "attncli-view")).first_selected_option.text \
        == "value"
    assert "value-weighted" in browser.find_element(By.ID, "attncli-focus").text
    norms = np.asarray(doc["value_norms"], dtype=np.float64)  # (L, H, P + A)
    weights = np.asarray(doc["steps"][0]["weights"], dtype=np.float64)  # (L, H, P)
    row = (weights * norms[..., :weights.shape[-1]]).reshape(-1, weights.shape[-1]).mean(axis=0)
    row[doc["sinks"]] = 0.0
    row = row / row.sum()
    keys = [j for j in range(len(doc["prompt"])) if j not in doc["sinks"]]
    assert agrees(shown(browser), sorted(((j, float(row[j])) for j in keys),
                                         key=lambda kw: (-kw[1], kw[0])))
    Select(browser.find_element(By.ID, "attncli-view")).select_by_value("raw")
    assert agrees(shown(browser), expected(doc, 0))
    marks = browser.find_elements(By.CSS_SELECTOR, "#attncli-conversation .turn")
    assert [m.text.strip() for m in marks] == [f"[{t['role']}]" for t in doc["turns"]
                                       if t["end"] > t["start"]]
    receipt = browser.find_element(By.ID, "attncli-receipt").text
    assert "largest difference" in receipt and "1 flagged" in receipt
    assert len(browser.find_elements(By.CSS_SELECTOR, "#attncli-receipt tr")) \
        == 1 + len(doc["answer"])
    assert "teacher-forced" in browser.title + browser.find_element(By.TAG_NAME, "body").text
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
