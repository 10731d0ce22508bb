"""Tokenisation equals tiktoken's, works offline, and every token gets a readable label."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from attncli.core.tokens import (
    GPT2_SHA256,
    GPT2_VOCAB,
    encode,
    get_encoding,
    labels_for,
    text_parts,
    token_bounds,
    token_chunks,
    tokenize,
    visible,
)
from attncli.errors import AttnCliError

TEXTS = [
    "Your journey starts with one step",
    "猫吃鱼",
    "emoji 🙂👍🏽 and ünïcödé — dashes",
    "line one\nline two\ttabbed  double  spaces ",
    "Some <|endoftext|> text",
]


def test_bundled_vocabulary_is_tiktokens_r50k() -> None:
    assert hashlib.sha256(GPT2_VOCAB.read_bytes()).hexdigest() == GPT2_SHA256
    assert (GPT2_VOCAB.parent / "LICENSE-gpt2-vocab").read_text().startswith("MIT License")



@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_tiktoken(text: str) -> None:
    from tiktoken_ext.openai_public import r50k_pat_str

    ref = tiktoken.Encoding(name="ref", pat_str=r50k_pat_str,
                            mergeable_ranks=load_tiktoken_bpe(str(GPT2_VOCAB), GPT2_SHA256),
                            special_tokens={"<|endoftext|>": 50256})
    assert encode(text) == ref.encode(text, disallowed_special=())
    assert encode(text, allow_special=True) == ref.encode(text, allowed_special="all")


def test_bundled_ranks_match_tiktokens_reader(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.core import tokens

    assert tokens._bundled_ranks() == load_tiktoken_bpe(str(GPT2_VOCAB), GPT2_SHA256)
    damaged = tmp_path / "gpt2.tiktoken"
    damaged.write_bytes(GPT2_VOCAB.read_bytes().replace(b" 100\n", b" 101\n", 1))
    monkeypatch.setattr(tokens, "GPT2_VOCAB", damaged)
    with pytest.raises(AttnCliError, match="damaged"):
        tokens._bundled_ranks()


def test_known_ids() -> None:
    # GPT-2 ids as printed in the book's chapter 2 for "Hello, do you like tea?".
    assert encode("Hello, do you like tea?") == [15496, 11, 466, 345, 588, 8887, 30]
    assert len(encode("猫吃鱼")) == 8
    book = "Hello, do you like tea? <|endoftext|> In the sunlit terraces of someunknownPlace."
    assert encode(book, allow_special=True) == [
        15496, 11, 466, 345, 588, 8887, 30, 220, 50256, 554, 262, 4252, 18250, 8812, 2114, 286,
        617, 34680, 27271, 13]


def test_special_token_is_text_unless_allowed() -> None:
    assert 50256 not in encode("a <|endoftext|> b")
    assert 50256 in encode("a <|endoftext|> b", allow_special=True)


@pytest.mark.parametrize("text", TEXTS)
def test_bytes_round_trip_and_labels(text: str) -> None:
    pieces = tokenize(text)
    assert b"".join(p.data or b"" for p in pieces) == text.encode("utf-8")
    for p in pieces:
        assert p.label and p.label.strip(), p
        assert "\ufffd" not in p.label
        assert "\n" not in p.label and "\t" not in p.label


def test_labels_name_the_split_character() -> None:
    labels = [p.label for p in tokenize("猫吃鱼")]
    assert labels[:3] == ["猫[1/3]", "猫[2/3]", "猫[3/3]"]
    assert labels_for([b"\xe5\x90", b"\x83"]) == ["吃[1-2/3]", "吃[3/3]"]
    assert labels_for([b"\xff"]) == ["\\xff"]
    assert labels_for([b" "]) == ["␣"]


def test_unknown_encoding() -> None:
    with pytest.raises(AttnCliError, match="unknown encoding 'nope'"):
        get_encoding("nope")


def test_unreachable_encoding_says_how_to_provide_it(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path) -> None:  # noqa: ANN001
    import tiktoken.registry

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    def offline(name: str) -> tiktoken.Encoding:
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    get_encoding.cache_clear()
    with pytest.raises(AttnCliError, match="TIKTOKEN_CACHE_DIR"):
        get_encoding("cl100k_base")
    assert tiktoken.registry is not None


def test_labels_of_a_long_text_take_linear_time() -> None:
    import time

    from attncli.core.tokens import tokenize

    start = time.process_time()  # CPU time: a loaded machine does not stretch it
    pieces = tokenize("猫吃鱼 and the river town woke slowly. " * 3000)
    assert len(pieces) > 30_000
    assert time.process_time() - start < 30.0  # was quadratic: minutes for this many tokens
    assert [p.label for p in pieces[:5]] == ["猫[1/3]", "猫[2/3]", "猫[3/3]", "吃[1-2/3]",
                                             "吃[3/3]"]
    assert [p.label for p in pieces[-3:]] == [" slowly", ".", "␣"]


@pytest.mark.parametrize("text", ["plain English words", "猫吃鱼 🐈‍⬛ naïve → ×", "a\x00b\n\t é",
                                  "日本語のテキスト" * 5 + " mixed ascii 🎉" * 3])
def test_fast_labels_equal_the_character_spans(text: str) -> None:
    from attncli.core.tokens import _labels_of_run, encode, get_encoding, labels_for

    enc = get_encoding("gpt2")
    pieces = [enc.decode_single_token_bytes(i) for i in encode(text)]
    assert labels_for(pieces) == _labels_of_run(pieces)


# Tokenising in pieces gives exactly the tokens of the whole text, labels included.

CHUNK_TEXTS = [
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
@pytest.mark.parametrize("text", CHUNK_TEXTS)
def test_chunked_tokens_equal_the_whole_texts(text: str, size: int, allow_special: bool) -> None:
    whole = tokenize(text, "gpt2", allow_special)
    chunks = list(token_chunks(text, "gpt2", allow_special, first=size, size=size))
    assert [p for chunk in chunks for p in chunk] == whole


@pytest.mark.parametrize("allow_special", [False, True])
@pytest.mark.parametrize("text", CHUNK_TEXTS)
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


@pytest.mark.parametrize("mark", ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069",
                                  "\u200e", "\u200f", "\u061c", "\u202a", "\u202b", "\u202c"])
def test_direction_controls_are_escaped_and_joiners_kept(mark: str) -> None:
    assert visible(f"ab{mark}cd") == f"ab\\u{ord(mark):04x}cd"
    assert visible("👨\u200d👩") == "👨\u200d👩"  # a zero-width joiner inside an emoji stays
