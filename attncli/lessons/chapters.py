"""The demo's chapters after the book's: order, the KV cache, flash attention and the cost."""

from __future__ import annotations

from typing import Any

from attncli.lessons.setup import LessonSpec, build

CHAPTERS = ("order", "kvcache", "flash", "cost")
SENTENCE = "Your journey starts with one step"
QUICK_TOKENS = 1024  # the demo's cost run: 128 … 1024 tokens, a few seconds


def chapter(key: str) -> Any:
    """The result a chapter shows, computed when the chapter is reached."""
    if key == "order":
        from attncli.lessons.permute import permute

        return permute(LessonSpec(variant="qkv"), "猫吃鱼", "鱼吃猫")
    if key == "cost":
        from attncli.lessons.cost import cost

        return cost(max_tokens=QUICK_TOKENS)
    spec = LessonSpec(text=SENTENCE, variant="causal")
    if key == "kvcache":
        from attncli.lessons.kvcache import kvcache

        return kvcache(build(spec), spec.config())
    if key == "flash":
        from attncli.lessons.flash import flash

        return flash(build(spec), spec.config(), block=2)
    raise KeyError(key)
