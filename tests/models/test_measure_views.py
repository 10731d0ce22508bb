"""run --measure norm|rollout against NumPy written here from the formulas (not attncli's code):
chapter-3 variants (the book's module rebuilt under attncli's seed), a GPT-2 and a Llama
checkpoint (transformers' eager attentions, values and output projections); show and the page
on their JSON; and the refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tests.conftest import SENTENCE
from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import save_family
from tests.tolerance import assert_near

TEXT = "Your journey starts with one step. The cat sat on the mat because it was tired."


def norm_reference(weights: np.ndarray, values: np.ndarray, w_o: np.ndarray | None) -> tuple[
        np.ndarray, np.ndarray]:
    """raw[h, i, j] = α_ij^h · ‖W_O[:, h·d:(h+1)·d] v_j^h‖, and each row divided by its sum.

    weights (H, T, T); values (H, T, d); w_o (d_model, H·d) as nn.Linear holds it, or None
    where the head writes its value as it is."""
    heads, _, d = values.shape
    raw = np.empty_like(weights, dtype=np.float64)
    for h in range(heads):
        written = values[h] if w_o is None else values[h] @ w_o[:, h * d:(h + 1) * d].T
        raw[h] = weights[h] * np.sqrt((written.astype(np.float64) ** 2).sum(-1))[None, :]
    return raw, raw / raw.sum(-1, keepdims=True)


def rollout_reference(per_layer: list[np.ndarray]) -> np.ndarray:
    """Π of (0.5·I + 0.5·mean_h A_l) with rows renormalised, layer 0 first applied."""
    size = per_layer[0].shape[-1]
    rolled = np.eye(size)
    for weights in per_layer:
        step = 0.5 * np.eye(size) + 0.5 * weights.astype(np.float64).mean(0)
        rolled = (step / step.sum(-1, keepdims=True)) @ rolled
    return rolled


def as_array(data: Any) -> np.ndarray:
    return np.array(data, dtype=np.float64)


# -- chapter 3 -----------------------------------------------------------------------------


class BookMultiHead(nn.Module):
    """Section 3.6.2's MultiHeadAttention as the book builds it (its parameters, in order)."""

    def __init__(self, d_in: int, d_out: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)


def test_norm_simple_qkv_causal(cli) -> None:  # noqa: ANN001
    """simple: ‖α x_j‖; qkv and causal: ‖α v_j‖ (no output projection)."""
    for variant in ("simple", "qkv", "causal"):
        shown_stages = "inputs,weights" if variant == "simple" else "inputs,values,weights"
        stages = cli("run", SENTENCE, "--variant", variant, "--show", shown_stages,
                     "--json").json()["stages"]
        weights = as_array(stages["weights"])  # (1, T, T)
        values = as_array(stages["inputs"])[None] if variant == "simple" \
            else as_array(stages["values"])  # (1, T, d)
        raw, shown = norm_reference(weights, values, None)
        doc = cli("run", SENTENCE, "--variant", variant, "--measure", "norm", "--json").json()
        assert doc["config"]["measure"] == "norm"
        assert_near(as_array(doc["norm"]), raw)
        assert_near(as_array(doc["weights"]), shown)


def test_norm_multihead_through_out_proj(cli) -> None:  # noqa: ANN001
    """multihead: each head's values through its own columns of the book's out_proj."""
    doc = cli("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--show",
              "inputs,values,weights", "--json").json()
    torch.manual_seed(doc["config"]["seed"])
    book = BookMultiHead(8, 8, 2)
    x = torch.tensor(doc["stages"]["inputs"])  # (T, 8)
    with torch.no_grad():
        values = book.W_value(x).view(len(x), 2, 4).transpose(0, 1).numpy()  # (2, T, 4)
    assert_near(values, as_array(doc["stages"]["values"]))
    raw, shown = norm_reference(as_array(doc["stages"]["weights"]), values,
                                book.out_proj.weight.detach().numpy())
    measured = cli("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--measure",
                   "norm", "--json").json()
    assert_near(as_array(measured["norm"]), raw)
    assert_near(as_array(measured["weights"]), shown)
    # The default stays the weights, with no measure in its config.
    plain = cli("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--json").json()
    assert "measure" not in plain["config"] and "norm" not in plain
    assert_near(as_array(plain["weights"]), as_array(doc["stages"]["weights"]))
    # The tiled path's window: the same numbers, rows renormalised over every key.
    tiled = cli("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--measure", "norm",
                "--impl", "tiled", "--rows", "2:5", "--cols", "0:4", "--json").json()
    window = as_array([[[np.nan if v is None else v for v in row] for row in head]
                       for head in tiled["weights"]])
    assert_near(window, np.where(np.isnan(window), np.nan, shown[:, 2:5, 0:4]), equal_nan=True)


# -- checkpoints ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("llama")
    return folder, save_family(folder, "llama", seed=11)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("gpt2")
    return folder, save_hf_gpt2(folder, seed=12, n_layer=3, n_head=2, n_embd=16,
                                n_positions=64)


