"""K-quant GGUF files (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against gguf's own dequantize of the bytes
written and against transformers loading the same file.

gguf.quants cannot quantize to K-quants, so the fixture writes random blocks with small finite
fp16 scales (tests/gguf_fixtures.py k_blocks). transformers' GGUF loader dequantizes with the same
gguf package and reads all five, so every type gets both checks. Q8_K is left out: gguf.quants has
no dequantizer for it (llama.cpp uses it for activations inside K-quant dot products, not for
stored weights).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch

from attncli.models.sources.gguf import describe_gguf, open_gguf
from tests.gguf_fixtures import HEADS, K_D, K_SCALES, KV_HEADS, LAYERS, to_gguf, write_k_llama
from tests.llama_fixtures import hf_reference
from tests.models.gguf.test_gguf_cli import TEXT, _transformers
from tests.models.gguf.test_gguf_source import transformers_tensors
from tests.tolerance import assert_near

Q = gguf.GGMLQuantizationType


@pytest.fixture(scope="module", params=list(K_SCALES), ids=lambda q: q.name)
def written(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Q, Path, dict[str, np.ndarray]]:
    qtype = request.param
    path = tmp_path_factory.mktemp("gguf") / f"llama-{qtype.name}.gguf"
    return qtype, path, write_k_llama(path, qtype)


def test_every_tensor_is_gguf_dequantize_of_its_bytes(written: tuple) -> None:
    """llama.cpp's converter layout (the Q/K row permute) applied to attncli's HF-layout tensor
    gives back exactly what gguf.quants.dequantize makes of the bytes written."""
    qtype, path, stored = written
    source = open_gguf(path)
    seen = set()
    for name in source.shapes():
        ours = source.tensor(name)  # HF layout
        assert ours.dtype == torch.float32
        gname, as_stored = to_gguf("llama", name, ours.numpy())
        raw = stored[gname]
        want = gguf.quants.dequantize(raw, qtype) if raw.dtype == np.uint8 else raw
        assert np.array_equal(as_stored, want), name
        assert source.dtype_name(name) == (qtype.name if raw.dtype == np.uint8 else "F32")
        seen.add(gname)
    assert seen == set(stored)


def test_every_tensor_matches_transformers(written: tuple) -> None:
    _, path, _ = written
    source = open_gguf(path)
    reference = transformers_tensors(path, "llama", source.config())
    assert set(source.shapes()) == set(reference)
    for name in source.shapes():
        # exact: both dequantize the same blocks with the same float32 products
        assert_near(source.tensor(name), reference[name].float(), atol=0, rtol=0)


def test_rows_of_a_k_quant_embedding_are_its_tensor_rows(written: tuple) -> None:
    _, path, _ = written
    source = open_gguf(path)
    whole = source.tensor("model.embed_tokens.weight")  # (vocab, K_D)
    assert whole.shape[1] == K_D
    assert torch.equal(source.rows("model.embed_tokens.weight", [7, 0, 7, 266]),
                       whole[[7, 0, 7, 266]])


def test_attention_matches_transformers_on_every_layer(cli: Callable[..., Any],
                                                      written: tuple) -> None:
    _, path, _ = written
    model = _transformers(path)
    ids: list[int] | None = None
    ref: dict[str, list[torch.Tensor]] = {}
    for layer in range(LAYERS):
        doc = cli("run", TEXT, "--model", str(path), "--layer", str(layer), "--json").json()
        if ids is None:
            ids = [t["id"] for t in doc["tokens"]]
            ref = hf_reference(model, ids)
        assert [t["id"] for t in doc["tokens"]] == ids
        ours = torch.tensor(doc["weights"])  # (heads, T, T)
        want = ref["attentions"][layer]  # (heads, T, T)
        assert ours.shape == (HEADS, len(ids), len(ids))
        assert_near(ours, want)
        causal = torch.tril(torch.ones(len(ids), len(ids)))  # (T, T)
        uniform = causal / causal.sum(-1, keepdim=True)  # (T, T): what all-zero weights give
        assert (want - uniform).abs().max() > 0.05, "the random weights left attention uniform"


def test_describe_names_the_k_quant(written: tuple) -> None:
    qtype, path, _ = written
    info = describe_gguf(path)
    assert info["quantization"] == qtype.name
    assert (info["readable"], info["reason"]) == (True, None)
    assert (info["heads"], info["kv_heads"], info["layers"]) == (HEADS, KV_HEADS, LAYERS)
