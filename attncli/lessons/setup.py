"""What every lesson starts from: tokens, input vectors and the seeded variant, as in `run`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from attncli.core.attention import VARIANTS, build_variant
from attncli.core.embed import check_dims, embed
from attncli.core.inputs import InputVectors
from attncli.core.result import TokenInfo
from attncli.core.tokens import get_encoding, tokenize
from attncli.errors import AttnCliError

CAUSAL = ("causal", "multihead")


@dataclass(frozen=True)
class LessonSpec:
    """The settings a lesson's numbers depend on (the same meaning as `run`'s options)."""

    text: str | None = None
    inputs: InputVectors | None = None
    variant: str = "causal"
    encoding: str = "gpt2"
    allow_special: bool = False
    seed: int = 123
    emb_dim: int = 8
    d_out: int | None = None
    heads: int | None = None
    qkv_bias: bool = False
    positions: bool = True

    def config(self) -> dict[str, Any]:
        """The settings as they go into the JSON of a lesson."""
        out: dict[str, Any] = {"variant": self.variant, "seed": self.seed,
                               "d_out": self.d_out, "heads": self.num_heads,
                               "qkv_bias": self.qkv_bias}
        if self.inputs is None:
            out |= {"encoding": self.encoding, "emb_dim": self.emb_dim,
                    "positions": self.positions}
        return out

    @property
    def num_heads(self) -> int:
        """--heads, or the variant's default (2 for multihead, else 1)."""
        return self.heads or (2 if self.variant == "multihead" else 1)


@dataclass
class Lesson:
    """A lesson's tokens, its input vectors and the seeded module (tensors: lessons only)."""

    tokens: list[TokenInfo]
    x: Tensor  # (T, d_in)
    module: nn.Module
    heads: int

    @property
    def head_dim(self) -> int:
        """Columns per head of the queries, keys and values."""
        return self.module.d_out // self.heads

    @property
    def scale(self) -> float:
        """What the scores are multiplied by before the softmax (simple does not scale)."""
        return 1.0 if isinstance(self.module, VARIANTS["simple"]) else 1 / math.sqrt(self.head_dim)


def check_spec(spec: LessonSpec) -> None:
    """Reject settings that cannot run, naming them."""
    if spec.variant not in VARIANTS:
        raise AttnCliError(f"unknown variant {spec.variant!r} (choose from {', '.join(VARIANTS)})")
    check_dims(emb_dim=spec.emb_dim, d_out=spec.d_out, heads=spec.heads)
    if spec.heads is not None and spec.heads != 1 and spec.variant != "multihead":
        raise AttnCliError(f"--heads applies to --variant multihead only (got variant "
                           f"{spec.variant!r}, heads={spec.heads})")
    if spec.inputs is not None and not spec.positions:
        raise AttnCliError("--no-positions applies to text: --inputs vectors are used as given")


def text_tokens(spec: LessonSpec, text: str) -> tuple[list[TokenInfo], list[int]]:
    """Token records and ids of text; empty text is refused."""
    pieces = tokenize(text, spec.encoding, spec.allow_special)
    tokens = [TokenInfo.of(p) for p in pieces]
    ids = [p.id for p in pieces if p.id is not None]
    if not ids:
        raise AttnCliError("no tokens to run: the text is empty")
    return tokens, ids


def build(spec: LessonSpec, text: str | None = None) -> Lesson:
    """Tokens, embeddings and module exactly as `attncli run` makes them for the same options."""
    check_spec(spec)
    text = spec.text if text is None else text
    if spec.inputs is not None:
        tokens = [TokenInfo(i, None, label) for i, label in enumerate(spec.inputs.labels)]
        x = torch.tensor(spec.inputs.vectors, dtype=torch.float32)  # (T, d_in)
    elif text is None:
        raise AttnCliError("no input text")
    else:
        tokens, ids = text_tokens(spec, text)
        x = embed(ids, get_encoding(spec.encoding).n_vocab, spec.emb_dim, None, spec.seed,
                  spec.positions)  # (T, emb_dim)
    d_in = x.shape[1]
    # Seed right before the module is built, as the pipeline does, so the weights are run's.
    torch.manual_seed(spec.seed)
    module = build_variant(spec.variant, d_in, spec.d_out or d_in, num_heads=spec.num_heads,
                           qkv_bias=spec.qkv_bias).eval()
    return Lesson(tokens, x, module, spec.num_heads)


def heads_qkv(lesson: Lesson, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values of x split into heads, each (heads, T, head_dim)."""
    module = lesson.module
    if isinstance(module, VARIANTS["simple"]):
        return x[None], x[None], x[None]  # (1, T, d_in): each input is its own query, key, value
    queries, keys, values = module.project(x)  # each (T, d_out)
    split = module.split_heads if hasattr(module, "split_heads") else (lambda t: t[None])
    return split(queries), split(keys), split(values)  # each (heads, T, head_dim)


def finish_context(lesson: Lesson, heads_context: Tensor) -> Tensor:
    """(T, d_out) heads side by side, then out_proj for multihead."""
    out_proj = getattr(lesson.module, "out_proj", None)
    return heads_context if out_proj is None else out_proj(heads_context)  # (T, d_out)


def max_abs(a: Tensor, b: Tensor) -> float:
    """The largest |a - b|, as a Python float."""
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
