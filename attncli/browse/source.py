"""What browse shows, as rows of heads computed on demand and kept: a model's layers, or the
chapter-3 variants on one text. Short inputs hold every weight; long ones take the tiled pass,
so a head's window, row or pooled blocks are exact and the N × N matrix is never made."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from attncli.browse.patterns import Cells, ExactRow, RowData, TiledRow, matrices, tiled_row
from attncli.core.compare import Shared, variant_request
from attncli.core.pipeline import Prepared, naive, prepare
from attncli.core.request import Extract, Measure, Request, Route
from attncli.core.result import Result
from attncli.core.sizes import NAIVE_BUDGET, Impl
from attncli.core.variants import TRAITS, Variant
from attncli.errors import AttnCliError
from attncli.models.family import LayerInputs
from attncli.models.heads import heads_bytes
from attncli.models.measures import head_measures
from attncli.models.run import open_checked, run_heads, run_model
from attncli.models.scores import head_scores, stacked_patterns
from attncli.records.heads import HeadsOptions

WEIGHTS = "weights"
LAYER_CACHE = 4  # tiled layers whose queries and keys are kept (the rest keep their pictures)


@dataclass(frozen=True)
class RowInfo:
    """One row of the overview: how it is named, its heads and each head's kv head."""

    name: str  # "layer 3", or a variant's name
    label: str  # "L3", or the variant's name
    heads: int
    kv: tuple[int, ...] | None = None  # grouped-query attention: the kv head of each head
    views: tuple[str, ...] = (WEIGHTS,)  # what `v` cycles through
    stages: tuple[str, ...] = (WEIGHTS,)  # what `s` cycles through (the N × N stages)
    causal: bool = True


