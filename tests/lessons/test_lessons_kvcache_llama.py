"""`attncli kvcache --model` on tiny Llama-family checkpoints: every step against the full pass
and against transformers' eager attention; the cache holds kv_heads, not query heads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.core.request import Request
from attncli.lessons.kvcache import kvcache_model
from attncli.models.llama.checkpoint import open_llama
from attncli.models.llama.config import kv_cache_values
from attncli.models.llama.decode import llama_shape
from attncli.models.llama.family import resolve_llama
from attncli.models.llama.model import llama_attention
from attncli.models.sources.named import Named
from tests.llama_fixtures import hf_reference, save_family
from tests.tolerance import assert_near

TEXT = "The cat sat on the mat 猫吃鱼 because it was tired"
CASES: dict[str, dict[str, Any]] = {
    "llama": {"family": "llama"},  # GQA: 4 query heads share 2 kv heads
    "qwen2": {"family": "qwen2"},  # q/k/v bias; 4 query heads share 1 kv head
    "qwen3": {"family": "qwen3"},  # per-head q/k RMSNorm, head_dim 12
    "mistral": {"family": "mistral", "tokenizer": "sp"},  # sliding window 5 < T
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """name → (the model folder, the transformers model that wrote it)."""
    root = tmp_path_factory.mktemp("kv-llama")
    made = {}
    for seed, (name, case) in enumerate(CASES.items()):
        settings = dict(case)
        made[name] = (root / name, save_family(root / name, settings.pop("family"), seed=seed + 40,
                                               **settings))
    return made


def _decode(folder: Path, layer: int) -> Any:
    return kvcache_model(Request(text=TEXT, model=str(folder), layer=layer))


def _ids(result: Any) -> list[int]:
    return [t.id for t in result.tokens if t.id is not None]


def _contexts(result: Any) -> torch.Tensor:
    return torch.stack([torch.tensor(step.context) for step in result.steps])  # (T, d_model)


@pytest.mark.parametrize("name", list(CASES))
def test_layer_0_steps_are_rows_of_the_full_pass(models: dict[str, tuple[Path, Any]],
                                                 name: str) -> None:
    result = _decode(models[name][0], 0)
    assert len(result.steps) > 5  # longer than Mistral's window
    assert result.weights_max_abs_diff <= 1e-6
    assert result.context_max_abs_diff <= 1e-5
    assert result.ok


def _close(context: torch.Tensor, expected: torch.Tensor) -> bool:
    """Within 1e-5 of the context's own size (about 10 in these models), float32's rounding."""
    return float((context - expected).abs().max()) <= 1e-5 * max(1.0, float(expected.abs().max()))


@pytest.mark.parametrize("name", list(CASES))
def test_deeper_steps_are_rows_of_the_full_pass(models: dict[str, tuple[Path, Any]],
                                                name: str) -> None:
    folder = models[name][0]
    result = _decode(folder, 2)
    spec = resolve_llama(str(folder)).spec
    assert result.config == {"model": str(folder), "heads": 4, "kv_heads": spec.kv_heads,
                             "d_out": 32, "layer": 2}
    assert result.weights_max_abs_diff <= 1e-5
    # One-row and whole-text float32 products round differently, and two blocks amplify it.
    ckpt = resolve_llama(str(folder))
    with open_llama(ckpt) as weights:
        full = llama_attention(weights, ckpt.spec, _ids(result), 2)
    assert _close(_contexts(result), full.output.context)
    assert result.ok


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("layer", [0, 2])
def test_in_float64_every_step_is_exact(models: dict[str, tuple[Path, Any]], name: str,
                                        layer: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without float32's rounding the decode and the full pass agree: the maths is the same."""
    read, rows = Named.__getitem__, Named.rows
    monkeypatch.setattr(Named, "__getitem__", lambda self, n: read(self, n).double())
    monkeypatch.setattr(Named, "rows", lambda self, n, i: rows(self, n, i).double())
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        result = _decode(models[name][0], layer)
    finally:
        torch.set_default_dtype(default)
    assert result.weights_max_abs_diff <= 1e-12
    assert result.context_max_abs_diff <= 1e-12


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("layer", [0, 2])
def test_each_step_matches_transformers(models: dict[str, tuple[Path, Any]], name: str,
                                        layer: int) -> None:
    folder, reference = models[name]
    result = _decode(folder, layer)
    ref = hf_reference(reference, _ids(result))
    for t, step in enumerate(result.steps):
        expected = ref["attentions"][layer][:, t, :t + 1]  # (heads, t+1)
        assert float((torch.tensor(step.weights) - expected).abs().max()) <= 1e-5
    assert _close(_contexts(result), ref["attn_out"][layer])


