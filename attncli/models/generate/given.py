"""A given answer, teacher-forced: prompt + answer through every layer in one pass, no
generation. Row P - 1 + s of each layer's weights is what the model looked at as it read the
token before answer token s, the same row generate's decode step s holds; the logits of that
row say how likely answer token s was, its rank, and what the model would have chosen.

The same pass keeps ‖W_O^h v_j^h‖ of every head and key (Kobayashi et al. 2020), which the
value view multiplies into the weights. Under llama.cpp's numerics the answer is read step by
step as generate's decode reads it instead (its float16 cache is the decoder's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attncli.core.measures import value_norms
from attncli.core.sizes import FLOAT_BYTES
from attncli.errors import AttnCliError
from attncli.machine import check_fits
from attncli.models.decoding import CachedValues
from attncli.models.family import Model
from attncli.models.generate.engine import (
    Step,
    check_decoder,
    fill,
    generation_bytes,
    holds,
    positions,
    scored,
)
from attncli.models.predict import trace_bytes
from attncli.models.sources.gguf.qmatmul import as_llama_cpp


@dataclass(frozen=True)
class Forced:
    """A teacher-forced pass: one Step per answer token, and the value norms of every key."""

    steps: list[Step]
    norms: np.ndarray  # (layers, heads, P + A) float32: ‖W_O^h v_j^h‖


def check_answer(model: Model, prompt_ids: list[int], answer_ids: list[int]) -> None:
    """The answer has tokens, and prompt + answer fit the model's positions."""
    check_decoder(model)
    if not prompt_ids:
        raise AttnCliError("the prompt has no tokens: give some text")
    if not answer_ids:
        raise AttnCliError("the answer is empty: give its text with --answer or --answer-file")
    limit, total = positions(model), len(prompt_ids) + len(answer_ids)
    if limit is not None and total > limit:
        raise AttnCliError(f"the prompt's {len(prompt_ids):,} tokens and the answer's "
                           f"{len(answer_ids):,} go past the model's {limit:,} positions; use a "
                           "shorter prompt or answer")
    model.check_tokens(prompt_ids + answer_ids)


def pass_bytes(model: Model, p: int, a: int) -> int:
    """What the one pass over prompt + answer holds at its peak: the trace's two blocks' (heads,
    T, T) stages at once (as --predict's pass), and every layer's kept answer rows, stacked."""
    spec, total = model.spec, p + a
    return trace_bytes(spec.num_heads, total) \
        + 2 * FLOAT_BYTES * spec.n_layer * spec.num_heads * a * total


def check_pass(model: Model, p: int, a: int) -> None:
    """Refuse, before it runs, a given answer's pass that does not fit (measured on SmolLM2:
    4,401 tokens peaked at 6.6 GB, 0.70 GB a (heads, T, T) stage)."""
    check_fits(pass_bytes(model, p, a),
               f"--answer needs one pass over the prompt's {p:,} tokens and the answer's {a:,} "
               f"through all {model.spec.n_layer} layers",
               "use a shorter prompt or answer")


@torch.no_grad()
def teacher_forced(model: Model, prompt_ids: list[int], answer_ids: list[int]) -> Forced:
    """Every answer token's step, from one pass over prompt + answer."""
    check_answer(model, prompt_ids, answer_ids)
    if as_llama_cpp():
        stepped = _stepped(model, prompt_ids, answer_ids)
        if stepped is not None:
            return stepped
    p, a = len(prompt_ids), len(answer_ids)
    check_pass(model, p, a)
    rows = slice(p - 1, p + a - 1)  # the queries that chose answer tokens 0..A-1
    weights, norms = [], []
    hidden = None
    for trace in model.trace(prompt_ids + answer_ids, model.spec.n_layer - 1):
        # a copy of the answer's rows: the slice alone (and .float() of float32 is itself)
        # would keep each layer's whole (heads, T, T) weights alive until the pass ends
        weights.append(trace.weights[:, rows, :].float().clone())  # (heads, A, T)
        norms.append(value_norms(trace.values.float(), trace.w_o().float()))  # (heads, T)
        hidden = trace.output
    assert hidden is not None, "a decoder has at least one layer"
    logits = model.logits(hidden[rows]).float()  # (A, vocab)
    every = torch.stack(weights).numpy()  # (layers, heads, A, T)
    steps = [scored(token_id, p - 1 + s, every[:, :, s, :p + s].copy(), logits[s])
             for s, token_id in enumerate(answer_ids)]
    return Forced(steps, torch.stack(norms).numpy())  # norms: (layers, heads, T)


@torch.no_grad()
def _stepped(model: Model, prompt_ids: list[int], answer_ids: list[int]) -> Forced | None:
    """Under llama.cpp's numerics: the answer read as generate's decode reads it, one step a
    token after the prompt's pass, so its keys, values and weights are rounded to float16 as
    the decode's cache rounds them (the one pass keeps them float32: SmolLM2's own greedy
    answer given back was up to 0.2 nats from its generated log-probabilities). None where
    the family's decoder cannot give the value norms from its caches."""
    need = generation_bytes(model, len(prompt_ids), len(answer_ids))
    decoder = model.decoder(0, len(prompt_ids) + len(answer_ids), held=holds(model, need))
    if not isinstance(decoder, CachedValues):
        return None
    fill(decoder, prompt_ids[:-1], None)
    steps, token_id, position = [], prompt_ids[-1], len(prompt_ids) - 1
    for answer_id in answer_ids:
        weights, logits = decoder.step_layers(token_id, position)  # (L, H, t+1), (vocab,)
        steps.append(scored(answer_id, position, weights.float().numpy().copy(),
                            logits.float()))
        token_id, position = answer_id, position + 1
    decoder.step(token_id, position)  # the last answer token's keys and values, no logits
    return Forced(steps, decoder.value_norms().numpy())  # norms: (layers, heads, P + A)
