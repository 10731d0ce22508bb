"""The newer decoder families (Gemma 2/3, Phi-3, GPT-NeoX, OLMo 2, SmolLM3) on every path: the
tiled kernel and the tiled rollout, kvcache and its --keep lesson, the page, --save-json and
show, models, heads' induction probe and --predict, each against transformers' eager pass."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from tests.family_fixtures import reference, rope_of, save_decoder, window_of
from tests.tolerance import assert_near, row_atol

NAMES = ("gemma2", "gemma3_text", "phi3", "gpt_neox", "olmo2", "smollm3")
TILED = tuple(n for n in NAMES if n != "gemma2")  # Gemma 2's soft-capping is refused there
LONG = ("The cat sat on the mat because it was tired. The dog ran in the park and then it "
        "slept. The bird sang on a tree all day.")  # 80-90 tokens: more than one 64-row tile
TEXT = "The cat sat on the mat because it was tired. The dog ran."
Models = dict[str, tuple[Path, Any]]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    """name → (the model folder, the transformers model read back from it)."""
    root = tmp_path_factory.mktemp("family-paths")
    return {name: (root / name, save_decoder(root / name, name, seed=110 + i))
            for i, name in enumerate(NAMES)}


@pytest.fixture(scope="module")
def references(models: Models) -> dict[tuple[str, str], tuple[list[int], dict[str, Any]]]:
    """(name, text) → (the tokenizer's ids, transformers' eager pass on them)."""
    out = {}
    for name, (folder, model) in models.items():
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        for text in (LONG, TEXT):
            ids = list(tok.encode(text).ids)
            out[name, text] = (ids, reference(model, ids))
    return out


def cells(data: list[Any]) -> np.ndarray:
    """JSON weights with null (masked) cells as NaN."""
    return np.array(json.loads(json.dumps(data).replace("null", "NaN")), dtype=np.float64)


def full_layers(model: Any, num_tokens: int) -> list[int]:
    """The layers whose window (if any) covers the whole text: the tiled kernel's layers."""
    return [layer for layer in range(model.config.num_hidden_layers)
            if (window_of(model, layer) or num_tokens) >= num_tokens]


def embedded(page: Path) -> Any:
    """The JSON the page holds in #attncli-data."""
    found = re.search(r'<script type="application/json" id="attncli-data">(.*?)</script>',
                      page.read_text(), re.S)
    assert found is not None
    return json.loads(found.group(1).replace("<\\/", "</"))


@pytest.mark.parametrize("name", TILED)
def test_tiled_equals_naive_and_transformers(cli, models: Models, references,  # noqa: ANN001
                                             name: str) -> None:
    folder, model = models[name]
    ids, ref = references[name, LONG]
    layers = full_layers(model, len(ids))
    assert layers and len(ids) > 64, (name, layers, len(ids))
    for layer in layers:
        base = ("run", LONG, "--model", str(folder), "--layer", str(layer), "--json")
        naive = cli(*base, "--impl", "naive").json()
        tiled = cli(*base, "--impl", "tiled").json()
        assert tiled["config"]["impl"] == "tiled" and naive["config"]["impl"] == "naive"
        assert [t["id"] for t in tiled["tokens"]] == ids
        (a, b), (c, d) = tiled["window"]["rows"], tiled["window"]["cols"]
        got = cells(tiled["weights"])  # (heads, b - a, d - c), NaN above the diagonal
        whole = cells(naive["weights"])  # (heads, T, T), 0 above the diagonal
        expected = ref["attentions"][layer].double().numpy()[:, a:b, c:d]
        after = np.arange(c, d)[None, :] > np.arange(a, b)[:, None]  # (b - a, d - c)
        assert (np.isnan(got) == after[None]).all(), (name, layer)
        assert_near(np.nan_to_num(got), whole[:, a:b, c:d])
        assert_near(np.nan_to_num(got), expected)
        context, want = np.array(tiled["context"]), ref["attn_out"][layer].double().numpy()
        # Contexts within their rows' size (row_atol): float32 sums round relative to the row.
        assert_near(context, want, atol=row_atol(want), msg=(name, layer))
        assert_near(context, np.array(naive["context"]), atol=row_atol(want), msg=(name, layer))


