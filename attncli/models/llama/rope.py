"""Rotary position embeddings (RoPE): the frequencies of each rope_type, and the rotation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.models.llama.block import NATIVE_NORM, _native
from attncli.models.llama.config import LlamaSpec, Rope


def base_inv_freq(theta: float, rotary_dim: int) -> Tensor:
    """θ_k = theta^(-2k/dim): one angular speed per pair of dimensions."""
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim  # (dim/2,)
    return 1.0 / (theta**exponents)  # (dim/2,)


def _llama3(inv_freq: Tensor, scaling: dict[str, float]) -> Tensor:
    """Llama 3.1: slow (long-wavelength) pairs divided by factor, fast ones kept, a ramp between."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq  # (dim/2,)
    slow = torch.where(wavelen > old_context / low, inv_freq / factor, inv_freq)  # (dim/2,)
    smooth = (old_context / wavelen - low) / (high - low)  # (dim/2,) 0 → slow end, 1 → fast end
    ramp = (1 - smooth) * slow / factor + smooth * slow  # (dim/2,)
    medium = (wavelen >= old_context / high) & (wavelen <= old_context / low)  # (dim/2,)
    return torch.where(medium, ramp, slow)  # (dim/2,)


def inv_freq(spec: LlamaSpec, num_tokens: int, rope: Rope | None = None) -> Tensor:
    """The angular speed of each rotated pair, after the config's rope_scaling (rope: one
    layer's own, else the spec's)."""
    rope = rope or Rope(spec.rope_theta, spec.rope_scaling, spec.rotary_dim)
    scaling, dim, theta = rope.scaling, rope.rotary_dim, rope.theta
    rope_type = scaling.get("rope_type", "default")
    if rope_type == "dynamic":
        # NTK-aware: past the trained length, raise the base so the slowest pair still fits.
        seq_len = max(num_tokens, spec.max_positions)
        factor = scaling["factor"]
        try:
            base = theta * ((factor * seq_len / spec.max_positions) - (factor - 1)) ** (
                dim / (dim - 2))
        except OverflowError:
            base = math.inf
        if not base < 3.4e38:  # float32's largest: the frequencies are computed in float32
            raise AttnCliError(f"dynamic RoPE on {num_tokens:,} tokens needs a base past what "
                               f"float32 holds (rope_theta {theta:g}, factor "
                               f"{factor:g}, max_position_embeddings {spec.max_positions:,})")
        return base_inv_freq(base, dim)
    if rope_type == "longrope":  # Phi-3: the long factors once the text outgrows the original
        key = "long_factor" if num_tokens > scaling["original_max_position_embeddings"] \
            else "short_factor"
        ext = torch.tensor(scaling[key], dtype=torch.float32)  # (dim/2,)
        exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim  # (dim/2,)
        return 1.0 / (ext * theta**exponents)  # (dim/2,)
    freqs = base_inv_freq(theta, dim)  # (dim/2,)
    if rope_type == "linear":
        return freqs / scaling["factor"]  # positions squeezed by factor
    if rope_type == "llama3":
        return _llama3(freqs, scaling)
    if rope_type == "freq_factors":  # llama.cpp's rope_freqs: θ_k / factor_k
        return freqs / torch.tensor(scaling["freq_factors"], dtype=torch.float32)  # (dim/2,)
    return freqs


def rope_tables(spec: LlamaSpec, num_tokens: int,
                rope: Rope | None = None) -> tuple[Tensor, Tensor]:
    """cos and sin of every position's angles, each (T, rotary_dim), halves repeated."""
    rope = rope or Rope(spec.rope_theta, spec.rope_scaling, spec.rotary_dim)
    positions = torch.arange(num_tokens, dtype=torch.float32)  # (T,)
    angles = positions[:, None] * inv_freq(spec, num_tokens, rope)[None, :]  # (T, dim/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, dim) pair k is dims k and k + dim/2
    factor = rope.scaling.get("attention_factor")  # LongRoPE scales cos and sin
    if factor is None:
        return angles.cos(), angles.sin()
    return angles.cos() * factor, angles.sin() * factor


class LayerRopes:
    """Each layer's cos and sin tables, built once per distinct rope; None for a NoPE layer."""

    def __init__(self, spec: LlamaSpec, num_tokens: int) -> None:
        self.spec, self.num_tokens = spec, num_tokens
        self._built: dict[int, tuple[Tensor, Tensor]] = {}

    def __getitem__(self, layer: int) -> tuple[Tensor, Tensor] | None:
        rope = self.spec.rope_of(layer)
        if rope is None:
            return None
        key = next((i for i in range(layer + 1) if self.spec.rope_of(i) == rope), layer)
        if key not in self._built:
            self._built[key] = rope_tables(self.spec, self.num_tokens, rope)
        return self._built[key]


