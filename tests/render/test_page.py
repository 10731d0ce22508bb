"""--save page.html: one file, no URL, the command's --json embedded exactly; offline SVG/HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attncli.render.page import render_page, script_safe
from tests.conftest import JOURNEY, ROOT, SENTENCE

TOY = str(ROOT / "samples" / "toy-gpt2")
COMMANDS = [
    ("run", "--inputs", str(JOURNEY), "--variant", "simple"),
    ("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--query", "journey"),
    ("explain", SENTENCE, "--variant", "causal"),
    ("compare", SENTENCE),
    ("heads", "The cat sat on the mat because it was tired", "--model", TOY),
]
URL = re.compile(r"https?://[^\s\"'<>)]*")
NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


def embedded(page: str, name: str = "attncli-data") -> object:
    match = re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def urls(text: str) -> set[str]:
    return set(URL.findall(text)) - NAMESPACES


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_page_embeds_exactly_the_json_and_no_url(cli, tmp_path: Path, args) -> None:  # noqa: ANN001
    page = tmp_path / "page.html"
    res = cli(*args, "--save", str(page))
    assert res.code == 0, res.err
    text = page.read_text("utf-8")
    assert embedded(text) == cli(*args, "--json").json()
    assert urls(text) == set()
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert text.count("<script") == 3  # the data, the extras, the page's own code


def test_show_page_embeds_shows_json(cli, tmp_path: Path) -> None:  # noqa: ANN001
    saved = tmp_path / "run.json"
    saved.write_text(cli("run", SENTENCE, "--json").out)
    page = tmp_path / "show.html"
    assert cli("show", str(saved), "--save", str(page)).code == 0
    assert embedded(page.read_text()) == cli("show", str(saved), "--json").json()


@pytest.mark.parametrize("name", ["x.svg", "x.term.html", "x.html"])
def test_no_url_in_any_saved_picture(cli, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    for args in COMMANDS[1:3]:
        path = tmp_path / name
        assert cli(*args, "--save", str(path)).code == 0
        text = path.read_text("utf-8")
        assert urls(text) == set(), urls(text)
        assert "cdnjs" not in text and "font-face" not in text


def test_term_html_is_the_terminal_copy(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "run.term.html"
    assert cli("run", SENTENCE, "--save", str(path)).code == 0
    text = path.read_text("utf-8")
    assert "<pre" in text and "attncli-data" not in text and "Attention weights" in text


def test_script_text_cannot_close_the_data_element() -> None:
    doc = {"tokens": [{"text": "</script><script>alert(1)</script><!--"}]}
    page = "".join(render_page(doc))
    assert "</script><script>alert" not in page
    assert embedded(page) == doc
    assert json.loads(script_safe(json.dumps("a</b<!--c"))) == "a</b<!--c"


def test_long_page_carries_the_pooled_maps(cli, tmp_path: Path) -> None:  # noqa: ANN001
    words = tmp_path / "words.txt"
    words.write_text("word " * 300)
    page = tmp_path / "long.html"
    args = ("run", "--file", str(words), "--impl", "tiled")
    assert cli(*args, "--save", str(page)).code == 0
    text = page.read_text("utf-8")
    assert embedded(text) == cli(*args, "--json").json()
    extra = embedded(text, "attncli-extra")
    assert extra["pooled"][0]["head"] == 0 and extra["pooled"][0]["edges"][0] == 0
