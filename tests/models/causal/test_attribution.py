"""Attribution patching equals TransformerLens's gradient estimate on the same GPT-2- and
Llama-shaped checkpoints: each head's Σ (z_source − z_target) · ∂metric/∂z_target, the
gradient taken by autograd through the bridge's whole forward (a zero added at hook_z), within
1e-5 + 1e-5·|ref|, for a metric on one row (a logit difference) and on several (an answer's
log-probability, every logit's gradient)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.models.causal.attribution import attribution_grid
from attncli.models.causal.passes import CleanPass, clean_pass
from attncli.models.family import Model, open_model
from tests.tolerance import assert_near

CLEAN = [1, 40, 50, 60, 70, 80, 40, 50, 60, 70, 90, 33]
CORRUPT = [1, 41, 52, 60, 71, 80, 40, 55, 60, 70, 91, 33]
ROWS = {"logit-diff": [11], "answer": [8, 9, 10]}


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


def _hf_attribution(model: Any, target: list[int], source: list[int], metric: Any,
                    rows: list[int], heads: int) -> torch.Tensor:
    """transformers' estimate: the gradient at each o_proj's input (the heads' outputs side by
    side) on target's run, times source − target there."""
    found: dict[str, list[torch.Tensor]] = {"z": [], "delta": []}

    def keep(module: Any, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor]:  # noqa: ARG001
        found["z"].append(args[0].detach().clone())  # (1, T, heads · hd)
        return (args[0],)

    def watch(module: Any, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor]:  # noqa: ARG001
        delta = torch.zeros_like(args[0], requires_grad=True)
        found["delta"].append(delta)
        return (args[0] + delta,)

    layers = model.model.layers
    for hook, ids in ((keep, source), (keep, target), (watch, target)):
        handles = [layer.self_attn.o_proj.register_forward_pre_hook(hook) for layer in layers]
        logits = model(torch.tensor([ids])).logits[0]  # (T, vocab)
        for handle in handles:
            handle.remove()
    metric(logits[rows].float()).backward()
    count = len(layers)
    grid = []
    for layer in range(count):
        delta = found["z"][layer] - found["z"][count + layer]  # (1, T, heads · hd)
        grad = found["delta"][layer].grad  # (1, T, heads · hd)
        assert grad is not None
        grid.append((delta * grad)[0].unflatten(-1, (heads, -1)).sum((0, 2)))  # (heads,)
    return torch.stack(grid).double()  # (layers, heads)


@pytest.mark.parametrize("name", ["logit-diff", "answer"])
def test_attribution_through_a_quantized_gguf_equals_transformers(
        tmp_path: Path, name: str) -> None:
    """Through Q4_K blocks (the 8B's type): the backward dequantizes each matrix again; the
    reference is transformers' model of the same file (its dequantized weights)."""
    from gguf import GGMLQuantizationType

    from tests.gguf_fixtures import write_k_llama
    from tests.models.gguf.test_gguf_cli import _transformers

    path = tmp_path / "k-llama.gguf"
    write_k_llama(path, GGMLQuantizationType.Q4_K, seed=4)
    model, reference = open_model(str(path)), _transformers(path)
    target, source = _clean(model, CLEAN), _clean(model, CORRUPT)
    metric, rows = _metric(name), ROWS[name]
    got = attribution_grid(model, target, source, metric, rows)
    ref = _hf_attribution(reference, CLEAN, CORRUPT, metric, rows, model.spec.num_heads)
    assert_near(got, ref)
    assert ref.abs().max() > 1e-4


def test_the_backward_holds_one_block_at_a_time(tmp_path: Path) -> None:
    """The tensors attribution patching holds at once (torch's allocations, tracked as they are
    made and freed) do not grow with depth: a block runs again and back at a time. Before, the
    backward kept every block's activations: 8 blocks held 3.8× what 2 held."""
    from attncli.lessons.memory import peak_bytes
    from tests.llama_fixtures import save_family

    ids = list(range(3, 99))  # 96 tokens: activations far larger than the estimates
    peaks = []
    for layers in (2, 8):
        folder = tmp_path / f"deep-{layers}"
        save_family(folder, "llama", seed=5, num_hidden_layers=layers, intermediate_size=256)
        model = open_model(str(folder))
        target, source = _clean(model, ids), _clean(model, ids[::-1])
        peak, _ = peak_bytes(lambda m=model, t=target, s=source: attribution_grid(
            m, t, s, _metric("logit-diff"), [len(ids) - 1]), [])
        peaks.append(peak)
    assert peaks[1] <= 1.2 * peaks[0], peaks
