"""Tiny random decoders saved as transformers saves them, shared by the generate tests that
compare against transformers: Llama, Qwen2 (grouped-query attention: 2 heads a kv head) and
GPT-2 (with its lm_head), each folder beside the transformers model it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import save_family

CASES = ["llama", "qwen2", "gpt2"]


def _save(folder: Path, name: str, seed: int) -> Any:
    if name == "gpt2":
        return save_hf_gpt2(folder, seed, lm_head=True, n_layer=2, n_embd=16, n_head=4,
                            vocab_size=384, n_positions=64)
    return save_family(folder, name, seed=seed)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Each case's folder and its transformers model (eval mode), saved once a module."""
    root = tmp_path_factory.mktemp("decoders")
    return {name: (root / name, _save(root / name, name, 40 + i).eval())
            for i, name in enumerate(CASES)}