def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) → (-x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)  # each (..., dim/2)
    return torch.cat((-x2, x1), dim=-1)  # (..., dim)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Turn each pair of x (heads, T, head_dim) by its position's angle; extra dims pass through.

    A query at position i and a key at position j then meet at angle i - j: their dot product
    depends on how far apart they are, not where they are.
    """
    rotary_dim = cos.shape[-1]
    if rotary_dim == x.shape[-1]:  # the whole head turns: no tail to put back
        return x * cos + rotate_half(x) * sin  # (heads, T, head_dim)
    turned, kept = x[..., :rotary_dim], x[..., rotary_dim:]  # partial rotary keeps the tail
    turned = turned * cos + rotate_half(turned) * sin  # (heads, T, rotary_dim)
    if kept.shape[-1] == 0:  # the whole head turned: no copy to join an empty tail
        return turned
    return torch.cat((turned, kept), dim=-1)  # (heads, T, head_dim)


def native_turn(x: Tensor, cos: Tensor, sin: Tensor) -> bool:
    """Whether _rows.c's rope_turn takes x (..., head_dim) with one row of cos and sin:
    float32 on the CPU, contiguous, not empty (an empty tensor has no buffer), an even
    head_dim, no gradient asked for."""
    return NATIVE_NORM and _native is not None and x.dtype == cos.dtype == sin.dtype \
        == torch.float32 and x.is_cpu and cos.is_cpu and sin.is_cpu and x.numel() > 0 \
        and x.shape[-1] % 2 == 0 and cos.numel() == sin.numel() == x.shape[-1] \
        and x.is_contiguous() and cos.is_contiguous() and sin.is_contiguous() \
        and not (torch.is_grad_enabled() and x.requires_grad)


@dataclass(frozen=True)
class RopeRow:
    """Position t's RoPE, (1, rotary_dim) each. Where the whole head turns, sin is stored with
    the sign of the half it multiplies, (-sin₁, sin₂): x·cos + rotate_half(x)·sin is then
    x·cos + (x₂, x₁)·(-sin₁, sin₂), the swapped halves one roll. The same products and sum as
    apply_rope, bit for bit (an addcmul would round once less: under llama.cpp's numerics that
    ulp moves float16 keys and 8-bit activations, and the answer with them)."""

    cos: Tensor
    sin: Tensor  # signed where whole, else as the tables hold it
    whole: bool

    def turn(self, x: Tensor) -> Tensor:
        """apply_rope(x, cos, sin) on x (heads, 1, head_dim): one C call, else 4 torch calls."""
        if not self.whole:  # partial rotary: the tail is put back
            return apply_rope(x, self.cos, self.sin)
        native = _native if native_turn(x, self.cos, self.sin) else None
        if native is not None:  # _rows.c: the same products and sum, rounded as torch's
            out = torch.empty_like(x)  # (heads, 1, head_dim)
            native.rope_turn(x.data_ptr(), self.cos.data_ptr(), self.sin.data_ptr(),
                             out.data_ptr(), x.numel() // x.shape[-1], x.shape[-1])
            return out
        return x * self.cos + x.roll(x.shape[-1] // 2, -1) * self.sin  # (heads, 1, head_dim)


class StepRopes:
    """A decode step's RoPE rows: each layer's tables looked up once (LayerRopes searches the
    layers before it on every lookup), sin signed once per distinct table where the whole head
    turns, and position t's row cut once for every layer sharing the table."""

    def __init__(self, ropes: LayerRopes, head_dim: int) -> None:
        self.ropes, self.head_dim = ropes, head_dim
        self._tables: dict[int, tuple[Tensor, Tensor, bool] | None] = {}
        self._signed_of: dict[int, tuple[Tensor, Tensor, bool]] = {}  # by id of the cos table
        self._rows: dict[int, tuple[int, RopeRow]] = {}  # by id of the signed tables: t, row

    def row(self, layer: int, t: int) -> RopeRow | None:
        """Layer's RoPE at position t, or None (NoPE)."""
        if layer not in self._tables:
            self._tables[layer] = self._signed(layer)
        tables = self._tables[layer]
        if tables is None:
            return None
        last = self._rows.get(id(tables))
        if last is not None and last[0] == t:
            return last[1]
        cos, sin, whole = tables
        row = RopeRow(cos[t:t + 1], sin[t:t + 1], whole)  # (1, rotary_dim) each
        self._rows[id(tables)] = t, row
        return row

    def _signed(self, layer: int) -> tuple[Tensor, Tensor, bool] | None:
        """Layer's (T, rotary_dim) cos and sin; sin as (-sin₁, sin₂) if the whole head turns."""
        tables = self.ropes[layer]
        if tables is None:
            return None
        cos, sin = tables
        if id(cos) not in self._signed_of:  # layers sharing a rope share LayerRopes' tables
            if cos.shape[-1] != self.head_dim:
                self._signed_of[id(cos)] = cos, sin, False
            else:
                half = sin.shape[-1] // 2
                signed = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)  # (T, rotary)
                self._signed_of[id(cos)] = cos, signed, True
        return self._signed_of[id(cos)]
