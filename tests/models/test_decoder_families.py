"""Gemma 2/3, Phi-3, GPT-NeoX, OLMo 2 and SmolLM3 through the family protocol, against
transformers' eager attention on tiny random checkpoints with each family's feature on."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.core.request import Request
from tests.family_fixtures import (
    FAMILY_CASES,
    SHORT_TEXT,
    attention_module,
    blocks,
    final_logits,
    model_type,
    reference,
    rope_of,
    save_decoder,
    stages,
    window_of,
)
from tests.tolerance import assert_near, row_atol

TEXT = "The cat sat on the mat 猫吃鱼，狗吃肉 🙂 because it was tired; 東京は日本の首都です。"
TOL = {"atol": 1e-5, "rtol": 1e-5}
NAMES = list(FAMILY_CASES)
Models = dict[str, tuple[Path, Any]]
HEAD_STAGES = ("queries", "keys", "values", "queries_norm", "keys_norm", "queries_rope",
               "keys_rope")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """name → (the model folder, the transformers model read back from it)."""
    root = tmp_path_factory.mktemp("decoder-families")
    return {name: (root / name, save_decoder(root / name, name, seed=70 + i))
            for i, name in enumerate(NAMES)}


def _ids(folder: Path, text: str = TEXT) -> list[int]:
    from tokenizers import Tokenizer

    return list(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids)


def _references(model: Any, ids: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """transformers' float32 pass, and the same model in float64 (the exact result)."""
    return reference(model, ids), reference(copy.deepcopy(model).double(), ids)


def assert_matches(got: torch.Tensor, ref: torch.Tensor, exact: torch.Tensor) -> None:
    """got within TOL of the exact float64 result, widened by as much as transformers' own
    float32 result misses it (two float32 computations round apart; neither is the truth)."""
    slack = float((ref.double() - exact).abs().max()) if ref.numel() else 0.0
    assert_near(got.detach().double(), exact, atol=TOL["atol"] + slack, rtol=TOL["rtol"])


def _open(folder: Path) -> Any:
    from attncli.models.family import open_model

    return open_model(str(folder))


def _num_layers(model: Any) -> int:
    return int(model.config.num_hidden_layers)


def test_the_fixtures_exercise_their_features(models: Models) -> None:
    sizes = {name: len(_ids(folder)) for name, (folder, _) in models.items()}
    cfg = {name: model.config for name, (_, model) in models.items()}
    for name in NAMES:
        c = cfg[name]
        assert (c.num_hidden_layers, c.num_attention_heads) == (3, 4), name
        if model_type(name) != "gpt_neox":  # GQA: 4 query heads share 2 kv heads
            assert c.num_key_value_heads == 2, name
    # Gemma 2: the cap really bends the scores, and the final logits.
    gemma2 = models["gemma2"][1]
    ids = _ids(models["gemma2"][0])
    ref = reference(gemma2, ids)
    st = stages(gemma2, 0, ref["attn_input"][0])
    assert float((st["capped"] - st["scaled"]).abs().max()) > 0.3
    uncapped = final_logits(gemma2, ref["block_out"][-1], capped=False)  # (T, vocab)
    assert float((ref["logits"] - uncapped).abs().max()) > 0.3
    assert cfg["gemma2"].query_pre_attn_scalar != cfg["gemma2"].head_dim
    # Windows shorter than the text, on some layers only.
    for name in ("gemma2", "gemma3_text"):
        windows = [window_of(models[name][1], layer) for layer in range(3)]
        assert None in windows and 4 in windows and sizes[name] > 8, (name, windows)
    # Gemma 3: sliding and global layers turn with different bases; QK-norm per head.
    gemma3 = models["gemma3_text"][1]
    thetas = {rope_of(gemma3, layer, 10)["theta"] for layer in range(3)}  # type: ignore[index]
    assert len(thetas) == 2
    assert attention_module(blocks(gemma3)[0]).q_norm.weight.shape == (8,)
    # Phi-3: longrope with long factors on the text, short ones on SHORT_TEXT, half a head.
    phi3 = models["phi3"][1]
    long_rope, short_rope = rope_of(phi3, 0, sizes["phi3"]), rope_of(phi3, 0, 5)
    assert long_rope is not None and short_rope is not None
    assert sizes["phi3"] > phi3.config.original_max_position_embeddings
    assert len(_ids(models["phi3"][0], SHORT_TEXT)) <= phi3.config.original_max_position_embeddings
    assert not torch.equal(long_rope["divisors"], short_rope["divisors"])
    assert long_rope["dims"] < 8 and long_rope["scale"] > 1.0
    # GPT-NeoX: a quarter of each head turns; parallel and serial residuals.
    for name in ("gpt_neox", "gpt_neox-serial"):
        rope = rope_of(models[name][1], 0, 10)
        assert rope is not None and rope["dims"] == 4 < 16
    assert {cfg["gpt_neox"].use_parallel_residual, cfg["gpt_neox-serial"].use_parallel_residual} \
        == {True, False}
    # OLMo 2: QK-norm over the whole projection; no input norm.
    olmo2 = attention_module(blocks(models["olmo2"][1])[0])
    assert olmo2.q_norm.weight.shape == (32,) and olmo2.k_norm.weight.shape == (16,)
    assert not hasattr(blocks(models["olmo2"][1])[0], "input_layernorm")
    # SmolLM3: layer 1 has no positional encoding, layers 0 and 2 do.
    smol = models["smollm3"][1]
    assert [rope_of(smol, layer, 10) is None for layer in range(3)] == [False, True, False]


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_stages_give_transformers_weights(models: Models, name: str) -> None:
    """The formulas the tests hold attncli to reproduce transformers' own eager weights."""
    folder, model = models[name]
    ids = _ids(folder)
    ref = reference(model, ids)
    for layer in range(_num_layers(model)):
        st = stages(model, layer, ref["attn_input"][layer])
        assert_near(st["weights"], ref["attentions"][layer])
    assert_near(final_logits(model, ref["block_out"][-1]), ref["logits"])


