"""`attncli kvcache`: every step against the full causal pass and SDPA; bytes, MACs, JSON keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attncli.core.request import Request
from attncli.lessons.kvcache import kvcache
from attncli.lessons.setup import build, heads_qkv, lesson_config, within
from tests.conftest import SENTENCE
from tests.gpt2_fixtures import hf_reference, save_hf_gpt2
from tests.tolerance import assert_near

STEP_KEYS = {"index", "token", "cache_len", "cache_bytes", "weights", "context", "macs_cached",
             "macs_recompute"}


def test_json_keys_are_pinned(cli) -> None:  # noqa: ANN001
    doc = cli("kvcache", SENTENCE, "--json").json()
    assert set(doc) == {"kind", "steps", "max_abs_diff", "totals"}
    assert all(set(step) == STEP_KEYS for step in doc["steps"])
    assert set(doc["totals"]) == {"tokens", "layers", "first_step_macs", "last_step_macs_cached",
                                  "last_step_macs_recompute", "macs_cached", "macs_recompute",
                                  "prefill_macs", "cache_bytes", "weights_max_abs_diff",
                                  "context_max_abs_diff"}
    assert [s["index"] for s in doc["steps"]] == list(range(6))
    assert [s["cache_len"] for s in doc["steps"]] == list(range(1, 7))
    assert doc["steps"][1]["token"] == " journey"


@pytest.mark.parametrize(("variant", "heads"), [("causal", 1), ("multihead", 2),
                                                ("multihead", 4)])
def test_each_step_is_row_t_of_the_full_pass(variant: str, heads: int) -> None:
    spec = Request(text=SENTENCE, variant=variant, heads=heads if heads > 1 else None,
                      d_out=8)
    lesson = build(spec)
    result = kvcache(lesson, lesson_config(spec))
    with torch.no_grad():
        full = lesson.module(lesson.x)  # the ordinary full pass
        queries, keys, values = heads_qkv(lesson, lesson.x)  # each (heads, T, head_dim)
        reference = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
        heads_context = reference.transpose(0, 1).reshape(len(result.steps), -1)  # (T, d_out)
        out_proj = getattr(lesson.module, "out_proj", None)
        sdpa_context = heads_context if out_proj is None else out_proj(heads_context)
    for t, step in enumerate(result.steps):
        weights = torch.tensor(step.weights)  # (heads, t+1)
        assert weights.shape == (heads, t + 1)
        assert_near(weights, full.weights[:, t, :t + 1])
        assert_near(torch.tensor(step.context), full.context[t])
        assert_near(torch.tensor(step.context), sdpa_context[t])
    assert result.max_abs_diff <= 1e-5 and result.ok


def test_cache_bytes_and_macs() -> None:
    spec = Request(text=SENTENCE, variant="multihead", heads=2, emb_dim=8, d_out=8)
    result = kvcache(build(spec), lesson_config(spec))
    d_in = d_out = 8
    for t, step in enumerate(result.steps):
        assert step.cache_bytes == 2 * 1 * 2 * (t + 1) * 4 * 4  # 2 × layers × heads × t × hd × 4
        new_token = 3 * d_in * d_out + d_out * d_out + 2 * (t + 1) * d_out
        assert step.macs_cached == new_token
        assert step.macs_recompute == new_token + t * 2 * d_in * d_out  # the prefix's K and V
    totals = result.totals
    assert totals["prefill_macs"] == totals["macs_cached"]  # the same work, done at once
    assert totals["macs_recompute"] > totals["macs_cached"]
    assert totals["first_step_macs"] == result.steps[0].macs_cached
    assert totals["cache_bytes"] == result.steps[-1].cache_bytes


def test_bad_input_exits_2(cli) -> None:  # noqa: ANN001
    cli("kvcache", "one two", "--variant", "qkv").assert_usage_error("kvcache needs a causal")
    cli("kvcache", "one two", "--head", "3").assert_usage_error("--head 3 is out of range")
    cli("kvcache", "x", "--model", "samples/toy-gpt2", "--variant", "causal").assert_usage_error(
        "--variant does not apply with --model")


def test_prints_the_check_and_the_totals(cli) -> None:  # noqa: ANN001
    res = cli("kvcache", SENTENCE, "--variant", "multihead")
    assert res.code == 0 and "Check: each step equals row t of the full causal pass" in res.out
    assert "Prefill" in res.out
    zh = cli("kvcache", SENTENCE, "--lang", "zh")
    assert "键值缓存" in zh.out.replace("\n", "")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    directory = tmp_path_factory.mktemp("gpt2-kv")
    reference = save_hf_gpt2(directory, seed=7, n_layer=3, n_head=4, n_embd=64, n_positions=32)
    return directory, reference


@pytest.mark.parametrize("layer", [0, 2])
def test_gpt2_steps_match_transformers(cli, model, layer: int) -> None:  # noqa: ANN001
    doc = cli("kvcache", "The cat sat on the mat because", "--model", str(model[0]),
              "--layer", str(layer), "--json").json()
    ids = [step["token"] for step in doc["steps"]]
    assert len(ids) == 7
    run = cli("run", "The cat sat on the mat because", "--model", str(model[0]), "--json").json()
    ref = hf_reference(model[1], [t["id"] for t in run["tokens"]])
    for t, step in enumerate(doc["steps"]):
        expected = ref["attentions"][layer][:, t, :t + 1]  # (heads, t+1)
        assert_near(step["weights"], expected, msg=t)
        assert_near(step["context"], ref["attn"][layer][t], msg=t)
        assert step["cache_bytes"] == 2 * 3 * 4 * (t + 1) * 16 * 4
    assert doc["totals"]["layers"] == 3


def test_gpt2_layer_by_layer_and_streamed_decoding_equal_the_held_steps(model) -> None:  # noqa: ANN001
    """kvcache's layer-major path (one block's weights at a time) and steps that reread each
    block (held=False) give the held steps' numbers exactly, cache bytes included."""
    from attncli.models.decoding import LayerMajor
    from attncli.models.family import open_model

    gpt2 = open_model(str(model[0]))
    ids = [464, 3797, 3332, 319, 262, 2603, 780]
    held, streamed = gpt2.decoder(2, len(ids)), gpt2.decoder(2, len(ids), held=False)
    by_layer = gpt2.decoder(2, len(ids))
    assert isinstance(by_layer, LayerMajor)
    tokens = by_layer.decode_by_layer(ids)
    for t, token_id in enumerate(ids):
        weights, context = held.step(token_id, t)  # (heads, t + 1), (d,)
        again, again_context = streamed.step(token_id, t)
        assert torch.equal(weights, again) and torch.equal(context, again_context)
        assert torch.equal(tokens[t].weights, weights) and torch.equal(tokens[t].context, context)
        assert tokens[t].cache_bytes == held.cache_bytes() == 2 * 3 * 4 * (t + 1) * 16 * 4


