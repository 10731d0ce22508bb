"""SmolLM3's GGUF architecture (smollm3): a LlamaModel in llama.cpp's converter, so its Q and K
rows are permuted as llama's are; llama.cpp skips the rotary embedding on every fourth layer
(n_no_rope_layer_step = 4, src/llama-model.cpp)."""

from __future__ import annotations

from typing import Any

from attncli.models.llama.gguf import LAYERS, LLAMA_KEYS, LLAMA_LAYER, LLAMA_TOP, llama_fill
from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe


def _fill(config: dict[str, Any], header: GgufHeader) -> None:
    """SmolLM3: llama.cpp skips the rotary embedding on every fourth layer."""
    llama_fill(config, header)
    config["no_rope_layers"] = [int((i + 1) % 4 != 0) for i in range(config["num_hidden_layers"])]
    config["use_sliding_window"] = False


SMOLLM3 = GgufRecipe("smollm3", "SmolLM3ForCausalLM", LLAMA_KEYS,
                     Layout(LAYERS, LLAMA_TOP, LLAMA_LAYER, frozenset(), permuted=True), _fill)
