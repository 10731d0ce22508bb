"""The generation loop: the prompt through every layer (filling each layer's cache: in one pass
where the family's decoder has prefill, as every one has now, else token by token without
logits), then one decode step per answer token, each keeping its own attention from its own
cache.

Step s's query is the token at position P - 1 + s (the prompt's last token, then each answer
token): its weights over every layer's cache are what the model looked at as it chose answer
token s, the same row a full teacher-forced pass over prompt + answer holds at that position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from attncli.errors import AttnCliError
from attncli.models.decoding import CachedValues, DecodeStep, prefill_queries, prefill_spans
from attncli.models.family import Model
from attncli.models.generate.sampling import Sampling, choose, generator_for, with_seed
from attncli.models.predict import check_logits

TOP_K = 5  # next-token candidates kept per step


@dataclass(frozen=True)
class Step:
    """One answer token and what made it."""

    token_id: int
    position: int  # the query's position: the token before this one
    weights: np.ndarray  # (layers, heads, position + 1) float32, from the step's own caches
    top_ids: list[int]  # the TOP_K likeliest next tokens, most likely first
    top_probs: list[float]  # their probabilities (softmax of the raw logits)
    prob: float  # the chosen token's probability (softmax of the raw logits)
    logprob: float  # its natural log, from log-softmax in float64 (exact where prob is tiny)
    rank: int  # 1 + how many tokens are likelier than it (1: the greedy choice)


def scored(token_id: int, position: int, weights: np.ndarray, logits: torch.Tensor) -> Step:
    """The step that put token_id after position: its weights (layers, heads, position + 1),
    and what logits (vocab,) float32 say of it and of the likeliest tokens."""
    check_logits(logits)
    probs = torch.softmax(logits, dim=-1)  # (vocab,)
    top = probs.topk(min(TOP_K, probs.shape[0]))
    logprob = float(torch.log_softmax(logits.double(), dim=-1)[token_id])
    rank = 1 + int((logits > logits[token_id]).sum())
    return Step(token_id, position, weights, top.indices.tolist(), top.values.tolist(),
                float(probs[token_id]), logprob, rank)


def check_decoder(model: Model) -> None:
    """Refuse, in one line, a model that cannot generate (an encoder)."""
    if model.traits.bidirectional:
        raise AttnCliError(f"generate needs a decoder; a {model.traits.title} attends in both "
                           "directions and does not write text token by token")


def positions(model: Model) -> int | None:
    """The positions the checkpoint was made for (None: no fixed number)."""
    return model.spec.positions or model.traits.max_tokens


def prefill_bytes(model: Model, prompt_len: int) -> int:
    """The prompt's pass beside the caches and the weights: the widest span of rows' work in
    the block's row-by-row parts (prefill_spans; a prefill without spans, GPT-2's, holds its
    whole (heads, T, T) float32 scores, masked scores and softmax instead), a chunk's float64
    scores over every key in about four stages (scores, scaled, masked, softmax), the scratch
    a dense product on a file's blocks dequantizes into, and for every row its stream and
    queries (float32) and its keys (float64)."""
    from attncli.core.sizes import FLOAT_BYTES
    from attncli.models.sources.gguf.qmatmul import DENSE_FROM, DENSE_PIECE

    spec, shape = model.spec, model.decode_shape()
    spans = prefill_spans(prompt_len, shape.row_bytes) if shape.row_bytes else []
    span = max((end - start for start, end in spans), default=0) * shape.row_bytes \
        if shape.row_bytes else 3 * FLOAT_BYTES * spec.num_heads * prompt_len ** 2
    scores = 4 * 8 * spec.num_heads * prefill_queries(spec.num_heads, prompt_len) * prompt_len
    scratch = FLOAT_BYTES * min(DENSE_PIECE, shape.token_macs) \
        if shape.held_bytes and prompt_len >= DENSE_FROM else 0
    rows = prompt_len * (FLOAT_BYTES * (spec.d_model + spec.d_out)
                         + 8 * spec.kv_heads * spec.head_dim)
    return span + scores + scratch + rows


def generation_bytes(model: Model, prompt_len: int, new_tokens: int) -> int:
    """What a generation holds beside the model's weights: every step's weights kept (float32,
    layers × heads × the keys it saw), every layer's keys and values (float32) of the prompt
    and the answer, and the prompt's pass (prefill_bytes)."""
    from attncli.core.sizes import FLOAT_BYTES

    spec, tokens = model.spec, prompt_len + new_tokens
    kept = spec.n_layer * spec.num_heads * new_tokens * tokens * FLOAT_BYTES
    cache = 2 * spec.n_layer * spec.kv_heads * spec.head_dim * tokens * FLOAT_BYTES
    return kept + cache + prefill_bytes(model, prompt_len)


