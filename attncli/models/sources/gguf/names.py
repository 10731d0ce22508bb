"""Hugging Face tensor names onto llama.cpp's, and the layout changes between, as mechanics: which
names and which changes an architecture has is its family's (a GgufRecipe's Layout, declared in
the family's gguf.py).

llama.cpp's converter rewrites a few tensors on the way in; reading them back undoes it:
- transposed: stored (out, in) where HF keeps (in, out) (GPT-2's Conv1D); reading transposes.
- permuted: attn_q and attn_k rows in llama.cpp's rotary layout (convert_hf_to_gguf.py
  LlamaModel.permute); the inverse is applied with n_head for Q and n_head_kv for K, as
  transformers' loader does (LlamaTensorProcessor._reverse_permute_weights).
- norm_shift: HF's Gemma RMSNorm stores w and computes x·(1 + w); the converter stores w + 1 for
  every tensor named *norm.weight, and reading subtracts 1 (float32: within 2^-24·|w + 1|).
- neox_qkv: HF's query_key_value holds each head's [q; k; v] rows in turn; the converter
  (GPTNeoXModel.modify_tensors) regroups them as [all q; all k; all v], and reading regroups back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


def hf_to_gguf(layout: Layout, layers: int) -> dict[str, str]:
    """Every HF name this layout knows, for layers 0..layers-1, to its GGUF name."""
    names = dict(layout.top)
    for i in range(layers):
        prefix = layout.layer_prefix.format(i=i)
        names |= {prefix + hf: f"blk.{i}.{gg}" for hf, gg in layout.layer.items()}
    return names


def unpermute(rows: np.ndarray, heads: int, out: np.ndarray | None = None) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of Q or K rows: within each head, its converter
    interleaved the two rotary halves (rows h*d + 2j, 2j+1 <- j, j + d/2). out: an array of
    rows' shape to write into (default: a new one)."""
    half = rows.shape[0] // heads // 2
    split = rows.reshape(heads, half, 2, *rows.shape[1:])  # (heads, d/2, 2, ...)
    return _written(split.swapaxes(1, 2), rows.shape, out)  # (heads*d, ...) in HF's order


def interleave_heads(rows: np.ndarray, heads: int, out: np.ndarray | None = None) -> np.ndarray:
    """Undo llama.cpp's GPT-NeoX regrouping of query_key_value: [all q; all k; all v] rows back
    to HF's per-head [q_h; k_h; v_h] (weight (3·d, d) or bias (3·d,)); out as unpermute's."""
    head_dim = rows.shape[0] // 3 // heads
    grouped = rows.reshape(3, heads, head_dim, *rows.shape[1:])  # (3, h, hd, ...)
    return _written(grouped.swapaxes(0, 1), rows.shape, out)  # (h, 3, hd, ...): HF's order


def _written(view: np.ndarray, shape: tuple[int, ...], out: np.ndarray | None) -> np.ndarray:
    """view's values in C order as shape: into out where given, else a new array."""
    if out is None:
        return view.reshape(shape)
    np.copyto(out.reshape(view.shape), view)
    return out


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
