"""The Llama block's parts every family on it shares: its norms, its MLP and its shortcuts.

Each family declares in its spec which of them it has (Gemma's four norms, OLMo 2's norms
after attention and MLP only, GPT-NeoX's LayerNorm and parallel MLP); the code asks the spec.
Each part can be resolved once (norm_of, linear_of, products_of, Finish.of: its weights and
names looked up, its branches taken), as a held decoder does for every step; the functions
that take weights and a name resolve it for the one call.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.models.activations import activation
from attncli.models.llama.config import LlamaSpec
from attncli.models.sources.mapped import Mapped, Piece
from attncli.models.sources.named import Named

Rows = Callable[[Tensor], Tensor]  # a part of the block on rows (..., d_in) → (..., d_out)

_native: ModuleType | None
try:
    import attncli.models.llama._rows as _native
except ImportError:  # built without a C compiler: torch's rms_norm
    _native = None
NATIVE_NORM = _native is not None and os.environ.get("ATTNCLI_FUSED", "1") != "0"
_NATIVE_MOST = 1 << 15  # longer rows torch may sum on several threads, in another order


@cache
def _lanes() -> int | None:
    """The vector width torch sums float32 rows with on this build (8 for its AVX2 and default
    kernels, which its AVX-512 level keeps for sums; 16 where a build has its own): the one at
    which _rows.c gives F.rms_norm's bits on 200 random rows of four widths (an order one
    row tells apart from another only about one time in five); None where neither does."""
    assert _native is not None
    generator = torch.Generator("cpu").manual_seed(44)
    # float32 on the CPU whatever torch.set_default_dtype or set_default_device say: the C
    # reads float32 buffers in the CPU's memory
    cases = [(torch.randn(rows, d, generator=generator, dtype=torch.float32,
                          device="cpu") * size,  # (rows, d)
              torch.randn(d, generator=generator, dtype=torch.float32, device="cpu"))  # (d,)
             for rows, d, size in ((80, 576, 1.0), (40, 2048, 30.0), (40, 100, 1e-3),
                                   (40, 4100, 1.0))]
    for lanes in (8, 16):
        for x, scale in cases:
            out = torch.empty_like(x)  # (rows, d)
            _native.rms_norm(x.data_ptr(), scale.data_ptr(), out.data_ptr(), x.shape[0],
                             x.shape[1], 1e-5, lanes)
            if not torch.equal(out, F.rms_norm(x, scale.shape, scale, 1e-5)):
                break
        else:
            return lanes
    return None


def _native_rows(x: Tensor, scale: Tensor) -> int | None:
    """The lanes to call _rows.c with on x (..., d) and scale (d,): float32 on the CPU,
    contiguous, no gradient asked for, rows of lanes to _NATIVE_MOST values; else None."""
    if not NATIVE_NORM or x.device.type != "cpu" or scale.device.type != "cpu" \
            or scale.dim() != 1 or x.dim() < 1 or x.shape[-1] != scale.shape[0] \
            or not x.is_contiguous() or not scale.is_contiguous() \
            or (torch.is_grad_enabled() and (x.requires_grad or scale.requires_grad)):
        return None
    lanes = _lanes()
    return lanes if lanes is not None and lanes <= x.shape[-1] < _NATIVE_MOST else None


def rms_norm(x: Tensor, scale: Tensor, eps: float) -> Tensor:
    """x / RMS(x) · scale over the last dimension: LayerNorm without the mean or the shift."""
    if x.dtype == scale.dtype == torch.float32:
        lanes = _native_rows(x, scale)
        if lanes is not None and _native is not None:  # one C call (_rows.c), torch's bits
            out = torch.empty_like(x)  # (..., d)
            if out.numel():
                _native.rms_norm(x.data_ptr(), scale.data_ptr(), out.data_ptr(),
                                 x.numel() // x.shape[-1], x.shape[-1], eps, lanes)
            return out
        return F.rms_norm(x, scale.shape, scale, eps)  # (..., d) the same formula, one call
    variance = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
    return scale * (x * torch.rsqrt(variance + eps))  # (..., d)


def norm_of(weights: Named, spec: LlamaSpec, name: str) -> Rows:
    """The family's norm named name: RMSNorm (Gemma's by 1 + w, added once), or LayerNorm."""
    scale = weights[f"{name}.weight"]  # (d,)
    if spec.layer_norm:  # GPT-NeoX: mean removed, then scale and shift
        bias = weights[f"{name}.bias"] if f"{name}.bias" in weights else None
        return partial(F.layer_norm, normalized_shape=scale.shape, weight=scale, bias=bias,
                       eps=spec.rms_eps)
    return partial(rms_norm, scale=scale + spec.norm_offset if spec.norm_offset else scale,
                   eps=spec.rms_eps)


def block_norm(weights: Named, spec: LlamaSpec, name: str, x: Tensor) -> Tensor:
    """The family's norm named name on x (..., d)."""
    return norm_of(weights, spec, name)(x)  # (..., d)


