"""bench/decode_split.py on a tiny synthetic Llama GGUF: the step's CPU time is split into its
quantized products, keyed by type and shape, and the rest (no timings are checked)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.tools.benches import bench_module


@pytest.mark.parametrize("numerics", ["float32", "llama.cpp"])
def test_the_split_names_each_product_and_adds_up(tmp_path: Path, numerics: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from attncli.models.sources.gguf.qmatmul import ENABLED

    if not ENABLED:
        pytest.skip("the quantized kernels are not built or are switched off")
    path = bench_module("hidden_cache").synthetic(tmp_path, 2, d=256, ffn=512)
    split = bench_module("decode_split")
    monkeypatch.setattr(sys, "argv", ["decode_split.py", str(path), "--steps", "3",
                                      "--numerics", numerics])
    split.main()
    parts = json.loads(capsys.readouterr().out)
    products = {name: t for name, t in parts.items() if name.startswith("Q4_1 ")}
    # q, k, v stacked (256 + 2·128 rows), o, gate and up stacked, down, and the unembedding
    assert {"Q4_1 512x256", "Q4_1 256x256", "Q4_1 1024x256", "Q4_1 256x512"} <= set(products)
    assert all(t >= 0 for t in products.values()) and parts["faults"] >= 0
    # medians of each part, so the parts add up to the step's median only roughly
    assert 0 < sum(products.values()) <= 2 * parts["step"]
