"""The tiled rollout (long/rollout.py): the rows asked for, walked back through the layers,
equal the naive rollout's rows, and its memory stays far below one N × N matrix."""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.conftest import ROOT
from tests.llama_fixtures import save_family
from tests.tolerance import assert_near

TEXT = ("Your journey starts with one step. The cat sat on the mat because it was tired. "
        "Attention is all you need.")
MEMORY_LIMIT = 1200 * 2**20  # address space for the child: Python, torch and the run


def rollout_reference(per_layer: list[np.ndarray]) -> np.ndarray:
    """Π of (0.5·I + 0.5·mean_h A_l), rows renormalised, layer 0 applied first (float64)."""
    size = per_layer[0].shape[-1]
    rolled = np.eye(size)
    for weights in per_layer:
        step = 0.5 * np.eye(size) + 0.5 * weights.astype(np.float64).mean(0)
        rolled = (step / step.sum(-1, keepdims=True)) @ rolled
    return rolled


def cells(data: list[list[Any]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in data])


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llama")
    save_family(folder, "llama", seed=21, max_position_embeddings=16384)
    return folder


def test_tiled_rows_equal_naive_rows(cli, llama: Path) -> None:  # noqa: ANN001
    base = ("run", TEXT, "--model", str(llama), "--layer", "2", "--measure", "rollout")
    naive = cli(*base, "--json").json()
    whole = np.array(naive["weights"][0])  # (T, T)
    for rows in ("0:3", "-12:"):
        tiled = cli(*base, "--impl", "tiled", "--rows", rows, "--json").json()
        assert tiled["config"]["impl"] == "tiled" and tiled["config"]["measure"] == "rollout"
        (a, b), (c, d) = tiled["window"]["rows"], tiled["window"]["cols"]
        got = cells(tiled["weights"][0])  # (b - a, d - c), NaN after each query
        expected = np.where(np.isnan(got), np.nan, whole[a:b, c:d])
        assert_near(got, expected)
        assert len(tiled["stats"]["lse"]) == 4, "the layer's own stats keep every head"
    # --query alone: the corner's rows and the query's, its row over every key.
    one = cli(*base, "--impl", "tiled", "--query", "40", "--json").json()
    row = np.array([np.nan if v is None else v for v in one["query"]["weights"][0]])
    assert_near(row[:41], whole[40, :41])
    assert np.isnan(row[41:]).all()
    shown = cli(*base, "--impl", "tiled", "--rows", "20:24", "--cols", "0:24")
    assert shown.code == 0 and "Attention rollout to layer 2, heads averaged" in shown.out


def test_windows_walked_back_as_the_layers_mask_them(tmp_path: Path) -> None:
    """A sliding-window model (Mistral, window 5): the rows from long/rollout.py against
    transformers' eager attentions of every layer."""
    from attncli.core.request import Request
    from attncli.long.rollout import rollout_rows
    from attncli.models.family import LayerInputs, open_model

    hf = save_family(tmp_path, "mistral", seed=22)
    model = open_model(str(tmp_path))
    ids = model.tokens(Request(text=TEXT, model=str(tmp_path))).ids
    with torch.no_grad():
        attentions = [a[0].numpy() for a in hf(torch.tensor([ids]),
                                               output_attentions=True).attentions]
    assert isinstance(model, LayerInputs)
    picked = [30, 7, 12]
    layers = model.layer_inputs(ids, 2, max(picked) + 1)
    got = rollout_rows(layers, model.spec.windows, picked).numpy()  # (3, 31)
    expected = rollout_reference(attentions[:3])[picked][:, :31]
    assert_near(got, expected)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def test_memory_bounded_on_a_long_input(llama: Path, tmp_path: Path) -> None:
    """11K tokens under a 1.2 GB address space: one N × N float32 matrix alone is 0.5 GB, N ×
    N × layers 1.6 GB; the rows, the layers' inputs and a tile fit."""
    rng = random.Random(0)
    words = TEXT.split()
    text = tmp_path / "long.txt"
    text.write_text(" ".join(rng.choice(words) for _ in range(4000)))
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    args = [sys.executable, "-m", "attncli", "run", "--file", str(text), "--model", str(llama),
            "--layer", "2", "--measure", "rollout", "--rows", "-8:", "--json"]
    done = subprocess.run(args, capture_output=True, env=env, cwd=ROOT, timeout=600,
                          preexec_fn=_limit, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    doc = json.loads(done.stdout)
    size = doc["config"]["num_tokens"]
    assert size > 10_000 and doc["config"]["impl"] == "tiled"
    assert 3 * size * size * 4 > MEMORY_LIMIT > size * size * 4
    rows = cells(doc["weights"][0])  # (8, N)
    assert_near(np.nansum(rows, -1), 1.0, atol=1e-4)
