"""The "toyarch" family's GGUF files: one recipe here, plus one line in attncli.models.GGUF
(tests/models/gguf/test_gguf_recipes.py adds it), and the toy family reads them as it reads
safetensors."""

from __future__ import annotations

from typing import Any

from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe

_KEYS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
         "attention.head_count": "num_heads"}
_LAYER = {f"attn.{hf}.weight": f"attn_{gg}.weight"
          for hf, gg in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))} | {
    "attn.o.bias": "attn_output.bias"}
_LAYOUT = Layout("", {"embed.weight": "token_embd.weight"}, _LAYER,
                 transposed=frozenset({"attn_output.weight"}), permuted=False)


def _fill(config: dict[str, Any], header: GgufHeader) -> None:
    """Nothing the toy's config.json holds is missing from its metadata."""


TOY = GgufRecipe("toyarch", "ToyForCausalLM", _KEYS, _LAYOUT, _fill)