def linear_of(weights: Named, name: str) -> Rows:
    """x @ Wᵀ (+ b when the checkpoint has one): nn.Linear on weights read from disk, or on
    the file's quantized blocks where the source computes on them (a GGUF on the CPU)."""
    bias = weights[f"{name}.bias"] if f"{name}.bias" in weights else None
    quantized = weights.quantized(f"{name}.weight")
    if quantized is not None:
        return partial(quantized.linear, bias=bias)  # (..., d_out)
    return partial(F.linear, weight=weights[f"{name}.weight"], bias=bias)


def linear(weights: Named, name: str, x: Tensor) -> Tensor:
    """linear_of(weights, name) on x (..., d_in): (..., d_out)."""
    return linear_of(weights, name)(x)


@dataclass(frozen=True)
class Products:
    """x through several named linears: one product cut into each one's columns where one
    matrix holds them all (a held stack: widths; Phi-3's and NeoX's fused tensors: pieces),
    else one product each (parts)."""

    parts: tuple[Rows, ...] = ()
    whole: Rows | None = None  # (..., Σ rows): every name's features in one product
    widths: tuple[int, ...] = ()  # a stack's: each name's columns of whole's, in order
    pieces: tuple[Piece, ...] = ()  # a fused tensor's: where each name's columns lie

    def __call__(self, x: Tensor) -> list[Tensor]:
        if self.whole is None:
            return [part(x) for part in self.parts]
        y = self.whole(x)  # (..., Σ rows)
        if self.pieces:
            return [piece.columns(y) for piece in self.pieces]  # each (..., its rows)
        return list(y.split_with_sizes(self.widths, dim=-1))


def products_of(weights: Named, names: list[str]) -> Products:
    """The named linears resolved. Where one stored tensor holds them all (Phi-3's qkv_proj
    and gate_up_proj, NeoX's query_key_value), one product with it, cut into each one's
    columns: the same dot products, without copying the pieces out of the weight."""
    mapped = weights if isinstance(weights, Mapped) else None
    fused = None if mapped is None else mapped.fused([f"{n}.weight" for n in names])
    biases = [f"{n}.bias" in weights for n in names]
    if mapped is None or fused is None or (any(biases) and not all(biases)):
        stack = None if any(biases) else weights.stacked([f"{n}.weight" for n in names])
        if stack is None:
            return Products(parts=tuple(linear_of(weights, n) for n in names))
        # Held matrices stacked: one product (T, Σ rows), split into each one's columns.
        return Products(whole=stack.linear,
                        widths=tuple(weights.shape(f"{n}.weight")[0] for n in names))
    whole, pieces = fused
    bias = None
    if all(biases):
        bias_fused = mapped.fused([f"{n}.bias" for n in names])
        if bias_fused is None:
            return Products(parts=tuple(linear_of(weights, n) for n in names))
        bias = weights[bias_fused[0]]  # (rows,)
    quantized = weights.quantized(whole)
    product = partial(F.linear, weight=weights[whole], bias=bias) if quantized is None \
        else partial(quantized.linear, bias=bias)  # (T, rows) every piece's features
    return Products(whole=product, pieces=tuple(pieces))


