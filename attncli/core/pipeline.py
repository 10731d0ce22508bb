"""text → tokens → embeddings → attention → Result, on the naive path (every N × N stage).

The tiled path (long/) and checkpoints (models/) build on prepare() and config_of() here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from attncli.activity import doing
from attncli.core.attention import Attention, AttentionOutput, build_variant
from attncli.core.convert import plain
from attncli.core.display import check_stages, resolve_query
from attncli.core.embed import embed
from attncli.core.measures import norm_weights, row_normalised, value_norms
from attncli.core.request import Device, Extract, Measure, Request
from attncli.core.result import STAGES, QueryRow, Result, RunConfig, TextConfig, TokenInfo
from attncli.core.sizes import (
    FLOAT_BYTES,
    NAIVE_BUDGET,
    Impl,
    check_module,
    check_naive,
    choose_impl,
    naive_bytes,
)
from attncli.core.tokens import get_encoding, tokenize
from attncli.core.variants import HEAD_DIM_STAGES, TOKEN_STAGES
from attncli.errors import AttnCliError
from attncli.machine import check_fits, size_text
from attncli.version import __version__

# The stages with a head axis first: --head keeps one head of each.
HEAD_STAGES = (*TOKEN_STAGES, *HEAD_DIM_STAGES)


def resolve_device(device: Device) -> torch.device:
    """cpu, cuda, mps, or auto (cuda when available); one asked for and absent, refused."""
    if device is Device.auto:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device is Device.cuda and not torch.cuda.is_available():
        raise AttnCliError("--device cuda was asked for, but no CUDA device is available")
    if device is Device.mps and not torch.backends.mps.is_available():
        raise AttnCliError("--device mps was asked for, but no MPS device (Apple silicon GPU) "
                           "is available")
    return torch.device(device.value)


def text_tokens(req: Request) -> tuple[list[TokenInfo], list[int]]:
    """Token records and ids of the request's text."""
    if req.text is None:
        raise AttnCliError("no input text")
    doing(f"tokenizing {len(req.text):,} characters")
    pieces = tokenize(req.text, req.encoding, req.allow_special)
    return [TokenInfo.of(p) for p in pieces], [p.id for p in pieces if p.id is not None]


def _inputs(req: Request) -> tuple[list[TokenInfo], Tensor]:
    """Token records and the input vectors (T, d_in)."""
    if req.inputs is not None:
        tokens = [TokenInfo(i, None, label) for i, label in enumerate(req.inputs.labels)]
        return tokens, torch.tensor(req.inputs.vectors, dtype=torch.float32)  # (T, d_in)
    tokens, ids = text_tokens(req)
    x = embed(ids, get_encoding(req.encoding).n_vocab, req.emb_dim, req.context_length,
              req.seed, req.positions)  # (T, emb_dim)
    return tokens, x


@dataclass
class Prepared:
    """A run's inputs and seeded module, the path it takes and its config."""

    tokens: list[TokenInfo]
    x: Tensor  # (T, d_in) on the run's device
    module: Attention
    heads: int
    impl: Impl  # naive or tiled
    config: RunConfig


def config_of(req: Request, num_tokens: int, d_in: int, d_out: int, heads: int,
              impl: Impl, head: int | None) -> RunConfig:
    """The typed config of a chapter-3 run."""
    text = None if req.inputs is not None else TextConfig(
        req.encoding, req.allow_special, req.emb_dim, req.context_length, req.positions)
    tiled = impl is Impl.tiled
    return RunConfig(
        source="inputs" if req.inputs is not None else "text", num_tokens=num_tokens,
        d_in=d_in, d_out=d_out, heads=heads, impl=impl.value, version=__version__,
        variant=req.kind.value, seed=req.seed, dropout=req.dropout, qkv_bias=req.qkv_bias,
        device=req.device.value, text=text, top_k=req.keys_kept if tiled else None,
        pool=req.pooling.value if tiled else None, head=head, measure=measure_of(req))


