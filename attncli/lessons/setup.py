"""What every lesson starts from: the request's tokens, input vectors and seeded variant, made by
the pipeline exactly as `run` makes them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from torch import Tensor

from attncli.core.attention import Attention
from attncli.core.pipeline import prepare
from attncli.core.request import Request
from attncli.core.result import TokenInfo
from attncli.core.tokens import tokenize
from attncli.errors import AttnCliError


def lesson_config(req: Request) -> dict[str, Any]:
    """The settings as they go into the JSON of a lesson."""
    out: dict[str, Any] = {"variant": req.kind.value, "seed": req.seed, "d_out": req.d_out,
                           "heads": req.num_heads, "qkv_bias": req.qkv_bias}
    if req.inputs is None:
        out |= {"encoding": req.encoding, "emb_dim": req.emb_dim, "positions": req.positions}
    return out


@dataclass
class Lesson:
    """A lesson's tokens, its input vectors and the seeded module (tensors: lessons only)."""

    tokens: list[TokenInfo]
    x: Tensor  # (T, d_in)
    module: Attention
    heads: int
    causal: bool  # the variant's trait: query i sees keys 0..i only

    @property
    def head_dim(self) -> int:
        """Columns per head of the queries, keys and values."""
        return self.module.d_out // self.heads

    @property
    def scale(self) -> float:
        """What q·k is multiplied by before the softmax: 1/√head_dim (the simple variant's
        queries come pre-multiplied by √d_in from heads_qkv, so its scores stay x·xᵀ)."""
        return 1 / math.sqrt(self.head_dim)


def source_of(config: dict[str, Any]) -> str:
    """What a lesson ran on, for a message: the text, or --inputs vectors."""
    return "the text" if "encoding" in config else "--inputs"


def text_tokens(req: Request, text: str) -> tuple[list[TokenInfo], list[int]]:
    """Token records and ids of text; empty text is refused."""
    pieces = tokenize(text, req.encoding, req.allow_special)
    tokens = [TokenInfo.of(p) for p in pieces]
    ids = [p.id for p in pieces if p.id is not None]
    if not ids:
        raise AttnCliError("no tokens to run: the text is empty")
    return tokens, ids


def build(req: Request, text: str | None = None) -> Lesson:
    """Tokens, embeddings and module exactly as `attncli run` makes them (text: another text)."""
    prep = prepare(req if text is None else replace(req, text=text))
    prep.module.eval()
    return Lesson(prep.tokens, prep.x, prep.module, prep.heads, req.traits.causal)


def heads_qkv(lesson: Lesson, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values of x split into heads, each (heads, T, head_dim)."""
    return lesson.module.heads_qkv(x)


def finish_context(lesson: Lesson, heads_context: Tensor) -> Tensor:
    """The context vectors (T, d_out) from the heads side by side (T, heads · head_dim)."""
    num_tokens = heads_context.shape[0]
    split = heads_context.view(num_tokens, lesson.heads, -1).transpose(0, 1)  # (h, T, hd)
    return lesson.module.combine(split)  # (T, d_out)


def max_abs(a: Tensor, b: Tensor) -> float:
    """The largest |a - b|, as a Python float."""
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


# A float32 result equals its reference where |a - ref| <= ATOL + RTOL·|ref| (the tests' bound).
ATOL, RTOL = 1e-5, 1e-5


def within(a: Tensor, ref: Tensor, rows: bool = False) -> bool:
    """Whether every |a - ref| <= ATOL + RTOL·|ref|; with rows, ATOL is scaled by the size of
    each last-axis row of ref, max(1, max|row|): a vector made by sums rounds relative to it."""
    if not a.numel():
        return True
    a, ref = a.double(), ref.double()
    atol = ATOL * ref.abs().amax(-1, keepdim=True).clamp(min=1.0) if rows else ATOL
    return bool(((a - ref).abs() <= atol + RTOL * ref.abs()).all())