def hf_llama(model: Any, ids: list[int]) -> tuple[list[np.ndarray], list[np.ndarray],
                                                  list[np.ndarray]]:
    """transformers' attentions (H, T, T), values per query head (H, T, d) and o_proj."""
    cfg = model.config
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    d = cfg.hidden_size // heads
    captured: list[torch.Tensor] = []
    hooks = [layer.self_attn.v_proj.register_forward_hook(
        lambda _m, _i, y: captured.append(y[0])) for layer in model.model.layers]
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    values = [v.view(len(ids), kv, d).transpose(0, 1).repeat_interleave(heads // kv, 0).numpy()
              for v in captured]
    o_proj = [layer.self_attn.o_proj.weight.detach().numpy() for layer in model.model.layers]
    return [a[0].numpy() for a in out.attentions], values, o_proj


def hf_gpt2(model: Any, ids: list[int]) -> tuple[list[np.ndarray], list[np.ndarray],
                                                 list[np.ndarray]]:
    """transformers' attentions, each head's values from c_attn, and c_proj as (d, H·d)."""
    body = getattr(model, "transformer", model)
    heads, width = model.config.n_head, model.config.n_embd
    captured: list[torch.Tensor] = []
    hooks = [block.attn.c_attn.register_forward_hook(lambda _m, _i, y: captured.append(y[0]))
             for block in body.h]
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    values = [qkv[:, 2 * width:].reshape(len(ids), heads, -1).transpose(0, 1).numpy()
              for qkv in captured]
    # Conv1D computes x @ W: nn.Linear's weight is its transpose.
    c_proj = [block.attn.c_proj.weight.detach().numpy().T for block in body.h]
    return [a[0].numpy() for a in out.attentions], values, c_proj


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_checkpoint_norm_and_rollout(cli, family: str, request: pytest.FixtureRequest,
                                     tmp_path: Path) -> None:  # noqa: ANN001
    folder, model = request.getfixturevalue(family)
    layer = 1
    doc = cli("run", TEXT, "--model", str(folder), "--layer", str(layer), "--measure", "norm",
              "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    attentions, values, w_o = (hf_llama if family == "llama" else hf_gpt2)(model, ids)
    raw, shown = norm_reference(attentions[layer], values[layer], w_o[layer])
    assert_near(as_array(doc["norm"]), raw)
    assert_near(as_array(doc["weights"]), shown)
    assert doc["config"]["measure"] == "norm"
    for shown_layer in (0, 2):
        rolled = cli("run", TEXT, "--model", str(folder), "--layer", str(shown_layer),
                     "--measure", "rollout", "--json").json()
        assert rolled["config"]["measure"] == "rollout" and len(rolled["weights"]) == 1
        assert_near(as_array(rolled["weights"][0]),
                    rollout_reference(attentions[:shown_layer + 1]))
    # show reads both back, and writes the same JSON; the table and the page say what it is.
    for kind, saved in (("norm", doc), ("rollout", rolled)):
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps(saved))
        again = cli("show", str(path), "--json")
        assert again.code == 0, again.err
        assert again.json() == saved
        table = cli("show", str(path))
        assert table.code == 0 and f"{kind}: " in table.out, table.err
        page = tmp_path / f"{kind}.html"
        assert cli("show", str(path), "--save", str(page)).code == 0
        html = page.read_text()
        assert f'"measure":"{kind}"' in html.replace(" ", ""), "the page's data names it"


def test_rollout_picks_rows_and_query(cli, llama: tuple[Path, Any]) -> None:  # noqa: ANN001
    """--query's row of a rollout is that row of the matrix; --head has no meaning there."""
    folder, _ = llama
    whole = cli("run", TEXT, "--model", str(folder), "--layer", "2", "--measure", "rollout",
                "--json").json()
    one = cli("run", TEXT, "--model", str(folder), "--layer", "2", "--measure", "rollout",
              "--query", "5", "--json").json()
    assert_near(as_array(one["query"]["weights"][0]), as_array(whole["weights"][0][5]))
    cli("run", TEXT, "--model", str(folder), "--measure", "rollout", "--head", "1",
        "--json").assert_usage_error("--head does not apply with --measure rollout")


def test_refusals(cli, llama: tuple[Path, Any]) -> None:  # noqa: ANN001
    folder, _ = llama
    bogus = cli("run", SENTENCE, "--measure", "bogus")
    assert bogus.code == 2 and "--measure" in bogus.err and bogus.err.count("\n") == 1
    cli("run", SENTENCE, "--variant", "multihead", "--measure", "rollout").assert_usage_error(
        "--measure rollout needs --model")
    cli("run", SENTENCE, "--measure", "norm", "--show", "values").assert_usage_error(
        "--show picks stages")
    cli("run", TEXT, "--model", str(folder), "--measure", "rollout", "--impl", "tiled"
        ).assert_usage_error("give --rows a:b")
    cli("run", TEXT, "--model", str(folder), "--measure", "norm", "--impl", "tiled", "--full",
        "--json").assert_usage_error("--full does not apply with --measure norm")
