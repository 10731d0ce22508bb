"""bench/hidden_cache.py at a tiny size: its synthetic Llama GGUF opens and runs, and its
dequantization measure reads every tensor back equal (no timings are checked)."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pytest

from tests.tools.benches import bench_module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return bench_module("hidden_cache")


def test_the_synthetic_model_runs_with_finite_weights(bench: ModuleType, tmp_path: Path,
                                                      cli) -> None:  # noqa: ANN001
    from tests import gguf_fixtures

    path = bench.synthetic(tmp_path, 3, d=256, ffn=512)
    assert gguf_fixtures.LAYERS == 2  # the other tests' tiny models are as they were
    done = cli("run", "the cat sat on the mat", "--model", str(path), "--layer", "2", "--json")
    assert done.code == 0, done.err
    weights = done.json()["weights"]
    assert all(math.isfinite(v) for head in weights for row in head for v in row if v is not None)


def test_the_dequantize_measure_counts_every_tensor(bench: ModuleType, tmp_path: Path) -> None:
    path = bench.synthetic(tmp_path, 2, d=256, ffn=512)
    measured = bench.dequant(path)
    assert measured["tensors"] == 3 + 2 * 9  # embeddings, norm, lm_head; nine per block
    assert measured["float32_mb"] > measured["file_mb"]