def test_tiled_refuses_soft_capping_and_short_windows(cli, models: Models) -> None:  # noqa: ANN001
    gemma2 = ("run", LONG, "--model", str(models["gemma2"][0]), "--layer", "1")
    cli(*gemma2, "--impl", "tiled").assert_usage_error(
        "--impl tiled: attention logit soft-capping (cap 2) is not part of the tiled kernel's")
    cli(*gemma2, "--impl", "tiled", "--measure", "rollout").assert_usage_error("soft-capping")
    gemma3 = ("run", LONG, "--model", str(models["gemma3_text"][0]), "--impl", "tiled")
    cli(*gemma3, "--layer", "0").assert_usage_error("layer 0 has a sliding window of 4 tokens")


def rollout_reference(per_layer: list[torch.Tensor]) -> np.ndarray:
    """Π of (0.5·I + 0.5·mean_h A_l), rows renormalised, layer 0 applied first (float64)."""
    size = per_layer[0].shape[-1]
    rolled = np.eye(size)
    for weights in per_layer:
        step = 0.5 * np.eye(size) + 0.5 * weights.double().numpy().mean(0)
        rolled = (step / step.sum(-1, keepdims=True)) @ rolled
    return rolled


@pytest.mark.parametrize("name", TILED)
def test_tiled_rollout_equals_naive(cli, models: Models, references, name: str) -> None:  # noqa: ANN001
    folder = models[name][0]
    ids, ref = references[name, LONG]
    base = ("run", LONG, "--model", str(folder), "--layer", "2", "--measure", "rollout",
            "--rows", "-12:", "--json")
    naive = cli(*base).json()
    tiled = cli(*base, "--impl", "tiled").json()
    assert tiled["config"]["impl"] == "tiled" and tiled["config"]["measure"] == "rollout"
    (a, b), (c, d) = tiled["window"]["rows"], tiled["window"]["cols"]
    assert (b, d) == (len(ids), len(ids))
    got = cells(tiled["weights"][0])  # (12, T), NaN after each query
    whole = cells(naive["weights"][0])[a:b, c:d]
    expected = rollout_reference(ref["attentions"][:3])[a:b, c:d]
    for want in (whole, expected):
        assert_near(got, np.where(np.isnan(got), np.nan, want), equal_nan=True)


@pytest.mark.parametrize("name", NAMES)
def test_kvcache_steps_are_the_full_pass(cli, models: Models, references,  # noqa: ANN001
                                         name: str) -> None:
    folder = models[name][0]
    ids, ref = references[name, TEXT]
    for layer in (0, 2):
        run = cli("kvcache", TEXT, "--model", str(folder), "--layer", str(layer), "--json")
        assert run.code == 0, run.err
        doc = run.json()
        assert len(doc["steps"]) == len(ids) > 8
        want = ref["attn_out"][layer].double().numpy()  # (T, d)
        scale = max(1.0, float(np.abs(want).max()))
        assert doc["max_abs_diff"] <= 1e-5 * scale
        for t, step in enumerate(doc["steps"]):
            expected = ref["attentions"][layer][:, t, :t + 1].double().numpy()  # (heads, t+1)
            assert_near(np.array(step["weights"]), expected)
            assert_near(np.array(step["context"]), want[t], atol=row_atol(want[t]), msg=(name, t))