def weight_bytes(model: Model) -> tuple[int, int]:
    """The bytes of the weights a decoder holds: held (every layer and the unembedding, as
    the file holds them where the kernels compute on its blocks, else float32), and streamed
    (one layer's float32 weights at a time)."""
    from attncli.core.sizes import FLOAT_BYTES

    shape = model.decode_shape()  # token_macs: one multiply-add per weight of a layer
    held = shape.held_bytes or FLOAT_BYTES * (shape.layers * shape.token_macs
                                              + shape.head_weights)
    return held, FLOAT_BYTES * shape.token_macs


def check_length(model: Model, prompt_len: int, sampling: Sampling) -> None:
    """The prompt and the longest answer fit the model's positions, and the kept weights, the
    caches and the prompt's pass fit memory beside the weights a streamed decoder holds."""
    from attncli.machine import check_fits

    if prompt_len == 0:
        raise AttnCliError("the prompt has no tokens: give some text")
    limit, n = positions(model), sampling.max_new_tokens
    if limit is not None and prompt_len + n > limit:
        raise AttnCliError(f"the prompt's {prompt_len:,} tokens and --max-new-tokens {n:,} go "
                           f"past the model's {limit:,} positions; use a smaller "
                           "--max-new-tokens or a shorter prompt")
    spec = model.spec
    check_fits(generation_bytes(model, prompt_len, n) + weight_bytes(model)[1],
               f"generating {n:,} tokens after {prompt_len:,} needs every step's weights over "
               f"{spec.n_layer} layers × {spec.num_heads} heads, every layer's keys and values "
               "and the prompt's pass beside one layer's weights",
               "use a smaller --max-new-tokens or a shorter prompt")


def holds(model: Model, beside: int = 0) -> bool:
    """Whether every layer's weights and the unembedding, with beside bytes more (a
    generation's caches, kept weights and prompt's pass: generation_bytes), fit in half the
    memory available, the weights as the file holds them where the kernels compute on its
    blocks (an 8B Q4_K: 4.9 GB), else as float32: then they are read once and held (fast
    steps, the logits one product); else each step reads each layer again from the file, one
    layer in memory at a time (an 8B's 32 GB of float32 on a 16 GB machine) and the
    unembedding a chunk of rows at a time."""
    from attncli.machine import fits

    return fits(weight_bytes(model)[0] + beside)


def fill(decoder: DecodeStep, prompt_ids: list[int],
          on_prefill: Callable[[int], None] | None) -> None:
    """Every layer's cache filled with the prompt's keys and values: in one pass where the
    family's decoder has one (prefill), else token by token with step (no logits wanted: the
    unembedding is most of a small model's step)."""
    prefill = getattr(decoder, "prefill", None)
    if prefill is not None and prompt_ids:
        prefill(prompt_ids)
        if on_prefill is not None:
            on_prefill(len(prompt_ids))
        return
    for position, token_id in enumerate(prompt_ids):
        decoder.step(token_id, position)
        if on_prefill is not None:
            on_prefill(position + 1)


@torch.no_grad()
def decode(model: Model, prompt_ids: list[int], sampling: Sampling,
           stop_ids: frozenset[int],
           on_prefill: Callable[[int], None] | None = None,
           on_decoder: Callable[[DecodeStep], None] | None = None) -> Iterator[Step]:
    """Answer tokens one decode step at a time, until a stop id (kept, as transformers keeps
    it) or sampling.max_new_tokens; a sampling run draws from sampling.seed (with_seed).
    on_decoder: handed the decoder once it exists (cached_norms reads its caches after)."""
    check_decoder(model)
    model.check_tokens(prompt_ids)
    check_length(model, len(prompt_ids), sampling)
    generator = generator_for(with_seed(sampling))
    n = sampling.max_new_tokens
    decoder = model.decoder(0, len(prompt_ids) + n,
                            held=holds(model, generation_bytes(model, len(prompt_ids), n)))
    if on_decoder is not None:
        on_decoder(decoder)
    fill(decoder, prompt_ids[:-1], on_prefill)
    token_id, position = prompt_ids[-1], len(prompt_ids) - 1
    for _ in range(n):
        weights, logits = decoder.step_layers(token_id, position)  # (L, H, t+1), (vocab,)
        logits = logits.float()
        check_logits(logits)
        chosen = choose(logits, sampling, generator)
        yield scored(chosen, position, weights.float().numpy().copy(), logits)
        if chosen in stop_ids:
            return
        token_id, position = chosen, position + 1


@torch.no_grad()
def cached_norms(decoder: DecodeStep, ids: list[int]) -> np.ndarray | None:
    """‖W_O^h v_j^h‖ (layers, heads, len(ids)) of prompt + answer ids from a generation's own
    caches, not from a second pass over them: the caches cut to the tokens every layer holds
    (a step Ctrl-C stopped may have reached some layers), the rest of ids (the last answer
    token, which no step read) taken through every layer without logits, then each layer's
    values through its W_O. None where the family's decoder cannot say."""
    if not isinstance(decoder, CachedValues):
        return None
    for position in range(decoder.keep(len(ids)), len(ids)):
        decoder.step(ids[position], position)
    return decoder.value_norms().numpy()  # (layers, heads, len(ids))
