"""StreamingLLM's lesson (Xiao et al. 2023): a key/value cache that evicts old tokens, judged by
the model's own next-token predictions beside the full cache's.

A cache that keeps the first S tokens (the attention sinks) and the latest W holds, at position t,
the keys {0..S-1} ∪ {t-W+1..t}. Each key and value in it was computed when its token was
processed under the same rule, so one teacher-forced pass whose (T, T) mask lets query t see
exactly those keys gives the logits that decoding with the evicted cache gives. Keys keep their
positions in the text: unlike the paper, the cache is not re-rotated to positions within it.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.lessons.budget import STREAMING_CHUNK_ROWS, check_streaming
from attncli.records.streaming import Policy, RangeScores, Score, StreamingResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from attncli.core.request import Request
    from attncli.models.decoding import Shape
    from attncli.models.family import Model

KEEP_FORM = "--keep window:W or --keep sinks:S,window:W (whole numbers, W ≥ 1, S ≥ 0)"
MOST_DIGITS = 9  # a count past 999,999,999 is longer than any text a lesson reads
RANGES = 4  # the positions after the window fills, cut into this many equal ranges


def visible_keys(policy: Policy, num_tokens: int) -> Tensor | None:
    """(T, T), True where query t may look: the keys its cache holds (None: every key ≤ t)."""
    if policy.window is None:
        return None
    query = torch.arange(num_tokens)[:, None]  # (T, 1)
    key = torch.arange(num_tokens)[None, :]  # (1, T)
    # Causal, and either a sink (key < S) or one of the latest W (t-W+1..t).
    kept = (key < (policy.sinks or 0)) | (key > query - policy.window)  # (T, T)
    return (key <= query) & kept  # (T, T)



def parse_keep(value: str) -> tuple[int, int]:
    """--keep's (sinks, window), parsed strictly: `window:W` or `sinks:S,window:W`."""
    found: dict[str, int] = {}
    for part in value.split(","):
        key, sep, count = part.partition(":")
        if key not in ("sinks", "window") or not sep:
            raise AttnCliError(f"--keep {value!r}: {part!r} is not sinks:S or window:W; "
                               f"use {KEEP_FORM}")
        if key in found:
            raise AttnCliError(f"--keep {value!r} names {key} twice; use {KEEP_FORM}")
        if not re.fullmatch(r"[0-9]+", count):
            raise AttnCliError(f"--keep {value!r}: {key}:{count} is not a whole number ≥ 0; "
                               f"use {KEEP_FORM}")
        if len(count) > MOST_DIGITS:
            raise AttnCliError(f"--keep {value!r}: {key}:{count[:12]}… is longer than any text a "
                               "lesson reads; use a window shorter than the text")
        found[key] = int(count)
    if "window" not in found:
        raise AttnCliError(f"--keep {value!r} has no window; use {KEEP_FORM}")
    if found["window"] < 1:
        raise AttnCliError(f"--keep {value!r}: window:0 keeps no key, not even the query's own; "
                           f"use {KEEP_FORM}")
    return found.get("sinks", 0), found["window"]


def policies(sinks: int, window: int) -> list[Policy]:
    """The full cache, the window alone, and (with sinks) sinks + window."""
    out = [Policy("full"), Policy("window", 0, window)]
    if sinks:
        out.append(Policy("sinks+window", sinks, window))
    return out


def check_keep(keep: str, model: str | None, layer: int | None, page: bool = False,
               head: int = 0) -> tuple[int, int]:
    """--keep parsed, and refused in one line where it cannot apply (before any input is read):
    without a model, with --layer, drawn as a page, or with a head shown (head != 0)."""
    sinks, window = parse_keep(keep)
    if model is None:
        raise AttnCliError("--keep needs --model: an evicted cache is judged by a trained "
                           "model's next-token predictions, which the chapter-3 variants "
                           "(random weights, no vocabulary head) do not make")
    if layer is not None:
        raise AttnCliError("--keep evicts keys in every layer and scores the last one's "
                           "predictions; --layer does not apply")
    if page:
        raise AttnCliError("--keep draws no page: use --save-json, or --save with .svg or .txt")
    if head != 0:
        raise AttnCliError("--keep measures every layer and head together: --head picks the "
                           "head of the plain lesson's weights; leave it out")
    return sinks, window


@torch.no_grad()
def final_stream(model: Model, token_ids: list[int], policy: Policy) -> Tensor:
    """The residual stream leaving the last block, every layer under policy's cache: (T, d)."""
    last: Tensor | None = None
    visible = visible_keys(policy, len(token_ids))  # (T, T) or None
    for block in model.trace(token_ids, model.spec.n_layer - 1, visible):
        last = block.output  # (T, d_model)
    assert last is not None
    return last


@torch.no_grad()
def evicted_logits(model: Model, token_ids: list[int], policy: Policy) -> Tensor:
    """The logits (T, vocab) decoding with policy's cache gives, from one masked pass."""
    return model.logits(final_stream(model, token_ids, policy))