def measure_of(req: Request) -> str | None:
    """The config's measure: None for the weights themselves (their JSON stays as it was)."""
    return None if req.measure is Measure.weights else req.measure.value


def check_measure(req: Request, extract: Extract, num_tokens: int, heads: int,
                  impl: Impl) -> None:
    """Refuse what --measure norm or rollout cannot show; on the naive path, estimate what
    they keep (the tiled path estimates its own)."""
    if req.measure is Measure.weights:
        return
    option = f"--measure {req.measure.value}"
    if extract.stages:
        raise AttnCliError(f"--show picks stages of the attention weights; {option} shows its "
                           "own matrix: leave out one of them")
    if req.measure is Measure.rollout and extract.head is not None:
        raise AttnCliError("--head does not apply with --measure rollout: rollout averages the "
                           "heads into one matrix")
    if req.full:
        raise AttnCliError(f"--full does not apply with {option}: pick the rows with --rows a:b")
    if impl is Impl.tiled:
        return
    # norm: the raw and row-normalised matrices beside the weights; rollout: three (T, T).
    copies = 3 * heads if req.measure is Measure.norm else 3
    check_fits(copies * num_tokens * num_tokens * FLOAT_BYTES,
               f"{option} keeps {copies} {num_tokens:,} × {num_tokens:,} matrices",
               "pick fewer tokens")


def prepare(req: Request, head: int | None = None, budget_bytes: int = NAIVE_BUDGET) -> Prepared:
    """Inputs, the seeded module, the path (--impl, auto against budget_bytes) and the config."""
    device = resolve_device(req.device)
    tokens, x = _inputs(req)  # x: (T, d_in)
    d_in = x.shape[1]
    heads = req.num_heads
    impl = choose_impl(req.impl, len(tokens), heads, budget_bytes)
    check_head(head, heads)
    d_out = req.d_out or d_in
    check_module(d_in, d_out, len(tokens), req.traits.multihead, f"--d-out {d_out}"
                 if req.d_out else f"--inputs {d_in:,}-wide vectors" if req.inputs
                 else f"--emb-dim {d_in}")
    if impl is Impl.naive:
        check_naive(naive_bytes(len(tokens), heads), len(tokens), heads)
    # Seed right before the module is built, as the book does, so its numbers come out.
    torch.manual_seed(req.seed)
    module = build_variant(req.kind, d_in, req.d_out or d_in, num_heads=heads,
                           dropout=req.dropout, qkv_bias=req.qkv_bias).to(device)
    config = config_of(req, len(tokens), d_in, module.d_out, heads, impl, head)
    return Prepared(tokens, x.to(device), module, heads, impl, config)


def check_head(head: int | None, num_heads: int) -> None:
    """Reject a --head outside 0..num_heads-1."""
    if head is not None and not 0 <= head < num_heads:
        raise AttnCliError(f"--head {head} is out of range: this run has {num_heads} head(s), "
                           f"numbered 0 to {num_heads - 1}")


def window_of(extract: Extract, num_tokens: int) -> dict[str, list[int]] | None:
    """The --rows/--cols window resolved against the run ({"rows", "cols"}), or None."""
    if extract.rows is None and extract.cols is None:
        return None
    rows = extract.rows.resolve(num_tokens) if extract.rows is not None else (0, num_tokens)
    cols = extract.cols.resolve(num_tokens) if extract.cols is not None else (0, num_tokens)
    return {"rows": list(rows), "cols": list(cols)}