@pytest.mark.parametrize("name", list(CASES))
def test_cache_holds_kv_heads(models: dict[str, tuple[Path, Any]], name: str) -> None:
    folder = models[name][0]
    spec = resolve_llama(str(folder)).spec
    result = _decode(folder, 0)
    for t, step in enumerate(result.steps):
        assert step.cache_len == t + 1
        assert step.cache_bytes == 2 * spec.n_layer * spec.kv_heads * (t + 1) * spec.head_dim * 4
        assert step.cache_bytes == kv_cache_values(spec, t + 1) * 4
        assert len(step.weights) == spec.num_heads  # every query head is shown
        assert all(len(row) == t + 1 for row in step.weights)
    assert result.totals["cache_bytes"] == result.steps[-1].cache_bytes


def test_sliding_window_leaves_old_keys_unread(models: dict[str, tuple[Path, Any]]) -> None:
    result = _decode(models["mistral"][0], 0)
    window = 5
    for t, step in enumerate(result.steps):
        weights = torch.tensor(step.weights)  # (heads, t+1)
        seen = max(0, t + 1 - window)
        if seen:
            assert float(weights[:, :seen].abs().max()) == 0
        assert_near(weights[:, seen:].sum(-1), torch.ones(4))
        assert step.cache_len == t + 1  # the cache keeps them; the window only skips them


def test_macs_count_kv_heads(models: dict[str, tuple[Path, Any]]) -> None:
    spec = resolve_llama(str(models["llama"][0])).spec
    d, hd, ff = 32, 8, 48
    shape = llama_shape(spec)
    # q_proj and o_proj: d · 4·hd each; k_proj and v_proj: d · 2·hd each; SwiGLU: 3 · d · ff.
    assert shape.token_macs == 2 * d * 4 * hd + 2 * d * 2 * hd + 3 * d * ff
    result = _decode(models["llama"][0], 0)
    for t, step in enumerate(result.steps):
        assert step.macs_cached == 3 * (shape.token_macs + 2 * (t + 1) * 4 * hd)
        assert step.macs_recompute >= step.macs_cached
    assert result.totals["prefill_macs"] == result.totals["macs_cached"]


def test_cli_json(cli, models: dict[str, tuple[Path, Any]]) -> None:  # noqa: ANN001
    run = cli("kvcache", TEXT, "--model", str(models["qwen3"][0]), "--layer", "-1", "--json")
    assert run.code == 0
    doc = run.json()
    assert set(doc) == {"steps", "max_abs_diff", "totals"}
    assert set(doc["steps"][0]) == {"index", "token", "cache_len", "cache_bytes", "weights",
                                    "context", "macs_cached", "macs_recompute"}
    assert len(doc["steps"][0]["weights"]) == 4
    assert len(doc["steps"][0]["context"]) == 32
    assert doc["totals"]["layers"] == 3
    assert doc["max_abs_diff"] <= 1e-5


def test_cli_table(cli, models: dict[str, tuple[Path, Any]]) -> None:  # noqa: ANN001
    run = cli("kvcache", TEXT, "--model", str(models["llama"][0]), "--head", "3")
    assert run.code == 0
    assert "Check" in run.out
