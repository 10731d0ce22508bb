"""The tiled path with a Llama-family model: the same numbers as transformers, in less memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.core.request import Extract, Request
from attncli.errors import AttnCliError
from attncli.models.run import run_model
from tests.llama_fixtures import hf_reference, save_family
from tests.tolerance import assert_near

TEXT = " ".join(["The cat sat on the mat 猫吃鱼 because it was tired."] * 4)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("llama-long")
    return {"qwen3": (root / "q", save_family(root / "q", "qwen3", seed=21)),
            "mistral": (root / "m", save_family(root / "m", "mistral", seed=22))}


@pytest.mark.parametrize("layer", [0, 2])
def test_tiled_matches_transformers(models, layer: int) -> None:
    folder, model = models["qwen3"]
    req = Request(text=TEXT, model=str(folder), layer=layer)
    # --impl auto, with too little room for N × N matrices
    result = run_model(req, Extract(), budget_bytes=1)
    assert result.long is not None and result.variant == "llama"
    assert result.config.impl == "tiled"
    assert result.model is not None and result.model.family is not None
    assert result.model.family.kv_heads == 2
    ids = [t.id for t in result.tokens]
    ref = hf_reference(model, ids)
    assert result.window is not None
    rows, cols = result.window["rows"], result.window["cols"]
    expected = ref["attentions"][layer][:, rows[0]:rows[1], cols[0]:cols[1]]
    got = torch.nan_to_num(torch.tensor(result.weights), nan=0.0)  # masked cells are NaN
    assert_near(got, expected)
    assert_near(torch.tensor(result.context), ref["attn_out"][layer])


def test_naive_only_commands_refuse_long_inputs(models) -> None:
    req = Request(text=TEXT * 40, model=str(models["qwen3"][0]))
    with pytest.raises(AttnCliError, match="more than --impl auto allows"):
        run_model(req)


def test_a_sliding_window_layer_is_refused_on_the_tiled_path(models) -> None:
    req = Request(text=TEXT, model=str(models["mistral"][0]), impl="tiled")
    with pytest.raises(AttnCliError, match="sliding window of 5 tokens"):
        run_model(req, Extract(), budget_bytes=1)
