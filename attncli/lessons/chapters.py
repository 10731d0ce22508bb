"""The demo's chapters after the book's: order, the KV cache, flash attention and the cost."""

from __future__ import annotations

from typing import Any

from attncli.core.request import Request
from attncli.core.variants import Variant

CHAPTERS = ("order", "kvcache", "flash", "cost")
SENTENCE = "Your journey starts with one step"
QUICK_TOKENS = 1024  # the demo's cost run: 128 … 1024 tokens, a few seconds


def chapter(key: str) -> Any:
    """The result a chapter shows, computed when the chapter is reached."""
    if key == "order":
        from attncli.lessons.permute import permute

        return permute(Request(text="猫吃鱼", variant=Variant.qkv), "猫吃鱼", "鱼吃猫")
    if key == "cost":
        from attncli.lessons.cost import cost

        return cost(max_tokens=QUICK_TOKENS)
    spec = Request(text=SENTENCE, variant=Variant.causal)
    if key == "kvcache":
        from attncli.lessons.kvcache import kvcache_lesson

        return kvcache_lesson(spec)
    if key == "flash":
        from attncli.lessons.flash import flash_lesson

        return flash_lesson(spec, block=2)
    raise KeyError(key)
