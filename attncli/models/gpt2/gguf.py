"""GPT-2's GGUF architecture (gpt2): its metadata keys, tensor names and stored layout.

HF's Conv1D stores (in, out); llama.cpp's converter transposes attn_qkv, attn_output, ffn_up and
ffn_down to (out, in), and reading them transposes back (Layout.transposed).
"""

from __future__ import annotations

from typing import Any

from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe

# `gpt2.` metadata key suffix -> config.json key
_KEYS = {"block_count": "n_layer", "embedding_length": "n_embd",
         "feed_forward_length": "n_inner", "attention.head_count": "n_head",
         "attention.layer_norm_epsilon": "layer_norm_epsilon", "context_length": "n_ctx"}
_LAYER = {
    f"{hf}.{part}": f"{gg}.{part}"
    for hf, gg in (("ln_1", "attn_norm"), ("attn.c_attn", "attn_qkv"),
                   ("attn.c_proj", "attn_output"), ("ln_2", "ffn_norm"),
                   ("mlp.c_fc", "ffn_up"), ("mlp.c_proj", "ffn_down"))
    for part in ("weight", "bias")}
_TOP = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
        "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias",
        "lm_head.weight": "output.weight"}
_TRANSPOSED = frozenset({"attn_qkv.weight", "attn_output.weight", "ffn_up.weight",
                         "ffn_down.weight"})


def _fill(config: dict[str, Any], header: GgufHeader) -> None:
    """What a GPT-2 config.json holds that its GGUF metadata does not."""
    config["n_positions"] = config.get("n_ctx", 1024)
    config["activation_function"] = "gelu_new"


GPT2 = GgufRecipe("gpt2", "GPT2LMHeadModel", _KEYS,
                  Layout("h.{i}.", _TOP, _LAYER, _TRANSPOSED, permuted=False), _fill)
