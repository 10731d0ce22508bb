"""Hugging Face tensor names onto llama.cpp's, per architecture, with the layout changes between.

llama.cpp's converter rewrites a few tensors on the way in; reading them back undoes it:
- llama: the rows of attn_q and attn_k are permuted into its rotary layout
  (convert_hf_to_gguf.py LlamaModel.permute); the inverse is applied with n_head for Q and
  n_head_kv for K, as transformers' loader does (LlamaTensorProcessor._reverse_permute_weights).
- gpt2: HF's Conv1D stores (in, out); the converter transposes attn_qkv, attn_output, ffn_up
  and ffn_down to (out, in), and reading them transposes back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli.errors import AttnCliError


@dataclass(frozen=True)
class Layout:
    """How one architecture's HF names map onto GGUF names."""

    layer_prefix: str  # HF prefix of layer i, with {i}
    top: dict[str, str]  # HF name -> GGUF name outside the layers
    layer: dict[str, str]  # HF suffix -> GGUF suffix inside layer i
    transposed: frozenset[str]  # GGUF suffixes stored transposed
    permuted: bool  # attn_q / attn_k rows in llama.cpp's rotary order


_LLAMA_LAYER = {
    **{f"self_attn.{hf}_proj.{part}": f"attn_{gg}.{part}"
       for hf, gg in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))
       for part in ("weight", "bias")},
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_LLAMA_TOP = {"model.embed_tokens.weight": "token_embd.weight",
              "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
_GPT2_LAYER = {
    f"{hf}.{part}": f"{gg}.{part}"
    for hf, gg in (("ln_1", "attn_norm"), ("attn.c_attn", "attn_qkv"),
                   ("attn.c_proj", "attn_output"), ("ln_2", "ffn_norm"),
                   ("mlp.c_fc", "ffn_up"), ("mlp.c_proj", "ffn_down"))
    for part in ("weight", "bias")}
_GPT2_TOP = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
             "ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias",
             "lm_head.weight": "output.weight"}
_GPT2_TRANSPOSED = frozenset({"attn_qkv.weight", "attn_output.weight", "ffn_up.weight",
                              "ffn_down.weight"})

LAYOUTS = {
    "llama": Layout("model.layers.{i}.", _LLAMA_TOP, _LLAMA_LAYER, frozenset(), permuted=True),
    "qwen2": Layout("model.layers.{i}.", _LLAMA_TOP, _LLAMA_LAYER, frozenset(), permuted=False),
    "qwen3": Layout("model.layers.{i}.", _LLAMA_TOP, _LLAMA_LAYER, frozenset(), permuted=False),
    "gpt2": Layout("h.{i}.", _GPT2_TOP, _GPT2_LAYER, _GPT2_TRANSPOSED, permuted=False),
}


def layout_for(architecture: str, path: object) -> Layout:
    """The layout of a supported architecture, or one line listing the supported ones."""
    if architecture not in LAYOUTS:
        raise AttnCliError(f"{path} holds a {architecture!r} model; attncli reads GGUF "
                           f"architectures {', '.join(sorted(LAYOUTS))}")
    return LAYOUTS[architecture]


def hf_to_gguf(layout: Layout, layers: int) -> dict[str, str]:
    """Every HF name this layout knows, for layers 0..layers-1, to its GGUF name."""
    names = dict(layout.top)
    for i in range(layers):
        prefix = layout.layer_prefix.format(i=i)
        names |= {prefix + hf: f"blk.{i}.{gg}" for hf, gg in layout.layer.items()}
    return names


def unpermute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of Q or K rows: within each head, its converter
    interleaved the two rotary halves (rows h*d + 2j, 2j+1 <- j, j + d/2)."""
    half = rows.shape[0] // heads // 2
    split = rows.reshape(heads, half, 2, *rows.shape[1:])  # (heads, d/2, 2, ...)
    return split.swapaxes(1, 2).reshape(rows.shape)  # (heads*d, ...) in HF's order


def stored_layout(layout: Layout, gguf_name: str) -> str:
    """'transposed', 'q', 'k' or '' : what reading this tensor has to undo."""
    suffix = gguf_name.split(".", 2)[-1] if gguf_name.startswith("blk.") else gguf_name
    if suffix in layout.transposed:
        return "transposed"
    if layout.permuted and suffix in ("attn_q.weight", "attn_q.bias"):
        return "q"
    if layout.permuted and suffix in ("attn_k.weight", "attn_k.bias"):
        return "k"
    return ""
