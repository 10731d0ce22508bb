"""`run`, `explain` and `heads` on a Llama-family checkpoint: tensors become a plain Result here."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from attncli import __version__
from attncli.core.convert import plain
from attncli.core.pipeline import Prepared, check_head, to_result
from attncli.core.request import Extract, Request
from attncli.core.result import (
    FamilyInfo,
    HeadsResult,
    ModelInfo,
    Result,
    RunConfig,
    TextConfig,
    TokenInfo,
)
from attncli.core.sizes import NAIVE_BUDGET, Impl, choose_impl, naive_bytes, size_text
from attncli.errors import AttnCliError
from attncli.models.hf_tokens import hf_tokenize
from attncli.models.llama import llama_all_layers, llama_attention
from attncli.models.llama_checkpoint import LlamaCheckpoint, open_llama, resolve_llama

if TYPE_CHECKING:
    from attncli.long.run import Progress

VARIANT = "llama"  # the Result's variant for the whole family; model.architecture says which
THUMBNAIL = 24  # the largest side of a pooled per-head thumbnail


def llama_info(ckpt: LlamaCheckpoint, layer: int | None = None) -> ModelInfo:
    """The "model" object: where the checkpoint is, its shape and its attention."""
    spec = ckpt.spec
    family = FamilyInfo(
        architecture=spec.architecture, kv_heads=spec.kv_heads, head_dim=spec.head_dim,
        rope_theta=spec.rope_theta, rope_scaling=spec.rope_scaling.get("rope_type", "default"),
        sliding_window=spec.sliding_window,
        window=None if layer is None else spec.layer_windows[layer])
    return ModelInfo(str(spec.directory), spec.n_layer, spec.num_heads, spec.d_model, layer,
                     family)


def llama_tokens(ckpt: LlamaCheckpoint,
                 req: Request) -> tuple[list[TokenInfo], list[int], dict[str, Any]]:
    """Token records, ids, and the "tokenizer" JSON: what its post-processor added."""
    if req.text is None:
        raise AttnCliError("no input text")
    if req.heads is not None and req.heads != ckpt.spec.num_heads:
        raise AttnCliError(f"heads={req.heads} disagrees with num_attention_heads="
                           f"{ckpt.spec.num_heads} in config.json")
    tokens = hf_tokenize(ckpt.directory, req.text, req.allow_special)
    ids = [p.id for p in tokens.pieces if p.id is not None]
    added = {"file": tokens.name, "bos": tokens.before[0] if tokens.before else None,
             "added_before": tokens.before, "added_after": tokens.after}
    return [TokenInfo.of(p) for p in tokens.pieces], ids, added


def _config(req: Request, ckpt: LlamaCheckpoint, tokens: list[TokenInfo], added: dict[str, Any],
            layer: int, impl: Impl, head: int | None) -> RunConfig:
    spec, tiled = ckpt.spec, impl is Impl.tiled
    return RunConfig(
        source="text", num_tokens=len(tokens), d_in=spec.d_model,
        d_out=spec.num_heads * spec.head_dim, heads=spec.num_heads, impl=impl.value,
        version=__version__, model=req.model, layer=layer,
        text=TextConfig(None, req.allow_special), tokenizer=added, head=head,
        top_k=req.keys_kept if tiled else None, pool=req.pooling.value if tiled else None)


def _impl(req: Request, ckpt: LlamaCheckpoint, num_tokens: int, layer: int,
          budget_bytes: int | None) -> Impl:
    """naive or tiled: --impl, or auto against the budget; None budget means naive only."""
    heads = ckpt.spec.num_heads
    impl = choose_impl(req.impl, num_tokens, heads, budget_bytes or NAIVE_BUDGET)
    if impl is Impl.tiled and budget_bytes is None:
        raise AttnCliError(
            f"{num_tokens:,} tokens × {heads} heads need about "
            f"{size_text(naive_bytes(num_tokens, heads))} as full N × N matrices, more than "
            f"--impl auto allows ({NAIVE_BUDGET // 2**20} MiB); `attncli run` shows long "
            "inputs, or force this with --impl naive")
    window = ckpt.spec.layer_windows[layer]
    if impl is Impl.tiled and window is not None and window < num_tokens:
        raise AttnCliError(
            f"layer {layer} has a sliding window of {window} tokens, which the tiled path "
            f"does not implement; use --impl naive, or at most {window} tokens")
    return impl


def run_llama(req: Request, extract: Extract, progress: Progress | None = None,
              budget_bytes: int | None = None) -> Result:
    """Layer req.layer of a Llama-family model: its attention over the RMSNorm'd stream.

    Long inputs take the tiled path when budget_bytes allows it (`attncli run`).
    """
    ckpt = resolve_llama(req.model or "")
    check_head(extract.head, ckpt.spec.num_heads)
    tokens, ids, added = llama_tokens(ckpt, req)
    layer = ckpt.spec.layer_index(req.layer or 0)
    impl = _impl(req, ckpt, len(ids), layer, budget_bytes)
    config = _config(req, ckpt, tokens, added, layer, impl, extract.head)
    if impl is Impl.tiled:
        return _run_long(req, ckpt, tokens, ids, layer, config, extract, progress)
    with open_llama(ckpt) as weights:
        shown = llama_attention(weights, ckpt.spec, ids, layer)
    return to_result(VARIANT, config, tokens, shown.inputs, shown.output, extract,
                     model=llama_info(ckpt, shown.layer))


def _run_long(req: Request, ckpt: LlamaCheckpoint, tokens: list[TokenInfo], ids: list[int],
              layer: int, config: RunConfig, extract: Extract,
              progress: Progress | None) -> Result:
    """The tiled path: earlier layers through fused attention, the shown one tile by tile."""
    from attncli.long.run import run_long
    from attncli.models.llama import RotaryProjection, llama_layer_input

    spec = ckpt.spec
    with open_llama(ckpt) as weights:
        x, cos, sin = llama_layer_input(weights, spec, ids, layer)  # x: (T, d_model)
        module = RotaryProjection(weights, spec, layer, cos, sin)
        prep = Prepared(tokens, x, module, spec.num_heads, Impl.tiled, config)
        # The module hands the kernel rotated, group-repeated heads: causal attention per head.
        result = run_long(req, prep, extract, progress)
    return replace(result, variant=VARIANT, model=llama_info(ckpt, layer))


def run_llama_heads(req: Request, sort: str) -> HeadsResult:
    """Every layer × query head of a Llama-family model: measures and pooled thumbnails."""
    from attncli.models.measures import head_measures, page_weights, sort_measures

    ckpt = resolve_llama(req.model or "")
    tokens, ids, added = llama_tokens(ckpt, req)
    with open_llama(ckpt) as weights:
        weights_all = llama_all_layers(weights, ckpt.spec, ids)  # (layers, heads, T, T)
    measures = sort_measures(head_measures(weights_all), sort)
    for row in measures:
        row["kv_head"] = ckpt.spec.kv_group(row["head"])  # type: ignore[typeddict-unknown-key]
    side = min(len(ids), THUMBNAIL)
    flat = weights_all.flatten(0, 1).unsqueeze(1)  # (layers·heads, 1, T, T)
    pooled = torch.nn.functional.adaptive_max_pool2d(flat, side)  # (layers·heads, 1, p, p)
    thumbs = pooled.view(ckpt.spec.n_layer, ckpt.spec.num_heads, side, side)  # (L, H, p, p)
    config = {"model": req.model, "tokenizer": added, "allow_special": req.allow_special,
              "num_tokens": len(tokens), "sort": sort, "version": __version__}
    return HeadsResult(config=config, model=llama_info(ckpt), tokens=tokens,
                       measures=[dict(m) for m in measures], thumbnails=plain(thumbs),
                       weights=page_weights(weights_all))