@pytest.mark.parametrize("name", NAMES)
def test_kvcache_keep_scores_the_full_cache_as_transformers(cli, models: Models,  # noqa: ANN001
                                                            references, name: str) -> None:
    ids, ref = references[name, TEXT]
    run = cli("kvcache", TEXT, "--model", str(models[name][0]), "--keep", "sinks:2,window:4",
              "--json")
    assert run.code == 0, run.err
    doc = run.json()
    assert doc["keep"] == {"sinks": 2, "window": 4} and doc["tokens"] == len(ids)
    logits = ref["logits"].double()  # (T, vocab)
    nll = -torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    for span in doc["ranges"]:
        expected = float(nll[span["start"]:span["stop"]].mean())
        assert_near(span["full"]["mean_nll"], expected, msg=(name, span))
        if not span["window_full"]:  # the window holds every key yet: no policy differs
            assert_near(span["sinks+window"]["mean_nll"], expected, msg=(name, span))


@pytest.mark.parametrize("name", NAMES)
def test_the_page_holds_the_run_and_heads(cli, models: Models, tmp_path: Path,  # noqa: ANN001
                                          name: str) -> None:
    folder = models[name][0]
    for command in ("run", "heads"):
        page = tmp_path / f"{command}.html"
        run = cli(command, TEXT, "--model", str(folder), "--json", "--save", str(page))
        assert run.code == 0, run.err
        doc = run.json()
        held = embedded(page)
        assert held == doc
        assert held["model"]["architecture"] == json.loads(
            (folder / "config.json").read_text())["model_type"]


@pytest.mark.parametrize("name", NAMES)
def test_saved_runs_and_heads_read_back(cli, models: Models, tmp_path: Path,  # noqa: ANN001
                                        name: str) -> None:
    folder = models[name][0]
    for command in ("run", "heads"):
        saved = tmp_path / f"{command}.json"
        made = cli(command, TEXT, "--model", str(folder), "--save-json", str(saved))
        assert made.code == 0, made.err
        shown = cli("show", str(saved))
        assert shown.code == 0, shown.err
        assert shown.out.strip()
    again = cli("show", str(tmp_path / "run.json"), "--json")
    assert again.code == 0, again.err
    assert again.json()["weights"] == json.loads((tmp_path / "run.json").read_text())["weights"]


