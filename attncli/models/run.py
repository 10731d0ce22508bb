"""Runs on a checkpoint: one layer's attention as a Result, or every head's measures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from attncli import __version__
from attncli.core.convert import plain
from attncli.core.pipeline import check_head, text_tokens, to_result
from attncli.core.request import Extract, Request
from attncli.core.result import HeadsResult, ModelInfo, Result, RunConfig, TextConfig
from attncli.core.sizes import Impl
from attncli.errors import AttnCliError
from attncli.models.checkpoint import Checkpoint, resolve_checkpoint
from attncli.models.gpt2 import gpt2_all_layers, gpt2_attention
from attncli.models.llama_config import family_of, is_llama_family
from attncli.models.measures import head_measures, page_weights, sort_measures

if TYPE_CHECKING:
    from attncli.long.run import Progress

THUMBNAIL = 24  # the largest side of a pooled per-head thumbnail


def model_info(ckpt: Checkpoint, layer: int | None = None) -> ModelInfo:
    """Where the checkpoint is and its shape."""
    return ModelInfo(str(ckpt.path), ckpt.n_layer, ckpt.n_head, ckpt.n_embd, layer)


def run_model(req: Request, extract: Extract | None = None, progress: Progress | None = None,
              budget_bytes: int | None = None) -> Result:
    """Layer req.layer of a checkpoint: its attention over the normalised residual stream.

    A Llama-family model may take the tiled path when budget_bytes is given (`run` only); a
    GPT-2 checkpoint reads at most 1024 tokens, which the naive path shows whole.
    """
    extract = extract or Extract(stages=None)
    if is_llama_family(req.model or ""):
        from attncli.models.llama_run import run_llama

        return run_llama(req, extract, progress, budget_bytes)
    if req.impl is Impl.tiled:
        raise AttnCliError("--impl tiled does not apply to a GPT-2 checkpoint: it reads at most "
                           "1024 tokens, which the naive path shows whole")
    ckpt = resolve_checkpoint(req.model or "", req.heads)
    check_head(extract.head, ckpt.n_head)
    tokens, ids = text_tokens(req)
    shown = gpt2_attention(ckpt, ids, req.layer or 0)
    config = RunConfig(source="text", num_tokens=len(tokens), d_in=ckpt.n_embd,
                       d_out=ckpt.n_embd, heads=ckpt.n_head, impl="naive", version=__version__,
                       model=req.model, layer=shown.layer,
                       text=TextConfig("gpt2", req.allow_special), head=extract.head)
    return to_result("gpt2", config, tokens, shown.inputs, shown.output, extract,
                     model=model_info(ckpt, shown.layer))


def run_heads(req: Request, sort: str = "layer") -> HeadsResult:
    """Every layer × head of a GPT-2 checkpoint: measures and pooled thumbnails."""
    if req.model is None:
        raise AttnCliError("attncli heads needs --model PATH|NAME (a local GPT-2 or Llama-family "
                           "checkpoint)")
    sort_measures([], sort)  # an unknown sort key fails before any work
    if family_of(req.model):
        from attncli.models.llama_run import run_llama_heads

        return run_llama_heads(req, sort)
    ckpt = resolve_checkpoint(req.model, req.heads)
    tokens, ids = text_tokens(req)
    weights = gpt2_all_layers(ckpt, ids)  # (layers, heads, T, T)
    measures = sort_measures(head_measures(weights), sort)
    side = min(len(ids), THUMBNAIL)
    flat = weights.flatten(0, 1).unsqueeze(1)  # (layers·heads, 1, T, T)
    # Max pooling keeps a sharp one-token pattern visible in a small picture.
    pooled = torch.nn.functional.adaptive_max_pool2d(flat, side)  # (layers·heads, 1, p, p)
    thumbs = pooled.view(ckpt.n_layer, ckpt.n_head, side, side)  # (layers, heads, p, p)
    config = {"model": req.model, "encoding": "gpt2", "allow_special": req.allow_special,
              "num_tokens": len(tokens), "sort": sort, "version": __version__}
    return HeadsResult(config=config, model=model_info(ckpt), tokens=tokens,
                       measures=[dict(m) for m in measures], thumbnails=plain(thumbs),
                       weights=page_weights(weights))
