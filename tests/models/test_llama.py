"""attncli's Llama-family forward pass against transformers' eager attention, on tiny models."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.hf_tokens import hf_tokenize, load_tokenizer
from attncli.models.llama.checkpoint import open_llama
from attncli.models.llama.family import resolve_llama
from attncli.models.llama.model import llama_all_layers, llama_attention, window_mask
from tests.llama_fixtures import hf_reference, save_family
from tests.tolerance import assert_near

TEXT = "The cat sat on the mat 猫吃鱼，狗吃肉 🙂 because it was tired; 東京は日本の首都です。"
TOL = {"atol": 1e-5, "rtol": 1e-5}
ROPE = {
    "linear": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0},
    # max_position_embeddings 16 < the text's tokens, so the dynamic base really changes.
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8,
               "rope_theta": 500000.0},
}
CASES: dict[str, dict[str, Any]] = {
    "llama": {"family": "llama"},  # GQA: 4 query heads share 2 kv heads
    "qwen2": {"family": "qwen2"},  # q/k/v bias; 4 query heads share 1 kv head
    "qwen3": {"family": "qwen3"},  # per-head q/k RMSNorm, head_dim 12 ≠ 32 / 4
    "mistral": {"family": "mistral", "tokenizer": "sp"},  # sliding window 5 < T
    "bf16": {"family": "llama", "dtype": torch.bfloat16},
    "sharded": {"family": "qwen2", "dtype": torch.float16, "shard": "8KB"},
    "bias": {"family": "llama", "attention_bias": True, "mlp_bias": True},
    "qwen2-window": {"family": "qwen2", "use_sliding_window": True, "sliding_window": 4,
                     "max_window_layers": 1},
    # transformers turns the whole head with the default rope, whatever the factor says.
    "partial": {"family": "llama", "partial_rotary_factor": 0.5},
    **{f"rope-{name}": {"family": "llama", "rope_parameters": params,
                        "max_position_embeddings": 16} for name, params in ROPE.items()},
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """name → (the model folder, the transformers model that wrote it)."""
    root = tmp_path_factory.mktemp("llama")
    made = {}
    for seed, (name, case) in enumerate(CASES.items()):
        settings = dict(case)
        made[name] = (root / name, save_family(root / name, settings.pop("family"), seed=seed,
                                               **settings))
    return made


def _ids(folder: Path) -> list[int]:
    return [p.id for p in hf_tokenize(folder, TEXT).pieces if p.id is not None]


def assert_matches(got: torch.Tensor, ref: torch.Tensor, exact: torch.Tensor) -> None:
    """got is within TOL of the exact (float64) result, widened by exactly as much as
    transformers' own float32 result ref misses it: two float32 computations round apart, by up
    to ~3e-5 on some CPUs (AVX-512 kernels), and neither is the truth."""
    slack = float((ref.double() - exact).abs().max()) if ref.numel() else 0.0
    assert_near(got.double(), exact, atol=TOL["atol"] + slack, rtol=TOL["rtol"])


@pytest.mark.parametrize("name", list(CASES))
def test_every_layer_and_head_matches_transformers(models, name: str) -> None:
    folder, model = models[name]
    ckpt = resolve_llama(str(folder))
    ids = _ids(folder)
    ref = hf_reference(model, ids)
    exact = hf_reference(copy.deepcopy(model).double(), ids)  # the same model in float64
    with open_llama(ckpt) as weights:
        for layer in range(ckpt.spec.n_layer):
            got = llama_attention(weights, ckpt.spec, ids, layer)
            assert got.output.weights.shape == (ckpt.spec.num_heads, len(ids), len(ids))
            for mine, key in ((got.output.weights, "attentions"), (got.inputs, "attn_input"),
                              (got.output.context, "attn_out")):
                assert_matches(mine, ref[key][layer], exact[key][layer])
            assert len(got.hidden_states) == layer + 1
            for i, mine in enumerate(got.hidden_states):
                assert_matches(mine, ref["hidden_states"][i], exact["hidden_states"][i])
        stacked = llama_all_layers(weights, ckpt.spec, ids)
    assert_matches(stacked, torch.stack(ref["attentions"]), torch.stack(exact["attentions"]))


def test_the_cases_exercise_what_they_claim(models) -> None:
    spec = {name: resolve_llama(str(models[name][0])).spec for name in CASES}
    assert (spec["llama"].num_heads, spec["llama"].kv_heads) == (4, 2)
    assert spec["qwen2"].kv_heads == 1 and spec["qwen3"].qk_norm and spec["qwen3"].head_dim == 12
    assert spec["mistral"].layer_windows == (5, 5, 5)
    assert spec["qwen2-window"].layer_windows == (None, 4, 4)
    assert len(_ids(models["mistral"][0])) > 5
    assert len(_ids(models["rope-dynamic"][0])) > 16
    assert len(list(models["sharded"][0].glob("model-*.safetensors"))) > 1
    header = json.loads((models["bf16"][0] / "config.json").read_text())
    assert header.get("dtype", header.get("torch_dtype")) == "bfloat16"


@pytest.mark.parametrize("name", ["llama", "qwen3", "rope-llama3"])
def test_rope_stages_match_transformers_rotation(models, name: str) -> None:
    """queries_rope and keys_rope equal transformers' own cos/sin applied to its projections."""
    folder, model = models[name]
    ckpt = resolve_llama(str(folder))
    ids = _ids(folder)
    attn = model.model.layers[0].self_attn
    captured: dict[str, torch.Tensor] = {}
    hooks = [attn.q_proj.register_forward_hook(lambda _m, _i, y: captured.update(q=y[0])),
             attn.k_proj.register_forward_hook(lambda _m, _i, y: captured.update(k=y[0]))]
    try:
        hf_reference(model, ids)
    finally:
        for hook in hooks:
            hook.remove()
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    spec, num_tokens = ckpt.spec, len(ids)
    q = captured["q"].view(num_tokens, spec.num_heads, spec.head_dim).transpose(0, 1)
    k = captured["k"].view(num_tokens, spec.kv_heads, spec.head_dim).transpose(0, 1)
    if spec.qk_norm:
        q, k = attn.q_norm(q), attn.k_norm(k)
    with torch.no_grad():
        cos, sin = model.model.rotary_emb(q, torch.arange(num_tokens)[None])
        q_ref, k_ref = apply_rotary_pos_emb(q[None], k[None], cos, sin)
    with open_llama(ckpt) as weights:
        out = llama_attention(weights, spec, ids, 0).output
    assert_near(out.queries_rope, q_ref[0], **TOL)
    share = spec.num_heads // spec.kv_heads
    assert_near(out.keys_rope, k_ref[0].repeat_interleave(share, 0), **TOL)
    # The scores are the rotated queries and keys, and the weights their masked softmax.
    assert_near(out.scores, out.queries_rope @ out.keys_rope.transpose(-2, -1), **TOL)
    assert_near(torch.softmax(out.masked, -1), out.weights, **TOL)


