"""attncli's GPT-2 forward pass against transformers' own GPT-2, on locally built checkpoints."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.gpt2.family import resolve_checkpoint
from attncli.models.gpt2.model import gpt2_all_layers, gpt2_attention
from tests.gpt2_fixtures import hf_reference, save_hf_gpt2
from tests.tolerance import assert_near

SMALL = {"n_layer": 3, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": 50257}
TOKEN_IDS = [50256, 464, 3797, 3332, 319, 262, 2603, 13, 383, 3290, 3332, 319, 262, 2603, 13,
             50000, 11, 0, 12, 286]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, torch.nn.Module]]:
    """name → (what to pass as --model, the transformers model that wrote it)."""
    root = tmp_path_factory.mktemp("gpt2")
    made: dict[str, tuple[Path, torch.nn.Module]] = {}
    made["model"] = (root / "model", save_hf_gpt2(root / "model", seed=1, **SMALL))
    # GPT2LMHeadModel writes transformer.-prefixed keys; a non-default eps must be honoured.
    made["lm_head"] = (root / "lm", save_hf_gpt2(root / "lm", seed=2, lm_head=True,
                                                 layer_norm_epsilon=1e-3, **SMALL))
    made["fp16"] = (root / "half", save_hf_gpt2(root / "half", seed=3, half=True, **SMALL))
    # Bare files: no config.json beside them, so every size comes from the tensor shapes.
    odd = save_hf_gpt2(root / "odd", seed=4, lm_head=True, n_layer=2, n_head=4, n_embd=64,
                       n_inner=100, n_positions=40, vocab_size=300)
    made["bare"] = (_bare_file(root / "odd"), odd)
    wide = save_hf_gpt2(root / "wide", seed=5, n_layer=1, n_head=12, n_embd=768,
                        n_positions=32, vocab_size=500)
    made["wide"] = (_bare_file(root / "wide"), wide)
    return made


def _bare_file(directory: Path) -> Path:
    """The directory's model.safetensors moved out alone, as <directory>.safetensors."""
    return Path(shutil.move(directory / "model.safetensors", f"{directory}.safetensors"))


def _ids(name: str) -> list[int]:
    return [t % 300 for t in TOKEN_IDS] if name in ("bare", "wide") else TOKEN_IDS


@pytest.mark.parametrize("name", ["model", "lm_head", "fp16", "bare", "wide"])
def test_every_layer_and_head_matches_transformers(models, name: str) -> None:
    path, model = models[name]
    ckpt = resolve_checkpoint(str(path), heads=4 if name == "bare" else None)
    ref = hf_reference(model, _ids(name))
    for layer in range(ckpt.n_layer):
        got = gpt2_attention(ckpt, _ids(name), layer)
        out = got.output
        assert got.layer == layer
        assert_near(out.weights, ref["attentions"][layer])
        assert_near(got.inputs, ref["ln_1"][layer])
        assert_near(out.context, ref["attn"][layer])
        assert len(got.hidden_states) == layer + 1
        for got_h, ref_h in zip(got.hidden_states, ref["hidden_states"], strict=False):
            assert_near(got_h, ref_h)
        # Queries, keys and values are transformers' fused c_attn output, split into heads.
        fused = ref["qkv"][layer]  # (T, 3d)
        q, k, v = (t.view(len(_ids(name)), ckpt.n_head, ckpt.head_dim).transpose(0, 1)
                   for t in fused.split(ckpt.n_embd, dim=-1))  # each (heads, T, head_dim)
        for got_t, ref_t in ((out.queries, q), (out.keys, k), (out.values, v)):
            assert_near(got_t, ref_t)


def test_all_layers_is_one_pass_over_every_head(models) -> None:
    path, model = models["lm_head"]
    weights = gpt2_all_layers(resolve_checkpoint(str(path)), TOKEN_IDS)
    expected = torch.stack(hf_reference(model, TOKEN_IDS)["attentions"])  # (layers, heads, T, T)
    assert weights.shape == (3, 4, len(TOKEN_IDS), len(TOKEN_IDS))
    assert_near(weights, expected)


def test_the_reference_attention_is_peaked_so_the_comparison_means_something(models) -> None:
    weights = torch.stack(hf_reference(models["model"][1], TOKEN_IDS)["attentions"])
    assert weights.max().item() > 0.9  # far from uniform 1/T


def test_stages_follow_the_attention_record(models) -> None:
    ckpt = resolve_checkpoint(str(models["model"][0]))
    out = gpt2_attention(ckpt, TOKEN_IDS, -1).output
    T = len(TOKEN_IDS)
    assert out.scores is not None and out.scaled is not None and out.masked is not None
    assert_near(out.scaled, out.scores / math.sqrt(16))
    above = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T)
    assert torch.isneginf(out.masked[:, above]).all()
    assert torch.equal(out.softmax, out.weights) and out.dropped is None
    assert out.heads_context is not None and out.heads_context.shape == (T, 64)
    assert_near(out.weights.sum(-1), torch.ones(4, T))


def test_negative_layer_counts_from_the_end(models) -> None:
    ckpt = resolve_checkpoint(str(models["model"][0]))
    assert gpt2_attention(ckpt, TOKEN_IDS[:3], -1).layer == 2
    assert gpt2_attention(ckpt, TOKEN_IDS[:3], -3).layer == 0


@pytest.mark.parametrize(("layer", "message"), [
    (3, "layer 3 is out of range for this 3-layer model (use 0..2, or -3..-1 from the end)"),
    (-4, "layer -4 is out of range for this 3-layer model (use 0..2, or -3..-1 from the end)"),
])  # fmt: skip
def test_layer_out_of_range(models, layer: int, message: str) -> None:
    ckpt = resolve_checkpoint(str(models["model"][0]))
    with pytest.raises(AttnCliError) as err:
        gpt2_attention(ckpt, TOKEN_IDS, layer)
    assert str(err.value) == message


@pytest.mark.parametrize(("token_ids", "message"), [
    ([], "no tokens to run: the text is empty"),
    ([1] * 129, "129 tokens is more than this model's context of 128 positions (n_positions); "
                "shorten the text"),
    ([5, 50257], "token id 50257 at position 1 is outside the model's vocabulary (0..50256)"),
    ([-1], "token id -1 at position 0 is outside the model's vocabulary (0..50256)"),
])  # fmt: skip
def test_bad_tokens(models, token_ids: list[int], message: str) -> None:
    ckpt = resolve_checkpoint(str(models["model"][0]))
    for run in (lambda: gpt2_attention(ckpt, token_ids, 0),
                lambda: gpt2_all_layers(ckpt, token_ids)):
        with pytest.raises(AttnCliError) as err:
            run()
        assert str(err.value) == message


def test_full_context_runs(models) -> None:
    ckpt = resolve_checkpoint(str(models["model"][0]))
    weights = gpt2_attention(ckpt, [7] * 128, 0).output.weights
    assert weights.shape == (4, 128, 128)
