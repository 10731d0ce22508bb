"""OLMo 2's GGUF architecture (olmo2): its tensor names, written as HF stores them (llama.cpp
rotates them NeoX-style); its norms after attention and after the MLP, none before."""

from __future__ import annotations

from typing import Any

from attncli.models.llama.gguf import LAYERS, LLAMA_KEYS, LLAMA_LAYER, LLAMA_TOP, llama_fill
from attncli.models.sources.gguf.config import refuse
from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe

_LAYER = {hf: gg for hf, gg in LLAMA_LAYER.items() if hf != "input_layernorm.weight"} | {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight"}


def _fill(config: dict[str, Any], header: GgufHeader) -> None:
    """OLMo 2; an OLMo 3 file (written with arch olmo2 and sliding windows) is refused."""
    if "olmo2.attention.sliding_window" in header.metadata:
        raise refuse(header, "with sliding-window layers is OLMo 3, which attncli does not read")
    llama_fill(config, header)


OLMO2 = GgufRecipe("olmo2", "Olmo2ForCausalLM", LLAMA_KEYS,
                   Layout(LAYERS, LLAMA_TOP, _LAYER, frozenset(), permuted=False), _fill)