@dataclass
class Source:
    """The rows, and what computes one (row, view or stage) when it is first asked for."""

    title: str
    tokens: list[str]
    rows: list[RowInfo]
    compute: Callable[[int, str], RowData]
    long: bool = False
    pages: Callable[[int], Result | Any] | None = None  # the HTML page's result of a row
    start: int = 0  # the row selected first (--layer)
    answer: int | None = None  # a generation: the query of answer token 0's step (P - 1)
    notes: list[str] = field(default_factory=list)  # lines under the title (turns, a receipt)
    cells: Cells | None = None  # per position: what Enter opens instead of the head view
    _done: dict[tuple[int, str], RowData] = field(default_factory=dict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def ready(self, row: int, what: str = WEIGHTS) -> RowData | None:
        """The row's data when it has been computed, else None."""
        return self._done.get((row, what))

    def get(self, row: int, what: str = WEIGHTS) -> RowData:
        """The row's data, computed now if need be (one computation at a time)."""
        with self._lock:
            key = (row, what)
            held = self._done.get(key)
            if held is None or (isinstance(held, TiledRow) and not held.alive):
                self._done[key] = self.compute(row, what)
                self._forget_tiled(row)
            return self._done[key]

    def fetch(self, row: int, what: str = WEIGHTS) -> dict[tuple[int, str], RowData]:
        """The row's data computed (as get), with every row computed so far: a worker's result."""
        with self._lock:
            self.get(row, what)
            return self.held()

    def held(self) -> dict[tuple[int, str], RowData]:
        """Every row computed so far, by (row, view or stage)."""
        with self._lock:
            return dict(self._done)

    def keep(self, row: int, what: str, data: RowData) -> None:
        """Store data computed alongside another row's (a pass gives every layer at once)."""
        self._done.setdefault((row, what), data)

    def _forget_tiled(self, keep: int) -> None:
        tiled = [v for k, v in self._done.items()
                 if isinstance(v, TiledRow) and v.alive and k[0] != keep]
        for data in tiled[:max(0, len(tiled) - LAYER_CACHE + 1)]:
            data.release()


BEFORE_MASK = ("scores", "scaled", "capped")  # stages computed before the causal mask


def _scores(weights: np.ndarray, ids: list[int] | None) -> list[dict[str, float]]:
    """The `heads` measures of each head (and its head scores when the tokens have ids)."""
    w = torch.from_numpy(np.nan_to_num(weights, nan=0.0))[None]  # (1, heads, T, T)
    if w.shape[-1] < 2:  # the measures leave out row 0: one token has none
        return [{} for _ in range(w.shape[1])]
    rows = head_measures(w)
    found = head_scores(w, stacked_patterns(ids)) if ids and len(ids) == w.shape[-1] else {}
    return [{**{k: float(v) for k, v in row.items()  # type: ignore[arg-type]
                if k not in ("layer", "head")},
             **{name: float(found[name][0][h]) for name in found}}
            for h, row in enumerate(rows)]


def source_of(req: Request, shared: Shared) -> Source:
    """What browse shows for req: a checkpoint's layers, or the chapter-3 variants (req.variant
    alone when it names one), shared's settings applied to each."""
    if req.route is Route.checkpoint:
        return model_source(req)
    return chapter3_source(req, list(Variant) if req.variant is None else [req.variant], shared)


def chapter3_source(base: Request, variants: list[Variant], shared: Shared) -> Source:
    """The chapter-3 variants on one text (or --inputs), one row each, heads as the variant has."""
    requests: list[Request] = []
    preps: list[Prepared] = []
    left_out: list[str] = []
    for v in variants:
        req = variant_request(base, v, shared)
        if len(variants) > 1 and req.traits.multihead and preps:  # not asked for by name
            width = req.d_out or int(preps[0].x.shape[1])
            if width % req.num_heads:
                left_out.append(f"{v.value} left out: its {req.num_heads} heads do not divide "
                                f"d_out={width} (see --num-heads, --d-out)")
                continue
        preps.append(prepare(req))  # tokens, embeddings, seeded modules, the path
        requests.append(req)
    variants = [r.kind for r in requests]
    long = any(p.impl is Impl.tiled for p in preps)
    if long and any(r.dropout > 0 for r in requests):
        raise AttnCliError("--dropout is not supported on the tiled path (--impl tiled, or a text "
                           "past the naive budget): leave out --dropout, or use --impl naive or "
                           "a shorter text")
    ids = [t.id for t in preps[0].tokens if t.id is not None]
    results: dict[int, Result] = {}

    def result(row: int, measure: Measure = Measure.weights) -> Result:
        if measure is not Measure.weights:
            return naive(prepare(replace(requests[row], measure=measure)), Extract(stages=()))
        if row not in results:
            results[row] = naive(preps[row], Extract(stages=None))
        return results[row]

    def compute(row: int, what: str) -> RowData:
        prep, traits = preps[row], requests[row].traits
        if prep.impl is Impl.tiled:
            if what != WEIGHTS:
                raise AttnCliError(f"{what} is not kept on the tiled path: `attncli run` with a "
                                   "shorter text shows every stage")
            return tiled_row(prep.module, traits.causal, prep.x, requests[row].keys_kept)
        weights = matrices(result(row).weights, prep.heads)
        data = (result(row, Measure.norm).weights if what == "norm" else
                result(row).weights if what == WEIGHTS else result(row).stages[what])
        return ExactRow(matrices(data, prep.heads, traits.causal and what not in BEFORE_MASK),
                        _scores(weights, ids))

    rows = [RowInfo(v.value, v.value, p.heads, causal=TRAITS[v].causal,
                    views=(WEIGHTS,) if p.impl is Impl.tiled else (WEIGHTS, "norm"),
                    stages=(WEIGHTS,) if p.impl is Impl.tiled else _stages(result(k)))
            for k, (v, p) in enumerate(zip(variants, preps, strict=True))]
    count = len(preps[0].tokens)
    title = f"chapter-3 attention on {count:,} token{'s' if count != 1 else ''}" + (
        " (tiled: exact windows on demand)" if long else "") + "".join(
        f" · {note}" for note in left_out)
    return Source(title, [t.text for t in preps[0].tokens], rows, compute, long,
                  pages=None if long else result)


def _model_stages(req: Request) -> tuple[str, ...]:
    """The N × N stages of the model's layer 0 (the weights alone where they do not fit)."""
    try:
        return _stages(run_model(replace(req, layer=0), Extract(stages=None)))
    except AttnCliError:
        return (WEIGHTS,)


SQUARE = ("scores", "scaled", "capped", "masked", "softmax", "dropped", WEIGHTS)


def _stages(result: Result) -> tuple[str, ...]:
    """The N × N stages a naive result holds, in computation order."""
    return tuple(s for s in SQUARE if s == WEIGHTS or s in result.stages)


def model_source(req: Request) -> Source:
    """A checkpoint's layers, one row each: every weight of every layer from one pass when they
    fit, else each layer's tiled pass when it is first shown."""
    model = open_checked(req)
    spec, traits = model.spec, model.traits
    tokens = model.tokens(req)
    ids, n = tokens.ids, len(tokens.ids)
    if n < 2:
        raise AttnCliError(f"browse needs at least 2 tokens (got {n})")
    exact = req.impl is Impl.naive or not traits.supports_tiled or (
        req.impl is Impl.auto and heads_bytes(spec.n_layer, spec.num_heads, n) <= NAIVE_BUDGET)
    kv = tuple(spec.kv_group(h) for h in range(spec.num_heads)) if traits.kv_heads else None
    causal = not traits.bidirectional
    # The stages this family's layers have, from one pass to layer 0 (a model's stage is the
    # pass up to its layer: each later one is computed when it is first shown).
    stages = _model_stages(req) if exact else (WEIGHTS,)
    views = (WEIGHTS,) if not exact else (WEIGHTS, "norm", "rollout")
    rows = [RowInfo(f"layer {k}", f"L{k}", spec.num_heads, kv, views, stages,
                    causal) for k in range(spec.n_layer)]
    name = model.info().name or spec.architecture
    title = f"{name} · {spec.n_layer} layers × {spec.num_heads} heads · {n:,} tokens" + (
        "" if exact else " (tiled: each layer when shown, exact windows on demand)")
    source = Source(title, [t.text for t in tokens.tokens], rows, lambda r, w: _never(), not exact,
                    start=spec.layer_index(req.layer or 0))
    heads_done: dict[str, Any] = {}

    def every_layer(view: str) -> None:
        measure = Measure(view) if view != WEIGHTS else Measure.weights
        done = run_heads(replace(req, measure=measure), HeadsOptions(threshold=1.0))
        heads_done[view] = done
        scores = {(m["layer"], m["head"]): m for m in done.measures}
        for layer in range(spec.n_layer):
            weights = np.asarray(done.weights[layer]) if done.weights is not None else None
            if weights is None:
                raise AttnCliError("the weights of every layer did not fit in memory")
            per_head = [{k: float(v) for k, v in scores[(layer, h)].items()
                         if isinstance(v, int | float) and k not in ("layer", "head", "kv_head")}
                        for h in range(spec.num_heads)] if weights.shape[0] > 1 else [
                {"first": float(np.nanmean(weights[0, 1:, 0]))}]
            if causal:
                weights = matrices(weights, weights.shape[0], causal)
            source.keep(layer, view, ExactRow(weights.astype(np.float32), per_head))

    def compute(row: int, what: str) -> RowData:
        if exact and what in views:
            every_layer(what)
            data = source.ready(row, what)
            assert data is not None, "every layer was kept"
            return data
        if exact:  # a stage of one layer: its own pass
            shown = run_model(replace(req, layer=row), Extract(stages=None))
            if what not in shown.stages:
                raise AttnCliError(f"this model's layer {row} has no {what} stage")
            base = source.get(row, WEIGHTS)
            return ExactRow(matrices(shown.stages[what], spec.num_heads,
                                      causal and what not in BEFORE_MASK), base.scores)
        if what != WEIGHTS:
            raise AttnCliError(f"{what} needs every weight: a shorter text shows it")
        return _tiled_layer(model, ids, row, req, inputs)

    inputs: dict[int, tuple[torch.Tensor, Any]] = {}
    source.compute = compute
    source.pages = (lambda row: heads_done.get(WEIGHTS)) if exact else None
    return source


INPUTS_BUDGET = 2**30  # bytes of layer inputs kept for a long model's later rows
AHEAD = 4  # layers past the one asked for whose inputs one pass also keeps


def _tiled_layer(model: Any, ids: list[int], layer: int, req: Request,
                 inputs: dict[int, tuple[torch.Tensor, Any]]) -> RowData:
    """A long text's layer on the tiled path. One pass through the blocks keeps the inputs of
    the next few layers too (within INPUTS_BUDGET), so moving down the rows does not start each
    layer's pass from the embeddings again."""
    spec = model.spec
    if spec.tiled_refusal:
        raise AttnCliError(f"layer {layer}: {spec.tiled_refusal}; a shorter text shows it")
    window = spec.windows[layer]
    if window is not None and window < len(ids):
        raise AttnCliError(f"layer {layer} has a sliding window of {window} tokens, which the "
                           "tiled path does not implement: a shorter text shows it")
    model.check_tokens(ids)
    if layer not in inputs:
        inputs.clear()
        each = len(ids) * spec.d_model * 4  # one layer's input, float32
        last = min(spec.n_layer - 1, layer + min(AHEAD, INPUTS_BUDGET // each - 1))
        if isinstance(model, LayerInputs) and last > layer:
            for k, pair in enumerate(model.layer_inputs(ids, last, len(ids))):
                if k >= layer:
                    inputs[k] = pair  # x: (T, d_model) and its layer's module
        else:
            inputs[layer] = model.layer_input(ids, layer)  # x: (T, d_model)
    x, module = inputs[layer]
    return tiled_row(module, True, x, req.keys_kept)


def _never() -> RowData:
    raise AssertionError("replaced before use")
