"""The tiny GPT-2- and Llama-shaped checkpoints that attncli and TransformerLens both load."""

from __future__ import annotations

from typing import Any

import pytest

from attncli.models.family import Model, open_model
from tests.models.causal.tl import gpt2_pair, llama_pair


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def pair(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[Model, Any]:
    """attncli's model and TransformerLens's bridge of one tiny checkpoint, per family."""
    folder = tmp_path_factory.mktemp(f"causal-{request.param}")
    bridge = gpt2_pair(folder) if request.param == "gpt2" else llama_pair(folder)
    return open_model(str(folder)), bridge
