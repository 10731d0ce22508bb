"""A text as a checkpoint's own tokenizer reads it: its tokenizer.json, or a GGUF file's
vocabulary, for any family that tokenises that way."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.models.family import Tokens
from attncli.models.hf_tokens import hf_tokenize, source_tokenizer

if TYPE_CHECKING:
    from attncli.core.request import Request
    from attncli.models.sources.base import WeightSource


def source_tokens(source: WeightSource, req: Request) -> Tokens:
    """The text as the checkpoint's own tokenizer reads it (its tokenizer.json, or a GGUF file's
    vocabulary), and what its post-processor added (BOS, EOS)."""
    if req.text is None:
        raise AttnCliError("no input text")
    tokens = hf_tokenize(source_tokenizer(source), req.text, req.allow_special, source.label)
    ids = [p.id for p in tokens.pieces if p.id is not None]
    added = {"file": tokens.name, "bos": tokens.before[0] if tokens.before else None,
             "added_before": tokens.before, "added_after": tokens.after}
    return Tokens([TokenInfo.of(p) for p in tokens.pieces], ids, encoding=None, tokenizer=added)
