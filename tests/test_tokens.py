"""Tokenisation equals tiktoken's, works offline, and every token gets a readable label."""

from __future__ import annotations

import hashlib

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from attncli.core.tokens import GPT2_SHA256, GPT2_VOCAB, encode, get_encoding, labels_for, tokenize
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

    start = time.perf_counter()
    pieces = tokenize("猫吃鱼 and the river town woke slowly. " * 3000)
    assert len(pieces) > 30_000
    assert time.perf_counter() - start < 5.0  # was quadratic: minutes for this many tokens
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
