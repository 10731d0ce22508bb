"""Edited passes equal TransformerLens's hook_z edits on the same GPT-2- and Llama-shaped
checkpoints: the clean logits, zero and mean ablation of one head and of heads in two layers,
within 1e-5 + 1e-5·|ref|."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from attncli.models.causal.passes import CleanPass, clean_pass, edited_logits, replaced
from attncli.models.family import Model
from tests.models.causal.tl import hooked_logits, z_hook
from tests.tolerance import assert_near

IDS = [1, 40, 50, 60, 70, 80, 40, 50, 60, 70, 90, 33]


def _close(got: torch.Tensor, ref: torch.Tensor) -> None:
    assert_near(got, ref)


def _clean(model: Model) -> CleanPass:
    return clean_pass(model, IDS, model.trace(IDS, model.spec.n_layer - 1))


def test_clean_logits_are_transformer_lens(pair: tuple[Model, Any]) -> None:
    model, bridge = pair
    _close(_clean(model).logits, hooked_logits(bridge, IDS, []))


@pytest.mark.parametrize("how", ["zero", "mean"])
def test_one_head_ablated_as_hook_z(pair: tuple[Model, Any], how: str) -> None:
    model, bridge = pair
    clean, layer, head = _clean(model), model.spec.n_layer - 1, 1
    z = clean.z[layer][head]  # (T, hd)
    values = torch.zeros_like(z) if how == "zero" else z.mean(0).expand_as(z)
    with torch.no_grad():
        got = edited_logits(model, clean, {layer: replaced(head, values)})
    make = (torch.zeros_like if how == "zero"
            else lambda t: t.mean(1, keepdim=True).expand_as(t))
    ref = hooked_logits(bridge, IDS, [(f"blocks.{layer}.attn.hook_z", z_hook(head, make))])
    _close(got, ref)
    assert (got - clean.logits).abs().max() > 1e-3  # the edit changed something


def test_heads_in_two_layers_at_some_positions(pair: tuple[Model, Any]) -> None:
    model, bridge = pair
    clean = _clean(model)
    where = torch.tensor([i % 3 == 0 for i in range(len(IDS))])  # (T,)
    fixed = torch.randn(clean.z[1][0].shape, generator=torch.Generator().manual_seed(0))
    edits = {0: replaced(2, torch.zeros_like(clean.z[0][2]), where),
             1: replaced(0, fixed, where)}  # (T, hd) given values

    def zero_at(t: torch.Tensor) -> torch.Tensor:
        return torch.where(where[None, :, None], 0.0, t)

    def other_at(z: torch.Tensor, hook: Any) -> torch.Tensor:  # noqa: ARG001
        z = z.clone()
        z[:, where, 0] = fixed[where]
        return z

    with torch.no_grad():
        got = edited_logits(model, clean, edits)
    ref = hooked_logits(bridge, IDS, [("blocks.0.attn.hook_z", z_hook(2, zero_at)),
                                      ("blocks.1.attn.hook_z", other_at)])
    _close(got, ref)


def test_lower_blocks_are_not_run_again(pair: tuple[Model, Any],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit at the last layer runs that block alone: the stream entering it is the clean
    pass's."""
    model, _ = pair
    clean, last = _clean(model), model.spec.n_layer - 1
    seen: list[int] = []
    original = model.edited  # type: ignore[attr-defined]

    def watched(ids: list[int], first: int, stream: torch.Tensor, edit: Any) -> torch.Tensor:
        seen.append(first)
        assert stream.shape == (1, *clean.streams[first].shape)
        assert stream.data_ptr() == clean.streams[first].data_ptr()  # the clean stream itself

        def seen_edit(layer: int, z: torch.Tensor) -> torch.Tensor:
            seen.append(layer)
            return edit(layer, z)

        return original(ids, first, stream, seen_edit)

    monkeypatch.setattr(model, "edited", watched)
    with torch.no_grad():
        edited_logits(model, clean, {last: replaced(0, torch.zeros_like(clean.z[last][0]))})
    assert seen == [last, last]
