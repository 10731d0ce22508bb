"""Attribution patching equals TransformerLens's gradient estimate on the same GPT-2- and
Llama-shaped checkpoints: each head's Σ (z_source − z_target) · ∂metric/∂z_target, the
gradient taken by autograd through the bridge's whole forward (a zero added at hook_z), within
1e-5 + 1e-5·|ref|, for a metric on one row (a logit difference) and on several (an answer's
log-probability, every logit's gradient)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from attncli.models.causal.passes import CleanPass, clean_pass
from attncli.models.causal.patch import attribution_grid
from attncli.models.family import Model, open_model
from tests.models.causal.tl import gpt2_pair, llama_pair
from tests.tolerance import assert_near

CLEAN = [1, 40, 50, 60, 70, 80, 40, 50, 60, 70, 90, 33]
CORRUPT = [1, 41, 52, 60, 71, 80, 40, 55, 60, 70, 91, 33]
ROWS = {"logit-diff": [11], "answer": [8, 9, 10]}


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def pair(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> tuple[Model, Any]:
    folder = tmp_path_factory.mktemp(f"attribution-{request.param}")
    bridge = gpt2_pair(folder) if request.param == "gpt2" else llama_pair(folder)
    return open_model(str(folder)), bridge


def _metric(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """logits (P, vocab) at ROWS[name] → the metric: logit(33) − logit(34) at the last row, or
    the log-probability of CLEAN's next tokens at three rows."""
    if name == "logit-diff":
        return lambda logits: logits[0, 33].double() - logits[0, 34].double()
    targets = torch.tensor(CLEAN[9:12])  # the tokens after rows 8, 9, 10

    def answer(logits: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(logits.double(), -1).gather(-1, targets[:, None]).sum()

    return answer


def _tl_attribution(bridge: Any, target: list[int], source: list[int], metric: Any,
                    rows: list[int]) -> torch.Tensor:
    """TransformerLens's estimate: hook_z's gradient on target's run, times source − target."""
    layers = bridge.cfg.n_layers
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor([source]))
    found: dict[int, torch.Tensor] = {}

    def watch(layer: int) -> Any:
        def hook(z: torch.Tensor, hook: Any) -> torch.Tensor:  # noqa: ARG001
            found[layer] = z.detach().clone()  # (1, T, heads, hd)
            delta = torch.zeros_like(z, requires_grad=True)
            found[layers + layer] = delta
            return z + delta

        return hook

    logits = bridge.run_with_hooks(torch.tensor([target]), fwd_hooks=[
        (f"blocks.{layer}.attn.hook_z", watch(layer)) for layer in range(layers)])
    metric(logits[0, rows].float()).backward()
    grid = []
    for layer in range(layers):
        grad = found[layers + layer].grad  # (1, T, heads, hd)
        assert grad is not None
        delta = cache[f"blocks.{layer}.attn.hook_z"] - found[layer]  # (1, T, heads, hd)
        grid.append((delta * grad)[0].sum((0, 2)))  # (heads,)
    return torch.stack(grid).double()  # (layers, heads)


def _clean(model: Model, ids: list[int]) -> CleanPass:
    return clean_pass(model, ids, model.trace(ids, model.spec.n_layer - 1))


@pytest.mark.parametrize("name", ["logit-diff", "answer"])
@pytest.mark.parametrize("denoise", [False, True], ids=["noise", "denoise"])
def test_attribution_equals_transformer_lens(pair: tuple[Model, Any], name: str,
                                             denoise: bool) -> None:
    model, bridge = pair
    runs = (_clean(model, CORRUPT), _clean(model, CLEAN))
    target, source = runs if denoise else runs[::-1]
    metric, rows = _metric(name), ROWS[name]
    got = attribution_grid(model, target, source, metric, rows)
    ref = _tl_attribution(bridge, target.ids, source.ids, metric, rows)
    assert got.shape == (model.spec.n_layer, model.spec.num_heads)
    assert_near(got, ref)
    assert ref.abs().max() > 1e-3  # the heads' outputs move the metric
