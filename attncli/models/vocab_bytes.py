"""The exact bytes a tokenizer.json vocabulary entry stands for, and the labelled pieces.

Byte-level BPE (Llama 3, Qwen) spells bytes as printable characters (Ġ is a space);
SentencePiece-style vocabularies (Llama 2, Mistral) write ▁ for a space and fall back to
byte tokens such as <0xE7>; WordPiece (BERT) marks a word's continuation with ##.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from attncli.core.inputs import parse_json
from attncli.core.pieces import TokenPiece
from attncli.core.tokens import labels_for

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable character → byte table, as byte-level BPE uses it."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[chr(byte)] = byte
        else:
            table[chr(256 + extra)] = byte
            extra += 1
    return table


def spec_of(tokenizer: Any) -> dict[str, Any]:
    """The tokenizer as tokenizer.json describes it, read back by the one JSON reader."""
    spec = parse_json(tokenizer.to_str(), "the tokenizer")
    return spec if isinstance(spec, dict) else {}


def _is_byte_level(tokenizer: Any) -> bool:
    return "ByteLevel" in json.dumps(spec_of(tokenizer).get("decoder"))


def token_bytes(token: str, byte_level: bool, special: bool) -> bytes:
    """The exact bytes a vocabulary entry stands for."""
    if special:
        return token.encode("utf-8")
    if byte_level:
        table = _byte_decoder()
        return bytes(table[ch] for ch in token) if all(ch in table for ch in token) \
            else token.encode("utf-8")
    if match := _BYTE_TOKEN.fullmatch(token):
        return bytes([int(match[1], 16)])  # byte fallback
    return token.replace("▁", " ").encode("utf-8")


Triple = tuple[int, str, int]  # a token's id, its vocabulary entry, and 1 for a special token


class Labeller:
    """Turns a tokenizer's tokens into labelled pieces (what it asks of tokenizer.json, once)."""

    def __init__(self, tokenizer: Any) -> None:
        self.byte_level = _is_byte_level(tokenizer)
        self.specials = {t.content for t in tokenizer.get_added_tokens_decoder().values()
                         if t.special}
        decoder = spec_of(tokenizer).get("decoder") or {}  # WordPiece (BERT): "##" continues
        self.joiner = decoder.get("prefix") if decoder.get("type") == "WordPiece" else None

    def pieces(self, triples: list[Triple], start: int) -> list[TokenPiece]:
        """Labelled pieces of these tokens, numbered from start."""
        special = [bool(mask) or tok in self.specials for _, tok, mask in triples]
        data = [token_bytes(self._word(triples, k), self.byte_level, special[k])
                for k in range(len(triples))]
        labels = labels_for(data)
        return [TokenPiece(start + k, tid, label, chunk) for k, ((tid, _, _), label, chunk) in
                enumerate(zip(triples, labels, data, strict=True))]

    def _word(self, triples: list[Triple], k: int) -> str:
        """WordPiece's token k as the text it stands for: "##at" continues a word ("at"); a
        word after another word starts with the space the pre-tokenizer took away."""
        token, joiner = triples[k][1], self.joiner
        if not joiner or triples[k][2] or token in self.specials:
            return token
        if token.startswith(joiner) and len(token) > len(joiner):
            return token[len(joiner):]
        earlier = k > 0 and not triples[k - 1][2] and triples[k - 1][1] not in self.specials
        return " " + token if earlier else token
