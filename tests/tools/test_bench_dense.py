"""bench/dense.py on a small size: a line per type the kernels take, a ratio per row count, and
its dense side is F.linear on the dequantized weights itself; the one-row measure against the
float32 floor is there for each type (no timings are checked)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attncli.models.sources.gguf.qmatmul import dense_rows
from tests.tools.benches import bench_module


def test_a_ratio_per_type_and_row_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from attncli.models.sources.gguf.qmatmul import ENABLED

    if not ENABLED:
        pytest.skip("the quantized kernels are not built or are switched off")
    dense = bench_module("dense")
    monkeypatch.setattr(sys, "argv", ["dense.py", "--size", "256", "--rows", "4,40",
                                      "--repeats", "1", "--out", str(tmp_path / "dense.json")])
    dense.main()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["type"] for line in lines] == [q.name for q in dense.TYPES]
    assert all(set(line["kernels_over_dense"]) == {"4", "40"} for line in lines)
    assert all(r > 0 for line in lines for r in line["kernels_over_dense"].values())
    floors = [line["one_row"] for line in lines]
    assert all(set(f) == {"kernel_ns_per_weight", "floor_ns_per_weight", "floor_over_kernel"}
               and min(f.values()) > 0 for f in floors)
    assert json.loads((tmp_path / "dense.json").read_text())["types"] == lines
    for qtype in dense.TYPES:  # finite matrices, and the dense side is F.linear itself
        matrix = dense.random_matrix(qtype, 64, 256, np.random.default_rng(1))
        x = torch.randn(3, 256, generator=torch.Generator().manual_seed(2))
        weights = matrix.dequantized()  # (64, 256): one piece
        assert torch.isfinite(weights).all()
        with dense_rows(1):
            assert torch.equal(matrix.linear(x), torch.nn.functional.linear(x, weights))