@pytest.mark.parametrize("name", NAMES)
def test_token_ids_equal_the_tokenizers(models: Models, name: str) -> None:
    folder, _ = models[name]
    got = _open(folder).tokens(Request(text=TEXT, model=str(folder))).ids
    assert got == _ids(folder)


@pytest.mark.parametrize("name", NAMES)
def test_every_layer_matches_transformers(models: Models, name: str) -> None:
    folder, model = models[name]
    ids = _ids(folder)
    ref, exact = _references(model, ids)
    mine = _open(folder)
    layers = _num_layers(model)
    for layer in range(layers):
        got = mine.attention(ids, layer)
        assert got.output.weights.shape == (4, len(ids), len(ids))
        assert_matches(got.output.weights, ref["attentions"][layer], exact["attentions"][layer])
        assert_matches(got.inputs, ref["attn_input"][layer], exact["attn_input"][layer])
        assert_matches(got.output.context, ref["attn_out"][layer], exact["attn_out"][layer])
    traced = list(mine.trace(ids, layers - 1))
    assert [t.layer for t in traced] == list(range(layers))
    for t in traced:
        assert_matches(t.weights, ref["attentions"][t.layer], exact["attentions"][t.layer])
        assert_matches(t.output, ref["block_out"][t.layer], exact["block_out"][t.layer])
    assert_matches(mine.all_layers(ids), torch.stack(ref["attentions"]),
                   torch.stack(exact["attentions"]))


@pytest.mark.parametrize("name", NAMES)
def test_explain_stages_match_the_formulas(models: Models, name: str) -> None:
    folder, model = models[name]
    ids = _ids(folder)
    ref, exact_ref = _references(model, ids)
    double = copy.deepcopy(model).double()
    mine = _open(folder)
    for layer in range(_num_layers(model)):
        out = mine.attention(ids, layer).output
        want = stages(model, layer, ref["attn_input"][layer])
        exact = stages(double, layer, exact_ref["attn_input"][layer])
        for stage in (*HEAD_STAGES, "scores", "scaled", "capped"):
            got = getattr(out, stage, None)
            if want[stage] is None:  # NoPE layer: no RoPE stage; no cap: no capped stage
                assert got is None, (name, layer, stage)
                continue
            assert got is not None, (name, layer, stage)
            assert_matches(got, want[stage], exact[stage])
        # The masked stage: -inf exactly where the causal mask and the window hide a key.
        hidden = want["hidden"].expand_as(out.masked)  # (heads, T, T)
        assert torch.equal(torch.isinf(out.masked), hidden), (name, layer)
        assert bool((out.masked[hidden] < 0).all())
        before = want["scaled"] if want["capped"] is None else want["capped"]
        exact_before = exact["scaled"] if exact["capped"] is None else exact["capped"]
        assert_matches(out.masked[~hidden], before[~hidden], exact_before[~hidden])


