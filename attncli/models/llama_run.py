"""`run`, `explain` and `heads` on a Llama-family checkpoint: tensors become a plain Result here."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from attncli import __version__
from attncli.core.pipeline import THUMBNAIL, plain, to_result
from attncli.core.result import HeadsResult, LongResult, Result, TokenInfo
from attncli.errors import AttnCliError
from attncli.models.hf_tokens import hf_tokenize
from attncli.models.llama import llama_all_layers, llama_attention
from attncli.models.llama_checkpoint import LlamaCheckpoint, open_llama, resolve_llama

if TYPE_CHECKING:
    from attncli.core.display import LongView
    from attncli.core.pipeline import Request
    from attncli.long.run import Progress

VARIANT = "llama"  # the Result's variant for the whole family; model.architecture says which
# The stages these models add, in computation order: after Q, K, V and before the scores.
EXTRA_STAGES = ("queries_norm", "keys_norm", "queries_rope", "keys_rope")


def llama_info(ckpt: LlamaCheckpoint, layer: int | None = None) -> dict[str, Any]:
    """The "model" object of the JSON: where the checkpoint is, its shape and its attention."""
    spec = ckpt.spec
    info: dict[str, Any] = {
        "path": str(spec.directory), "architecture": spec.architecture, "layers": spec.n_layer,
        "heads": spec.num_heads, "kv_heads": spec.kv_heads, "head_dim": spec.head_dim,
        "d_model": spec.d_model, "rope_theta": spec.rope_theta,
        "rope_scaling": spec.rope_scaling.get("rope_type", "default"),
        "sliding_window": spec.sliding_window,
    }  # fmt: skip
    if layer is not None:
        info["layer"] = layer
        info["window"] = spec.layer_windows[layer]  # this layer's window (None: full causal)
    return info


def llama_tokens(ckpt: LlamaCheckpoint,
                 req: Request) -> tuple[list[TokenInfo], list[int], dict[str, Any]]:
    """Token records, ids, and the "tokenizer" JSON: what its post-processor added."""
    if req.text is None:
        raise AttnCliError("no input text")
    if req.heads is not None and req.heads != ckpt.spec.num_heads:
        raise AttnCliError(f"heads={req.heads} disagrees with num_attention_heads="
                           f"{ckpt.spec.num_heads} in config.json")
    if req.encoding not in ("gpt2", "r50k_base"):
        raise AttnCliError(f"--model uses the checkpoint's own tokenizer.json, not --encoding "
                           f"{req.encoding}")
    tokens = hf_tokenize(ckpt.directory, req.text, req.allow_special)
    ids = [p.id for p in tokens.pieces if p.id is not None]
    added = {"file": tokens.name, "bos": tokens.before[0] if tokens.before else None,
             "added_before": tokens.before, "added_after": tokens.after}
    return [TokenInfo.of(p) for p in tokens.pieces], ids, added


def _config(req: Request, ckpt: LlamaCheckpoint, tokens: list[TokenInfo],
            added: dict[str, Any]) -> dict[str, Any]:
    spec = ckpt.spec
    return {"model": req.model, "tokenizer": added, "allow_special": req.allow_special,
            "source": "text", "num_tokens": len(tokens),
            "d_in": spec.d_model, "d_out": spec.num_heads * spec.head_dim, "heads": spec.num_heads,
            "impl": "naive", "version": __version__}


def _impl(req: Request, ckpt: LlamaCheckpoint, num_tokens: int,
          budget_bytes: int | None) -> str:
    """naive or tiled: --impl, or auto against the budget; None budget means naive only."""
    from attncli.long.run import size_text
    from attncli.long.tiled import NAIVE_BUDGET, choose_impl, naive_bytes

    heads = ckpt.spec.num_heads
    impl = choose_impl(req.impl, num_tokens, heads, budget_bytes or NAIVE_BUDGET)
    if impl == "tiled" and budget_bytes is None:
        raise AttnCliError(
            f"{num_tokens:,} tokens × {heads} heads need about "
            f"{size_text(naive_bytes(num_tokens, heads))} as full N × N matrices, more than "
            f"--impl auto allows ({NAIVE_BUDGET // 2**20} MiB); `attncli run` shows long "
            "inputs, or force this with --impl naive")
    window = ckpt.spec.layer_windows[ckpt.spec.layer_index(req.layer)]
    if impl == "tiled" and window is not None and window < num_tokens:
        raise AttnCliError(
            f"layer {req.layer} has a sliding window of {window} tokens, which the tiled path "
            f"does not implement; use --impl naive, or at most {window} tokens")
    return impl


def run_llama(req: Request, view: LongView | None = None, progress: Progress | None = None,
              budget_bytes: int | None = None) -> Result | LongResult:
    """Layer req.layer of a Llama-family model: its attention over the RMSNorm'd stream.

    Long inputs take the tiled path when budget_bytes allows it (`attncli run`).
    """
    ckpt = resolve_llama(req.model or "")
    tokens, ids, added = llama_tokens(ckpt, req)
    if _impl(req, ckpt, len(ids), budget_bytes) == "tiled":
        return _run_long(req, ckpt, tokens, ids, _config(req, ckpt, tokens, added), view,
                         progress)
    with open_llama(ckpt) as weights:
        shown = llama_attention(weights, ckpt.spec, ids, req.layer)
    config = {**_config(req, ckpt, tokens, added), "layer": shown.layer}
    result = to_result(req, tokens, shown.inputs, shown.output, config,
                       llama_info(ckpt, shown.layer))
    out = shown.output
    extra = {name: getattr(out, name) for name in EXTRA_STAGES if getattr(out, name) is not None}
    stages = {**result.stages, **{name: plain(t) for name, t in extra.items()
                                  if req.keep is None or name in req.keep}}
    present = list(result.present or ())
    at = present.index("values") + 1 if "values" in present else len(present)
    present[at:at] = list(extra)
    return replace(result, variant=VARIANT, stages=stages, present=tuple(present))


def _run_long(req: Request, ckpt: LlamaCheckpoint, tokens: list[TokenInfo], ids: list[int],
              config: dict[str, Any], view: LongView | None,
              progress: Progress | None) -> LongResult:
    """The tiled path: earlier layers through fused attention, the shown one tile by tile."""
    from attncli.core.display import LongView
    from attncli.core.pipeline import Prepared
    from attncli.long.run import run_long
    from attncli.models.llama import RotaryProjection, llama_layer_input

    spec = ckpt.spec
    layer = spec.layer_index(req.layer)
    info = llama_info(ckpt, layer)
    config = {**config, "layer": layer, "impl": "tiled", "top_k": req.top_k, "pool": req.pool,
              **{key: info[key] for key in ("architecture", "kv_heads", "head_dim", "window")}}
    with open_llama(ckpt) as weights:
        x, cos, sin = llama_layer_input(weights, spec, ids, layer)  # x: (T, d_model)
        module = RotaryProjection(weights, spec, layer, cos, sin)
        prep = Prepared(tokens, x, module, spec.num_heads, "tiled", config)
        # The module hands the kernel rotated, group-repeated heads: multi-head attention.
        result = run_long(replace(req, variant="multihead"), prep, view or LongView(), progress)
    return replace(result, variant=VARIANT)


def run_llama_heads(req: Request, sort: str) -> HeadsResult:
    """Every layer × query head of a Llama-family model: measures and pooled thumbnails."""
    from attncli.models.measures import head_measures, sort_measures

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
              "num_tokens": len(tokens), "sort": sort,
              "version": __version__}
    return HeadsResult(config=config, model=llama_info(ckpt), tokens=tokens,
                       measures=[dict(m) for m in measures], thumbnails=plain(thumbs))
