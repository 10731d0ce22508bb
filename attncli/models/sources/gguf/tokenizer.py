"""A tokenizer.json (HF tokenizers format) from a GGUF file's `tokenizer.ggml.*` metadata.

Two vocabulary kinds: `gpt2` (byte-level BPE, split first by the regexes of the pre-tokenizer the
file names in tokenizer.ggml.pre, as llama.cpp's llama-vocab.cpp lists them) and `llama`
(SentencePiece-style BPE: ▁ for a space, <0xXX> byte fallback, merges rebuilt from the scores as
transformers does). A pre-tokenizer or model not listed here is refused by name, never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from attncli.errors import AttnCliError
from attncli.models.sources.gguf.header import GgufHeader

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
           r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# tokenizer.ggml.pre -> (the regexes applied one after another, llama.cpp's ignore_merges)
PRE_TOKENIZERS: dict[str, tuple[tuple[str, ...], bool]] = {
    "llama3": ((_LLAMA3,), True), "llama-v3": ((_LLAMA3,), True),
    "llama-bpe": ((_LLAMA3,), True),
    "qwen2": ((_QWEN2,), False),
    "smollm": ((r"\p{N}", _GPT2), False),
    "gpt-2": ((_GPT2,), False), "olmo": ((_GPT2,), False),
    "default": ((r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"), False),
}
CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types


def _strings(header: GgufHeader, key: str) -> list[str]:
    value = header.metadata.get(key)
    if not isinstance(value, list):
        raise AttnCliError(f"{header.path} has no {key} list of strings")
    return value


def _flag(header: GgufHeader, key: str, default: bool) -> bool:
    value = header.metadata.get(f"tokenizer.ggml.{key}", default)
    return bool(value) if isinstance(value, bool | int | np.integer) else default


def _token_id(header: GgufHeader, key: str, tokens: list[str]) -> int | None:
    value = header.metadata.get(f"tokenizer.ggml.{key}")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if not 0 <= value < len(tokens):
        raise AttnCliError(f"{header.path}: tokenizer.ggml.{key} is {value}, outside the "
                           f"{len(tokens):,}-token vocabulary")
    return value


def tokenizer_json(header: GgufHeader) -> str | None:
    """The file's tokenizer as tokenizer.json text, None when it has no vocabulary."""
    model = header.metadata.get("tokenizer.ggml.model")
    if model is None:
        return None
    tokens = _strings(header, "tokenizer.ggml.tokens")
    if not isinstance(model, str) or model not in _KINDS:
        raise AttnCliError(f"{header.path} has a {model!r} tokenizer; attncli builds 'gpt2' "
                           "(byte-level BPE) and 'llama' (SentencePiece-style) ones")
    build, bos_default, byte_level = _KINDS[model]
    document = build(header, tokens)
    add_bos = _flag(header, "add_bos_token", bos_default)
    document["added_tokens"] = _added_tokens(header, tokens, byte_level=byte_level)
    bos = _token_id(header, "bos_token_id", tokens)
    document["post_processor"] = _with_bos(bos, tokens) if add_bos and bos is not None else None
    return json.dumps(document, ensure_ascii=False)


def _base(vocab: dict[str, int], merges: list[list[str]], **model: Any) -> dict[str, Any]:
    return {"version": "1.0", "truncation": None, "padding": None, "normalizer": None,
            "model": {"type": "BPE", "dropout": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, **model, "vocab": vocab, "merges": merges}}


def _byte_level(header: GgufHeader, tokens: list[str]) -> dict[str, Any]:
    pre = header.metadata.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise AttnCliError(f"{header.path} names the pre-tokenizer {pre!r}, which attncli does "
                           f"not know (it knows {', '.join(sorted(PRE_TOKENIZERS))})")
    regexes, ignore_merges = PRE_TOKENIZERS[pre]
    merges = []
    for merge in _strings(header, "tokenizer.ggml.merges"):
        pair = merge.split(" ")
        if len(pair) != 2:
            raise AttnCliError(f"{header.path}: the merge {merge!r} is not two tokens")
        merges.append(pair)
    document = _base({t: i for i, t in enumerate(tokens)}, merges, unk_token=None,
                     fuse_unk=False, byte_fallback=False, ignore_merges=ignore_merges)
    splits = [{"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
              for r in regexes]
    document["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        *splits, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}]}
    document["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                           "use_regex": True}
    return document


def _sentencepiece(header: GgufHeader, tokens: list[str]) -> dict[str, Any]:
    scores = header.metadata.get("tokenizer.ggml.scores")
    if not isinstance(scores, np.ndarray) or len(scores) != len(tokens):
        raise AttnCliError(f"{header.path} has no tokenizer.ggml.scores, one per token")
    vocab = {t: i for i, t in enumerate(tokens)}
    if isinstance(header.metadata.get("tokenizer.ggml.merges"), list):
        merges = [m.split(" ", 1) for m in header.metadata["tokenizer.ggml.merges"]]
    else:
        merges = _merges_from_scores(vocab, dict(zip(tokens, scores.tolist(), strict=True)))
    unk = _token_id(header, "unknown_token_id", tokens)
    document = _base(vocab, merges, unk_token=tokens[unk] if unk is not None else None,
                     fuse_unk=True, byte_fallback=True, ignore_merges=False)
    prefix = _flag(header, "add_space_prefix", True)
    document["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "split": False,
                                 "prepend_scheme": "first" if prefix else "never"}
    steps: list[dict[str, Any]] = [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]
    if prefix:
        steps.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    document["decoder"] = {"type": "Sequence", "decoders": steps}
    return document


def _merges_from_scores(vocab: dict[str, int], scores: dict[str, float]) -> list[list[str]]:
    """Every split of a token into two tokens, best-scored merged token first (transformers'
    generate_merges with vocab_scores)."""
    found = []
    for merged, score in scores.items():
        local = [(merged[:k], merged[k:], score) for k in range(1, len(merged))
                 if merged[:k] in vocab and merged[k:] in vocab]
        found.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    found.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [[left, right] for left, right, _ in found]


def _added_tokens(header: GgufHeader, tokens: list[str], byte_level: bool) -> list[dict[str, Any]]:
    """Control tokens as special added tokens, user-defined ones as plain added tokens, as
    transformers adds them (a byte-level control token outside the byte alphabet is skipped)."""
    kinds = header.metadata.get("tokenizer.ggml.token_type")
    if not isinstance(kinds, np.ndarray):
        return []
    alphabet = set(_byte_alphabet()) if byte_level else None
    added = []
    for index, (token, kind) in enumerate(zip(tokens, kinds.tolist(), strict=False)):
        control = kind == CONTROL and (alphabet is None or set(token) <= alphabet)
        if control or kind == USER_DEFINED:
            added.append({"id": index, "content": token, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": control})
    return added


def _byte_alphabet() -> list[str]:
    """GPT-2's 256 printable characters, one per byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    return [chr(b) for b in printable] + [chr(256 + k) for k in range(256 - len(printable))]


def _with_bos(bos: int, tokens: list[str]) -> dict[str, Any]:
    token = tokens[bos]
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": token, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": token, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": token, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {token: {"id": token, "ids": [bos], "tokens": [token]}}}


# tokenizer.ggml.model → (its tokenizer.json builder, BOS added by default, byte-level), as
# transformers' GGUF loader reads them.
_KINDS: dict[str, tuple[Callable[[GgufHeader, list[str]], dict[str, Any]], bool, bool]] = {
    "gpt2": (_byte_level, False, True),
    "llama": (_sentencepiece, True, False),
}