@pytest.mark.parametrize("name", NAMES)
def test_logits_match_transformers(models: Models, name: str) -> None:
    folder, model = models[name]
    ids = _ids(folder)
    ref, exact = _references(model, ids)
    mine = _open(folder)
    last = list(mine.trace(ids, _num_layers(model) - 1))[-1].output  # (T, d)
    assert_matches(mine.logits(last), ref["logits"], exact["logits"])


def test_phi3_short_text_uses_the_short_factors(models: Models) -> None:
    folder, model = models["phi3"]
    ids = _ids(folder, SHORT_TEXT)
    ref, exact = _references(model, ids)
    mine = _open(folder)
    for layer in range(_num_layers(model)):
        got = mine.attention(ids, layer)
        assert_matches(got.output.weights, ref["attentions"][layer], exact["attentions"][layer])
        assert_matches(got.output.context, ref["attn_out"][layer], exact["attn_out"][layer])


@pytest.mark.parametrize("name", NAMES)
def test_kvcache_steps_equal_the_full_pass(models: Models, name: str) -> None:
    """The last layer, whose cached keys and values every earlier layer's decode feeds
    (tests/models/test_family_paths.py checks layers 0 and 2 through the CLI)."""
    layer = 2
    folder, model = models[name]
    ids = _ids(folder)
    ref, exact = _references(model, ids)
    decoder = _open(folder).decoder(layer, len(ids))
    for t, token_id in enumerate(ids):
        weights, output = decoder.step(token_id, t)  # (heads, t + 1), (d,)
        expected = ref["attentions"][layer][:, t, :t + 1]  # (heads, t + 1)
        assert_near(weights, expected, msg=(name, layer, t))
        # Against the float64 pass, within the row's own size: after two layers a context row
        # reaches 25, and an element near 0.1 carries the row's rounding (3e-6 of it here,
        # transformers' own float32 pass 5e-6; elementwise, 4e-5 on 0.097).
        assert_near(output, exact["attn_out"][layer][t], atol=row_atol(exact["attn_out"][layer][t]))


@pytest.mark.parametrize("name", NAMES)
def test_layer_by_layer_and_streamed_decoding_equal_the_held_steps(models: Models,
                                                                    name: str) -> None:
    """Every token through one layer before the next (kvcache's path: one layer's weights held)
    and steps that reread each layer from the file (held=False) give step()'s numbers exactly:
    the same arithmetic on the same rows, only the order of the loops and the reads differ."""
    from attncli.models.decoding import LayerMajor

    folder, _ = models[name]
    ids, model = _ids(folder), _open(folder)
    layer = 1
    held, streamed = model.decoder(layer, len(ids)), model.decoder(layer, len(ids), held=False)
    by_layer = model.decoder(layer, len(ids))
    assert isinstance(by_layer, LayerMajor)
    tokens = by_layer.decode_by_layer(ids)
    assert len(tokens) == len(ids)
    for t, token_id in enumerate(ids):
        weights, output = held.step(token_id, t)  # (heads, t + 1), (d,)
        again, again_output = streamed.step(token_id, t)
        assert torch.equal(weights, again) and torch.equal(output, again_output), (name, t)
        assert torch.equal(tokens[t].weights, weights), (name, t)
        assert torch.equal(tokens[t].context, output), (name, t)
        assert tokens[t].cache_bytes == held.cache_bytes() == streamed.cache_bytes(), (name, t)


