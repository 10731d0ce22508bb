"""What a Llama-family run adds to the views: its description line and kv groups."""

from __future__ import annotations

from rich.text import Text

from attncli.core.result import Result


def kv_note(result: Result, position: int) -> str:
    """ · kv head g, for a query head that shares its keys and values (GQA); else empty."""
    model = result.model
    if model is None or model.family is None or model.family.kv_heads == model.heads:
        return ""
    kv_heads, head = model.family.kv_heads, result.head_number(position)
    return f" · kv head {head // (model.heads // kv_heads)} of {kv_heads}"


def describe_llama(result: Result) -> Text:
    """One line naming the model, its layer and its attention settings."""
    m, c = result.model, result.config
    assert m is not None and m.family is not None, "a Llama-family run"
    f = m.family
    mask = f"sliding window {f.window}" if f.window else "full causal mask"
    return Text.assemble(
        (f"{f.architecture} layer {m.layer} of {m.layers} (0-based)", "bold"),
        f" · {m.heads} query heads, {f.kv_heads} kv heads · head_dim {f.head_dim} · "
        f"d_model {m.d_model} · RoPE θ {f.rope_theta:g} ({f.rope_scaling}) · {mask} · "
        f"{c.num_tokens} tokens\n",
        ("The checkpoint's own weights: each weight is how much a query token reads from a key "
         f"token of layer {m.layer}'s input, the RMSNorm'd residual stream.", "dim"))
