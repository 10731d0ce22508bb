"""Cutting a text where tiktoken's pre-tokenisers allow: the pieces encode as the whole text.

Every pattern attncli can meet (r50k/gpt2, which p50k shares; cl100k; o200k) is checked with
GPT-2's byte-pair ranks, exhaustively on short texts and on random longer ones.
"""

from __future__ import annotations

import itertools
import random
import unicodedata
from functools import cache

import pytest
import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext.openai_public import r50k_pat_str

from attncli.core.cutting.boundaries import Cuts, Vocabulary
from attncli.core.tokens import get_encoding, text_parts, token_chunks, tokenize

# The patterns as tiktoken writes them (its cl100k_base() and o200k_base() would download their
# vocabularies first); test_the_patterns_are_tiktokens checks they are still its own.
CL100K = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
          r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
O200K_PARTS = [
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
]
PATTERNS = {"r50k": r50k_pat_str, "cl100k": CL100K, "o200k": "|".join(O200K_PARTS)}


def test_the_patterns_are_tiktokens() -> None:
    import inspect

    import tiktoken_ext.openai_public as public

    source = inspect.getsource(public)
    assert CL100K in source
    assert all(part in source for part in O200K_PARTS)


@cache
def encodings() -> dict[str, tiktoken.Encoding]:
    """GPT-2's ranks under each pattern."""
    ranks = get_encoding("gpt2")._mergeable_ranks
    return {name: tiktoken.Encoding(name=f"test-{name}", pat_str=pattern, mergeable_ranks=ranks,
                                    special_tokens={})
            for name, pattern in PATTERNS.items()}


@cache
def vocabulary() -> Vocabulary:
    return Vocabulary.of(get_encoding("gpt2").token_byte_values())


def _cuts(text: str) -> list[int]:
    """Every cut of the first two kinds in text."""
    cuts, found, pos = Cuts(text, vocabulary), [], 1
    while pos < len(text) and (cut := cuts.simple(pos)) < len(text):
        found.append(cut)
        pos = cut + 1
    return found


def _run_cuts(text: str) -> list[int]:
    """Every cut of the third kind in text."""
    cuts, found, pos = Cuts(text, vocabulary), [], 1
    while pos < len(text) and (cut := cuts.in_runs(pos, len(text))) >= 0:
        found.append(cut)
        pos = cut + 1
    return found


def _assert_exact(text: str, cut_at: list[int], pretokens: bool = True) -> None:
    """Each cut's halves encode to the whole text's tokens under every pattern, and (for cuts
    between pre-tokens) pre-tokenise to its pre-tokens: GPT-2's ranks alone cannot tell some
    pre-token splits apart (no GPT-2 token holds a letter and an apostrophe)."""
    for name, enc in encodings().items():
        whole = enc.encode_ordinary(text)
        pieces = regex.findall(PATTERNS[name], text)
        for cut in cut_at:
            left, right = enc.encode_ordinary(text[:cut]), enc.encode_ordinary(text[cut:])
            assert left + right == whole, (name, text, cut)
            if pretokens:
                halves = (regex.findall(PATTERNS[name], text[:cut])
                          + regex.findall(PATTERNS[name], text[cut:]))
                assert halves == pieces, (name, text, cut)


# Letters with and without case, a letter with no case that modifies (Lm), a combining mark,
# digits, punctuation (ASCII and CJK), the apostrophe, symbols, and whitespace of every kind.
ALPHABET = ["a", "B", "s", "猫", "ー", "\u0301", "1", "²", ".", "。", "'", " ", "\n", "\r", "🙂",
            "\u3000"]


@pytest.mark.slow
def test_short_texts_exhaustively() -> None:
    checked = 0
    for length in range(1, 5):
        for chars in itertools.product(ALPHABET, repeat=length):
            text = "".join(chars)
            cuts = _cuts(text)
            _assert_exact(text, cuts)
            checked += len(cuts)
    assert checked > 10_000  # the cuts are not vacuous


