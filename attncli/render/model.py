"""What a checkpoint's run adds to the views: its description line and kv groups."""

from __future__ import annotations

from rich.text import Text

from attncli.core.result import Result


def kv_note(result: Result, position: int) -> str:
    """ · kv head g, for a query head that shares its keys and values (GQA); else empty."""
    model = result.model
    if model is None or model.kv_heads == model.heads:
        return ""
    kv_heads, head = model.kv_heads, result.head_number(position)
    return f" · kv head {head // (model.heads // kv_heads)} of {kv_heads}"


def describe_model(result: Result) -> Text:
    """One line naming the model, its layer and its attention settings."""
    m, c = result.model, result.config
    assert m is not None, "a checkpoint's run"
    f = m.family  # RoPE, kv heads and windows, for the models that have them
    if f is None:
        settings = f"{m.heads} heads · d_model {m.d_model}"
        if m.bidirectional:  # an encoder: no causal mask
            settings += " · bidirectional attention, no mask"
    else:
        mask = f"sliding window {f.window}" if f.window else "full causal mask"
        rope = "no positional encoding (NoPE)" if f.nope \
            else f"RoPE θ {f.rope_theta:g} ({f.rope_scaling})"
        settings = (f"{m.heads} query heads, {f.kv_heads} kv heads · head_dim {f.head_dim} · "
                    f"d_model {m.d_model} · {rope} · {mask}")
    return Text.assemble(
        (f"{m.name} layer {m.layer} of {m.layers} (0-based)", "bold"),
        f" · {settings} · {c.num_tokens} tokens\n",
        (f"{m.lead}: each weight is how much a query token reads from a key "
         f"token of layer {m.layer}'s input, the {m.norm} residual stream{m.reads}.", "dim"))


def measure_legend(measure: str | None, layer: int | None) -> str | None:
    """One line saying what run --measure norm or rollout shows instead of the weights (None:
    the weights themselves); layer: the layer a rollout reaches."""
    if measure == "norm":
        return ("norm: ‖α_ij·W_O v_j‖ per head, rows renormalised (Kobayashi 2020); raw in "
                "\"norm\"")
    if measure == "rollout":
        return (f"rollout: Ã_{layer}···Ã_0, Ã = 0.5·I + 0.5·mean_h(A), rows renormalised; "
                "heads averaged")
    return None
