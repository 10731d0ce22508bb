"""`heads`' one forward pass: every shown layer's weights, the view its thumbnails draw, each
head's scores and each layer's sink, kept one layer at a time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from attncli.activity import counted
from attncli.core.display import Window
from attncli.core.measures import norm_weights, residual_attention, row_normalised, value_norms
from attncli.core.request import Measure, Request
from attncli.core.sizes import NAIVE_STAGES
from attncli.errors import AttnCliError
from attncli.models.family import LayerTrace, ManyTexts, Model, Tokens
from attncli.models.hidden.passes import CachedPass
from attncli.models.measures import head_measures
from attncli.models.probe import Probe
from attncli.models.scores import (
    SCORES,
    head_labels,
    head_scores,
    layer_sinks,
    stacked_patterns,
)
from attncli.records.heads import Config, HeadsOptions, Said, Sink
from attncli.records.heads import Measure as Measured
from attncli.version import __version__


def check_threshold(threshold: float) -> None:
    """--threshold within 0..1 (a score is a share of attention)."""
    if not 0.0 <= threshold <= 1.0:
        raise AttnCliError(f"--threshold must be from 0 to 1 (got {threshold:g}): a score is the "
                           "share of a head's attention on its pattern")


def layer_span(window: Window | None, n_layer: int) -> tuple[int, int]:
    """--layers a:b as [a, b) of the model's layers, refused when out of range or empty."""
    return (0, n_layer) if window is None else window.resolve(n_layer, "layers")


@dataclass
class HeadsPass:
    """What one pass over layers first..stop-1 keeps: weights, the view, scores and sinks."""

    first: int
    patterns: Tensor  # (scores, T, T) the detection patterns of the run's tokens
    weights: list[Tensor] = field(default_factory=list)  # each (heads, T, T)
    views: list[Tensor] = field(default_factory=list)  # each (heads, T, T), or (1, T, T) rollout
    scores: list[dict[str, Tensor]] = field(default_factory=list)  # each name → (heads,)
    sinks: list[Sink] = field(default_factory=list)


def _traced(model: Model) -> bool:
    """Whether the family walks its blocks one by one (a family may offer all_layers only)."""
    return callable(getattr(model, "trace", None))


@torch.no_grad()
def heads_pass(model: Model, ids: list[int], first: int, stop: int, measure: Measure,
               passes: CachedPass | None = None) -> HeadsPass:
    """Blocks 0..stop-1 once (through passes' hidden-state cache when given); layers
    first..stop-1 kept. Scores and sinks always read the raw weights; the view is the weights,
    norm's rows renormalised, or rollout to that layer."""
    out = HeadsPass(first, patterns=stacked_patterns(ids))
    if not _traced(model):  # no residual stream to read: shares only, no norms
        if measure is Measure.norm:
            raise AttnCliError("--measure norm needs a family that traces its blocks")
        rolled = None
        for layer, weights in enumerate(model.all_layers(ids)[:stop]):  # (heads, T, T) each
            rolled = _keep(out, layer, weights, None, measure, rolled)
        return out
    # Layers before first matter to rollout only: a pass from the cache starts at first.
    rolled, start = None, 0 if passes is None or measure is Measure.rollout else first
    while passes is not None and measure is not Measure.norm and start < stop:
        kept = passes.kept(start)  # an earlier look kept this block's weights and stream
        if kept is None:
            break
        rolled = _keep(out, start, *kept, measure, rolled)
        start += 1
    if start == stop:
        return out
    traces = model.trace(ids, stop - 1) if passes is None else passes.trace(stop - 1, start)
    for trace in traces:
        counted("layers", trace.layer + 1, stop)
        view = None
        if measure is Measure.norm and trace.layer >= first:
            raw = norm_weights(trace.weights, value_norms(trace.values, trace.w_o()))
            view = row_normalised(raw)  # (heads, T, T) ‖α_ij · W_O v_j‖, rows renormalised
        rolled = _keep(out, trace.layer, trace.weights, trace.residual, measure, rolled, view)
    return out


@torch.no_grad()
def texts_passes(model: ManyTexts, texts: list[list[int]], n_layer: int) -> list[HeadsPass]:
    """heads_pass over every layer (the weights as the view) of each of texts, their passes
    run together layer by layer: each layer's weights read once, each text's pass its own."""
    outs = [HeadsPass(0, patterns=stacked_patterns(ids)) for ids in texts]
    for traces in model.trace_texts(texts, n_layer - 1):
        for out, trace in zip(outs, traces, strict=True):
            _keep(out, trace.layer, trace.weights, trace.residual, Measure.weights, None)
    return outs


