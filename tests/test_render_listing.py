"""Streamed listings print the same lines as the whole Rich table did."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from attncli.core.tokens import tokenize
from attncli.render.draw import listing
from attncli.render.draw.listing import print_tokens
from attncli.render.run import render_tokens

TEXTS = ["Your journey starts with one step", "Hello 猫吃鱼 ================ world\n\tx",
         "a", " [bold]markup[/bold] " * 30, "word " * 700 + "=" * 64 + " end", ""]


def _old(text: str, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(render_tokens(tokenize(text, "gpt2", False), "gpt2"))
    return console.file.getvalue()  # type: ignore[attr-defined]


def _new(text: str, width: int, **options: object) -> str:
    console = Console(file=io.StringIO(), width=width, **options)  # type: ignore[arg-type]
    print_tokens(console, tokenize(text, "gpt2", False), "gpt2")
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [24, 40, 80, 200])
@pytest.mark.parametrize("text", TEXTS)
def test_streamed_tokens_equal_the_whole_table(text: str, width: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "CHUNK_ROWS", 7)
    assert _new(text, width, color_system=None) == _old(text, width)


def test_colour_dims_the_bytes_and_keeps_the_text() -> None:
    text = "Hello 猫吃鱼 world"
    coloured = _new(text, 80, color_system="truecolor", force_terminal=True)
    assert "\x1b[2m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == _old(text, 80)
