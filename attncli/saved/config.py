"""The keys of the records every kind of saved document shares (a token, a run's "config", the
"model" object), and the model's description, worked out from what the file says of it."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from attncli.core.result import FamilyInfo, ModelInfo, RunConfig, TextConfig, TokenInfo
from attncli.errors import AttnCliError
from attncli.saved.parts import choice, hex_bytes, integer, maybe, obj, string
from attncli.saved.walk import Key, Reader, Table

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


def model_from(data: Any, where: str = "model") -> ModelInfo:
    """The JSON "model" object, its kv heads dividing its heads, described as its views name it."""
    model = Reader(RECORDS).read(ModelInfo, data, where)
    heads, family = model.heads, model.family
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


RECORDS: Table = {
    TokenInfo: {"bytes_hex": Key(name="bytes", check=hex_bytes)},
    # num_tokens: the tokens' count (N); head: one of the heads, read before it
    RunConfig: {"num_tokens": Key(low="N", high="N"), "heads": SIZE, "d_in": COUNT,
                "d_out": COUNT, "impl": Key(choices=("naive", "tiled")),
                "seed": Key(low=-2**63, high=2**64),
                "dropout": Key(low=0, high=math.nextafter(1, 0), means="a rate in 0 to 1"),
                "layer": Key(low=-BOUND, high=BOUND), "text": Key(inline="allow_special"),
                "top_k": COUNT, "head": Key(high="heads-1"), "tokenizer": Key(check=tokenizer_from),
                "pool": Key(choices=("max", "mean")), "measure": Key(choices=("norm", "rollout"))},
    TextConfig: {"emb_dim": SIZE, "context_length": SIZE},
    FamilyInfo: {"architecture": Key(choices=FAMILIES), "kv_heads": SIZE, "head_dim": SIZE,
                 "rope_scaling": Key(choices=SCALINGS), "sliding_window": SIZE, "window": SIZE},
    ModelInfo: {"layers": SIZE, "heads": SIZE, "d_model": SIZE, "layer": Key(high="layers-1"),
                "family": Key(inline="architecture"),
                **{name: Key(skip=True) for name in ("name", "norm", "reads", "lead",
                                                      "bidirectional")}},
}
MODEL = Key(check=model_from)  # a "model" object, read and described
