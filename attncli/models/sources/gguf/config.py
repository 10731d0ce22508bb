"""A config.json-equivalent dict (Hugging Face keys) from a GGUF file's `{arch}.*` metadata,
as transformers' own GGUF loader builds it (integrations/ggml.py GGUF_CONFIG_MAPPING).

The mechanics are here: the keys every architecture shares, each value checked to be a finite
number, the counts checked against the tensors, token ids and rope scaling. Which `{arch}.*`
keys an architecture has, and what its config.json holds that the metadata does not (what
llama.cpp itself fixes per architecture in src/llama-model.cpp load_hparams), is its family's
GgufRecipe; the helpers below are what recipes fill with. A value the maths needs that neither
the file nor llama.cpp fixes refuses the file by name.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from attncli.errors import AttnCliError
from attncli.models.sources.gguf.counts import check_counts, shown
from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.recipe import RECIPES

ARCHITECTURES = RECIPES  # every GGUF architecture attncli reads -> its family's recipe
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
    RECIPES.of(arch, header.path)
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
    recipe = RECIPES[arch]
    meta = header.metadata
    missing = [f"{arch}.{k}" for k in _REQUIRED if f"{arch}.{k}" not in meta]
    if missing:
        raise AttnCliError(f"{header.path} lacks metadata {', '.join(missing)}")
    check_counts(header, arch)  # before any per-layer list is built from them
    config: dict[str, Any] = {"model_type": recipe.model_type, "architectures": [recipe.hf_class]}
    config |= {hf: _number(header, f"{arch}.{k}") for k, hf in recipe.keys.items()
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
    recipe.fill(config, header)
    return config


def metadata_names(header: GgufHeader) -> dict[str, str]:
    """Each config.json key this file's config is read into -> the metadata key it comes from
    (only names a message cannot mean otherwise: with an underscore or a dot)."""
    arch = str(header.metadata.get("general.architecture"))
    pairs = [(hf, f"{arch}.{k}") for k, hf in RECIPES[arch].keys.items()] if arch in RECIPES \
        else []
    pairs += [(hf, f"tokenizer.ggml.{k}") for k, hf in _TOKEN_IDS.items()]
    pairs += [(f"rope_scaling.{hf}", f"{arch}.rope.scaling.{k}") for k, hf in _ROPE_SCALING.items()]
    return {hf: key for hf, key in pairs if "_" in hf or "." in hf}


def said_of_metadata(header: GgufHeader, err: AttnCliError) -> AttnCliError:
    """A config check's line, which names config.json and its keys, said of this file: its
    metadata, and the metadata keys the config's values were read from."""
    names = metadata_names(header)
    found = re.compile(r"(?<![\w.])(" + "|".join(
        re.escape(hf) for hf in sorted(names, key=len, reverse=True)) + r")(?![\w])")
    text, count = found.subn(lambda m: names[m[1]], str(err))
    if "config.json" in text:
        text = text.replace("config.json", f"{header.path}'s metadata", 1)
    elif count:
        text = f"{header.path}: {text}"
    else:
        return err
    said = AttnCliError(text)
    said.exit_code = err.exit_code
    return said


def refuse(header: GgufHeader, why: str) -> AttnCliError:
    """The one line refusing this file: "PATH: a ARCH GGUF why"."""
    arch = header.metadata.get("general.architecture")
    return AttnCliError(f"{header.path}: a {arch} GGUF {why}")


def rotary(config: dict[str, Any], header: GgufHeader) -> float:
    """rope.dimension_count as the fraction of each head that rotates (1.0 where absent)."""
    arch = header.metadata["general.architecture"]
    dims = header.metadata.get(f"{arch}.rope.dimension_count")
    head_dim = int(config["head_dim"])
    if dims is None:
        return 1.0
    if isinstance(dims, bool) or not isinstance(dims, int) or not 0 < dims <= head_dim \
            or dims % 2:
        raise refuse(header, f"has rope.dimension_count {dims!r}, not an even count of "
                             f"1..{head_dim} rotated dimensions per head")
    return dims / head_dim


def layer_types(config: dict[str, Any], header: GgufHeader, local: list[bool]) -> None:
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
        raise refuse(header, f"has {key} {shown(stored)}, not a period or one flag per layer")
    if len(local) != config["num_hidden_layers"]:
        raise refuse(header, f"has a sliding-window pattern of {len(local)} layers, not "
                             f"{config['num_hidden_layers']}")
    config["layer_types"] = ["sliding_attention" if s else "full_attention" for s in local]
