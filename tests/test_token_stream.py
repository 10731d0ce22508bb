"""Tokenising in pieces gives exactly the tokens of the whole text, labels included."""

from __future__ import annotations

import pytest

from attncli.core.token_stream import text_parts, token_bounds, token_chunks
from attncli.core.tokens import tokenize

TEXTS = [
    "Your journey starts with one step. " * 40,
    "猫吃鱼，狗吃肉。" * 60 + " 猫 吃 鱼 " * 40,
    "emoji 🙂👍🏽 and ünïcödé — dashes 🙂🙂🙂 " * 50,
    "line one\nline two\ttabbed  double  spaces \n\n\n   \r\n" * 50,
    "Some <|endoftext|> text<|endoftext|><|endoftext|>  <|endoftext|>\n" * 40,
    "numbers 1234567 12 3,456.78 and x'll we've they're IT'S " * 40,
    "    leading spaces then words     \t\t  trailing   " * 40,
    "<|endoftext|>" * 30 + "a",
    "ab" * 500,  # one pre-token after another, no space to cut at
    " " * 700 + "x" + "\n" * 300,
    "odd spaces\u3000 a\u2003 b\x85 c\x1c d\u200b e\u00a0 f\u180e g \u2028 h " * 40,
    "a <|endoftext|> b <|endoftext|>c  <|endoftext|>  d " * 30,
    "",
    "x",
]


@pytest.mark.parametrize("allow_special", [False, True])
@pytest.mark.parametrize("size", [1, 3, 17, 200])
@pytest.mark.parametrize("text", TEXTS)
def test_chunked_tokens_equal_the_whole_texts(text: str, size: int, allow_special: bool) -> None:
    whole = tokenize(text, "gpt2", allow_special)
    chunks = list(token_chunks(text, "gpt2", allow_special, first=size, size=size))
    assert [p for chunk in chunks for p in chunk] == whole


@pytest.mark.parametrize("allow_special", [False, True])
@pytest.mark.parametrize("text", TEXTS)
def test_parts_join_to_the_text(text: str, allow_special: bool) -> None:
    parts = list(text_parts(text, "gpt2", allow_special, first=5, size=11))
    assert "".join(parts) == text
    assert all(parts)


def test_a_long_text_comes_in_many_chunks() -> None:
    text = "The cat sat on the mat. " * 2000
    chunks = list(token_chunks(text, "gpt2", first=100, size=1000))
    assert len(chunks) > 10
    assert [p.index for chunk in chunks for p in chunk] == list(range(len(tokenize(text))))


def test_a_split_character_keeps_its_labels_across_chunks() -> None:
    # 猫 and 𝄞 split into byte pieces in GPT-2, labelled 猫[1/3], 𝄞[1-2/4] and so on.
    text = "a 猫 b 𝄞 " * 300
    labels = [p.label for chunk in token_chunks(text, first=7, size=7) for p in chunk]
    assert labels == [p.label for p in tokenize(text)]
    assert any("猫[1/3]" in label for label in labels)


def test_bounds_cover_every_index_and_id() -> None:
    text = "猫吃鱼 <|endoftext|> hello"
    last, largest = token_bounds(text)
    pieces = tokenize(text, allow_special=True)
    assert pieces[-1].index <= last and max(p.id or 0 for p in pieces) <= largest
    assert largest == 50256
    assert token_bounds("") == (0, 50256)
