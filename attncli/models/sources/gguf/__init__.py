"""GGUF files (llama.cpp, Ollama, LM Studio) as a weight source: header, tensors, tokenizer."""

from attncli.models.sources.gguf.describe import describe_gguf
from attncli.models.sources.gguf.source import GgufSource, open_gguf

__all__ = ["GgufSource", "describe_gguf", "open_gguf"]
