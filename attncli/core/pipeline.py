"""run(request) → Result: text → tokens → embeddings → attention; tensors become plain data here."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from attncli import __version__
from attncli.core.attention import VARIANTS, AttentionOutput, build_variant
from attncli.core.embed import check_dims, embed
from attncli.core.inputs import InputVectors
from attncli.core.result import STAGES, HeadsResult, LongResult, Result, TokenInfo
from attncli.core.tokens import get_encoding, tokenize
from attncli.errors import AttnCliError
from attncli.long.tiled import NAIVE_BUDGET, choose_impl, naive_bytes

if TYPE_CHECKING:
    from attncli.core.display import LongView
    from attncli.long.run import Progress
    from attncli.models.checkpoint import Checkpoint


@dataclass(frozen=True)
class Request:
    """Every setting that affects the numbers of one run."""

    text: str | None = None
    inputs: InputVectors | None = None
    variant: str = "causal"
    encoding: str = "gpt2"
    allow_special: bool = False
    seed: int = 123
    emb_dim: int = 8
    context_length: int | None = None
    d_out: int | None = None
    heads: int | None = None
    dropout: float = 0.0
    qkv_bias: bool = False
    device: str = "cpu"
    model: str | None = None  # a GPT-2 checkpoint instead of a chapter-3 variant
    layer: int = 0
    keep: tuple[str, ...] | None = None  # the stages to keep as plain data; None keeps all
    impl: str = "auto"  # naive, tiled, or auto: naive while its N × N stages fit NAIVE_BUDGET
    top_k: int = 5  # tiled: the heaviest keys kept per query row
    pool: str = "max"  # tiled: how the terminal's heatmaps pool blocks of weights (max, mean)
    full: bool = False  # tiled: the whole weights matrix in the result, not a window
    positions: bool = True  # text: add the positional embedding to the token embedding


def validate(req: Request) -> None:
    """Reject settings that cannot run, before any work is done."""
    if req.model is not None:
        validate_model(req)
        return
    if req.variant not in VARIANTS:
        raise AttnCliError(f"unknown variant {req.variant!r} (choose from {', '.join(VARIANTS)})")
    if not 0.0 <= req.dropout < 1.0 or math.isnan(req.dropout):
        raise AttnCliError(f"dropout must be in [0, 1) (got {req.dropout})")
    check_dims(emb_dim=req.emb_dim, d_out=req.d_out, heads=req.heads,
               context_length=req.context_length)
    if not req.positions and req.inputs is not None:
        raise AttnCliError("--no-positions applies to text: --inputs vectors are used as given")
    if req.heads is not None and req.heads != 1 and req.variant != "multihead":
        raise AttnCliError(f"--heads applies to --variant multihead only (got variant "
                           f"{req.variant!r}, heads={req.heads})")
    if req.dropout > 0 and req.variant not in ("causal", "multihead"):
        raise AttnCliError(f"--dropout applies to causal and multihead only (got variant "
                           f"{req.variant!r})")
    choose_impl(req.impl, 0, 1)  # an unknown impl fails here
    if req.top_k < 0:
        raise AttnCliError(f"top-k must be 0 or more (got {req.top_k})")
    if req.pool not in ("max", "mean"):
        raise AttnCliError(f"unknown pool {req.pool!r} (choose from max, mean)")


def validate_model(req: Request) -> None:
    """With --model the checkpoint fixes the architecture: refuse settings that cannot apply."""
    if req.inputs is not None:
        raise AttnCliError("--model runs on text, not on --inputs vectors")
    if req.encoding not in ("gpt2", "r50k_base"):
        raise AttnCliError(f"--model uses GPT-2's own encoding, not --encoding {req.encoding}")
    if not req.positions:
        raise AttnCliError("--no-positions does not apply with --model: GPT-2 was trained with "
                           "its positional embeddings")
    if req.dropout:
        raise AttnCliError(f"--dropout does not apply with --model (got {req.dropout}): "
                           "a trained model is inspected as in inference")
    if req.device == "cuda":
        raise AttnCliError("--model runs on the CPU; leave out --device cuda")
    if req.impl == "tiled":
        raise AttnCliError("--impl tiled does not apply with --model: a GPT-2 checkpoint reads "
                           "at most 1024 tokens, which the naive path shows whole")
    check_dims(heads=req.heads)


def resolve_device(name: str) -> torch.device:
    """cpu, cuda, or auto (cuda when available)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise AttnCliError("--device cuda was asked for, but no CUDA device is available")
    if name not in ("cpu", "cuda"):
        raise AttnCliError(f"unknown device {name!r} (choose from cpu, cuda, auto)")
    return torch.device(name)