WORDS = ["the", " cat", "猫吃鱼", "東京は", "ひらがな", "カタカナー", "한국어", "ünïcödé",
         "e\u0301", "🙂", "👍🏽", "👩\u200d💻", "❤️", "𝄞", "1234567", "3,456.78", "x'll", "IT'S",
         "。", "，",
         "「", "」", "...", "—", " ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\x85", "_",
         "<|endoftext|>", "[bold]", "a" * 30, "猫" * 40, " " * 20]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=40))
def test_random_texts_cut_exactly(words: list[str]) -> None:
    text = "".join(words)
    _assert_exact(text, _cuts(text))


CASELESS = "猫吃鱼狗肉我们一起学习注意力机制東京日本首都ひらがなカタカナー한국어ـ"
# GPT-2 entries of two caseless letters or more: inside them, a cut would split a token.
IN_VOCABULARY = ["ال", "の魔", "アル", "イト", "ウス", "エル", "ゴン", "シャ", "スト", "ゼウス",
                 "ック", "ット", "ッド", "ティ", "ディ", "ドラゴン", "ファ", "フォ", "ヘラ", "ラン",
                 "ワン", "ンジ", "ヴァ", "ーク", "ーティ", "ール", "ーン", "ㅋㅋ", "覚醒", "龍喚士",
                 "龍契士"]
BEFORE = ["", "abc", "ABC", "aB", " ", "x猫", "'", "1", "。", "e\u0301", "\n"]
AFTER = ["", "。", "abc", "A", "Ab", "\u0301", "'s", "'S", " ", "1", "\n", "🙂", "ー"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_cuts_inside_long_caseless_runs_are_exact(seed: int) -> None:
    rng = random.Random(seed)
    found = 0
    for before, after in itertools.product(BEFORE, AFTER):
        run = "".join(rng.choice([*CASELESS, *IN_VOCABULARY] if seed % 2 else CASELESS)
                      for _ in range(rng.randint(120, 260)))
        text = before + run + after
        cuts = _run_cuts(text)
        assert all(all(unicodedata.category(ch) in ("Lo", "Lm") for ch in text[c - 65:c + 65])
                   for c in cuts)
        _assert_exact(text, cuts[::3], pretokens=False)
        found += len(cuts)
    assert found > 1000


@pytest.mark.parametrize(("run", "expect"), [("猫", True), ("ー", None), ("a", False),
                                             (" ", False), ("1", False), ("\u0301", False)])
def test_a_long_run_of_one_character(run: str, expect: bool | None) -> None:
    text = run * 400
    cuts = _run_cuts(text)
    if expect is not None:
        assert bool(cuts) == expect
    _assert_exact(text, cuts[::13], pretokens=False)


def test_a_run_followed_by_a_letter_with_case_is_never_cut() -> None:
    # o200k would read "猫Cd" as one pre-token in the second half but not in the whole text.
    assert _run_cuts("x" + "猫" * 300 + "Cd") == []
    assert _run_cuts("x" + "猫" * 300 + "\u0301") == []
    assert _run_cuts("猫" * 300 + "。") != []


@pytest.mark.slow
def test_cjk_without_spaces_comes_in_pieces() -> None:
    text = "猫吃鱼狗吃肉我们一起学习注意力机制" * 4000  # 68,000 characters, no space or mark
    parts = list(text_parts(text, first=2048, size=1 << 14))
    assert "".join(parts) == text and len(parts) > 3
    assert len(parts[0]) < 2048 + 200
    chunks = token_chunks(text, first=2048, size=1 << 14)
    assert [p for chunk in chunks for p in chunk] == tokenize(text)


@pytest.mark.parametrize("text", ["a" * 5000, "𝄞" * 3000, " " * 4000 + "x", "1" * 5000,
                                  "猫" * 3000, "e\u0301" * 2000])
def test_a_piece_that_cannot_be_cut_is_labelled_in_chunks(text: str) -> None:
    chunks = list(token_chunks(text, first=10, size=10, tokens=7))
    assert all(chunk for chunk in chunks) and len(chunks) > 20
    assert [p for chunk in chunks for p in chunk] == tokenize(text)
