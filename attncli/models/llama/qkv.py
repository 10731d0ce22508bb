"""Block layer's queries, keys and values: the projections, the q/k norms and RoPE.

A Projection is one layer's, its weights looked up once (a held decoder keeps one a layer);
project() resolves it for one call, as the full pass does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from torch import Tensor

from attncli.models.llama.block import Products, Rows, norm_of, products_of, rms_norm
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.rope import RopeRow, apply_rope
from attncli.models.sources.named import Named


@dataclass
class Heads:
    """One layer's queries, keys and values split into heads, with the stages between."""

    queries: Tensor  # (heads, T, hd) as projected
    keys: Tensor  # (kv_heads, T, hd)
    values: Tensor  # (kv_heads, T, hd)
    queries_norm: Tensor | None  # (heads, T, hd) after q_norm
    keys_norm: Tensor | None  # (kv_heads, T, hd) after k_norm
    queries_rope: Tensor  # (heads, T, hd) what the scores read: turned, or as they were (NoPE)
    keys_rope: Tensor  # (kv_heads, T, hd)


def _split(t: Tensor, heads: int, head_dim: int) -> Tensor:
    """(..., T, heads · head_dim) → (..., heads, T, head_dim) (a leading batch passes through)."""
    return t.unflatten(-1, (heads, head_dim)).transpose(-3, -2)


@dataclass(frozen=True)
class Projection:
    """Block layer's q, k and v products and its q/k norms, resolved."""

    qkv: Products
    q_norm: Rows | None  # Qwen3, Gemma 3: over each head's own head_dim; OLMo 2: whole
    k_norm: Rows | None
    whole_norms: bool  # OLMo 2: one RMSNorm over every head's queries (keys) together
    heads: int
    kv_heads: int
    head_dim: int

    @classmethod
    def of(cls, weights: Named, spec: LlamaSpec, layer: int) -> Projection:
        """Block layer's projections and norms, as its spec asks."""
        name = f"layers.{layer}.self_attn"
        qkv = products_of(weights, [f"{name}.q_proj", f"{name}.k_proj", f"{name}.v_proj"])
        q_norm: Rows | None = None
        k_norm: Rows | None = None
        if spec.qk_norm_whole:  # plain RMSNorm, no offset
            q_norm = partial(rms_norm, scale=weights[f"{name}.q_norm.weight"], eps=spec.rms_eps)
            k_norm = partial(rms_norm, scale=weights[f"{name}.k_norm.weight"], eps=spec.rms_eps)
        elif spec.qk_norm:
            q_norm = norm_of(weights, spec, f"{name}.q_norm")
            k_norm = norm_of(weights, spec, f"{name}.k_norm")
        return cls(qkv, q_norm, k_norm, spec.qk_norm_whole, spec.num_heads, spec.kv_heads,
                   spec.head_dim)

    def __call__(self, x: Tensor, rope: tuple[Tensor, Tensor] | None) -> Heads:
        """q, k, v of x (T, d_model) split into heads, their norms, and RoPE where given."""
        hd = self.head_dim
        queries, keys, values = self.qkv(x)  # (T, h·hd), (T, kv·hd), (T, kv·hd)
        values = _split(values, self.kv_heads, hd)  # (kv, T, hd)
        queries_norm = keys_norm = None
        if self.whole_norms and self.q_norm is not None and self.k_norm is not None:
            queries_norm = _split(self.q_norm(queries), self.heads, hd)  # (heads, T, hd)
            keys_norm = _split(self.k_norm(keys), self.kv_heads, hd)  # (kv, T, hd)
        queries, keys = _split(queries, self.heads, hd), _split(keys, self.kv_heads, hd)
        if not self.whole_norms and self.q_norm is not None and self.k_norm is not None:
            queries_norm = self.q_norm(queries)  # (heads, T, hd)
            keys_norm = self.k_norm(keys)  # (kv, T, hd)
        q = queries if queries_norm is None else queries_norm  # (heads, T, hd)
        k = keys if keys_norm is None else keys_norm  # (kv, T, hd)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)  # turned by each position's angle
        return Heads(queries, keys, values, queries_norm, keys_norm, q, k)

    def row(self, x: Tensor, rope: RopeRow | None) -> tuple[Tensor, Tensor, Tensor]:
        """One token's (1, d_model) queries (heads, 1, hd), keys and values (kv, 1, hd) each,
        queries and keys turned: __call__'s values, bit for bit."""
        h, kv, hd = self.heads, self.kv_heads, self.head_dim
        if self.qkv.whole is None or not self.qkv.widths or self.q_norm is not None:
            heads = self(x, None)
            queries, keys = heads.queries_rope, heads.keys_rope  # (heads, 1, hd), (kv, 1, hd)
            if rope is not None:
                queries, keys = rope.turn(queries), rope.turn(keys)
            return queries, keys, heads.values
        # One stacked product [q | k | v] (1, (h + 2·kv)·hd): each head's row a view of it,
        # and the queries and keys, side by side, turned by one RoPE (elementwise: the same).
        y = self.qkv.whole(x).view(h + 2 * kv, 1, hd)  # (h + 2·kv, 1, hd)
        turned, values = y.split_with_sizes((h + kv, kv))  # (h + kv, 1, hd), (kv, 1, hd)
        if rope is not None:
            turned = rope.turn(turned)
        queries, keys = turned.split_with_sizes((h, kv))  # (h, 1, hd), (kv, 1, hd)
        return queries, keys, values


def project(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
            rope: tuple[Tensor, Tensor] | None) -> Heads:
    """Block layer's q, k, v of x (T, d_model), their q/k norms, and RoPE where it has one."""
    return Projection.of(weights, spec, layer)(x, rope)
