"""A model run's memory is bounded by one layer, not by the file: the estimate against a count
made here from the shape, its one-line refusal, and a run under RLIMIT_AS that fails if a
layer's weights were kept after the next layer began."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attncli import machine
from attncli.models.memory import held_bytes, layer_weights, run_bytes
from attncli.models.sources.gguf import open_gguf, qmatmul
from attncli.models.unembed import VOCAB_CHUNK
from bench.shapes import LlamaShape, Q, write_llama_shape
from tests.conftest import ROOT
from tests.tolerance import assert_near

TINY = LlamaShape("tiny", 3, 256, 4, 2, 512, vocab=600)
# 16 layers of 61 MB as float32 (973 MB in all) in a 140 MB Q4_K file.
WIDE = LlamaShape("wide", 16, 1024, 16, 4, 4096, vocab=600)


def _layer_bytes(shape: LlamaShape) -> int:
    """One block's float32 bytes, counted from the shape: q, k, v, o, gate, up, down, 2 norms."""
    d, hd = shape.hidden, shape.hidden // shape.heads
    return 4 * (2 * d * shape.heads * hd + 2 * d * shape.kv_heads * hd + 3 * d * shape.ffn + 2 * d)


def test_run_bytes_is_the_largest_layer_and_a_block_of_unembedding_rows(tmp_path: Path) -> None:
    source = open_gguf(write_llama_shape(tmp_path / "t.gguf", TINY, Q.Q8_0))
    assert layer_weights(source.shapes()) == {i: _layer_bytes(TINY) for i in range(3)}
    rows = min(TINY.vocab, VOCAB_CHUNK) * TINY.hidden * 4
    assert run_bytes(source.shapes()) == _layer_bytes(TINY) + rows


def test_a_model_whose_layer_cannot_fit_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:  # noqa: ANN001
    path = write_llama_shape(tmp_path / "t.gguf", TINY, Q.Q8_0)
    monkeypatch.setattr(machine, "available_bytes", lambda: _layer_bytes(TINY))  # < 2 × need
    cli("run", "the cat", "--model", str(path)).assert_usage_error(
        "needs its weights held (2 MB) or one layer's weights as float32 at a time (3 MB)")
    monkeypatch.setattr(machine, "available_bytes", lambda: 64 * _layer_bytes(TINY))
    assert cli("run", "the cat", "--model", str(path), "--json").code == 0


def test_held_bytes_count_the_files_blocks_where_the_kernels_compute_on_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = open_gguf(write_llama_shape(tmp_path / "t.gguf", TINY, Q.Q8_0))
    matrices = [(rows, cols) for _, (rows, cols) in TINY.matrices()]
    norms = 2 * TINY.layers + 1
    file_bytes = sum(rows * cols // 32 * 34 for rows, cols in matrices)  # Q8_0: 34 per 32
    assert held_bytes(source) == file_bytes + norms * TINY.hidden * 4
    monkeypatch.setattr(qmatmul, "ENABLED", False)  # every matrix dequantized: float32
    assert held_bytes(source) == sum(r * c for r, c in matrices) * 4 + norms * TINY.hidden * 4


# The child: optionally keep every tensor read (what a leak would do), set RLIMIT_AS to the
# given bytes past what it holds after importing attncli and torch, then run the CLI.
CHILD = """
import resource, sys
import torch
from attncli.cli.main import execute
from attncli.models.sources import named
if sys.argv[1] == "keep":
    init = named.Named.__init__
    def keeping(self, *a, **k):
        init(self, *a, **k)
        self.keep = True
    named.Named.__init__ = keeping
held = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
resource.setrlimit(resource.RLIMIT_AS, (held + int(sys.argv[2]), resource.RLIM_INFINITY))
sys.exit(execute(sys.argv[3:]))
"""


def _run_limited(mode: str, headroom: int, *args: str,
                 quantized: bool = False) -> subprocess.CompletedProcess[str]:
    # No hidden-state cache: the kept run must make the whole pass the freed run made, not read
    # the streams the freed run left. The float32 path unless quantized: the kernels on the
    # file's blocks keep no float32 matrix to free.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2", "NO_COLOR": "1",
           "ATTNCLI_NO_CACHE": "1", "ATTNCLI_QMATMUL": "1" if quantized else "0"}
    return subprocess.run([sys.executable, "-c", CHILD, mode, str(headroom), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_layers_are_freed_one_by_one_under_an_address_space_limit(tmp_path: Path) -> None:
    """16 layers whose float32 weights (973 MB) exceed the limit, while one (61 MB) fits: the
    run through every layer, with its predictions, completes; the same run keeping every
    tensor it reads is stopped by the same limit, so the limit does bind."""
    path = write_llama_shape(tmp_path / "wide.gguf", WIDE, Q.Q4_K)
    layer = _layer_bytes(WIDE)
    assert 16 * layer > 900 * 2**20
    headroom = 8 * layer  # 486 MB past what Python, torch and attncli hold before the run
    args = ("run", "the cat sat on the mat", "--model", str(path), "--layer", "-1",
            "--predict", "3", "--json")
    freed = _run_limited("free", headroom, *args)
    assert freed.returncode == 0, freed.stderr[-2000:]
    assert json.loads(freed.stdout)["config"]["layer"] == 15
    kept = _run_limited("keep", headroom, *args)
    assert kept.returncode != 0
    assert re.search(r"MemoryError|more than half the|Cannot allocate|DefaultCPUAllocator",
                     kept.stderr), kept.stderr[-2000:]
    # On the quantized blocks, every layer kept as the file holds it (140 MB) fits the limit
    # that the float32 copies overran, and the run gives the float32 run's weights.
    held = _run_limited("keep", headroom, *args, quantized=True)
    assert held.returncode == 0, held.stderr[-2000:]
    ours, theirs = (np.array(json.loads(r.stdout)["weights"], dtype=float)  # (h, T, T), nan
                    for r in (held, freed))  # where masked (null)
    assert_near(ours, theirs, equal_nan=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_kvcache_holds_one_layer_at_a_time_under_an_address_space_limit(tmp_path: Path) -> None:
    """kvcache decodes every token through one layer before the next: under a limit that one
    layer fits and the 16 do not, it completes, its steps checked against the full pass; kept
    tensors (what the decoder held before) are stopped by the same limit."""
    path = write_llama_shape(tmp_path / "wide.gguf", WIDE, Q.Q4_K)
    headroom = 8 * _layer_bytes(WIDE)  # 486 MB; the 16 layers are 973 MB
    args = ("kvcache", "the cat sat on the mat", "--model", str(path), "--layer", "-1",
            "--json")
    freed = _run_limited("free", headroom, *args)
    assert freed.returncode == 0, freed.stderr[-2000:]
    doc = json.loads(freed.stdout)
    assert doc["totals"]["layers"] == 16 and len(doc["steps"]) == doc["totals"]["tokens"] > 5
    assert doc["totals"]["weights_max_abs_diff"] <= 1e-5  # the steps against the full pass
    kept = _run_limited("keep", headroom, *args)
    assert kept.returncode != 0
    assert re.search(r"MemoryError|more than half the|Cannot allocate|DefaultCPUAllocator",
                     kept.stderr), kept.stderr[-2000:]