def to_result(variant: str, config: RunConfig, tokens: list[TokenInfo], x: Tensor,
              out: AttentionOutput, extract: Extract, **extra: object) -> Result:
    """A naive pass as a Result: only the stages and the head extract names are converted."""
    tensors: dict[str, Tensor | None] = {name: getattr(out, name, None) for name in STAGES}
    tensors["inputs"] = x
    present = tuple(name for name in STAGES if tensors.get(name) is not None)
    if extract.stages is not None:
        check_stages(extract.stages, present, variant)
    if extract.head is not None:
        h = extract.head
        tensors |= {name: None if t is None else t[h:h + 1] for name, t in tensors.items()
                    if name in HEAD_STAGES}
    kept = present if extract.stages is None else extract.stages  # in the order asked for
    stages = {name: plain(tensors[name]) for name in kept if name in present}
    weights = stages["weights"] if "weights" in stages else plain(tensors["weights"])
    context = stages["context"] if "context" in stages else plain(out.context)
    labels = [t.text for t in tokens]
    index = None if extract.query is None else resolve_query(extract.query, labels)
    query = None if index is None else QueryRow(index, labels[index],
                                                [head[index] for head in weights])
    return Result(variant=variant, config=config, tokens=tokens, weights=weights,
                  context=context, stages=stages, present=present, query=query,
                  window=window_of(extract, len(tokens)), **extra)  # type: ignore[arg-type]


def naive(prep: Prepared, extract: Extract) -> Result:
    """The naive path: every (heads, T, T) stage of the module's forward pass."""
    with torch.no_grad():
        out = prep.module(prep.x)
        result = to_result(prep.config.variant or "", prep.config, prep.tokens, prep.x, out,
                           extract)
        if prep.config.measure != Measure.norm.value:
            return result
        raw = norm_weights(out.weights, key_norms(prep.module, prep.x))  # (heads, T, T)
    return measured(result, raw, row_normalised(raw), extract)


def out_proj_of(module: Attention, values: Tensor) -> Tensor:
    """W_O (d_out, heads · head_dim) as nn.Linear holds it, read off the module's combine():
    the identity for a variant without an output projection (simple, qkv, causal)."""
    heads, _, head_dim = values.shape  # values (heads, T, head_dim): their sizes and device
    width = heads * head_dim
    eye = torch.eye(width, dtype=values.dtype, device=values.device)  # (width, width)
    basis = eye.view(width, heads, head_dim).transpose(0, 1)  # (heads, width, hd): token t = e_t
    bias = module.combine(basis[:, :1] * 0)  # (1, d_out) what combine adds to nothing
    return (module.combine(basis) - bias).T  # (d_out, width)


def key_norms(module: Attention, x: Tensor) -> Tensor:
    """‖W_O^h v_j^h‖ (heads, T) of each head's values of x (T, d_in) (simple: v_j = x_j)."""
    _, _, values = module.heads_qkv(x)  # (heads, T, head_dim)
    return value_norms(values, out_proj_of(module, values))  # (heads, T)


def measured(result: Result, raw: Tensor | None, shown: Tensor, extract: Extract) -> Result:
    """A naive result whose matrix is the measure's: shown (heads or 1, T, T) as weights, and
    raw, norm's lengths before the rows are renormalised (None for rollout)."""
    if extract.head is not None and raw is not None:
        one = slice(extract.head, extract.head + 1)
        raw, shown = raw[one], shown[one]  # (1, T, T)
    weights = plain(shown)
    query = None if result.query is None else replace(
        result.query, weights=[head[result.query.index] for head in weights])
    return replace(result, weights=weights, norm=None if raw is None else plain(raw),
                   query=query)


def run_naive(req: Request, extract: Extract | None = None,
              budget_bytes: int = NAIVE_BUDGET) -> Result:
    """The naive path only, for commands that show every N × N stage; long inputs are refused."""
    extract = extract or Extract(stages=None)
    if req.impl is Impl.tiled:
        raise AttnCliError("--impl tiled applies to `attncli run` only: this command shows "
                           "every N × N stage (use --impl naive or auto)")
    prep = prepare(req, extract.head, budget_bytes)
    if prep.impl is Impl.tiled:
        raise AttnCliError(
            f"{len(prep.tokens):,} tokens × {prep.heads} head(s) need about "
            f"{size_text(naive_bytes(len(prep.tokens), prep.heads))} as full N × N matrices, "
            f"more than --impl auto allows ({NAIVE_BUDGET // 2**20} MiB); `attncli run` shows "
            "long inputs, or force this with --impl naive")
    return naive(prep, extract)
