"""Tokenisation with tiktoken: the bundled GPT-2 vocabulary, readable labels, exact bytes;
whole, or in pieces as the text streams."""

from __future__ import annotations

import binascii
import hashlib
import re
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from attncli.core.pieces import TokenPiece
from attncli.core.sizes import check_tokens
from attncli.errors import AttnCliError, escaped

if TYPE_CHECKING:
    import tiktoken

    from attncli.core.cutting.boundaries import Vocabulary

GPT2_VOCAB = Path(__file__).parent.parent / "data" / "gpt2.tiktoken"
GPT2_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
ENDOFTEXT = "<|endoftext|>"
ALIASES = {"gpt2": "gpt2", "r50k_base": "gpt2"}
DOWNLOADED = ("cl100k_base", "o200k_base", "p50k_base", "p50k_edit")
LOAD_TIMEOUT_S = 5.0
FIRST_CHARS = 2048  # the first piece is small, so the first rows come out at once
CHUNK_CHARS = 1 << 16  # later pieces: about 64 KB of text each
CHUNK_TOKENS = 1 << 13  # tokens labelled at a time, however long a piece


def encoding_names() -> list[str]:
    """All encoding names --encoding accepts."""
    return [*ALIASES, *DOWNLOADED]


def _bundled_ranks() -> dict[bytes, int]:
    """The bundled r50k_base ranks, checked against the sha256 tiktoken expects for that file.

    tiktoken's own reader does the same line by line through base64.b64decode; splitting once
    and decoding with binascii is about twice as fast, and this load is on every run's path.
    """
    data = GPT2_VOCAB.read_bytes()
    fields = data.split()  # token, rank, token, rank, ...
    if hashlib.sha256(data).hexdigest() != GPT2_SHA256 or len(fields) % 2:
        raise AttnCliError(f"the bundled GPT-2 vocabulary {GPT2_VOCAB} is damaged: reinstall")
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


def longest_gpt2_token() -> int:
    """The bytes of GPT-2's longest token (its special token included)."""
    return max(len(ENDOFTEXT.encode()), *map(len, _bundled_ranks()))


def _bundled_gpt2() -> tiktoken.Encoding:
    import tiktoken
    from tiktoken_ext.openai_public import r50k_pat_str

    return tiktoken.Encoding(
        name="gpt2",
        pat_str=r50k_pat_str,
        mergeable_ranks=_bundled_ranks(),
        special_tokens={ENDOFTEXT: 50256},
        explicit_n_vocab=50257,
    )


def _downloaded(name: str) -> tiktoken.Encoding:
    import tiktoken

    box: dict[str, object] = {}

    def load() -> None:
        try:
            box["enc"] = tiktoken.get_encoding(name)
        except Exception as err:  # noqa: BLE001 - any failure means the files are unreachable
            box["err"] = err

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(LOAD_TIMEOUT_S)
    if "enc" in box:
        return box["enc"]  # type: ignore[return-value]
    reason = "timed out" if worker.is_alive() else type(box.get("err")).__name__
    raise AttnCliError(
        f"encoding {name!r} is not bundled and its vocabulary could not be downloaded ({reason}); "
        f"put tiktoken's cached file in a folder and set TIKTOKEN_CACHE_DIR to it, "
        f"or use --encoding gpt2"
    )


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """The named tiktoken encoding; GPT-2 (r50k_base) comes from the bundled vocabulary."""
    if name in ALIASES:
        return _bundled_gpt2()
    if name in DOWNLOADED:
        return _downloaded(name)
    raise AttnCliError(f"unknown encoding {name!r} (choose from {', '.join(encoding_names())})")


def encode(text: str, encoding: str = "gpt2", allow_special: bool = False) -> list[int]:
    """Token ids of text; special-token spellings are plain text unless allow_special."""
    enc = get_encoding(encoding)
    if allow_special:
        return enc.encode(text, allowed_special="all")
    return enc.encode_ordinary(text)


def _visible(text: str) -> str:
    """Escape control characters and make a whitespace-only label visible."""
    label = escaped(text)
    return label.replace(" ", "␣") if label.strip() == "" else label


def visible(text: str) -> str:
    """text as a terminal may show it: control characters escaped as `tokens` shows them."""
    return _visible(text)