@dataclass(frozen=True)
class FeedForward:
    """SwiGLU down(act(gate(x)) · up(x)), or down(act(up(x))) where the MLP has no gate."""

    act: Rows
    gate_up: Products  # (gate, up), or (up,) alone
    down: Rows

    @classmethod
    def of(cls, weights: Named, spec: LlamaSpec, block: str) -> FeedForward:
        """Block's MLP resolved."""
        act = activation(spec.hidden_act, "hidden_act")
        gate_up = products_of(weights, [f"{block}.mlp.gate_proj", f"{block}.mlp.up_proj"]) \
            if spec.gated_mlp else Products(parts=(linear_of(weights, f"{block}.mlp.up_proj"),))
        return cls(act, gate_up, linear_of(weights, f"{block}.mlp.down_proj"))

    def __call__(self, x: Tensor) -> Tensor:
        features = self.gate_up(x)  # (T, d_ff) each
        hidden = self.act(features[0]) if len(features) == 1 \
            else self.act(features[0]) * features[1]  # (T, d_ff)
        return self.down(hidden)  # (T, d_model)


def attention_norm(weights: Named, spec: LlamaSpec, layer: int) -> Rows | None:
    """Block layer's input_layernorm, or None where attention reads the stream itself (OLMo 2)."""
    if not spec.pre_attn_norm:
        return None
    return norm_of(weights, spec, f"layers.{layer}.input_layernorm")


def attention_input(weights: Named, spec: LlamaSpec, layer: int, x: Tensor) -> Tensor:
    """What block layer's attention reads: input_layernorm(x), or x itself (OLMo 2)."""
    norm = attention_norm(weights, spec, layer)
    return x if norm is None else norm(x)  # (T, d_model)


@dataclass(frozen=True)
class Finish:
    """The rest of a block after attention: the family's norms, the MLP and both shortcuts."""

    ff: FeedForward
    attn_output_norm: Rows | None  # Gemma, OLMo 2: on attention's output
    mlp_input_norm: Rows | None  # post_attention_layernorm (the MLP's input)
    mlp_output_norm: Rows | None  # Gemma, OLMo 2: on the MLP's output
    parallel: bool  # GPT-NeoX: the MLP reads the block's input, not attention's output

    @classmethod
    def of(cls, weights: Named, spec: LlamaSpec, layer: int) -> Finish:
        """Block layer's finish resolved."""
        block = f"layers.{layer}"

        def norm(name: str, used: bool) -> Rows | None:
            return norm_of(weights, spec, f"{block}.{name}") if used else None

        return cls(FeedForward.of(weights, spec, block),
                   norm("attn_output_norm", spec.post_attn_norm),
                   norm("post_attention_layernorm", spec.pre_mlp_norm or spec.parallel),
                   norm("mlp_output_norm", spec.post_mlp_norm), spec.parallel)

    def __call__(self, x: Tensor, attn_out: Tensor) -> Tensor:
        """The stream leaving the block (T, d_model), for input x and attention's attn_out."""
        if self.attn_output_norm is not None:
            attn_out = self.attn_output_norm(attn_out)  # (T, d_model)
        if self.parallel:  # GPT-NeoX: the MLP reads the block's input, not attention's output
            assert self.mlp_input_norm is not None
            return self.ff(self.mlp_input_norm(x)) + attn_out + x  # (T, d_model)
        x = x + attn_out  # (T, d_model) shortcut around attention
        normed = x if self.mlp_input_norm is None else self.mlp_input_norm(x)  # (T, d_model)
        mlp_out = self.ff(normed)  # (T, d_model)
        if self.mlp_output_norm is not None:
            mlp_out = self.mlp_output_norm(mlp_out)
        return x + mlp_out  # (T, d_model)


def finish_block(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
                 attn_out: Tensor) -> Tensor:
    """The rest of block layer after attention wrote attn_out (T, d_model) for input x:
    the family's norms, the MLP and both shortcuts. Returns the stream leaving the block."""
    return Finish.of(weights, spec, layer)(x, attn_out)


def embed(weights: Named, spec: LlamaSpec, token_ids: list[int]) -> Tensor:
    """The token embeddings (T, d_model), times √d_model in Gemma; no position embeddings."""
    x = weights.rows("embed_tokens.weight", token_ids)  # (T, d_model)
    return x if spec.embed_scale == 1.0 else x * spec.embed_scale  # (T, d_model)
