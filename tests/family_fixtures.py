"""Tiny random checkpoints of the newer decoder families (Gemma 2/3, Phi-3, GPT-NeoX, OLMo 2,
SmolLM3), each with its special feature switched on, and transformers' eager pass as reference."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tests.llama_fixtures import BASE, byte_level_tokenizer, sentencepiece_tokenizer

# rope_local_base_freq (sliding layers) far from rope_theta (global ones), so a layer read with
# the other one's base shows at once on a 20-token text.
GEMMA3_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
               "full_attention": {"rope_type": "default", "rope_theta": 10000.0}}
# Phi-3's longrope: per-frequency divisors; rotary dims 4 of head_dim 8 → 2 factors each.
PHI3_ROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
             "short_factor": [1.0, 1.7], "long_factor": [2.5, 6.0]}

# name → (model_type and settings, tokenizer kind). Every one: 3 layers, hidden 32 (64 for
# NeoX, so that a quarter of a head is 4 dims), 4 heads.
FAMILY_CASES: dict[str, tuple[dict[str, Any], str]] = {
    # Soft-capping small enough that tanh bends random scores; query_pre_attn_scalar 12 ≠
    # head_dim 8; sliding window 4 on layers 0 and 2; GQA 4:2; capped final logits.
    "gemma2": ({"model_type": "gemma2", "head_dim": 8, "query_pre_attn_scalar": 12,
                "attn_logit_softcapping": 2.0, "final_logit_softcapping": 2.5,
                "sliding_window": 4}, "sp"),
    # 2 local : 1 global, window 4, their own RoPE bases, per-head QK-norm, GQA, capped logits.
    "gemma3_text": ({"model_type": "gemma3_text", "head_dim": 8, "query_pre_attn_scalar": 8,
                     "sliding_window": 4, "final_logit_softcapping": 3.0,
                     "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
                     "rope_parameters": GEMMA3_ROPE}, "sp"),
    # Fused qkv_proj and gate_up_proj, GQA, longrope on half of each head: original_max 8 is
    # shorter than the text (long factors) and longer than SHORT_TEXT (short factors).
    "phi3": ({"model_type": "phi3", "rope_parameters": PHI3_ROPE,
              "original_max_position_embeddings": 8}, "sp"),
    # Fused per-head query_key_value, rotary on a quarter of each head, parallel residual.
    "gpt_neox": ({"model_type": "gpt_neox", "hidden_size": 64, "rotary_pct": 0.25,
                  "use_parallel_residual": True}, "byte"),
    "gpt_neox-serial": ({"model_type": "gpt_neox", "hidden_size": 64, "rotary_pct": 0.25,
                         "use_parallel_residual": False}, "byte"),
    # QK-norm over the whole projection, post-norms only, GQA.
    "olmo2": ({"model_type": "olmo2"}, "byte"),
    # Layer 1 has no positional encoding (no_rope_layers: 1 = RoPE, 0 = NoPE), GQA.
    "smollm3": ({"model_type": "smollm3", "no_rope_layers": [1, 0, 1]}, "byte"),
}
GEMMA = ("gemma2", "gemma3_text")
NOT_FOR = {"gpt_neox": ("num_key_value_heads",)}  # GPT-NeoX has no GQA
SHORT_TEXT = "The cat"  # at most original_max_position_embeddings (8) tokens for phi3


def model_type(name: str) -> str:
    """The model_type of FAMILY_CASES[name]."""
    return str(FAMILY_CASES[name][0]["model_type"])


def _settings(name: str) -> dict[str, Any]:
    settings = {**BASE, **FAMILY_CASES[name][0]}
    for key in NOT_FOR.get(str(settings["model_type"]), ()):
        settings.pop(key, None)
    return settings


def _randomise(model: Any, gemma: bool) -> None:
    """Norm gains near 1 (Gemma stores gain - 1), random biases, a small MLP output."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.copy_(torch.randn_like(param) * 0.5)
            elif "norm" in name:
                param.copy_(torch.randn_like(param) * 0.5 + (0.0 if gemma else 1.0))
            if "down_proj" in name or "dense_4h_to_h" in name:
                param.mul_(0.1)  # keeps the residual stream near 1 through the layers


def save_decoder(directory: Path, name: str, seed: int) -> Any:
    """Save FAMILY_CASES[name] (float32 safetensors and tokenizer.json); return it read back."""
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = _settings(name)
    kind = settings.pop("model_type")
    cfg = AutoConfig.for_model(kind, **settings)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    _randomise(model, kind in GEMMA)
    model.save_pretrained(directory, safe_serialization=True)
    tok = byte_level_tokenizer() if FAMILY_CASES[name][1] == "byte" else sentencepiece_tokenizer()
    tok.save(str(directory / "tokenizer.json"))
    return AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                attn_implementation="eager").eval()


def blocks(model: Any) -> list[Any]:
    """The decoder layers of a transformers causal LM of these families."""
    inner = model.gpt_neox if hasattr(model, "gpt_neox") else model.model
    return list(inner.layers)