def test_query_heads_of_one_group_read_the_same_keys(models) -> None:
    folder, _ = models["llama"]
    ckpt = resolve_llama(str(folder))
    with open_llama(ckpt) as weights:
        out = llama_attention(weights, ckpt.spec, _ids(folder), 1).output
    assert [ckpt.spec.kv_group(h) for h in range(4)] == [0, 0, 1, 1]
    assert torch.equal(out.keys_rope[0], out.keys_rope[1])
    assert not torch.equal(out.keys_rope[1], out.keys_rope[2])


def test_sliding_window_mask() -> None:
    mask = window_mask(6, 3)
    visible = [[j for j in range(6) if not mask[i, j]] for i in range(6)]
    assert visible == [[0], [0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]


@pytest.mark.parametrize("name", ["llama", "mistral"])
def test_token_ids_equal_the_tokenizers(models, name: str) -> None:
    folder, _ = models[name]
    tokens = hf_tokenize(folder, TEXT, allow_special=True)
    assert [p.id for p in tokens.pieces] == load_tokenizer(folder).encode(TEXT).ids
    assert tokens.before == [tokens.pieces[0].label] and tokens.after == []
    # Every byte of the text is in exactly one token (after the BOS, which is not text).
    text_bytes = b"".join(p.data or b"" for p in tokens.pieces[1:])
    assert text_bytes.replace(b" ", b"") == TEXT.encode().replace(b" ", b"")


def _write_config(folder: Path, **changes: Any) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


@pytest.mark.parametrize(("changes", "named"), [
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
     "rope_scaling.rope_type='yarn'"),
    ({"hidden_act": "xielu"}, "hidden_act='xielu'"),
    ({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping=50.0"),
    ({"attention_chunk_size": 8}, "attention_chunk_size=8"),
    ({"layer_types": ["chunked_attention"] * 3}, "'chunked_attention'"),
    ({"num_key_value_heads": 3}, "num_key_value_heads must divide"),
])  # fmt: skip
def test_unsupported_config_keys_are_refused_by_name(models, tmp_path: Path, changes,
                                                       named: str) -> None:
    import shutil

    folder = Path(shutil.copytree(models["llama"][0], tmp_path / "m"))
    _write_config(folder, **changes)
    with pytest.raises(AttnCliError, match=named.replace("(", r"\(").replace(".", r"\.")):
        resolve_llama(str(folder))


def test_a_missing_or_misshapen_tensor_is_refused(models, tmp_path: Path) -> None:
    import shutil

    folder = Path(shutil.copytree(models["llama"][0], tmp_path / "m"))
    _write_config(folder, intermediate_size=50)
    with pytest.raises(AttnCliError, match="mlp.gate_proj.weight.*shape"):
        resolve_llama(str(folder))
    _write_config(folder, intermediate_size=48, num_hidden_layers=4)
    with pytest.raises(AttnCliError, match="lacks .* tensor"):
        resolve_llama(str(folder))


def test_kv_cache_size_shows_what_gqa_saves(models) -> None:
    from attncli.models.llama.config import kv_cache_values

    spec = resolve_llama(str(models["llama"][0])).spec
    assert kv_cache_values(spec, 100) == 2 * 3 * 2 * 100 * 8  # 2 × layers × kv_heads × T × hd
    mha = kv_cache_values(spec, 100) * spec.num_heads // spec.kv_heads
    assert mha == 2 * 3 * 4 * 100 * 8  # without GQA: one key and value head per query head
