"""A saved run's "config" and "model" objects back into their typed records, read by walking the
records (walk.py), then checked against the tokens and weights the file holds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from attncli.core.result import FamilyInfo, ModelInfo, RunConfig, TextConfig, TokenInfo
from attncli.errors import AttnCliError
from attncli.saved.parts import bad, choice, hex_bytes, integer, maybe, number, obj, string
from attncli.saved.walk import Key, Table, read

BOUND = 2**31  # no count attncli writes comes near it
# The architectures a saved run may name (core cannot ask models/ for its registry).
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "gemma3", "phi3",
            "gpt_neox", "olmo2", "smollm3")
SCALINGS = ("default", "linear", "dynamic", "llama3", "freq_factors", "longrope")
COUNT, SIZE = Key(high=BOUND), Key(low=1, high=BOUND)


def tokenizer_from(value: Any, where: str) -> dict[str, Any]:
    """What a checkpoint's tokenizer.json added: strings, null, or lists of strings."""
    out: dict[str, Any] = {}
    for key, v in obj(value, where).items():
        at = f"{where}.{string(key, where)}"
        out[key] = ([string(s, f"{at}[{i}]") for i, s in enumerate(v)] if isinstance(v, list)
                    else maybe(v, string, at))
    return out


def _rate(value: Any, where: str) -> float:
    """A dropout rate, 0 to 1 (1 excluded)."""
    rate = number(value, where)
    if not 0 <= rate < 1:
        raise bad(where, value, "a rate in 0 to 1")
    return rate


RECORDS: Table = {
    TokenInfo: {"bytes_hex": Key(name="bytes", check=hex_bytes)},
    RunConfig: {"num_tokens": COUNT, "heads": SIZE, "d_in": COUNT, "d_out": COUNT,
                "impl": Key(choices=("naive", "tiled")), "seed": Key(low=-2**63, high=2**64),
                "dropout": Key(check=_rate), "layer": Key(low=-BOUND, high=BOUND),
                "text": Key(inline="allow_special"), "top_k": COUNT, "head": COUNT,
                "pool": Key(choices=("max", "mean")), "tokenizer": Key(check=tokenizer_from),
                "measure": Key(choices=("norm", "rollout"))},
    TextConfig: {"emb_dim": SIZE, "context_length": SIZE},
    FamilyInfo: {"architecture": Key(choices=FAMILIES), "kv_heads": SIZE, "head_dim": SIZE,
                 "rope_scaling": Key(choices=SCALINGS), "sliding_window": SIZE, "window": SIZE},
    ModelInfo: {"layers": SIZE, "heads": SIZE, "d_model": SIZE, "layer": COUNT,
                "family": Key(inline="architecture"),
                **{name: Key(skip=True) for name in ("name", "norm", "reads", "lead",
                                                      "bidirectional")}},
}


def config_from(data: Any, size: int) -> RunConfig:
    """The JSON "config" back into the typed record; num_tokens must be the tokens' count."""
    config = read(RunConfig, data, "config", RECORDS)
    integer(config.num_tokens, "config.num_tokens", size, size)
    if config.head is not None:
        integer(config.head, "config.head", 0, config.heads - 1)
    return config if config.impl == "tiled" else replace(config, top_k=None, pool=None)


def model_from(data: Any, config: RunConfig | None) -> ModelInfo:
    """The JSON "model" object; its heads must be the run's."""
    model = read(ModelInfo, data, "model", RECORDS)
    heads, family = model.heads, model.family
    if config is not None and heads != config.heads:
        raise AttnCliError(f"saved file: model.heads is {heads}, config.heads {config.heads}")
    if model.layer is not None:
        integer(model.layer, "model.layer", 0, model.layers - 1)
    if family is not None and heads % integer(family.kv_heads, "model.kv_heads", 1, heads):
        raise AttnCliError(f"saved file: model.kv_heads {family.kv_heads} does not divide "
                           f"model.heads {heads}")
    # An encoder's names its bidirectional attention: its weights hold no masked cell.
    encoder = "attention" in data and bool(choice(data["attention"], "model.attention",
                                                  ("bidirectional",)))
    # Only a RoPE model's "model" object names its architecture; one without was a GPT-2 run's.
    name, norm, reads, lead = (
        ("encoder", "LayerNorm'd", "", ModelInfo.lead) if encoder and family is None else
        ("GPT-2", "LayerNorm'd", " ln_1(h)", "A trained model, not the chapter-3 toy")
        if family is None else (family.architecture, "RMSNorm'd", "", ModelInfo.lead))
    return replace(model, name=name, norm=norm, reads=reads, lead=lead, bidirectional=encoder)