def _nulls_as_nan(rows: list) -> torch.Tensor:
    return torch.tensor([[[math.nan if w is None else w for w in row] for row in head]
                         for head in rows])  # (heads, T, T)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_cli_run_explain_heads_kvcache(cli, models: Models, name: str) -> None:  # noqa: ANN001
    folder, model = models[name]
    ids = _ids(folder)
    ref, exact = _references(model, ids)
    run = cli("run", TEXT, "--model", str(folder), "--layer", "-1", "--json")
    assert run.code == 0, run.err
    doc = run.json()
    assert [t["id"] for t in doc["tokens"]] == ids
    assert_near(torch.tensor(doc["weights"]), ref["attentions"][-1])
    assert_matches(torch.tensor(doc["context"]), ref["attn_out"][-1], exact["attn_out"][-1])

    layer = 1  # smollm3's NoPE layer, a full layer of gemma2, a sliding one of gemma3
    explain = cli("explain", TEXT, "--model", str(folder), "--layer", str(layer), "--json")
    assert explain.code == 0, explain.err
    shown = explain.json()["stages"]
    want = stages(model, layer, ref["attn_input"][layer])
    # exact: which cells are masked is a yes or no
    assert_near(_nulls_as_nan(shown["masked"]).isnan(), want["hidden"].expand(4, -1, -1), atol=0,
                rtol=0)
    for stage in ("queries_rope", "keys_rope", "capped"):
        expected = "present" if want[stage] is not None else "absent (null)"
        assert (shown.get(stage) is not None) == (want[stage] is not None), \
            f"{name} layer {layer}: explain --json stage {stage!r} should be {expected}"
    assert_near(torch.tensor(shown["weights"]), ref["attentions"][layer])

    heads = cli("heads", TEXT, "--model", str(folder), "--json")
    assert heads.code == 0, heads.err
    rows = {(h["layer"], h["head"]): h for h in heads.json()["heads"]}
    for layer_index, weights in enumerate(ref["attentions"]):
        later = weights[:, 1:, :].double()  # (heads, T-1, T) queries 1..T-1
        first = later[..., 0].mean(-1)  # (heads,) share on the first token
        prev = later.diagonal(0, -2, -1).mean(-1)  # (heads,) share on the previous token
        for head in range(4):
            row = rows[(layer_index, head)]
            assert_near(row["first"], float(first[head]), msg=(name, layer_index, head))
            assert_near(row["prev"], float(prev[head]), msg=(name, layer_index, head))

    kvcache = cli("kvcache", TEXT, "--model", str(folder), "--layer", "-1", "--json")
    assert kvcache.code == 0, kvcache.err
    steps = kvcache.json()["steps"]
    assert len(steps) == len(ids)
    for t, step in enumerate(steps):
        expected = ref["attentions"][-1][:, t, :t + 1]  # (heads, t + 1)
        assert_near(step["weights"], expected, msg=(name, t))
        want = exact["attn_out"][-1][t]  # (d,) the float64 pass, as in the test above
        assert_near(step["context"], want, atol=row_atol(want), msg=(name, t))
    # The check against attncli's own full pass: within float32's rounding of the context's size.
    size = max(1.0, float(ref["attn_out"][-1].abs().max()))
    assert kvcache.json()["max_abs_diff"] <= 1e-5 * size


@pytest.mark.parametrize("name", ["gpt_neox", "smollm3", "gemma2"])
def test_explain_names_what_the_family_changes(cli, models: Models, name: str) -> None:  # noqa: ANN001
    """Partial rotary names its turned dimensions (from the config), a NoPE layer is named as
    such, and soft-capping is a step of its own."""
    folder, model = models[name]
    layer = {"smollm3": "1"}.get(name, "0")
    res = cli("explain", "The cat sat on", "--model", str(folder), "--layer", layer)
    assert res.code == 0, res.err
    out = " ".join(res.out.split())
    config = model.config
    if name == "gpt_neox":
        head_dim = config.hidden_size // config.num_attention_heads
        turned = int(head_dim * config.rope_parameters["partial_rotary_factor"])
        assert 0 < turned < head_dim
        assert f"only the first {turned} of each head's {head_dim} dimensions turn" in out
    if name == "smollm3":
        assert config.no_rope_layers[1] == 0
        assert "Layer 1 has no positional encoding (NoPE)" in out and "RoPE θ" not in out
    if name == "gemma2":
        assert "Soft-capped scores cap · tanh(scaled ÷ cap)" in out


@pytest.mark.parametrize("name", ["gemma2", "gemma3_text", "olmo2"])
def test_head_keeps_one_head_of_every_stage(cli, models: Models, name: str) -> None:  # noqa: ANN001
    """--head keeps one head of every stage with a head axis, the capped, q/k-normed and
    turned ones included, and each equals that head of the whole run."""
    folder, _ = models[name]
    args = ("explain", "The cat sat on", "--model", str(folder), "--json")
    whole = cli(*args).json()["stages"]
    one = cli(*args, "--head", "2").json()["stages"]
    headed = [k for k in ("queries", "queries_norm", "keys_norm", "queries_rope", "keys_rope",
                          "scores", "scaled", "capped", "masked", "softmax", "weights")
              if k in whole]
    assert {"queries_rope", "scaled"} <= set(headed)
    for stage in headed:
        assert len(one[stage]) == 1, stage
        assert one[stage][0] == whole[stage][2], stage
