"""A config.json-equivalent dict (Hugging Face keys) from a GGUF file's `{arch}.*` metadata,
as transformers' own GGUF loader builds it (integrations/ggml.py GGUF_CONFIG_MAPPING).

What llama.cpp's converter does not write, llama.cpp itself fixes per architecture
(src/llama-model.cpp load_hparams); those fixed values are used here, named where they are set:
- gemma2: every other layer local (swa pattern 2); gemma3: 5 local to 1 global (pattern 6), local
  layers rotating with base 10000 unscaled. query_pre_attn_scalar is not stored: llama.cpp scales
  scores by 1/sqrt(hidden/heads) for the 27B models (46 layers gemma2, 62 gemma3) and by
  1/sqrt(head_dim) otherwise, which are the released checkpoints' values.
- smollm3: no rotary embedding on every fourth layer (n_no_rope_layer_step = 4).
- gptneox: rope base 10000 where the file has no rope.freq_base (its converter writes none).
A value the maths needs that neither the file nor llama.cpp fixes refuses the file by name.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attncli.errors import AttnCliError
from attncli.models.sources.gguf.counts import check_counts, shown
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
_GEMMA_KEYS = _LLAMA_KEYS | {"attention.key_length": "head_dim",
                             "attention.sliding_window": "sliding_window",
                             "attn_logit_softcapping": "attn_logit_softcapping",
                             "final_logit_softcapping": "final_logit_softcapping"}
_NEOX_KEYS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
              "feed_forward_length": "intermediate_size",
              "attention.head_count": "num_attention_heads",
              "attention.layer_norm_epsilon": "layer_norm_eps", "rope.freq_base": "rotary_emb_base",
              "context_length": "max_position_embeddings"}
ARCHITECTURES = {
    "llama": ("llama", "LlamaForCausalLM", _LLAMA_KEYS | {"rope.dimension_count": "head_dim"}),
    "qwen2": ("qwen2", "Qwen2ForCausalLM", _LLAMA_KEYS | {"attention.sliding_window":
                                                          "sliding_window"}),
    "qwen3": ("qwen3", "Qwen3ForCausalLM", _LLAMA_KEYS | {"attention.key_length": "head_dim"}),
    "gpt2": ("gpt2", "GPT2LMHeadModel", _GPT2_KEYS),
    "smollm3": ("smollm3", "SmolLM3ForCausalLM", _LLAMA_KEYS),
    "gemma2": ("gemma2", "Gemma2ForCausalLM", _GEMMA_KEYS),
    "gemma3": ("gemma3_text", "Gemma3ForCausalLM", _GEMMA_KEYS),
    "phi3": ("phi3", "Phi3ForCausalLM", _LLAMA_KEYS | {
        "rope.scaling.original_context_length": "original_max_position_embeddings"}),
    "olmo2": ("olmo2", "Olmo2ForCausalLM", _LLAMA_KEYS),
    "gptneox": ("gpt_neox", "GPTNeoXForCausalLM", _NEOX_KEYS),
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
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AttnCliError(f"{header.path}: metadata {key} is {shown(value)}, not a finite "
                           "number")
    return value


def build_config(header: GgufHeader) -> dict[str, Any]:
    """The HF config dict for this file's model, or one line naming what is missing."""
    arch = architecture(header)
    model_type, cls, keys = ARCHITECTURES[arch]
    meta = header.metadata
    missing = [f"{arch}.{k}" for k in _REQUIRED if f"{arch}.{k}" not in meta]
    if missing:
        raise AttnCliError(f"{header.path} lacks metadata {', '.join(missing)}")
    check_counts(header, arch)  # before any per-layer list is built from them
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


def _refuse(header: GgufHeader, why: str) -> AttnCliError:
    arch = header.metadata.get("general.architecture")
    return AttnCliError(f"{header.path}: a {arch} GGUF {why}")


def _rotary(config: dict[str, Any], header: GgufHeader) -> float:
    """rope.dimension_count as the fraction of each head that rotates (1.0 where absent)."""
    arch = header.metadata["general.architecture"]
    dims = header.metadata.get(f"{arch}.rope.dimension_count")
    head_dim = int(config["head_dim"])
    if dims is None:
        return 1.0
    if isinstance(dims, bool) or not isinstance(dims, int) or not 0 < dims <= head_dim \
            or dims % 2:
        raise _refuse(header, f"has rope.dimension_count {dims!r}, not an even count of "
                              f"1..{head_dim} rotated dimensions per head")
    return dims / head_dim


