"""Tokenisation in pieces: the text cut where tiktoken's pre-tokeniser cuts anyway, so the ids
are those of the whole text, and the first tokens are ready before the last are encoded."""

from __future__ import annotations

import re
from collections.abc import Iterator

from attncli.core.tokens import TokenPiece, get_encoding, labels_for

FIRST_CHARS = 2048  # the first piece is small, so the first rows come out at once
CHUNK_CHARS = 1 << 16  # later pieces: about 64 KB of text each


def token_chunks(text: str, encoding: str = "gpt2", allow_special: bool = False,
                 first: int = FIRST_CHARS, size: int = CHUNK_CHARS) -> Iterator[list[TokenPiece]]:
    """The text's tokens as lists of pieces with running indices, the same as tokenize gives."""
    enc = get_encoding(encoding)
    index = 0
    for part in text_parts(text, encoding, allow_special, first, size):
        ids = enc.encode(part, allowed_special="all") if allow_special else \
            enc.encode_ordinary(part)
        data = [enc.decode_single_token_bytes(i) for i in ids]
        # A part never cuts a character, so a character split across tokens lies in one part.
        labels = labels_for(data)
        yield [TokenPiece(index + k, tid, lab, piece) for k, (tid, lab, piece)
               in enumerate(zip(ids, labels, data, strict=True))]
        index += len(ids)


def token_bounds(text: str, encoding: str = "gpt2") -> tuple[int, int]:
    """Upper bounds known before any token is made: the last index and the largest id."""
    # Every token holds at least one byte of the text (a special token, several).
    last = max(len(text.encode("utf-8", "surrogatepass")) - 1, 0)
    return last, get_encoding(encoding).n_vocab - 1


def text_parts(text: str, encoding: str = "gpt2", allow_special: bool = False,
               first: int = FIRST_CHARS, size: int = CHUNK_CHARS) -> Iterator[str]:
    """Consecutive parts of text whose encodings, joined, are the encoding of the whole text."""
    enc = get_encoding(encoding)
    if not allow_special:
        yield from _cut(text, first, size)
        return
    # tiktoken first splits off the special tokens, then pre-tokenises each stretch between them
    # as a string of its own; so do we.
    specials = re.compile("|".join(map(re.escape, sorted(enc.special_tokens_set))))
    start = 0
    for match in specials.finditer(text):
        if match.start() > start:
            yield from _cut(text[start:match.start()], first, size)
        yield match.group()
        start = match.end()
    if start < len(text):
        yield from _cut(text[start:], first, size)


def _cut(text: str, first: int, size: int) -> Iterator[str]:
    """text in parts of about first, then size, characters, each cut before a space that follows
    a non-space character.

    No pre-token of tiktoken's patterns (r50k, p50k, cl100k, o200k) holds a non-space character
    followed by a space: a space only ever starts one, or lies in a run of whitespace. So such a
    space starts a pre-token, and the one before it ends in a non-space character, which stops
    the patterns' only look-ahead (`\\s+(?!\\S)`); they never look behind. Each part,
    pre-tokenised alone, therefore gives the whole text's pre-tokens, and encodes to its ids.
    """
    start, target = 0, first
    while len(text) - start > target:
        cut = text.find(" ", start + target)
        while cut > 0 and text[cut - 1].isspace():
            cut = text.find(" ", cut + 1)
        if cut <= 0:
            break
        yield text[start:cut]
        start, target = cut, size
    if start < len(text):
        yield text[start:]