@torch.no_grad()
def next_token_scores(model: Model, streams: Tensor,
                      token_ids: list[int]) -> tuple[Tensor, Tensor]:
    """For streams (P, T, d): the NLL (P, T-1) of token t+1 given tokens ≤ t, float64, and the
    top-1 id (P, T-1) at positions 0..T-2; STREAMING_CHUNK_ROWS rows unembedded at a time."""
    num_policies, num_tokens, d_model = streams.shape
    rows = streams[:, :-1].reshape(-1, d_model)  # (P·(T-1), d_model)
    targets = torch.tensor(token_ids[1:]).repeat(num_policies)  # (P·(T-1),)
    nll, top = [], []
    for begin in range(0, rows.shape[0], STREAMING_CHUNK_ROWS):
        logits = model.logits(rows[begin:begin + STREAMING_CHUNK_ROWS])  # (R, vocab)
        target = targets[begin:begin + STREAMING_CHUNK_ROWS, None]  # (R, 1)
        # −log softmax at the target: logsumexp over the vocabulary minus the target's logit.
        chunk_nll = torch.logsumexp(logits, dim=-1) - logits.gather(1, target)[:, 0]  # (R,)
        nll.append(chunk_nll.double())
        top.append(logits.argmax(dim=-1))  # (R,)
    shape = (num_policies, num_tokens - 1)
    return torch.cat(nll).reshape(shape), torch.cat(top).reshape(shape)


def step_ranges(scored: int, window: int) -> list[tuple[int, int]]:
    """Positions 0..scored-1 in ranges: before the window fills (t < W), then RANGES equal ones."""
    rest = scored - window
    pieces = min(RANGES, rest)
    bounds = [window + rest * k // pieces for k in range(pieces + 1)]
    return [(0, window), *zip(bounds, bounds[1:], strict=False)]


def _score(nll: Tensor, top: Tensor, full_top: Tensor | None) -> Score:
    """nll (n,) float64, top (n,), full_top (n,) or None (the full cache itself)."""
    mean = float(nll.mean())
    perplexity = math.exp(mean) if mean < math.log(1e300) else None
    agreement = None if full_top is None else float((top == full_top).double().mean())
    return Score(mean, perplexity, agreement)


def score_ranges(names: list[str], nll: Tensor, top: Tensor, window: int,
                 spans: list[tuple[int, int]]) -> list[RangeScores]:
    """Each span's scores per policy, from nll (P, T-1) and top (P, T-1); row 0 is the full cache.
    """
    out = []
    for start, stop in spans:
        scores = {name: _score(nll[k, start:stop], top[k, start:stop],
                               None if k == 0 else top[0, start:stop])
                  for k, name in enumerate(names)}
        out.append(RangeScores(start, stop, start >= window, scores))
    return out


def check_evicts(num_tokens: int, sinks: int, window: int) -> None:
    """Refuse a cache that still holds every key at the last prediction (t = T-2): query t
    loses key S first at t = S + W, so a text needs at least S + W + 2 tokens."""
    if sinks + window <= num_tokens - 2:
        return
    label = Policy("keep", sinks, window).label
    most = num_tokens - 2 - sinks
    hint = (f"use a window of at most {most:,}, or a longer text" if most >= 1
            else f"use a text of at least {sinks + window + 2:,} tokens")
    seen = (f"the last prediction (position {num_tokens - 2:,}) still sees every key"
            if num_tokens >= 2 else "it has no next token to predict")
    raise AttnCliError(f"--keep {label} evicts nothing from this {num_tokens:,}-token text: "
                       f"{seen} (sinks + window = {sinks + window:,}); {hint}")


def _pass_macs(shape: Shape, unembed_macs: int) -> Callable[[int], int]:
    """Multiply-adds of one masked pass over T tokens: each layer's projections and MLP per
    token, Q·Kᵀ and weights·V over the whole (T, T) (the mask does not skip cells), and the
    unembedding of every position."""
    def macs(tokens: int) -> int:
        attention = 2 * tokens * tokens * shape.d_out  # (T, T) scores and weights·V, per layer
        return shape.layers * (tokens * shape.token_macs + attention) + tokens * unembed_macs

    return macs


def _vocab(model: Model) -> int:
    """The rows of the unembedding, from one zero row (a headless checkpoint: one line)."""
    return int(model.logits(torch.zeros(1, model.spec.d_model)).shape[-1])  # (1, vocab)


def streaming_model(req: Request, sinks: int, window: int) -> StreamingResult:
    """The checkpoint on the text under the full cache and each evicted one: perplexity and top-1
    agreement per range of positions, from one masked pass per policy."""
    from attncli.lessons.kvcache import open_decoder

    model = open_decoder(req, "kvcache --keep")
    assert req.model is not None
    ids = model.tokens(req).ids
    model.check_tokens(ids)
    num_tokens, chosen = len(ids), policies(sinks, window)
    check_evicts(num_tokens, sinks, window)
    spec, vocab = model.spec, _vocab(model)
    check_streaming(num_tokens, spec.num_heads, len(chosen), _pass_macs(model.decode_shape(),
                    vocab * spec.d_model), vocab, req.model)
    streams = torch.stack([final_stream(model, ids, p) for p in chosen])  # (P, T, d_model)
    nll, top = next_token_scores(model, streams, ids)  # each (P, T-1)
    names = [p.name for p in chosen]
    scored = num_tokens - 1
    ranges = score_ranges(names, nll, top, window, step_ranges(scored, window))
    after = score_ranges(names, nll, top, window, [(window, scored)])[0]
    config = {"model": req.model, "tokens": num_tokens, "layers": spec.n_layer}
    return StreamingResult(config, chosen, ranges, after)