def _char_spans(data: bytes) -> list[tuple[int, int, str | None]]:
    """(start, end, char) for each UTF-8 character of data; char None for an invalid byte."""
    spans: list[tuple[int, int, str | None]] = []
    pos = 0
    while pos < len(data):
        for width in (1, 2, 3, 4):
            try:
                ch = data[pos:pos + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            spans.append((pos, pos + width, ch))
            pos += width
            break
        else:
            spans.append((pos, pos + 1, None))
            pos += 1
    return spans


def labels_for(pieces: list[bytes]) -> list[str]:
    """A readable, non-empty label per token; a byte piece names the character it belongs to."""
    # A piece holding whole characters decodes on its own; a character split across pieces
    # leaves each of them undecodable, so every run of those starts and ends on a boundary.
    labels: list[str | None] = []
    for piece in pieces:
        try:
            labels.append(_visible(piece.decode("utf-8")))
        except UnicodeDecodeError:
            labels.append(None)
    k = 0
    while k < len(pieces):
        if labels[k] is None:
            end = k
            while end < len(pieces) and labels[end] is None:
                end += 1
            labels[k:end] = _labels_of_run(pieces[k:end])
            k = end
        k += 1
    return labels  # type: ignore[return-value]


def _labels_of_run(pieces: list[bytes]) -> list[str]:
    """Labels of pieces that together hold whole characters, split ones named byte by byte."""
    whole = b"".join(pieces)
    spans = _char_spans(whole)  # in byte order, so each token's characters are a run of them
    labels: list[str] = []
    start, first_span = 0, 0
    for piece in pieces:
        end = start + len(piece)
        while first_span < len(spans) and spans[first_span][1] <= start:
            first_span += 1
        parts: list[str] = []
        for k in range(first_span, len(spans)):
            s, e, ch = spans[k]
            if s >= end:
                break
            if ch is None:
                parts.append(f"\\x{whole[s]:02x}")
            elif s >= start and e <= end:
                parts.append(ch)
            else:
                # A character split across tokens: name it and the bytes this token holds.
                first, last = max(s, start) - s + 1, min(e, end) - s
                rng = str(first) if first == last else f"{first}-{last}"
                parts.append(f"{ch}[{rng}/{e - s}]")
        labels.append(_visible("".join(parts)))
        start = end
    return labels


def tokenize(text: str, encoding: str = "gpt2", allow_special: bool = False) -> list[TokenPiece]:
    """Tokenise text into pieces with ids, labels and exact bytes."""
    enc = get_encoding(encoding)
    ids = encode(text, encoding, allow_special)
    check_tokens(len(ids))
    pieces = [enc.decode_single_token_bytes(i) for i in ids]
    labels = labels_for(pieces)
    return [TokenPiece(i, tid, lab, data) for i, (tid, lab, data) in
            enumerate(zip(ids, labels, pieces, strict=True))]


def token_chunks(text: str, encoding: str = "gpt2", allow_special: bool = False,
                 first: int = FIRST_CHARS, size: int = CHUNK_CHARS,
                 tokens: int = CHUNK_TOKENS) -> Iterator[list[TokenPiece]]:
    """The text's tokens as lists of pieces with running indices, the same as tokenize gives:
    the text is encoded part by part (text_parts), a part's tokens labelled about `tokens` at
    a time."""
    enc = get_encoding(encoding)
    index = 0
    for part in text_parts(text, encoding, allow_special, first, size):
        ids = enc.encode(part, allowed_special="all") if allow_special else \
            enc.encode_ordinary(part)
        start = 0
        while start < len(ids):
            stop = min(start + tokens, len(ids))
            data = [enc.decode_single_token_bytes(i) for i in ids[start:stop]]
            # A character split across tokens stays in one list (its later tokens start with a
            # UTF-8 continuation byte), so its labels name it as the whole text's do.
            while stop < len(ids) and 0x80 <= (following := enc.decode_single_token_bytes(
                    ids[stop]))[0] < 0xC0:
                data.append(following)
                stop += 1
            labels = labels_for(data)
            yield [TokenPiece(index + k, tid, lab, piece) for k, (tid, lab, piece)
                   in enumerate(zip(ids[start:stop], labels, data, strict=True))]
            index += stop - start
            start = stop


def token_bounds(text: str, encoding: str = "gpt2") -> tuple[int, int]:
    """Upper bounds known before any token is made: the last index and the largest id."""
    # Every token holds at least one byte of the text (a special token, several).
    last = max(len(text.encode("utf-8", "surrogatepass")) - 1, 0)
    return last, get_encoding(encoding).n_vocab - 1


def text_parts(text: str, encoding: str = "gpt2", allow_special: bool = False,
               first: int = FIRST_CHARS, size: int = CHUNK_CHARS) -> Iterator[str]:
    """Consecutive parts of text whose encodings, joined, are the encoding of the whole text
    (where they may be cut: core/cutting/boundaries.py)."""
    from attncli.core.cutting.boundaries import Cuts

    def vocabulary() -> Vocabulary:
        return _vocabulary(encoding)

    if not allow_special:
        yield from Cuts(text, vocabulary).parts(first, size)
        return
    # tiktoken first splits off the special tokens, then pre-tokenises each stretch between them
    # as a string of its own; so do we.
    enc = get_encoding(encoding)
    specials = re.compile("|".join(map(re.escape, sorted(enc.special_tokens_set))))
    start = 0
    for match in specials.finditer(text):
        if match.start() > start:
            yield from Cuts(text[start:match.start()], vocabulary).parts(first, size)
        yield match.group()
        start = match.end()
    if start < len(text):
        yield from Cuts(text[start:], vocabulary).parts(first, size)


@cache
def _vocabulary(encoding: str) -> Vocabulary:
    """The byte pairs inside the encoding's entries, for cuts inside runs of CJK letters."""
    from attncli.core.cutting.boundaries import Vocabulary

    return Vocabulary.of(get_encoding(encoding).token_byte_values())