def test_within_is_the_house_bound() -> None:
    ref = torch.tensor([[25.0, 0.1], [0.5, 0.2]], dtype=torch.float64)
    assert within(ref + torch.tensor([[2.5e-4, 0.0], [1.4e-5, 0.0]]), ref)  # 1e-5 + 1e-5·|ref|
    assert not within(ref + torch.tensor([[0.0, 0.0], [2e-5, 0.0]]), ref)  # bound 1.5e-5 there
    # rows: atol scaled by the row's size, so 0.1 in a row reaching 25 may be 2e-4 off.
    off = ref + torch.tensor([[0.0, 2e-4], [0.0, 0.0]])
    assert within(off, ref, rows=True) and not within(off, ref)
    assert within(torch.empty(0), torch.empty(0))


def test_ok_says_whether_every_step_is_within_the_bound() -> None:
    from attncli.lessons.kvcache import assemble, decode_variant, full_pass, variant_shape

    lesson = build(Request(text=SENTENCE, variant="causal"))
    config = lesson_config(Request(text=SENTENCE, variant="causal"))
    decoded, full = decode_variant(lesson), full_pass(lesson)
    assert assemble(config, lesson.tokens, variant_shape(lesson), decoded, full).ok
    decoded.context[2] = decoded.context[2] + 1e-3  # one step's context off by 1e-3
    bad = assemble(config, lesson.tokens, variant_shape(lesson), decoded, full)
    assert not bad.ok and bad.context_max_abs_diff >= 1e-3