def _layer_types(config: dict[str, Any], header: GgufHeader, local: list[bool]) -> None:
    """layer_types from attention.sliding_window_pattern where the file has one, else local."""
    arch = header.metadata["general.architecture"]
    key = f"{arch}.attention.sliding_window_pattern"
    stored = header.metadata.get(key)
    if isinstance(stored, int) and not isinstance(stored, bool) and stored >= 0:
        # older converters wrote the period n: llama.cpp's set_swa_pattern makes layer i local
        # where n == 0 or i % n < n - 1
        local = [stored == 0 or i % stored < stored - 1 for i in range(len(local))]
    elif isinstance(stored, np.ndarray) and stored.dtype.kind in "biu":
        local = [bool(v) for v in stored]
    elif stored is not None:
        raise _refuse(header, f"has {key} {shown(stored)}, not a period or one flag per layer")
    if len(local) != config["num_hidden_layers"]:
        raise _refuse(header, f"has a sliding-window pattern of {len(local)} layers, not "
                              f"{config['num_hidden_layers']}")
    config["layer_types"] = ["sliding_attention" if s else "full_attention" for s in local]


def _gemma2_fill(config: dict[str, Any], header: GgufHeader) -> None:
    _gemma_fill(config, header, gemma2=True)


def _gemma3_fill(config: dict[str, Any], header: GgufHeader) -> None:
    _gemma_fill(config, header, gemma2=False)


def _gemma_fill(config: dict[str, Any], header: GgufHeader, gemma2: bool) -> None:
    """Gemma 2 / 3: softcaps, windows, the score scale and the local rope base."""
    _llama_fill(config, header)
    needed = ("attn_logit_softcapping", "final_logit_softcapping", "sliding_window") if gemma2 \
        else ()
    missing = [k for k in needed if k not in config]
    if missing:
        raise _refuse(header, f"lacks {', '.join(missing)} (its converter always writes them)")
    config["hidden_activation"] = "gelu_pytorch_tanh"
    config.setdefault("rope_theta", 10000.0)
    layers = int(config["num_hidden_layers"])
    big = layers == (46 if gemma2 else 62)  # llama.cpp's LLM_TYPE_27B
    config["query_pre_attn_scalar"] = (config["hidden_size"] // config["num_attention_heads"]
                                       if big else config["head_dim"])
    window = config.get("sliding_window")
    if not gemma2:
        config.setdefault("final_logit_softcapping", None)
        config["attn_logit_softcapping"] = None
        config["rope_local_base_freq"] = 10000.0
    if not window:  # gemma3 written with sliding_window_pattern 1: every layer global
        config["sliding_window"] = None
        _layer_types(config, header, [False] * layers)
    else:
        every = 2 if gemma2 else 6
        _layer_types(config, header, [i % every < every - 1 for i in range(layers)])


def _phi3_fill(config: dict[str, Any], header: GgufHeader) -> None:
    """Phi-3 / Phi-4: partial rotary, an optional window (0: none)."""
    _llama_fill(config, header)
    window = header.metadata.get("phi3.attention.sliding_window")
    config["sliding_window"] = int(window) if isinstance(window, int) and window > 0 else None
    config["partial_rotary_factor"] = _rotary(config, header)
    config.setdefault("original_max_position_embeddings", config.get("max_position_embeddings"))


def _olmo2_fill(config: dict[str, Any], header: GgufHeader) -> None:
    """OLMo 2; an OLMo 3 file (written with arch olmo2 and sliding windows) is refused."""
    if "olmo2.attention.sliding_window" in header.metadata:
        raise _refuse(header, "with sliding-window layers is OLMo 3, which attncli does not read")
    _llama_fill(config, header)


def _smollm3_fill(config: dict[str, Any], header: GgufHeader) -> None:
    """SmolLM3: llama.cpp skips the rotary embedding on every fourth layer."""
    _llama_fill(config, header)
    config["no_rope_layers"] = [int((i + 1) % 4 != 0) for i in range(config["num_hidden_layers"])]
    config["use_sliding_window"] = False


def _neox_fill(config: dict[str, Any], header: GgufHeader) -> None:
    """Pythia / GPT-NeoX: partial rotary, parallel residual, biases everywhere."""
    if "gptneox.use_parallel_residual" not in header.metadata:
        raise _refuse(header, "lacks use_parallel_residual (its converter always writes it)")
    config["use_parallel_residual"] = bool(header.metadata["gptneox.use_parallel_residual"])
    config["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    config["rotary_pct"] = _rotary(config, header)
    del config["head_dim"]  # GPT-NeoX's config.json has no head_dim
    config.setdefault("rotary_emb_base", 10000)
    config["hidden_act"] = "gelu"
    config["attention_bias"] = "blk.0.attn_qkv.bias" in header.tensors


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
_FILLS = {"llama": _llama_fill, "qwen2": _llama_fill, "qwen3": _llama_fill, "gpt2": _gpt2_fill,
          "smollm3": _smollm3_fill, "gemma2": _gemma2_fill, "gemma3_text": _gemma3_fill,
          "phi3": _phi3_fill, "olmo2": _olmo2_fill, "gpt_neox": _neox_fill}