def test_models_lists_each_family(cli, models: Models, tmp_path: Path,  # noqa: ANN001
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    root = tmp_path / "hub"
    for name, (folder, _) in models.items():
        shutil.copytree(folder, root / f"models--Org--{name}" / "snapshots" / "a")
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "no-ollama"))
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "no-lmstudio"))
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "no-attncli"))
    run = cli("models", "--json")
    assert run.code == 0, run.err
    doc = run.json()
    assert doc["unreadable"] == []
    listed = {m["name"]: m for m in doc["models"]}
    assert set(listed) == {f"Org/{name}" for name in NAMES}
    for name, (_, model) in models.items():
        cfg = model.config
        heads = cfg.num_attention_heads
        row = listed[f"Org/{name}"]
        assert (row["architecture"], row["layers"], row["heads"], row["kv_heads"]) == (
            cfg.model_type, cfg.num_hidden_layers, heads,
            getattr(cfg, "num_key_value_heads", None) or heads), name
    table = cli("models")
    assert table.code == 0 and all(f"Org/{name}" in table.out for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_induction_probe_starts_with_the_models_bos(cli, models: Models,  # noqa: ANN001
                                                    name: str) -> None:
    folder = models[name][0]
    run = cli("heads", "--model", str(folder), "--probe", "induction", "--json")
    assert run.code == 0, run.err
    probe = run.json()["config"]["probe"]
    added = Tokenizer.from_file(str(folder / "tokenizer.json")).encode("").ids
    bos = added[0] if added else json.loads((folder / "config.json").read_text())["bos_token_id"]
    assert probe["bos"] is True and probe["ids"][0] == bos
    length = probe["length"]
    body = probe["ids"][1:]
    assert body[:length] == body[length:2 * length]  # the random half, then its repeat


@pytest.mark.parametrize("name", NAMES)
def test_predict_top1_is_transformers_argmax(cli, models: Models, references,  # noqa: ANN001
                                             name: str) -> None:
    ids, ref = references[name, TEXT]
    run = cli("run", TEXT, "--model", str(models[name][0]), "--predict", "3", "--json")
    assert run.code == 0, run.err
    predictions = run.json()["predictions"]
    assert len(predictions) == len(ids)
    logits = ref["logits"]  # (T, vocab)
    assert predictions[-1]["top"][0]["id"] == int(logits[-1].argmax())
    for entry, row in zip(predictions, logits, strict=True):
        top2 = row.topk(2).values
        if float(top2[0] - top2[1]) > 1e-4:  # a near tie may round either way in float32
            assert entry["top"][0]["id"] == int(row.argmax()), (name, entry["index"])


@pytest.mark.parametrize("name", NAMES)
def test_the_heading_names_each_layers_own_rope(cli, models: Models, name: str) -> None:  # noqa: ANN001
    """Gemma 3's local layers turn with their own base; SmolLM3's NoPE layer has none."""
    folder, model = models[name]
    for layer in range(model.config.num_hidden_layers):
        doc = cli("run", TEXT, "--model", str(folder), "--layer", str(layer), "--json").json()
        rope = rope_of(model, layer, len(doc["tokens"]))
        if rope is None:
            assert doc["model"]["nope"] is True, (name, layer)
        else:
            assert doc["model"]["rope_theta"] == rope["theta"], (name, layer)


def _multimodal_gemma3(text_folder: Path, folder: Path) -> None:
    """The gemma3_text checkpoint as Gemma3ForConditionalGeneration writes its language model:
    config.json's text_config, tensors under model.language_model."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder.mkdir()
    text = json.loads((text_folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
         "text_config": text}))
    tensors = load_file(text_folder / "model.safetensors")
    save_file({re.sub(r"^model\.", "model.language_model.", k): v for k, v in tensors.items()},
              folder / "model.safetensors", metadata={"format": "pt"})
    shutil.copy(text_folder / "tokenizer.json", folder / "tokenizer.json")


def test_multimodal_gemma3_is_its_language_model(cli, models: Models, references,  # noqa: ANN001
                                                 tmp_path: Path) -> None:
    text_folder, model = models["gemma3_text"]
    folder = tmp_path / "gemma3"
    _multimodal_gemma3(text_folder, folder)
    ids, ref = references["gemma3_text", TEXT]
    for layer in (0, 2):
        doc = cli("run", TEXT, "--model", str(folder), "--layer", str(layer), "--json").json()
        assert doc["model"]["architecture"] == "gemma3"
        assert_near(cells(doc["weights"]), ref["attentions"][layer].numpy())
    saved = tmp_path / "run.json"
    assert cli("run", TEXT, "--model", str(folder), "--save-json", str(saved)).code == 0
    assert cli("show", str(saved)).code == 0
    kv = cli("kvcache", TEXT, "--model", str(folder), "--layer", "2", "--json")
    assert kv.code == 0 and len(kv.json()["steps"]) == len(ids)
    tiled = cli("run", LONG, "--model", str(folder), "--layer", "2", "--impl", "tiled", "--json")
    assert tiled.code == 0 and tiled.json()["config"]["impl"] == "tiled"


@pytest.mark.parametrize(("bos", "used"), [(1, True), (5, False)])
def test_induction_probe_falls_back_to_the_configs_bos(cli, models: Models, tmp_path: Path,  # noqa: ANN001
                                                       bos: int, used: bool) -> None:
    """No BOS added by the tokenizer: config.json's bos_token_id, when it names an added
    token (1: <|begin|>), else no BOS (5 is a plain byte token)."""
    import shutil

    folder = tmp_path / "olmo2"
    shutil.copytree(models["olmo2"][0], folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["post_processor"] = None
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    added = {t["id"] for t in tok["added_tokens"]}
    assert (bos in added) is used
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "bos_token_id": bos}))
    probe = cli("heads", "--model", str(folder), "--probe", "induction", "--json").json()
    got = probe["config"]["probe"]
    assert got["bos"] is used
    assert (got["ids"][0] == bos) is used
    assert len(got["ids"]) == 2 * got["length"] + int(used)
