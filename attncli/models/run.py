"""Runs on a checkpoint, whatever its family: one layer's attention as a Result (`heads`, every
head's measures, is in heads.py). Tensors become plain data here."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from attncli.activity import doing
from attncli.core.convert import plain
from attncli.core.measures import norm_weights, residual_attention, row_normalised, value_norms
from attncli.core.pipeline import (
    Prepared,
    check_head,
    check_measure,
    measure_of,
    measured,
    resolve_device,
    run_naive,
    to_result,
)
from attncli.core.request import Extract, Measure, Request, Route
from attncli.core.result import Result, RunConfig, TextConfig
from attncli.core.sizes import NAIVE_BUDGET, Impl, choose_impl, naive_bytes
from attncli.errors import AttnCliError
from attncli.long.path import run as run_variant
from attncli.machine import check_fits, size_text
from attncli.models.family import (
    DEFAULT,
    FamilyTraits,
    LayerInputs,
    Model,
    Tokens,
    family_named,
    open_family,
)
from attncli.models.heads import (
    check_threshold,
    head_effects,
    heads_bytes,
    heads_config,
    heads_pass,
    layer_span,
    scored_rows,
)
from attncli.models.hidden.passes import CachedPass, cached_pass
from attncli.models.measures import page_weights, sort_measures
from attncli.models.memory import on_device, on_request_device
from attncli.models.predict import plan_predictions, with_predictions
from attncli.models.probe import SCORE_OF, check_probe, probe_tokens
from attncli.models.scores import SCORES
from attncli.models.sources.base import config_named
from attncli.records.heads import HeadsOptions, HeadsResult
from attncli.version import __version__

if TYPE_CHECKING:
    from attncli.core.attention import Attention
    from attncli.long.run import Progress

def _config(req: Request, model: Model, tokens: Tokens, layer: int, impl: Impl,
            head: int | None) -> RunConfig:
    spec, tiled = model.spec, impl is Impl.tiled
    return RunConfig(
        source="text", num_tokens=len(tokens.tokens), d_in=spec.d_model, d_out=spec.d_out,
        heads=spec.num_heads, impl=impl.value, version=__version__, model=req.model, layer=layer,
        text=TextConfig(tokens.encoding, req.allow_special), tokenizer=tokens.tokenizer,
        head=head, top_k=req.keys_kept if tiled else None,
        pool=req.pooling.value if tiled else None, measure=measure_of(req))


def _impl(req: Request, model: Model, num_tokens: int, layer: int,
          budget_bytes: int | None) -> Impl:
    """naive or tiled: --impl, or auto against the budget; None budget means naive only."""
    if not model.traits.supports_tiled:
        return Impl.naive
    heads = model.spec.num_heads
    impl = choose_impl(req.impl, num_tokens, heads, budget_bytes or NAIVE_BUDGET)
    if impl is Impl.tiled and budget_bytes is None:
        raise AttnCliError(
            f"{num_tokens:,} tokens × {heads} heads need about "
            f"{size_text(naive_bytes(num_tokens, heads))} as full N × N matrices, more than "
            f"--impl auto allows ({NAIVE_BUDGET // 2**20} MiB); `attncli run` shows long "
            "inputs, or force this with --impl naive")
    refusal = model.spec.tiled_refusal
    if impl is Impl.tiled and refusal:
        if req.impl is Impl.tiled:
            raise AttnCliError(f"--impl tiled: {refusal}; use --impl naive")
        raise AttnCliError(f"{num_tokens:,} tokens need the tiled path, and {refusal}; use "
                           "--impl naive, or a shorter text")
    window = model.spec.windows[layer]
    if impl is Impl.tiled and window is not None and window < num_tokens:
        raise AttnCliError(
            f"layer {layer} has a sliding window of {window} tokens, which the tiled path "
            f"does not implement; use --impl naive, or at most {window} tokens")
    return impl


def open_checked(req: Request) -> Model:
    """The request's checkpoint; --impl tiled refused first where the family has no such path."""
    try:
        source, family = open_family(req.model or "")
    except AttnCliError:
        _check_tiled(req, family_named(DEFAULT).traits)  # as the family a bare file would be
        raise
    _check_tiled(req, family.traits)
    # On a GPU, each tensor moves there as it is read (one layer at a time, as on the CPU).
    source = on_device(source, resolve_device(req.device), req.model or "")
    with config_named(source):
        return family.load(source, req.model or "", req.heads)


