"""Tokenisation with a checkpoint's own tokenizer.json (HF tokenizers): labels and exact bytes.

Byte-level BPE (Llama 3, Qwen) spells bytes as printable characters (Ġ is a space);
SentencePiece-style vocabularies (Llama 2, Mistral) write ▁ for a space and fall back to
byte tokens such as <0xE7>. Both are turned back into the bytes each token stands for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from attncli.core.tokens import TokenPiece, labels_for
from attncli.errors import AttnCliError

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


@dataclass(frozen=True)
class HFTokens:
    """One tokenisation: pieces, and what the tokenizer's post-processor added."""

    pieces: list[TokenPiece]
    before: list[str]  # special tokens the post-processor put before the text, e.g. ["<s>"]
    after: list[str]  # and after it (an EOS, for a few tokenizers)
    name: str  # how the tokenizer is named in the JSON: "tokenizer.json"


@cache
def load_tokenizer(directory: Path) -> Any:
    """The folder's tokenizer.json, read with HF tokenizers (nothing is downloaded)."""
    from tokenizers import Tokenizer

    file = directory / "tokenizer.json"
    if not file.is_file():
        raise AttnCliError(f"{directory} has no tokenizer.json: attncli tokenises with the "
                           f"model's own tokenizer (fetch it with the checkpoint)")
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise AttnCliError(f"cannot read {file}: {reason}") from None


def _is_byte_level(tokenizer: Any) -> bool:
    import json

    spec = json.loads(tokenizer.to_str())
    return "ByteLevel" in json.dumps(spec.get("decoder"))


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


def _added(ids: list[int], text_ids: list[int],
           tokens: list[str]) -> tuple[list[str], list[str]]:
    """The tokens before and after text_ids in ids: what the post-processor added (BOS, EOS)."""
    n = len(text_ids)
    start = next((k for k in range(len(ids) - n + 1) if ids[k : k + n] == text_ids), 0)
    return tokens[:start], tokens[start + n :]


def hf_tokenize(directory: Path, text: str, allow_special: bool = False) -> HFTokens:
    """Tokenise text as the model's tokenizer does, BOS and all, into labelled pieces.

    Special-token spellings in the text are plain text unless allow_special, as for GPT-2.
    """
    tokenizer = load_tokenizer(directory)
    tokenizer.encode_special_tokens = not allow_special
    try:
        encoding = tokenizer.encode(text, add_special_tokens=True)
        plain = tokenizer.encode(text, add_special_tokens=False)
    finally:
        tokenizer.encode_special_tokens = False
    specials = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    byte_level = _is_byte_level(tokenizer)
    before, after = _added(encoding.ids, plain.ids, encoding.tokens)
    data = []
    for tok, mask in zip(encoding.tokens, encoding.special_tokens_mask, strict=True):
        data.append(token_bytes(tok, byte_level, special=bool(mask) or tok in specials))
    labels = labels_for(data)
    pieces = [TokenPiece(i, tid, label, chunk) for i, (tid, label, chunk) in
              enumerate(zip(encoding.ids, labels, data, strict=True))]
    return HFTokens(pieces=pieces, before=before, after=after, name="tokenizer.json")


def model_tokens(model: str, text: str,
                 allow_special: bool) -> tuple[dict[str, Any], list[TokenPiece], str]:
    """`tokens --model`: the JSON document, the pieces, and the tokenizer's name for titles."""
    from attncli.core.result import TokenInfo
    from attncli.models.llama_config import family_of, model_folder

    folder = model_folder(model)
    if folder is None or family_of(model) is None:
        raise AttnCliError(f"tokens --model reads a Llama-family folder's tokenizer.json; "
                           f"{model} is not one (GPT-2 checkpoints use --encoding gpt2)")
    tokens = hf_tokenize(folder, text, allow_special)
    doc = {"model": model, "tokenizer": {"file": tokens.name, "bos": tokens.before[0]
                                         if tokens.before else None,
                                         "added_before": tokens.before,
                                         "added_after": tokens.after},
           "tokens": [TokenInfo.of(p).to_dict() for p in tokens.pieces]}
    return doc, tokens.pieces, f"{folder.name}/{tokens.name}"
