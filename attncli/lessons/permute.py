"""Attention without positions is permutation-equivariant: 「猫吃鱼」 looks like 「鱼吃猫」."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import replace

import torch

from attncli.core.request import Request, Route
from attncli.errors import AttnCliError
from attncli.lessons.budget import check_permute
from attncli.lessons.setup import ATOL, RTOL, build, lesson_config, max_abs, text_tokens, within
from attncli.records.lessons import PermuteCase, PermuteResult

# B's numbers are A's reordered where within ATOL + RTOL·|A's| (lessons/setup.py), as float64
# here makes certain; a trained encoder runs in float32, where a reordered sum rounds differently
# by about 1e-7 of the numbers summed: the same bound holds it.


def find_permutation(ids_a: list[int], ids_b: list[int], labels: dict[int, str]) -> list[int]:
    """For each position of B, the position in A of the same token; equal tokens in order."""
    if Counter(ids_a) != Counter(ids_b):
        only_a = Counter(ids_a) - Counter(ids_b)
        only_b = Counter(ids_b) - Counter(ids_a)
        raise AttnCliError(
            "the two texts must hold the same tokens in another order; "
            f"only in A: {_describe(only_a, labels)}; only in B: {_describe(only_b, labels)}")
    where: dict[int, deque[int]] = defaultdict(deque)
    for i, token_id in enumerate(ids_a):
        where[token_id].append(i)
    return [where[token_id].popleft() for token_id in ids_b]


DESCRIBED = 8  # distinct tokens named in the refusal; the rest are counted


def _describe(counts: Counter[int], labels: dict[int, str]) -> str:
    """The tokens of counts, in the order they first appear, the first DESCRIBED of them named."""
    if not counts:
        return "nothing"
    named = ", ".join(f"{labels[token_id]!r} (id {token_id})" + (f" ×{n}" if n > 1 else "")
                      for token_id, n in list(counts.items())[:DESCRIBED])
    rest = len(counts) - DESCRIBED
    return named + (f" and {rest:,} other token(s)" if rest > 0 else "")


def _case(spec: Request, text_a: str, text_b: str, permutation: list[int],
          positions: bool) -> PermuteCase:
    """Run A and B with the same seed; compare B with A's rows and columns reordered."""
    spec = replace(spec, positions=positions)
    a, b = build(spec, text_a), build(spec, text_b)
    # float64 so that rounding cannot hide, or fake, the finding.
    with torch.no_grad():
        out_a = a.module.double()(a.x.double())
        out_b = b.module.double()(b.x.double())
    perm = torch.tensor(permutation)  # (T,)
    reordered = out_a.weights[:, perm][:, :, perm]  # (heads, T, T) A's weights in B's order
    diff = max(max_abs(out_b.weights, reordered), max_abs(out_b.context, out_a.context[perm]))
    same = within(out_b.weights, reordered) and within(out_b.context, out_a.context[perm])
    return PermuteCase(positions, same, diff, out_a.weights.tolist(), out_b.weights.tolist())


def permute_lesson(req: Request, text_a: str, text_b: str) -> PermuteResult:
    """`attncli permute` on what req runs: its checkpoint's layer, or its chapter-3 variant."""
    return (permute_model if req.route is Route.checkpoint else permute)(req, text_a, text_b)


def permute(spec: Request, text_a: str, text_b: str) -> PermuteResult:
    """The permutation from A to B and both cases (without, then with positions)."""
    if spec.inputs is not None:
        raise AttnCliError("permute runs on two texts, not on --inputs vectors")
    tokens_a, ids_a = text_tokens(spec, text_a)
    tokens_b, ids_b = text_tokens(spec, text_b)
    labels = {t.id: t.text for t in [*tokens_a, *tokens_b] if t.id is not None}
    permutation = find_permutation(ids_a, ids_b, labels)
    d_out = spec.d_out or spec.emb_dim
    check_permute(len(tokens_a), spec.num_heads, spec.emb_dim, d_out, spec.traits.multihead,
                  f"--d-out {d_out}" if spec.d_out else f"--emb-dim {spec.emb_dim}")
    return PermuteResult(
        config={k: v for k, v in lesson_config(spec).items() if k != "positions"},
        text_a=text_a, text_b=text_b, tokens_a=tokens_a, tokens_b=tokens_b,
        permutation=permutation,
        without_positions=_case(spec, text_a, text_b, permutation, False),
        with_positions=_case(spec, text_a, text_b, permutation, True),
        causal=spec.traits.causal)


def permute_model(req: Request, text_a: str, text_b: str) -> PermuteResult:
    """`permute --model`: an encoder's layer on A and B, with its position embeddings left out
    and kept. Without them (and with no mask) the whole encoder is permutation-equivariant."""
    from attncli.models.family import Positionless, open_model

    model = open_model(req.model or "")
    if not isinstance(model, Positionless):
        raise AttnCliError(
            f"permute --model runs on an encoder (bert, roberta), whose positions are added to "
            f"its inputs and can be left out; a {model.traits.title} checkpoint is a decoder, "
            "whose causal mask carries word order by itself (each token sees only the tokens "
            "before it), with its positions or without")
    tokens_a, tokens_b = (model.tokens(replace(req, text=t)) for t in (text_a, text_b))
    labels = {t.id: t.text for t in [*tokens_a.tokens, *tokens_b.tokens] if t.id is not None}
    permutation = find_permutation(tokens_a.ids, tokens_b.ids, labels)
    layer = model.spec.layer_index(req.layer or 0)
    perm = torch.tensor(permutation)  # (T,)

    def case(positions: bool) -> PermuteCase:
        run = model.attention if positions else model.attention_positionless
        a, b = run(tokens_a.ids, layer).output, run(tokens_b.ids, layer).output
        reordered = a.weights[:, perm][:, :, perm]  # (heads, T, T) A's weights in B's order
        diff = max(max_abs(b.weights, reordered), max_abs(b.context, a.context[perm]))
        same = within(b.weights, reordered) and within(b.context, a.context[perm], rows=True)
        return PermuteCase(positions, same, diff, a.weights.tolist(), b.weights.tolist())

    info = model.info(layer)
    return PermuteResult(
        config={"variant": f"{info.name} layer {layer}", "model": req.model, "layer": layer,
                "tolerance": {"atol": ATOL, "rtol": RTOL}},
        text_a=text_a, text_b=text_b, tokens_a=tokens_a.tokens, tokens_b=tokens_b.tokens,
        permutation=permutation, without_positions=case(False), with_positions=case(True),
        causal=not model.traits.bidirectional)
