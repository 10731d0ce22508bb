"""Paragraphs wrap at the width in Chinese too, and never start a line with closing punctuation."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from attncli.i18n import STRINGS
from attncli.render.draw.prose import prose
from tests.conftest import make_console


@pytest.mark.parametrize("width", [30, 50, 80])
def test_chinese_wraps_within_the_width_keeping_every_character(width: int) -> None:
    source = STRINGS["demo.intro.text"][1]
    text = prose(make_console(width), source).plain
    lines = text.split("\n")
    assert len(lines) > 1 and all(cell_len(line) <= width for line in lines)
    assert text.replace("\n", "").replace(" ", "") == source.replace(" ", "")
    assert not any(line[0] in "，。、：；）" for line in lines)


def test_latin_text_is_left_to_rich() -> None:
    text = prose(make_console(20), "plain English words here", "italic")
    assert text.plain == "plain English words here" and text.style == "italic"