def _cpu_only(req: Request, num_tokens: int) -> None:
    """The tiled path of a model runs on the CPU only: refused on any other device."""
    device = resolve_device(req.device)
    if device.type != "cpu":
        raise AttnCliError(f"{num_tokens:,} tokens take the tiled path, which runs a --model on "
                           f"the CPU only; use --device cpu, or --impl naive on {device.type}")


def _check_tiled(req: Request, traits: FamilyTraits) -> None:
    if req.impl is Impl.tiled and not traits.supports_tiled:
        most = ("as many tokens as its position embeddings hold" if traits.max_tokens is None
                else f"at most {traits.max_tokens} tokens")
        raise AttnCliError(f"--impl tiled does not apply to a {traits.title} checkpoint: it "
                           f"reads {most}, which the naive path shows whole")


def run_request(req: Request, extract: Extract | None = None, progress: Progress | None = None,
                naive_only: bool = False) -> Result:
    """What req asks for, on the path that fits: a checkpoint's layer (req.route) or a chapter-3
    variant, each tiled where its naive N × N stages would pass NAIVE_BUDGET, unless naive_only
    (`explain`, which shows every stage, refuses such inputs instead)."""
    if req.route is Route.checkpoint:
        return run_model(req, extract, progress, None if naive_only else NAIVE_BUDGET)
    if naive_only:
        return run_naive(req, extract)
    return run_variant(req, extract, progress)


@on_request_device
def run_model(req: Request, extract: Extract | None = None, progress: Progress | None = None,
              budget_bytes: int | None = None) -> Result:
    """Layer req.layer of a checkpoint: its attention over the normalised residual stream.

    Long inputs take the tiled path when the family has one and budget_bytes allows it
    (`run` only); a GPT-2 checkpoint reads at most 1024 tokens, which the naive path shows.
    """
    extract = extract or Extract(stages=None)
    model = open_checked(req)
    check_head(extract.head, model.spec.num_heads)
    doing(f"tokenizing {len(req.text or ''):,} characters")
    tokens = model.tokens(req)
    layer = model.spec.layer_index(req.layer or 0)
    impl = _impl(req, model, len(tokens.ids), layer, budget_bytes)
    config = _config(req, model, tokens, layer, impl, extract.head)
    check_measure(req, extract, len(tokens.ids), model.spec.num_heads, impl)
    plan = plan_predictions(req, extract, model, tokens, layer, impl is Impl.tiled)
    variant = model.traits.variant
    if impl is Impl.tiled:
        from attncli.long.run import run_long

        _cpu_only(req, len(tokens.ids))

        model.check_tokens(tokens.ids)
        picked, rolled = None, None
        if req.measure is Measure.rollout:
            from attncli.long.rollout import rollout_rows

            picked, layers = _rollout_layers(model, tokens, layer, extract)
            rolled = rollout_rows(layers, model.spec.windows[:layer + 1], picked,
                                  progress)  # (R, b) rows of Ã_L ··· Ã_0
            x, module = layers[-1]  # x: (T, d_model) the shown layer's input, whole
            del layers  # the earlier layers' inputs go before the tiled pass
        else:  # a repeat look starts from the fused path's kept streams
            x, module = cached_pass(req, model, tokens.ids, fused=True).layer_input(layer)
        prep = Prepared(tokens.tokens, x, module, model.spec.num_heads, Impl.tiled, config)
        # The module hands the kernel its heads ready: plain causal attention per head.
        result = run_long(req, prep, extract, progress)
        if picked is not None and rolled is not None:
            from attncli.long.run import with_rollout

            result = with_rollout(result, rolled, picked)
        result = replace(result, variant=variant, model=model.info(layer))
        return with_predictions(result, req, model, tokens, plan)
    passes = cached_pass(req, model, tokens.ids)  # a repeat look starts from kept streams
    shown = passes.attention(layer)
    result = to_result(variant, config, tokens.tokens, shown.inputs, shown.output, extract,
                       model=model.info(shown.layer))
    if req.measure is not Measure.weights:
        result = measured(result, *_measure_naive(passes, layer, req.measure), extract)
    return with_predictions(result, req, model, tokens, plan)


