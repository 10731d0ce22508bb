"""The shipped toy checkpoint loads, matches transformers, and has its documented head."""

from __future__ import annotations

import torch

from attncli.core.tokens import encode
from attncli.models.gpt2.family import resolve_checkpoint
from attncli.models.gpt2.model import gpt2_all_layers
from attncli.models.measures import head_measures
from tests.conftest import ROOT
from tests.gpt2_fixtures import hf_reference
from tests.tolerance import assert_near

TOY = ROOT / "samples" / "toy-gpt2"


def test_toy_model_matches_transformers_and_has_a_previous_token_head() -> None:
    from transformers import GPT2Model

    ids = encode((TOY / "probe.txt").read_text().strip(), allow_special=True)
    ckpt = resolve_checkpoint(str(TOY))
    assert (ckpt.n_layer, ckpt.n_head, ckpt.n_embd) == (3, 4, 64)
    assert (TOY / "model.safetensors").stat().st_size <= 8 * 2**20
    ours = gpt2_all_layers(ckpt, ids)  # (layers, heads, T, T)
    model = GPT2Model.from_pretrained(TOY).float().eval()
    model.set_attn_implementation("eager")
    reference = torch.stack(hf_reference(model, ids)["attentions"])
    assert_near(ours, reference)
    best = max(head_measures(ours), key=lambda row: row["prev"])
    assert (best["layer"], best["head"]) == (0, 3) and best["prev"] > 0.4
