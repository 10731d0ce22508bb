"""A Llama 3.1-style GGUF: llama.cpp's converter writes the "llama3" rope scaling as a rope_freqs
tensor (one divisor per rotated pair). attncli applies it; the reference is transformers running
the same HF weights with rope_scaling {"rope_type": "llama3", ...} in its config."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch

from tests.gguf_fixtures import (
    CTX,
    FFN,
    HEADS,
    KV_HEADS,
    LAYERS,
    D,
    write_model,
)
from tests.llama_fixtures import hf_reference
from tests.tolerance import assert_near

HEAD_DIM = D // HEADS
# A short original context, so that most of the 8 rotated pairs are scaled or ramped.
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}
TEXT = "the the hello world 12 the he " * 3


def _converter_factors(theta: float = 10000.0) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, as llama.cpp writes it."""
    freqs = 1.0 / (theta ** (np.arange(0, HEAD_DIM, 2, dtype=np.float32) / HEAD_DIM))
    old, low, high = (LLAMA3["original_max_position_embeddings"], LLAMA3["low_freq_factor"],
                      LLAMA3["high_freq_factor"])
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            factors.append(1.0)
        elif wavelen > old / low:
            factors.append(LLAMA3["factor"])
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / LLAMA3["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def _write(path: Path, factors: np.ndarray | None) -> dict[str, np.ndarray]:
    """The tiny llama in F32, with llama.cpp's rope_freqs tensor where factors are given."""
    extra = None if factors is None else {"rope_freqs.weight": factors}
    return write_model(path, "llama", gguf.GGMLQuantizationType.F32, extra=extra)


def _reference(weights: dict[str, np.ndarray], vocab: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=D, intermediate_size=FFN,
                         num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, rms_norm_eps=1e-6,
                         rope_theta=10000.0, max_position_embeddings=CTX, rope_scaling=LLAMA3,
                         tie_word_embeddings=False, attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    return model


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    path = tmp_path_factory.mktemp("rope") / "llama31.gguf"
    weights = _write(path, _converter_factors())
    vocab = weights["model.embed_tokens.weight"].shape[0]
    return path, _reference(weights, vocab)


@pytest.mark.parametrize("layer", range(LAYERS))
def test_rope_freqs_match_transformers_llama3_scaling(cli, scaled, layer: int) -> None:  # noqa: ANN001
    path, model = scaled
    doc = cli("run", TEXT, "--model", str(path), "--layer", str(layer), "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    ref = hf_reference(model, ids)["attentions"][layer]  # (heads, T, T)
    assert_near(torch.tensor(doc["weights"]), ref)
    assert doc["model"]["rope_scaling"] == "freq_factors"


def test_without_the_factors_the_attention_differs(cli, scaled, tmp_path: Path) -> None:  # noqa: ANN001
    """The check above can fail: the same weights with plain RoPE give other weights."""
    path, model = scaled
    plain = tmp_path / "plain.gguf"
    _write(plain, None)
    doc = cli("run", TEXT, "--model", str(plain), "--layer", "1", "--json").json()
    ref = hf_reference(model, [t["id"] for t in doc["tokens"]])["attentions"][1]
    assert (torch.tensor(doc["weights"]) - ref).abs().max() > 1e-3


@pytest.mark.parametrize(("factors", "why"), [
    (np.ones(HEAD_DIM, dtype=np.float32), "not one factor per rotated pair"),
    (np.array([1.0] * (HEAD_DIM // 2 - 1) + [0.0], dtype=np.float32), "positive finite"),
    (np.array([1.0] * (HEAD_DIM // 2 - 1) + [np.nan], dtype=np.float32), "positive finite"),
])
def test_a_lying_rope_freqs_is_one_line(cli, tmp_path: Path, factors: np.ndarray,  # noqa: ANN001
                                        why: str) -> None:
    path = tmp_path / "bad.gguf"
    _write(path, factors)
    got = cli("run", "hello", "--model", str(path), "--json")
    assert got.code == 2 and why in got.err and len(got.err.strip().splitlines()) == 1


def test_models_lists_it_as_readable(scaled) -> None:  # noqa: ANN001
    from attncli.models.sources.gguf.describe import describe_gguf

    described = describe_gguf(scaled[0])
    assert described["readable"] and described["reason"] is None
