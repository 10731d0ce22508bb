"""The spans occlusion masks together: each token, each word's tokens, each turn's tokens,
never a sink (the first token, the template's own)."""

from __future__ import annotations

import pytest

from attncli.core.result import TokenInfo
from attncli.models.generate.occlusion import spans_of
from attncli.records.given import Turn


def _tokens(*pieces: bytes) -> list[TokenInfo]:
    return [TokenInfo(j, j, piece.decode("utf-8", "replace"), piece.hex())
            for j, piece in enumerate(pieces)]


# "<s>What is the capital of Fr|ance?" with the sink first
SENTENCE = _tokens(b"<s>", b"What", b" is", b" the", b" capital", b" of", b" Fr", b"ance", b"?")
CHINESE = "法国".encode()  # two characters, three bytes each: the tokens cut inside them
TABLE = [
    ("token", SENTENCE, [0], [[1], [2], [3], [4], [5], [6], [7], [8]]),
    ("word", SENTENCE, [0], [[1], [2], [3], [4], [5], [6, 7], [8]]),
    ("word", SENTENCE, [0, 5], [[1], [2], [3], [4], [6, 7], [8]]),  # a sink splits
    ("word", _tokens(b"<s>", b" my", b"_", b"list", b"2", b"0", b"."), [0], [[1, 2, 3, 4, 5], [6]]),
    ("word", _tokens(b"<s>", CHINESE[:3], CHINESE[3:5], CHINESE[5:], b"\xef\xbc\x9f"), [0],
     [[1], [2, 3], [4]]),  # a token inside a character stays with it; each character a word
    ("word", _tokens(b"<s>", b"\n\n", b"Hi", b"!"), [0], [[1], [2], [3]]),
]


@pytest.mark.parametrize(("kind", "tokens", "skip", "want"), TABLE)
def test_tokens_and_words(kind: str, tokens: list[TokenInfo], skip: list[int],
                          want: list[list[int]]) -> None:
    assert spans_of(kind, tokens, skip, []) == want


def test_turns_leave_out_the_template_and_a_prompt_without_turns_is_one() -> None:
    turns = [Turn("user", 1, 4), Turn("assistant", 5, 9), Turn("user", 9, 9)]  # the last: empty
    assert spans_of("turn", SENTENCE, [0, 3], turns) == [[1, 2], [5, 6, 7, 8]]
    assert spans_of("turn", SENTENCE, [0], []) == [[1, 2, 3, 4, 5, 6, 7, 8]]
    assert spans_of("turn", SENTENCE[:1], [0], []) == []
