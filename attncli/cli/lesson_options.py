"""The lessons' options, declared once: what a lesson shows of its result (Shown) and the
chapter-3 settings they take. permute, kvcache, flash and cost take them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from attncli.cli.groups import Fields, Group
from attncli.cli.options import Chapter3, Look
from attncli.core.display import Lang
from attncli.opt import of, opt

# The lessons' chapter-3 settings: no --context-length, no --dropout (they decode or compare).
Settings = Annotated[Chapter3, Fields("variant", "seed", "emb_dim", "positions", "d_out", "heads",
                                      "qkv_bias")]


@dataclass(frozen=True)
class Sizes(Group):
    """The sizes `cost` measures."""

    max_tokens: int = opt(4096, help="The largest N; N doubles from 128.")
    # --num-heads was --heads, which ablate's L.H list means
    heads: int = opt(1, "--num-heads", help="Attention heads.", alias="--heads")
    emb_dim: int = opt(64, help="d_out, split across the heads.")


@dataclass(frozen=True)
class Shown(Group):
    """What a lesson shows of its result."""

    panel = "Display"
    head: int = opt(0, "--head", min=0, help="The head whose weights are shown (multihead, or "
                    "--model).")
    precision: int = opt(3, min=0, max=8, help="Decimals shown.")
    lang: Lang | None = of(Look, "lang")

    def language(self) -> str:
        """--lang, or the environment's language."""
        return Look(lang=self.lang).language()
