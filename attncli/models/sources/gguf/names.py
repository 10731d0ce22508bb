"""Hugging Face tensor names onto llama.cpp's, per architecture, with the layout changes between.

llama.cpp's converter rewrites a few tensors on the way in; reading them back undoes it:
- llama: the rows of attn_q and attn_k are permuted into its rotary layout
  (convert_hf_to_gguf.py LlamaModel.permute); the inverse is applied with n_head for Q and
  n_head_kv for K, as transformers' loader does (LlamaTensorProcessor._reverse_permute_weights).
- gpt2: HF's Conv1D stores (in, out); the converter transposes attn_qkv, attn_output, ffn_up
  and ffn_down to (out, in), and reading them transposes back.
- smollm3: a LlamaModel in the converter, so its Q and K rows are permuted as llama's are.
- gemma2, gemma3: HF's Gemma RMSNorm stores w and computes x·(1 + w); the converter stores w + 1
  for every tensor named *norm.weight (Gemma2Model / Gemma3Model.modify_tensors), q_norm and
  k_norm included, and reading them subtracts 1 (float32 rounding: within 2^-24·|w + 1|).
- gptneox: HF's query_key_value holds each head's [q; k; v] rows in turn; the converter
  (GPTNeoXModel.modify_tensors) regroups them as [all q; all k; all v], and reading regroups back.
- phi3, olmo2, qwen2, qwen3: written as HF stores them (llama.cpp rotates them NeoX-style).
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
    norm_shift: bool = False  # *norm.weight stored as w + 1 (Gemma)
    neox_qkv: bool = False  # attn_qkv rows regrouped from per-head [q k v] to [q; k; v]


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

_GEMMA_LAYER = _LLAMA_LAYER | {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight"}
_OLMO2_LAYER = {hf: gg for hf, gg in _GEMMA_LAYER.items()
                if hf not in ("input_layernorm.weight", "pre_feedforward_layernorm.weight")}
_PHI3_LAYER = {hf: gg for hf, gg in _LLAMA_LAYER.items()
               if hf not in ("mlp.gate_proj.weight", "mlp.up_proj.weight")} | {
    "self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"}
_NEOX_LAYER = {
    f"{hf}.{part}": f"{gg}.{part}"
    for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                   ("attention.query_key_value", "attn_qkv"), ("attention.dense", "attn_output"),
                   ("mlp.dense_h_to_4h", "ffn_up"), ("mlp.dense_4h_to_h", "ffn_down"))
    for part in ("weight", "bias")}
_NEOX_TOP = {"gpt_neox.embed_in.weight": "token_embd.weight",
             "gpt_neox.final_layer_norm.weight": "output_norm.weight",
             "gpt_neox.final_layer_norm.bias": "output_norm.bias",
             "embed_out.weight": "output.weight"}
_LAYERS = "model.layers.{i}."

LAYOUTS = {
    "llama": Layout("model.layers.{i}.", _LLAMA_TOP, _LLAMA_LAYER, frozenset(), permuted=True),
    "qwen2": Layout("model.layers.{i}.", _LLAMA_TOP, _LLAMA_LAYER, frozenset(), permuted=False),
    "qwen3": Layout("model.layers.{i}.", _LLAMA_TOP, _LLAMA_LAYER, frozenset(), permuted=False),
    "gpt2": Layout("h.{i}.", _GPT2_TOP, _GPT2_LAYER, _GPT2_TRANSPOSED, permuted=False),
    "smollm3": Layout(_LAYERS, _LLAMA_TOP, _LLAMA_LAYER, frozenset(), permuted=True),
    "gemma2": Layout(_LAYERS, _LLAMA_TOP, _GEMMA_LAYER, frozenset(), permuted=False,
                     norm_shift=True),
    "gemma3": Layout(_LAYERS, _LLAMA_TOP, _GEMMA_LAYER, frozenset(), permuted=False,
                     norm_shift=True),
    "phi3": Layout(_LAYERS, _LLAMA_TOP, _PHI3_LAYER, frozenset(), permuted=False),
    "olmo2": Layout(_LAYERS, _LLAMA_TOP, _OLMO2_LAYER, frozenset(), permuted=False),
    "gptneox": Layout("gpt_neox.layers.{i}.", _NEOX_TOP, _NEOX_LAYER, frozenset(),
                      permuted=False, neox_qkv=True),
}
# GGUF architectures attncli knows and does not read, with the reason
REFUSED = {
    "bert": "an encoder whose llama.cpp vocabulary ('bert', WPM) is split by llama.cpp's own "
            "rules, which attncli cannot rebuild exactly as a WordPiece tokenizer",
    "gemma": "Gemma 1, whose GGUF attncli does not map (it reads gemma2 and gemma3)",
    "gemma3n": "Gemma 3n, whose per-layer embeddings and AltUp are not attention attncli shows",
    "olmo": "OLMo 1, whose GGUF attncli does not map (it reads olmo2)",
}


def layout_for(architecture: str, path: object) -> Layout:
    """The layout of a supported architecture, or one line listing the supported ones."""
    if architecture not in LAYOUTS:
        why = REFUSED.get(architecture, "an architecture attncli has no tensor mapping for")
        raise AttnCliError(f"{path} holds a {architecture!r} model ({why}); attncli reads GGUF "
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


def interleave_heads(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's GPT-NeoX regrouping of query_key_value: [all q; all k; all v] rows back
    to HF's per-head [q_h; k_h; v_h] (weight (3·d, d) or bias (3·d,))."""
    head_dim = rows.shape[0] // 3 // heads
    grouped = rows.reshape(3, heads, head_dim, *rows.shape[1:])  # (3, h, hd, ...)
    return grouped.swapaxes(0, 1).reshape(rows.shape)  # (h, 3, hd, ...) flattened: HF's order


def stored_layout(layout: Layout, gguf_name: str) -> str:
    """'transposed', 'q', 'k', 'norm', 'qkv_heads' or '': what reading this tensor undoes."""
    suffix = gguf_name.split(".", 2)[-1] if gguf_name.startswith("blk.") else gguf_name
    if suffix in layout.transposed:
        return "transposed"
    if layout.norm_shift and suffix.endswith("norm.weight"):
        return "norm"
    if layout.neox_qkv and suffix in ("attn_qkv.weight", "attn_qkv.bias"):
        return "qkv_heads"
    if layout.permuted and suffix in ("attn_q.weight", "attn_q.bias"):
        return "q"
    if layout.permuted and suffix in ("attn_k.weight", "attn_k.bias"):
        return "k"
    return ""