def _keep(out: HeadsPass, layer: int, weights: Tensor, residual: Tensor | None,
          measure: Measure, rolled: Tensor | None, view: Tensor | None = None) -> Tensor | None:
    """One layer into out (when shown); rollout's product Ã_layer ··· Ã_0 carried on."""
    if measure is Measure.rollout:
        step = residual_attention(weights)  # (T, T) 0.5·I + 0.5·mean_h A, renormalised
        rolled = step if rolled is None else step @ rolled  # (T, T) layers 0..layer
    if layer < out.first:
        return rolled
    out.weights.append(weights)
    out.views.append(rolled[None] if rolled is not None else weights if view is None else view)
    scores = head_scores(weights[None], out.patterns)  # each (1, heads)
    out.scores.append({name: value[0] for name, value in scores.items()})  # each (heads,)
    out.sinks.append(layer_sinks(layer, weights, residual))
    return rolled


def scored_rows(done: HeadsPass, threshold: float,
                kinds: tuple[str, ...]) -> list[Measured]:
    """Every shown head's measures (layer numbers as the model counts them), its three scores
    and its labels: the kinds it scores at or above threshold on."""
    out: list[Measured] = []
    for row in head_measures(torch.stack(done.weights)):  # layer 0 = first shown
        k, head = row["layer"], row["head"]
        scores = {name: float(done.scores[k][name][head]) for name in SCORES}
        out.append({**row, "layer": done.first + k, "previous_token": scores["previous_token"],
                    "duplicate_token": scores["duplicate_token"],
                    "induction": scores["induction"],
                    "labels": head_labels(scores, threshold, kinds)})
    return out


@torch.no_grad()
def head_effects(model: Model, ids: list[int],
                 blocks: Iterable[LayerTrace]) -> dict[tuple[int, int], float]:
    """`heads --effect` and `scan --effect`: each head mean-ablated alone (its output replaced
    by its mean over the positions), the rise of the text's mean loss, as `ablate --heads all`
    ranks them; blocks: the trace of ids through every layer."""
    from attncli.models.causal.metrics import token_losses
    from attncli.models.causal.passes import clean_pass, each_head, mean_of
    from attncli.models.causal.readout import Readout

    clean = clean_pass(model, ids, blocks)
    before = token_losses(clean.logits, ids).mean()
    # The rows the loss reads (the last predicts none), each for its next token: (T - 1, 1).
    readout = Readout(list(range(len(ids) - 1)), torch.tensor(ids[1:])[:, None])
    return {(layer, head): float(-found.log_probs().mean() - before)
            for layer, head, found in each_head(model, clean, mean_of(clean), readout)}


# `heads` keeps every layer's (heads, N, N) weights: the per-layer list, its stack and the
# measures' temporaries held about 6.6 such float32 copies at the peak (SmolLM2 on 700 and 1,000
# tokens: 3.9 GB and 5.8 GB), beside one layer's NAIVE_STAGES while it runs.
HEADS_COPIES = 7


def heads_bytes(num_layers: int, num_heads: int, num_tokens: int, views: int = 0) -> int:
    """What `heads` holds at its peak: every shown layer's weights, several times, views more
    copies of them (--measure norm keeps its own matrices beside the weights), and one layer's
    stages."""
    copies = (HEADS_COPIES + views) * num_layers + NAIVE_STAGES
    return 4 * num_heads * num_tokens * num_tokens * copies


def heads_config(req: Request, options: HeadsOptions, tokens: Tokens, shown: tuple[int, int],
                 probe: Probe | None) -> Config:
    """The run's settings, as its JSON's "config" holds them."""
    made: Said = ({"encoding": tokens.encoding} if tokens.encoding is not None else
                  {} if tokens.tokenizer is None else {"tokenizer": tokens.tokenizer})
    said: Said = {**({"measure": req.measure.value} if req.measure is not Measure.weights
                     else {}), **({"probe": probe.to_dict()} if probe is not None else {})}
    return {"model": req.model or "", **made, "allow_special": req.allow_special,  # never None here
            "num_tokens": len(tokens.tokens), "sort": options.sort, "layers": list(shown),
            "threshold": options.threshold, **said, "version": __version__}
