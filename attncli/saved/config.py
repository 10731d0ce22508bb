"""A saved run's "config" and "model" objects back into their typed records, each key checked
for its type and range, and against the tokens and weights the file holds."""

from __future__ import annotations

from typing import Any

from attncli.core.result import FamilyInfo, ModelInfo, RunConfig, TextConfig
from attncli.errors import AttnCliError
from attncli.saved.parts import (
    bad,
    choice,
    flag,
    integer,
    maybe,
    need,
    number,
    obj,
    string,
)

BOUND = 2**31  # no count attncli writes comes near it
# The architectures a saved run may name (core cannot ask models/ for its registry).
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3_text", "gemma3", "phi3",
            "gpt_neox", "olmo2", "smollm3")
SCALINGS = ("default", "linear", "dynamic", "llama3", "freq_factors", "longrope")


def _get(doc: dict[str, Any], key: str, check: Any, *args: Any) -> Any:
    """doc[key] checked (None when absent or null)."""
    return maybe(doc.get(key), check, f"config.{key}", *args)


def tokenizer_from(value: Any, where: str) -> dict[str, Any]:
    """What a checkpoint's tokenizer.json added: strings, null, or lists of strings."""
    out: dict[str, Any] = {}
    for key, v in obj(value, where).items():
        at = f"{where}.{string(key, where)}"
        if isinstance(v, list):
            out[key] = [string(s, f"{at}[{i}]") for i, s in enumerate(v)]
        elif v is not None:
            out[key] = string(v, at)
        else:
            out[key] = None
    return out


def config_from(data: Any, size: int) -> RunConfig:
    """The JSON "config" back into the typed record; num_tokens must be the tokens' count."""
    doc = obj(data, "config")
    num_tokens = integer(need(doc, "num_tokens", "config"), "config.num_tokens", size, size)
    heads = integer(need(doc, "heads", "config"), "config.heads", 1, BOUND)
    text = None
    if "allow_special" in doc:
        text = TextConfig(_get(doc, "encoding", string), flag(doc["allow_special"],
                                                               "config.allow_special"),
                          _get(doc, "emb_dim", integer, 1, BOUND),
                          _get(doc, "context_length", integer, 1, BOUND),
                          _get(doc, "positions", flag))
    dropout = _get(doc, "dropout", number)
    if dropout is not None and not 0 <= dropout < 1:
        raise bad("config.dropout", dropout, "a rate in 0 to 1")
    impl = choice(need(doc, "impl", "config"), "config.impl", ("naive", "tiled"))
    return RunConfig(
        source=string(need(doc, "source", "config"), "config.source"), num_tokens=num_tokens,
        d_in=integer(need(doc, "d_in", "config"), "config.d_in", 0, BOUND),
        d_out=integer(need(doc, "d_out", "config"), "config.d_out", 0, BOUND), heads=heads,
        impl=impl, version=string(need(doc, "version", "config"), "config.version"),
        variant=_get(doc, "variant", string), seed=_get(doc, "seed", integer, -2**63, 2**64),
        dropout=dropout, qkv_bias=_get(doc, "qkv_bias", flag),
        device=_get(doc, "device", string), model=_get(doc, "model", string),
        layer=_get(doc, "layer", integer, -BOUND, BOUND), text=text,
        top_k=_get(doc, "top_k", integer, 0, BOUND) if impl == "tiled" else None,
        pool=_get(doc, "pool", choice, ("max", "mean")) if impl == "tiled" else None,
        head=_get(doc, "head", integer, 0, heads - 1),
        tokenizer=_get(doc, "tokenizer", tokenizer_from))


def _family(doc: dict[str, Any], heads: int) -> FamilyInfo:
    """A Llama-family model's attention settings."""
    kv_heads = integer(need(doc, "kv_heads", "model"), "model.kv_heads", 1, heads)
    if heads % kv_heads:
        raise AttnCliError(f"saved file: model.kv_heads {kv_heads} does not divide model.heads "
                           f"{heads}")
    sliding = maybe(doc.get("sliding_window"), integer, "model.sliding_window", 1, BOUND)
    return FamilyInfo(architecture=choice(doc["architecture"], "model.architecture", FAMILIES),
                      kv_heads=kv_heads,
                      head_dim=integer(need(doc, "head_dim", "model"), "model.head_dim", 1,
                                       BOUND),
                      rope_theta=number(need(doc, "rope_theta", "model"), "model.rope_theta"),
                      rope_scaling=choice(need(doc, "rope_scaling", "model"),
                                          "model.rope_scaling", SCALINGS),
                      sliding_window=sliding,
                      window=maybe(doc.get("window"), integer, "model.window", 1, BOUND),
                      nope=doc.get("nope") is True)


def model_from(data: Any, config: RunConfig | None) -> ModelInfo:
    """The JSON "model" object; its heads must be the run's."""
    doc = obj(data, "model")
    layers = integer(need(doc, "layers", "model"), "model.layers", 1, BOUND)
    heads = integer(need(doc, "heads", "model"), "model.heads", 1, BOUND)
    if config is not None and heads != config.heads:
        raise AttnCliError(f"saved file: model.heads is {heads}, config.heads {config.heads}")
    family = _family(doc, heads) if "architecture" in doc else None
    # An encoder's names its bidirectional attention: its weights hold no masked cell.
    encoder = "attention" in doc and bool(choice(doc["attention"], "model.attention",
                                                 ("bidirectional",)))
    # Only a RoPE model's "model" object names its architecture; one without was a GPT-2 run's.
    name, norm, reads, lead = (
        ("encoder", "LayerNorm'd", "", ModelInfo.lead) if encoder and family is None else
        ("GPT-2", "LayerNorm'd", " ln_1(h)", "A trained model, not the chapter-3 toy")
        if family is None else (family.architecture, "RMSNorm'd", "", ModelInfo.lead))
    return ModelInfo(path=string(need(doc, "path", "model"), "model.path"), layers=layers,
                     heads=heads,
                     d_model=integer(need(doc, "d_model", "model"), "model.d_model", 1, BOUND),
                     layer=maybe(doc.get("layer"), integer, "model.layer", 0, layers - 1),
                     family=family, name=name, norm=norm, reads=reads, lead=lead,
                     bidirectional=encoder)