def attention_module(block: Any) -> Any:
    """A decoder layer's self-attention module."""
    return block.attention if hasattr(block, "attention") else block.self_attn


def reference(model: Any, token_ids: list[int]) -> dict[str, Any]:
    """transformers' eager pass: per layer the attention weights (heads, T, T), the attention
    module's input and output (T, d) (output: o_proj / dense, before any post-norm and the
    residual add), the block's output (T, d); and the logits (T, vocab)."""
    got: dict[str, Any] = {"attn_input": [], "attn_out": [], "block_out": []}

    def keep_input(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        got["attn_input"].append((kwargs["hidden_states"] if "hidden_states" in kwargs
                                  else args[0])[0])

    hooks = []
    for block in blocks(model):
        attn = attention_module(block)
        hooks += [attn.register_forward_pre_hook(keep_input, with_kwargs=True),
                  attn.register_forward_hook(lambda _m, _i, y: got["attn_out"].append(y[0][0])),
                  block.register_forward_hook(lambda _m, _i, y: got["block_out"].append(
                      (y[0] if isinstance(y, tuple) else y)[0]))]
    try:
        with torch.no_grad():
            out = model(torch.tensor([token_ids]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    got["attentions"] = [a[0] for a in out.attentions]  # each (heads, T, T)
    got["logits"] = out.logits[0]  # (T, vocab)
    return got


# The reference stages below are written from the papers' formulas on the transformers
# module's own weights; tests check they give back transformers' attention weights.

def _rms(x: Tensor, weight: Tensor, eps: float, gemma: bool) -> Tensor:
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)  # (..., n)
    return normed * ((1.0 + weight) if gemma else weight)  # (..., n)


def _rope(x: Tensor, theta: float, dims: int, divisors: Tensor | None,
          scale: float) -> Tensor:
    """rotate_half RoPE on the first `dims` of each head of x (heads, T, hd)."""
    positions = torch.arange(x.shape[1], dtype=x.dtype)  # (T,)
    inv_freq = 1.0 / (theta ** (torch.arange(0, dims, 2, dtype=x.dtype) / dims))  # (dims/2,)
    if divisors is not None:
        inv_freq = inv_freq / divisors  # longrope: one divisor per frequency
    angles = positions[:, None] * inv_freq[None, :]  # (T, dims/2)
    cos, sin = angles.cos() * scale, angles.sin() * scale  # (T, dims/2)
    rot, rest = x[..., :dims], x[..., dims:]  # (heads, T, dims), (heads, T, hd - dims)
    first, second = rot[..., :dims // 2], rot[..., dims // 2:]  # each (heads, T, dims/2)
    turned = torch.cat([first * cos - second * sin, second * cos + first * sin], -1)
    return torch.cat([turned, rest], -1)  # (heads, T, hd)


def rope_of(model: Any, layer: int, num_tokens: int) -> dict[str, Any] | None:
    """How layer turns its queries and keys (theta, dims, divisors, scale); None: NoPE."""
    cfg = model.config
    kind = cfg.model_type
    if kind == "smollm3" and not cfg.no_rope_layers[layer]:
        return None
    params = cfg.rope_parameters
    if kind == "gemma3_text":
        params = params[cfg.layer_types[layer]]
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    dims = int(head_dim * params.get("partial_rotary_factor", 1.0))
    divisors, scale = None, 1.0
    if params.get("rope_type") == "longrope":
        original = cfg.original_max_position_embeddings
        long = num_tokens > original
        divisors = torch.tensor(params["long_factor" if long else "short_factor"])
        factor = cfg.max_position_embeddings / original
        scale = math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0
    return {"theta": float(params["rope_theta"]), "dims": dims, "divisors": divisors,
            "scale": scale}


def window_of(model: Any, layer: int) -> int | None:
    """layer's sliding window (query i sees keys i - w < j <= i), None: full causal."""
    cfg = model.config
    types = list(getattr(cfg, "layer_types", None) or [])
    if cfg.model_type in GEMMA:
        return cfg.sliding_window if types[layer] == "sliding_attention" else None
    if cfg.model_type == "phi3":
        return cfg.sliding_window
    if cfg.model_type == "smollm3" and cfg.use_sliding_window:
        return cfg.sliding_window if types[layer] == "sliding_attention" else None
    return None


def hidden_mask(num_tokens: int, window: int | None) -> Tensor:
    """True where query i may not look: j > i, and j <= i - window with a window."""
    i = torch.arange(num_tokens)[:, None]  # (T, 1)
    j = torch.arange(num_tokens)[None, :]  # (1, T)
    hidden = j > i  # (T, T)
    if window is not None:
        hidden = hidden | (j <= i - window)  # (T, T)
    return hidden


def _split(model: Any, attn: Any, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The projections q (T, H·hd), k, v (T, K·hd) from the module's own weights."""
    cfg = model.config
    heads = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", heads) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    if cfg.model_type == "gpt_neox":
        qkv = torch.nn.functional.linear(x, attn.query_key_value.weight, attn.query_key_value.bias)
        per_head = qkv.view(x.shape[0], heads, 3, head_dim)  # (T, H, [q k v], hd)
        q, k, v = (per_head[:, :, i].reshape(x.shape[0], -1) for i in range(3))
        return q, k, v
    if cfg.model_type == "phi3":
        qkv = x @ attn.qkv_proj.weight.T  # (T, (H + 2K)·hd)
        return (qkv[:, :heads * head_dim], qkv[:, heads * head_dim:(heads + kv) * head_dim],
                qkv[:, (heads + kv) * head_dim:])
    out = []
    for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
        out.append(torch.nn.functional.linear(x, proj.weight, proj.bias))
    return out[0], out[1], out[2]


@torch.no_grad()
def stages(model: Any, layer: int, attn_input: Tensor) -> dict[str, Any]:
    """Every stage of layer's attention on attn_input (T, d), from the formulas: queries, keys,
    values (heads, T, hd; kv heads repeated for each query head), queries_norm/keys_norm,
    queries_rope/keys_rope (None where the family or layer lacks them), scores, scaled, capped
    (None without soft-capping), hidden (T, T) mask, weights."""
    cfg = model.config
    kind = cfg.model_type
    attn = attention_module(blocks(model)[layer])
    heads = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", heads) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    num_tokens = attn_input.shape[0]
    x = attn_input
    q, k, v = _split(model, attn, x)  # (T, H·hd), (T, K·hd), (T, K·hd)
    q_norm = k_norm = None
    if kind == "olmo2":  # over the whole projection, before the head split
        eps = cfg.rms_norm_eps
        q_norm = _rms(q, attn.q_norm.weight, eps, False)  # (T, H·hd)
        k_norm = _rms(k, attn.k_norm.weight, eps, False)  # (T, K·hd)

    def per_head(t: Tensor, n: int) -> Tensor:
        return t.view(num_tokens, n, head_dim).transpose(0, 1)  # (n, T, hd)

    queries, keys, values = per_head(q, heads), per_head(k, kv), per_head(v, kv)
    if q_norm is not None and k_norm is not None:
        q_norm, k_norm = per_head(q_norm, heads), per_head(k_norm, kv)
    if kind == "gemma3_text":  # per head, over head_dim, (1 + w)
        q_norm = _rms(queries, attn.q_norm.weight, cfg.rms_norm_eps, True)
        k_norm = _rms(keys, attn.k_norm.weight, cfg.rms_norm_eps, True)
    q_in = queries if q_norm is None else q_norm
    k_in = keys if k_norm is None else k_norm
    rope = rope_of(model, layer, num_tokens)
    q_rope = k_rope = None
    if rope is not None:
        q_rope = _rope(q_in, rope["theta"], rope["dims"], rope["divisors"], rope["scale"])
        k_rope = _rope(k_in, rope["theta"], rope["dims"], rope["divisors"], rope["scale"])
    share = heads // kv

    def rep(t: Tensor | None) -> Tensor | None:
        return None if t is None else t.repeat_interleave(share, 0)  # (heads, T, hd)

    q_used = q_in if q_rope is None else q_rope
    k_used = rep(k_in if k_rope is None else k_rope)
    assert k_used is not None
    scores = q_used @ k_used.transpose(-2, -1)  # (heads, T, T)
    scalar = cfg.query_pre_attn_scalar if kind in GEMMA else head_dim
    scaled = scores / math.sqrt(scalar)  # (heads, T, T)
    cap = cfg.attn_logit_softcapping if kind == "gemma2" else None  # gemma3 ignores its own
    capped = None if cap is None else cap * torch.tanh(scaled / cap)  # (heads, T, T)
    hidden = hidden_mask(num_tokens, window_of(model, layer))  # (T, T)
    masked = (scaled if capped is None else capped).masked_fill(hidden, -torch.inf)
    weights = torch.softmax(masked, -1)  # (heads, T, T)
    return {"queries": queries, "keys": rep(keys), "values": rep(values),
            "queries_norm": q_norm, "keys_norm": rep(k_norm),
            "queries_rope": q_rope, "keys_rope": rep(k_rope), "scores": scores,
            "scaled": scaled, "capped": capped, "hidden": hidden, "weights": weights}


@torch.no_grad()
def final_logits(model: Any, hidden: Tensor, capped: bool = True) -> Tensor:
    """The final norm, the unembedding and (when capped) any final soft-capping of hidden."""
    cfg = model.config
    inner = model.gpt_neox if hasattr(model, "gpt_neox") else model.model
    if cfg.model_type == "gpt_neox":
        norm = inner.final_layer_norm
        normed = torch.nn.functional.layer_norm(hidden, norm.normalized_shape, norm.weight,
                                                norm.bias, norm.eps)
    else:
        eps = cfg.rms_norm_eps
        normed = _rms(hidden, inner.norm.weight, eps, cfg.model_type in GEMMA)
    logits = normed @ model.lm_head.weight.T  # (T, vocab)
    cap = getattr(cfg, "final_logit_softcapping", None) if capped else None
    return logits if cap is None else cap * torch.tanh(logits / cap)