def _inputs(req: Request) -> tuple[list[TokenInfo], Tensor]:
    """Token records and the input vectors (T, d_in)."""
    if req.inputs is not None:
        tokens = [TokenInfo(i, None, label) for i, label in enumerate(req.inputs.labels)]
        return tokens, torch.tensor(req.inputs.vectors, dtype=torch.float32)  # (T, d_in)
    tokens, ids = text_tokens(req)
    x = embed(ids, get_encoding(req.encoding).n_vocab, req.emb_dim, req.context_length,
              req.seed, req.positions)  # (T, emb_dim)
    return tokens, x


def plain(t: Tensor | None) -> Any:
    """Nested Python lists of floats; -inf (a masked score) becomes None."""
    if t is None:
        return None
    t = t.detach().to("cpu", torch.float32)
    if not torch.isfinite(t).all():
        if torch.isnan(t).any() or torch.isposinf(t).any():
            raise AttnCliError("the numbers overflowed float32: the inputs are too large")
        t = t.to(torch.float64).masked_fill(torch.isneginf(t), math.nan)
        return _nan_to_none(t.tolist())
    return t.tolist()


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return None if math.isnan(value) else value


def to_result(req: Request, tokens: list[TokenInfo], x: Tensor, out: AttentionOutput,
              config: dict[str, Any], model: dict[str, Any] | None = None) -> Result:
    """The one place tensors become plain data (only the stages req.keep names, for speed)."""
    tensors = {name: getattr(out, name, None) for name in
               ("queries", "keys", "values", "scores", "scaled", "masked", "softmax", "dropped",
                "heads_context")}
    tensors["inputs"] = x
    present = tuple(name for name in STAGES if name in ("weights", "context")
                    or tensors.get(name) is not None)
    stages = {name: plain(t) for name, t in tensors.items()
              if req.keep is None or name in req.keep}
    weights, context = plain(out.weights), plain(out.context)
    stages["weights"], stages["context"] = weights, context
    return Result(variant="gpt2" if req.model else req.variant, config=config, tokens=tokens,
                  weights=weights, context=context, stages=stages, model=model, present=present)


def text_tokens(req: Request) -> tuple[list[TokenInfo], list[int]]:
    """Token records and ids of the request's text."""
    if req.text is None:
        raise AttnCliError("no input text")
    pieces = tokenize(req.text, req.encoding, req.allow_special)
    tokens = [TokenInfo.of(p) for p in pieces]
    return tokens, [p.id for p in pieces if p.id is not None]


def model_info(ckpt: Checkpoint, layer: int | None = None) -> dict[str, Any]:
    """The "model" object of the JSON: where the checkpoint is and its shape."""
    info: dict[str, Any] = {"path": str(ckpt.path), "layers": ckpt.n_layer,
                            "heads": ckpt.n_head, "d_model": ckpt.n_embd}
    if layer is not None:
        info["layer"] = layer
    return info


def run_model(req: Request) -> Result:
    """Layer req.layer of a GPT-2 checkpoint: its attention over ln_1 of the residual stream."""
    from attncli.models.checkpoint import resolve_checkpoint
    from attncli.models.gpt2 import gpt2_attention

    ckpt = resolve_checkpoint(req.model or "", req.heads)
    tokens, ids = text_tokens(req)
    shown = gpt2_attention(ckpt, ids, req.layer)
    info = model_info(ckpt, shown.layer)
    config = {"model": req.model, "layer": shown.layer, "encoding": "gpt2",
              "allow_special": req.allow_special, "source": "text", "num_tokens": len(tokens),
              "d_in": ckpt.n_embd, "d_out": ckpt.n_embd, "heads": ckpt.n_head, "impl": "naive",
              "version": __version__}
    return to_result(req, tokens, shown.inputs, shown.output, config, info)


THUMBNAIL = 24  # the largest side of a pooled per-head thumbnail


def run_heads(req: Request, sort: str = "layer") -> HeadsResult:
    """Every layer × head of a GPT-2 checkpoint: measures and pooled thumbnails."""
    from attncli.models.checkpoint import resolve_checkpoint
    from attncli.models.gpt2 import gpt2_all_layers
    from attncli.models.measures import head_measures, sort_measures

    if req.model is None:
        raise AttnCliError("attncli heads needs --model PATH|NAME (a local GPT-2 checkpoint)")
    validate(req)
    sort_measures([], sort)  # an unknown sort key fails before any work
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
                       measures=[dict(m) for m in measures], thumbnails=plain(thumbs))


