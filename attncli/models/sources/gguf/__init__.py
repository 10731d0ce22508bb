"""GGUF files (llama.cpp, Ollama, LM Studio) as a weight source: header, tensors, tokenizer.

Its names are imported on first use, so that attncli.models can hand recipe.py the families'
recipes without importing numpy and the gguf package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attncli.models.sources.gguf.describe import describe_gguf
    from attncli.models.sources.gguf.source import GgufSource, open_gguf

__all__ = ["GgufSource", "describe_gguf", "open_gguf"]
_WHERE = {"GgufSource": "source", "open_gguf": "source", "describe_gguf": "describe"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
