"""The model types attncli knows it cannot show honestly, and why: no softmax pattern there."""

from __future__ import annotations

from typing import Any

_NO_ATTENTION = ("has no attention layers (a state-space or recurrent model): no token attends "
                 "to another")
_HYBRID = ("mixes softmax attention with state-space or linear-attention layers, which have no "
           "attention pattern; attncli does not yet show a model whose blocks differ in kind")
REFUSED: dict[str, str] = {
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"), _NO_ATTENTION),
    **dict.fromkeys(("jamba", "zamba", "zamba2", "bamba", "falcon_h1", "granitemoehybrid",
                     "nemotron_h", "lfm2", "qwen3_next", "minimax", "recurrent_gemma"), _HYBRID),
    **dict.fromkeys(("t5", "mt5", "bart", "mbart", "pegasus", "marian", "whisper"),
                    "is an encoder-decoder model: its cross-attention is not implemented"),
}


def softmax_layers(config: dict[str, Any]) -> str:
    """Which layers are softmax attention, where config.json's layer_types says."""
    types = config.get("layer_types")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        return ""
    full = [i for i, kind in enumerate(types) if "attention" in kind and "linear" not in kind]
    return (f" (softmax attention in layers {', '.join(map(str, full[:12]))}"
            f"{', ...' if len(full) > 12 else ''} of {len(types)})") if full else ""