@dataclass
class Prepared:
    """A run's inputs and module, and the path it takes."""

    tokens: list[TokenInfo]
    x: Tensor  # (T, d_in) on the run's device
    module: torch.nn.Module
    heads: int
    impl: str  # naive or tiled
    config: dict[str, Any]


def prepare(req: Request, budget_bytes: int) -> Prepared:
    """Inputs, the seeded module, the path (--impl, auto against budget_bytes) and the config."""
    device = resolve_device(req.device)
    tokens, x = _inputs(req)  # x: (T, d_in)
    d_in = x.shape[1]
    d_out = req.d_out or d_in
    heads = req.heads or (2 if req.variant == "multihead" else 1)
    impl = choose_impl(req.impl, len(tokens), heads, budget_bytes)
    # Seed right before the module is built, as the book does, so its numbers come out.
    torch.manual_seed(req.seed)
    module = build_variant(req.variant, d_in, d_out, num_heads=heads, dropout=req.dropout,
                           qkv_bias=req.qkv_bias).to(device)
    skip = ("text", "inputs", "model", "layer", "keep", "impl", "top_k", "pool", "full")
    tiled = {"top_k": req.top_k, "pool": req.pool} if impl == "tiled" else {}
    config = {**{k: v for k, v in asdict(req).items() if k not in skip},
              "source": "inputs" if req.inputs is not None else "text",
              "num_tokens": len(tokens), "d_in": d_in, "d_out": module.d_out, "heads": heads,
              "impl": impl, **tiled, "version": __version__}
    if req.inputs is not None:
        for key in ("encoding", "allow_special", "emb_dim", "context_length", "positions"):
            config.pop(key)
    return Prepared(tokens, x.to(device), module, heads, impl, config)


def naive(req: Request, prep: Prepared) -> Result:
    """The naive path: every (heads, T, T) stage of the module's forward pass."""
    with torch.no_grad():
        out = prep.module(prep.x)
    return to_result(req, prep.tokens, prep.x, out, prep.config)


def refuse_dropout(req: Request, prep: Prepared) -> None:
    """The tiled path has no dropout: say how to get it, and what it costs."""
    from attncli.long.run import size_text

    why = "--impl tiled" if req.impl == "tiled" else (
        f"--impl auto takes it beyond {NAIVE_BUDGET // 2**20} MiB")
    cost = size_text(naive_bytes(len(prep.tokens), prep.heads))
    raise AttnCliError(
        f"--dropout {req.dropout} is not supported on the tiled path ({why}); use --impl naive "
        f"to apply it (about {cost} for {len(prep.tokens):,} tokens × {prep.heads} head(s)), "
        "or leave out --dropout")


def run(req: Request, view: LongView | None = None, progress: Progress | None = None,
        budget_bytes: int = NAIVE_BUDGET) -> Result | LongResult:
    """Run one attention variant on the request's text or vectors, naive or tiled (--impl).

    view names what a tiled run rebuilds to be shown; progress follows its long passes.
    """
    validate(req)
    if req.model is not None:
        return run_model(req)
    prep = prepare(req, budget_bytes)
    if prep.impl == "naive":
        return naive(req, prep)
    if req.dropout > 0:
        refuse_dropout(req, prep)
    from attncli.core.display import LongView
    from attncli.long.run import run_long  # the tiled path's machinery, only when it is taken

    return run_long(req, prep, view or LongView(), progress)


def run_naive(req: Request, budget_bytes: int = NAIVE_BUDGET) -> Result:
    """The naive path only, for commands that show every N × N stage; long inputs are refused."""
    validate(req)
    if req.impl == "tiled":
        raise AttnCliError("--impl tiled applies to `attncli run` only: this command shows "
                           "every N × N stage (use --impl naive or auto)")
    if req.model is not None:
        return run_model(req)
    prep = prepare(req, budget_bytes)
    if prep.impl == "tiled":
        from attncli.long.run import size_text

        raise AttnCliError(
            f"{len(prep.tokens):,} tokens × {prep.heads} head(s) need about "
            f"{size_text(naive_bytes(len(prep.tokens), prep.heads))} as full N × N matrices, "
            f"more than --impl auto allows ({NAIVE_BUDGET // 2**20} MiB); `attncli run` shows "
            "long inputs, or force this with --impl naive")
    return naive(req, prep)
