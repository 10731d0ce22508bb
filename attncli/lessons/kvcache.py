"""Decoding token by token with a key/value cache, each step checked against the full causal pass.

At step t the query is token t and the cache holds the keys and values of tokens 0..t: nothing
before t is projected again. Without the cache, every step rebuilds the prefix's keys and values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from attncli.core.request import Request, Route
from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.lessons.budget import check_kvcache, check_model_kvcache
from attncli.lessons.setup import (
    Lesson,
    build,
    finish_context,
    heads_qkv,
    lesson_config,
    max_abs,
    source_of,
    within,
)
from attncli.models.decoding import Shape, decode_steps
from attncli.models.family import Model
from attncli.models.hidden.passes import cached_pass
from attncli.records.lessons import KVCacheResult, KVStep


@dataclass
class Decoded:
    """What a decoder computed: per step weights (heads, t+1), context (d_out,), cache bytes."""

    weights: list[Tensor] = field(default_factory=list)
    context: list[Tensor] = field(default_factory=list)
    cache_bytes: list[int] = field(default_factory=list)


@torch.no_grad()
def decode_variant(lesson: Lesson) -> Decoded:
    """A chapter-3 causal variant, one token at a time, with its keys and values cached."""
    out = Decoded()
    heads, head_dim = lesson.heads, lesson.head_dim
    k_cache = lesson.x.new_empty(heads, 0, head_dim)  # (heads, 0, head_dim)
    v_cache = lesson.x.new_empty(heads, 0, head_dim)  # (heads, 0, head_dim)
    for t in range(lesson.x.shape[0]):
        # Only token t is projected; the cache already holds keys and values of 0..t-1.
        queries, keys, values = heads_qkv(lesson, lesson.x[t:t + 1])  # each (heads, 1, hd)
        k_cache = torch.cat([k_cache, keys], dim=1)  # (heads, t+1, head_dim)
        v_cache = torch.cat([v_cache, values], dim=1)  # (heads, t+1, head_dim)
        # No mask: the cache holds only keys 0..t, the ones query t may see.
        attn_scores = queries @ k_cache.transpose(1, 2) * lesson.scale  # (heads, 1, t+1)
        attn_weights = torch.softmax(attn_scores, dim=-1)  # (heads, 1, t+1)
        heads_context = (attn_weights @ v_cache).transpose(0, 1).reshape(1, -1)  # (1, d_out)
        out.weights.append(attn_weights[:, 0])  # (heads, t+1)
        out.context.append(finish_context(lesson, heads_context)[0])  # (d_out,)
        out.cache_bytes.append(k_cache.nbytes + v_cache.nbytes)
    return out


def variant_shape(lesson: Lesson) -> Shape:
    """A chapter-3 variant is one layer: q, k, v projections, and out_proj for multihead."""
    d_in, d_out = lesson.x.shape[1], lesson.module.d_out
    out_proj = d_out * d_out if hasattr(lesson.module, "out_proj") else 0
    return Shape(layers=1, d_in=d_in, d_out=d_out, token_macs=3 * d_in * d_out + out_proj)


@torch.no_grad()
def full_pass(lesson: Lesson) -> tuple[Tensor, Tensor]:
    """The ordinary causal forward pass: weights (heads, T, T), context (T, d_out)."""
    out = lesson.module(lesson.x)
    return out.weights, out.context


def check_variant(variant: str, causal: bool) -> None:
    """A KV cache needs causal attention: otherwise each new token changes the earlier rows."""
    if not causal:
        raise AttnCliError(
            f"kvcache needs a causal variant (causal or multihead; got {variant!r}): without "
            "the mask every token sees later ones, so earlier rows change as tokens arrive")


def assemble(config: dict[str, Any], tokens: list[TokenInfo], shape: Shape, decoded: Decoded,
             full: tuple[Tensor, Tensor]) -> KVCacheResult:
    """Plain steps, the check of each against row t of the full pass, and the totals."""
    full_weights, full_context = full  # (heads, T, T), (T, d_out)
    steps, diff, context_diff, ok = [], 0.0, 0.0, True
    for t, (weights, context) in enumerate(zip(decoded.weights, decoded.context, strict=True)):
        later = full_weights[:, t, t + 1:]  # (heads, T - t - 1) the keys the step has not seen
        diff = max(diff, max_abs(weights, full_weights[:, t, :t + 1]), max_abs(later, 0 * later))
        context_diff = max(context_diff, max_abs(context, full_context[t]))
        # Through a model's blocks, float32 rounding of one-row and whole-text products adds up
        # layer by layer, relative to each context row's size.
        ok = ok and within(weights, full_weights[:, t, :t + 1]) and within(later, 0 * later) \
            and within(context, full_context[t], rows=True)
        steps.append(KVStep(t, tokens[t].text, t + 1, decoded.cache_bytes[t], weights.tolist(),
                            context.tolist(), shape.step_macs(t + 1, True),
                            shape.step_macs(t + 1, False)))
    cached = sum(s.macs_cached for s in steps)
    recompute = sum(s.macs_recompute for s in steps)
    totals = {"tokens": len(steps), "layers": shape.layers,
              "first_step_macs": steps[0].macs_cached,
              "last_step_macs_cached": steps[-1].macs_cached,
              "last_step_macs_recompute": steps[-1].macs_recompute,
              "macs_cached": cached, "macs_recompute": recompute,
              "prefill_macs": prefill_macs(shape, len(steps)),
              "cache_bytes": steps[-1].cache_bytes,
              "weights_max_abs_diff": diff, "context_max_abs_diff": context_diff}
    return KVCacheResult(config, tokens, steps, diff, context_diff, totals, ok)


def prefill_macs(shape: Shape, num_tokens: int) -> int:
    """One causal pass over all tokens at once: each layer, every token, half the score matrix."""
    causal_cells = num_tokens * (num_tokens + 1) // 2  # query i sees keys 0..i
    return shape.layers * (num_tokens * shape.token_macs + 2 * causal_cells * shape.d_out)


def kvcache(lesson: Lesson, config: dict[str, Any]) -> KVCacheResult:
    """Decode a chapter-3 causal variant step by step and check it against its full pass."""
    check_variant(config["variant"], lesson.causal)
    check_kvcache(lesson.x.shape[0], lesson.heads, lesson.module.d_out, source_of(config))
    return assemble(config, lesson.tokens, variant_shape(lesson), decode_variant(lesson),
                    full_pass(lesson))


def kvcache_lesson(req: Request, head: int = 0) -> KVCacheResult:
    """`attncli kvcache` on what req runs: its checkpoint, or its chapter-3 variant; head, the
    head shown, is refused when the run has no such head."""
    if req.route is Route.checkpoint:
        result = kvcache_model(req)
    else:
        result = kvcache(build(req), lesson_config(req))
    heads_run = len(result.steps[0].weights)
    if head >= heads_run:
        raise AttnCliError(f"--head {head} is out of range (use 0..{heads_run - 1})")
    return result


def open_decoder(req: Request, what: str) -> Model:
    """The request's checkpoint, refused before its weights are read when its attention is
    bidirectional (an encoder): a key/value cache needs causal attention."""
    from attncli.models.family import open_family
    from attncli.models.sources.base import config_named

    if req.model is None or req.text is None:
        raise AttnCliError(f"{what} runs a checkpoint on text")
    source, family = open_family(req.model)
    traits = family.traits
    if traits.bidirectional:
        raise AttnCliError(
            f"{what} does not apply to a {traits.title}: its attention is bidirectional, every "
            "token attends to every other, so each new token would change the keys and values "
            "of the tokens before it in every layer after the first: there is no key/value "
            "cache to reuse token by token")
    with config_named(source):  # --num-heads overrides an inferred count
        return family.load(source, req.model, req.heads)


def kvcache_model(req: Request) -> KVCacheResult:
    """`attncli kvcache --model`: the checkpoint decoded step by step, whatever its family, each
    step checked against the full pass of the layer shown."""
    model = open_decoder(req, "kvcache --model")
    assert req.model is not None
    tokens = model.tokens(req)
    spec, ids = model.spec, tokens.ids
    config: dict[str, Any] = {"model": req.model, "heads": spec.num_heads}
    if model.traits.kv_heads:
        config["kv_heads"] = spec.kv_heads
    config["d_out"] = spec.d_model
    index = spec.layer_index(req.layer or 0)
    model.check_tokens(ids)
    shape = model.decode_shape()
    check_model_kvcache(len(ids), spec.num_heads, spec.n_layer, shape.token_macs,
                        prefill_macs(shape, len(ids)),
                        2 * spec.n_layer * len(ids) * spec.kv_heads * spec.head_dim * 4, req.model)
    decoded = Decoded()
    # Layer by layer where the family can: one layer's weights held at a time, not the model's.
    for token in decode_steps(model.decoder(index, len(ids)), ids):
        decoded.weights.append(token.weights)  # (heads, t+1)
        decoded.context.append(token.context)  # (d_out,)
        decoded.cache_bytes.append(token.cache_bytes)
    full = cached_pass(req, model, ids).attention(index)  # a repeat look: from kept streams
    return assemble({**config, "layer": index}, tokens.tokens, shape, decoded,
                    (full.output.weights, full.output.context))
