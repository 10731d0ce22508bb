"""A config.json-equivalent dict (Hugging Face keys) from a GGUF file's `{arch}.*` metadata,
as transformers' own GGUF loader builds it (integrations/ggml.py GGUF_CONFIG_MAPPING)."""

from __future__ import annotations

from typing import Any

from attncli.errors import AttnCliError
from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import layout_for

# architecture -> (model_type, class, {gguf key suffix: HF key})
_LLAMA_KEYS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
               "feed_forward_length": "intermediate_size",
               "attention.head_count": "num_attention_heads",
               "attention.head_count_kv": "num_key_value_heads",
               "attention.layer_norm_rms_epsilon": "rms_norm_eps", "rope.freq_base": "rope_theta",
               "context_length": "max_position_embeddings"}
_GPT2_KEYS = {"block_count": "n_layer", "embedding_length": "n_embd",
              "feed_forward_length": "n_inner", "attention.head_count": "n_head",
              "attention.layer_norm_epsilon": "layer_norm_epsilon", "context_length": "n_ctx"}
ARCHITECTURES = {
    "llama": ("llama", "LlamaForCausalLM", _LLAMA_KEYS | {"rope.dimension_count": "head_dim"}),
    "qwen2": ("qwen2", "Qwen2ForCausalLM", _LLAMA_KEYS | {"attention.sliding_window":
                                                          "sliding_window"}),
    "qwen3": ("qwen3", "Qwen3ForCausalLM", _LLAMA_KEYS | {"attention.key_length": "head_dim"}),
    "gpt2": ("gpt2", "GPT2LMHeadModel", _GPT2_KEYS),
}
_REQUIRED = ("block_count", "embedding_length", "attention.head_count")
_TOKEN_IDS = {"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id",
              "padding_token_id": "pad_token_id"}
_ROPE_SCALING = {"type": "rope_type", "factor": "factor",
                 "original_context_length": "original_max_position_embeddings",
                 "attn_factor": "attention_factor"}


def architecture(header: GgufHeader) -> str:
    """general.architecture, checked to be one attncli reads."""
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise AttnCliError(f"{header.path} has no general.architecture string in its metadata")
    layout_for(arch, header.path)
    return arch


def _number(header: GgufHeader, key: str) -> int | float:
    value = header.metadata[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AttnCliError(f"{header.path}: metadata {key} is {value!r}, not a number")
    return value


def build_config(header: GgufHeader) -> dict[str, Any]:
    """The HF config dict for this file's model, or one line naming what is missing."""
    arch = architecture(header)
    model_type, cls, keys = ARCHITECTURES[arch]
    meta = header.metadata
    missing = [f"{arch}.{k}" for k in _REQUIRED if f"{arch}.{k}" not in meta]
    if missing:
        raise AttnCliError(f"{header.path} lacks metadata {', '.join(missing)}")
    config: dict[str, Any] = {"model_type": model_type, "architectures": [cls]}
    config |= {hf: _number(header, f"{arch}.{k}") for k, hf in keys.items()
               if f"{arch}.{k}" in meta}
    tokens = meta.get("tokenizer.ggml.tokens")
    embedding = header.tensors.get("token_embd.weight")
    if isinstance(tokens, list):
        config["vocab_size"] = len(tokens)
    elif embedding is not None:
        config["vocab_size"] = embedding.shape[0]
    config["tie_word_embeddings"] = "output.weight" not in header.tensors
    config |= {hf: int(meta[f"tokenizer.ggml.{k}"]) for k, hf in _TOKEN_IDS.items()
               if isinstance(meta.get(f"tokenizer.ggml.{k}"), int)}
    scaling = {hf: meta[f"{arch}.rope.scaling.{k}"] for k, hf in _ROPE_SCALING.items()
               if f"{arch}.rope.scaling.{k}" in meta}
    if scaling and scaling.get("rope_type") not in (None, "none"):
        config["rope_scaling"] = scaling
    _FILLS[model_type](config, header)
    return config


def _gpt2_fill(config: dict[str, Any], header: GgufHeader) -> None:
    """What a GPT-2 config.json holds that its GGUF metadata does not."""
    config["n_positions"] = config.get("n_ctx", 1024)
    config["activation_function"] = "gelu_new"


def _llama_fill(config: dict[str, Any], header: GgufHeader) -> None:
    """What a Llama-family config.json holds that its GGUF metadata does not."""
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    config.setdefault("head_dim", config["hidden_size"] // config["num_attention_heads"])
    config["hidden_act"] = "silu"
    config["attention_bias"] = "blk.0.attn_q.bias" in header.tensors


# model_type → what fills in the keys the metadata lacks
_FILLS = {"llama": _llama_fill, "qwen2": _llama_fill, "qwen3": _llama_fill, "gpt2": _gpt2_fill}