@torch.no_grad()
def _measure_naive(passes: CachedPass, layer: int,
                   measure: Measure) -> tuple[torch.Tensor | None, torch.Tensor]:
    """norm: layer's raw ‖α_ij · W_O^h v_j^h‖ (heads, T, T) and its rows renormalised;
    rollout: None and Ã_layer ··· Ã_0 (1, T, T), heads averaged, one block at a time."""
    rolled = last = None
    for trace in passes.trace(layer):
        if measure is Measure.rollout:
            step = residual_attention(trace.weights)  # (T, T) 0.5·I + 0.5·mean_h A, renormalised
            rolled = step if rolled is None else step @ rolled  # (T, T) layers 0..l
        last = trace
    assert last is not None, "a model has a layer 0"
    if rolled is not None:
        return None, rolled[None]  # (1, T, T)
    raw = norm_weights(last.weights, value_norms(last.values, last.w_o()))  # (heads, T, T)
    return raw, row_normalised(raw)


def _rollout_layers(model: Model, tokens: Tokens, layer: int,
                    extract: Extract) -> tuple[list[int], list[tuple[torch.Tensor, Attention]]]:
    """The rows a tiled rollout computes (the window's rows and the query's), checked and
    estimated, and every layer's input up to the last of them (the shown layer's whole)."""
    from attncli.long.rollout import check_rollout
    from attncli.long.run import rollout_picks

    if not isinstance(model, LayerInputs):
        raise AttnCliError(f"--measure rollout has no tiled path for a {model.traits.title} "
                           "checkpoint")
    picked = rollout_picks(extract, [t.text for t in tokens.tokens])
    prefix = max(picked) + 1
    check_rollout(len(picked), prefix, layer + 1, model.spec.d_model)
    return picked, model.layer_inputs(tokens.ids, layer, prefix)


THUMBNAIL = 24  # the largest side of a pooled per-head thumbnail


@on_request_device
def run_heads(req: Request, options: HeadsOptions | None = None) -> HeadsResult:
    """Every layer × head of a checkpoint (or of --layers): measures, scores, sinks and pooled
    thumbnails, from one forward pass that stops at the last layer shown."""
    options = options or HeadsOptions()
    if req.model is None:
        raise AttnCliError("attncli heads needs --model PATH|NAME (a local GPT-2 or Llama-family "
                           "checkpoint)")
    sort_measures([], options.sort)  # an unknown sort key fails before any work
    check_threshold(options.threshold)
    if options.probe is not None:
        check_probe(options.probe, options.probe_length, options.probe_seed)
    model = open_checked(req)
    first, stop = layer_span(options.layers, model.spec.n_layer)
    probe = None
    if options.probe is not None:
        tokens, probe = probe_tokens(model, req, options.probe, options.probe_length,
                                     options.probe_seed)
    else:
        doing(f"tokenizing {len(req.text or ''):,} characters")
        tokens = model.tokens(req)
    ids, spec = tokens.ids, model.spec
    n = len(ids)
    if n < 2:
        raise AttnCliError(f"head measures need at least 2 tokens (got {n})")
    views = 1 if req.measure is Measure.norm else 0
    check_fits(heads_bytes(stop - first, spec.num_heads, n, views),
               f"heads keeps {stop - first} layers' {spec.num_heads} heads of {n:,} × {n:,} "
               "weights", "pick fewer layers with --layers a:b, or `attncli run --layer L` "
               "shows one layer of a long input")
    done = heads_pass(model, ids, first, stop, req.measure, cached_pass(req, model, ids))
    doing("scoring the heads")
    kinds = SCORES if probe is None else (SCORE_OF[probe.kind],)
    measures = scored_rows(done, options.threshold, kinds)
    if options.effect:
        doing("ablating each head")
        effects = head_effects(model, ids, cached_pass(req, model, ids).trace(spec.n_layer - 1))
        for row in measures:
            row["effect"] = effects[(row["layer"], row["head"])]
    measures = sort_measures(measures, options.sort)
    if model.traits.kv_heads:
        for row in measures:
            row["kv_head"] = spec.kv_group(row["head"])
    view = torch.stack(done.views)  # (layers, heads or 1, T, T)
    del done.weights, done.views
    side = min(n, THUMBNAIL)
    # Max pooling keeps a sharp one-token pattern visible in a small picture.
    pooled = torch.nn.functional.adaptive_max_pool2d(view.flatten(0, 1).unsqueeze(1), side)
    thumbs = pooled.view(*view.shape[:2], side, side)  # (layers, heads or 1, p, p)
    return HeadsResult(config=heads_config(req, options, tokens, (first, stop), probe),
                       model=model.info(), tokens=tokens.tokens, measures=measures,
                       thumbnails=plain(thumbs), weights=page_weights(view), layers=done.sinks)
