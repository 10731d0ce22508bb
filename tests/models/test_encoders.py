"""BERT-style encoders (bert, roberta) on run, explain, heads and kvcache, against transformers'
eager BertModel / RobertaModel on tiny random checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.encoder_fixtures import encoder_reference, save_encoder, wordpiece_tokenizer
from tests.tolerance import assert_near, near

TEXT = "The cat sat on the mat 猫吃鱼 because it was tired"
TOL = {"atol": 1e-5, "rtol": 1e-5}  # 1e-5 + 1e-5·|ref|


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """bert and roberta, and bert again with a tokenizer whose single text has type id 1."""
    root = tmp_path_factory.mktemp("encoders")
    out = {name: (root / name, save_encoder(root / name, name, seed=seed))
           for name, seed in (("bert", 21), ("roberta", 22))}
    typed = root / "bert-type1"
    shutil.copytree(root / "bert", typed)
    wordpiece_tokenizer(type_id=1).save(str(typed / "tokenizer.json"))
    out["bert-type1"] = (typed, out["bert"][1])
    return out


def _ids(folder: Path, text: str = TEXT) -> list[int]:
    """The token ids the tokenizers library gives the text, special tokens included."""
    from tokenizers import Tokenizer

    return list(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids)


def test_wordpiece_pieces_are_the_text_they_stand_for(cli, encoders) -> None:  # noqa: ANN001
    """A ## continuation is its word's next letters, and a word after a word starts with the
    space the pre-tokenizer removed: the pieces join into the tokenizer's own decoding."""
    from tokenizers import Tokenizer, decoders

    folder, _ = encoders["bert"]
    text = "The cats sat on unbelievable mats"
    doc = cli("tokens", text, "--model", str(folder), "--json").json()
    pieces = [bytes.fromhex(t["bytes"]).decode() for t in doc["tokens"][1:-1]]  # no [CLS] [SEP]
    assert any(not p.startswith(" ") for p in pieces[1:])  # the text splits inside a word
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    ids = tok.encode(text).ids
    assert [t["id"] for t in doc["tokens"]] == ids
    assert "".join(pieces) == tok.decode(ids)
    assert "##" not in "".join(pieces)


@pytest.mark.parametrize(("name", "first", "last"), [("bert", "[CLS]", "[SEP]"),
                                                      ("roberta", "<s>", "</s>")])
def test_token_ids_are_the_tokenizers(cli, encoders, name: str, first: str, last: str) -> None:
    folder, _ = encoders[name]
    doc = cli("run", TEXT, "--model", str(folder), "--json").json()
    assert [t["id"] for t in doc["tokens"]] == _ids(folder)
    assert (doc["tokens"][0]["text"], doc["tokens"][-1]["text"]) == (first, last)
    assert doc["config"]["tokenizer"] == {"file": "tokenizer.json", "bos": first,
                                          "added_before": [first], "added_after": [last]}


@pytest.mark.parametrize("name", ["bert", "roberta", "bert-type1"])
def test_every_layer_matches_transformers(cli, encoders, name: str) -> None:
    """Weights, every explain stage, the attention output and the hidden states of each layer."""
    from attncli.models.family import open_model

    folder, model = encoders[name]
    ids = _ids(folder)
    ref = encoder_reference(model, ids, type_id=1 if name == "bert-type1" else 0)
    for layer in range(3):
        doc = cli("explain", TEXT, "--model", str(folder), "--layer", str(layer),
                  "--json").json()
        stages = {k: torch.tensor(v) for k, v in doc["stages"].items()}
        assert_near(torch.tensor(doc["weights"]), ref["attentions"][layer], **TOL)
        assert_near(stages["inputs"], ref["attn_input"][layer], **TOL)
        for stage in ("queries", "keys", "values", "heads_context"):
            assert_near(stages[stage], ref[stage][layer], **TOL)
        scores = ref["queries"][layer] @ ref["keys"][layer].transpose(-2, -1)  # (heads, T, T)
        assert_near(stages["scores"], scores, **TOL)
        assert_near(stages["scaled"], scores / 8**0.5, **TOL)  # head_dim 32 / 4 heads
        assert_near(stages["softmax"], ref["attentions"][layer], **TOL)
        assert_near(torch.tensor(doc["context"]), ref["attn_out"][layer], **TOL)
        assert "masked" not in doc["stages"]
    traced = list(open_model(str(folder)).trace(ids, 2))
    for layer, block in enumerate(traced):
        assert_near(block.residual, ref["hidden_states"][layer], **TOL)
        assert_near(block.output, ref["hidden_states"][layer + 1], **TOL)


def test_the_type_id_comes_from_the_post_processor(encoders) -> None:
    """The same weights read a text as segment 1 when the tokenizer says so: other numbers."""
    from attncli.models.family import open_model

    plain, typed = (open_model(str(encoders[n][0])) for n in ("bert", "bert-type1"))
    ids = _ids(encoders["bert"][0])
    assert (plain.type_id(), typed.type_id()) == (0, 1)  # type: ignore[attr-defined]
    assert not near(plain.attention(ids, 0).output.weights,
                              typed.attention(ids, 0).output.weights)


def test_roberta_positions_start_after_the_pad(encoders) -> None:
    """transformers' create_position_ids_from_input_ids: pad_token_id + 1 onwards; 66 rows hold
    64 tokens."""
    from attncli.models.family import open_model

    folder, _ = encoders["roberta"]
    spec = open_model(str(folder)).ckpt.spec  # type: ignore[attr-defined]
    assert spec.position_ids([0, 5, 1, 7]) == [2, 3, 1, 4]  # the pad (id 1) keeps position 1
    assert spec.max_tokens == 64


@pytest.mark.parametrize("command", ["run", "explain"])
def test_nothing_is_masked_and_the_heading_says_so(cli, encoders, command: str) -> None:
    folder = str(encoders["roberta"][0])
    doc = cli(command, TEXT, "--model", folder, "--json").json()
    weights = torch.tensor(doc["weights"])  # (heads, T, T): no null anywhere
    upper = torch.triu(torch.ones_like(weights[0], dtype=torch.bool), diagonal=1)
    assert (weights[:, upper] > 0).all()  # every query reads keys after it
    assert doc["model"]["attention"] == "bidirectional"
    assert doc["variant"] == "bert"
    shown = cli(command, TEXT, "--model", folder, "--head", "0").out
    assert "bidirectional attention, no mask" in shown.splitlines()[0]
    rows = [line for line in shown.splitlines() if line[:1].isdigit()]  # the tables' rows
    assert rows and not any("·" in line for line in rows)  # · is a masked cell
    if command == "explain":
        assert "Causal mask" not in shown and "bidirectional multi-head attention" in shown
        zh = cli(command, TEXT, "--model", folder, "--head", "0", "--lang", "zh").out
        assert "双向多头注意力" in zh and "因果掩码" not in zh


def test_heads_reads_every_layer_and_probes_after_cls(cli, encoders) -> None:
    folder, model = encoders["bert"]
    doc = cli("heads", TEXT, "--model", str(folder), "--json").json()
    assert doc["model"]["attention"] == "bidirectional"
    assert len(doc["heads"]) == 12 and "kv_head" not in doc["heads"][0]
    probe = cli("heads", "--model", str(folder), "--probe", "induction", "--probe-length", "8",
                "--json").json()["config"]["probe"]
    assert probe["bos"] and probe["ids"][0] == 2  # [CLS], the token the tokenizer adds first
    ids = probe["ids"]
    assert ids[1:9] == ids[9:] and 2 not in ids[1:]


@pytest.mark.parametrize("args", [["kvcache", TEXT], ["kvcache", TEXT, "--keep", "window:2"]])
def test_kvcache_is_refused_with_the_reason(cli, encoders, args: list[str]) -> None:
    cli(*args, "--model", str(encoders["bert"][0])).assert_usage_error(
        "its attention is bidirectional, every token attends to every other")


def test_what_an_encoder_cannot_show_is_one_line(cli, encoders) -> None:
    folder = str(encoders["bert"][0])
    cli("run", TEXT, "--model", folder, "--predict", "3").assert_usage_error(
        "an encoder (BERT, RoBERTa) fills in masked tokens in place")
    cli("run", TEXT, "--model", folder, "--impl", "tiled").assert_usage_error(
        "--impl tiled does not apply to a BERT-style encoder checkpoint")
    cli("run", "the cat sat " * 30, "--model", folder).assert_usage_error(
        "92 tokens is more than this encoder's 64 positions (max_position_embeddings 64)")


def _with_config(tmp_path: Path, folder: Path, **changes: Any) -> Path:
    """A copy of folder whose config.json has changes (None removes a key)."""
    out = tmp_path / "changed"
    shutil.copytree(folder, out)
    config = json.loads((out / "config.json").read_text())
    config |= changes
    (out / "config.json").write_text(json.dumps(config))
    return out


@pytest.mark.parametrize(("changes", "message"), [
    ({"position_embedding_type": "relative_key"},
     "sets position_embedding_type='relative_key', which attncli does not implement"),
    ({"is_decoder": True}, "sets is_decoder=True, which attncli does not implement"),
    ({"add_cross_attention": True}, "sets add_cross_attention=True"),
    ({"hidden_act": "prelu"}, "sets hidden_act='prelu', which attncli does not implement"),
    ({"num_attention_heads": 5}, "num_attention_heads 5 must divide hidden_size 32"),
    ({"layer_norm_eps": -1}, "layer_norm_eps must be a small positive number"),
    ({"max_position_embeddings": 1}, "leaves no position for a token"),
    ({"num_hidden_layers": 10**6}, "claims num_hidden_layers=1,000,000"),
    ({"type_vocab_size": 3}, "has shape (2, 32), expected (3, 32)"),
])
def test_hostile_configs_are_refused_by_name(cli, encoders, tmp_path: Path,
                                             changes: dict[str, Any], message: str) -> None:
    base = "roberta" if "max_position_embeddings" in changes else "bert"
    folder = _with_config(tmp_path, encoders[base][0], **changes)
    cli("run", TEXT, "--model", str(folder)).assert_usage_error(message)


def test_models_lists_the_encoders(cli, encoders, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "hub"
    for name in ("bert", "roberta"):
        shutil.copytree(encoders[name][0], root / f"models--Org--tiny-{name}" / "snapshots" / "a")
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "none"))
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "none"))
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "none"))
    doc = cli("models", "--json").json()
    rows = {row["architecture"]: row for row in doc["models"]}
    for name in ("bert", "roberta"):
        assert (rows[name]["layers"], rows[name]["heads"], rows[name]["kv_heads"]) == (3, 4, 4)


def test_a_saved_run_shows_unmasked(cli, encoders, tmp_path: Path) -> None:
    saved = tmp_path / "run.json"
    saved.write_text(cli("run", TEXT, "--model", str(encoders["bert"][0]), "--json").out)
    doc = cli("show", str(saved), "--json").json()
    assert doc["model"]["attention"] == "bidirectional"
    shown = cli("show", str(saved), "--head", "0").out
    assert "bidirectional attention, no mask" in shown.splitlines()[0]
    rows = [line for line in shown.splitlines() if line[:1].isdigit()]
    assert rows and not any("·" in line for line in rows)


NODE = shutil.which("node")
# The page's own scripts, fed a document: what they take as causal for each of its matrices.
PAGE_PROBE = """
const fs = require("fs");
const dir = process.argv[2], text = fs.readFileSync(process.argv[3], "utf8");
const code = ["page.js", "page-long.js", "page-heads.js"]
  .map((n) => fs.readFileSync(dir + "/" + n, "utf8")).join("\\n");
const document = { getElementById: (id) => ({ textContent: id === "attncli-data" ? text : "{}" }) };
const run = new Function("document", code + "\\nreturn stageModel().list.map((c) => c.causal);");
console.log(JSON.stringify(run(document)));
"""


@pytest.mark.skipif(NODE is None, reason="needs node to run the page's script")
@pytest.mark.parametrize(("model", "causal"), [("bert", False), ("toy-gpt2", True)])
def test_the_page_masks_no_key_of_an_encoder(cli, encoders, tmp_path: Path, model: str,
                                             causal: bool) -> None:
    import subprocess

    from tests.conftest import ROOT

    folder = encoders[model][0] if model in encoders else ROOT / "samples" / model
    saved = tmp_path / "explain.json"
    saved.write_text(cli("explain", TEXT, "--model", str(folder), "--json").out)
    (tmp_path / "probe.js").write_text(PAGE_PROBE)
    assets = ROOT / "attncli" / "render" / "assets"
    out = subprocess.run([str(NODE), str(tmp_path / "probe.js"), str(assets), str(saved)],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    flags = json.loads(out)  # the weights, then each stage (causal only for weight stages)
    if causal:
        assert flags[0] and not all(flags)  # the weights masked, the q/k/v stages not
    else:
        assert flags and not any(flags)


def test_tensorflow_layernorm_names_are_read(cli, encoders, tmp_path: Path) -> None:
    """google-bert/bert-base-uncased keeps LayerNorm.gamma and .beta: the same numbers."""
    from safetensors.torch import load_file, save_file

    folder, model = encoders["bert"]
    old = tmp_path / "old-names"
    shutil.copytree(folder, old)
    tensors = load_file(str(folder / "model.safetensors"))
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma")
               .replace("LayerNorm.bias", "LayerNorm.beta"): v for k, v in tensors.items()}
    assert renamed.keys() != tensors.keys()
    save_file(renamed, str(old / "model.safetensors"), metadata={"format": "pt"})
    ids = _ids(folder)
    ref = encoder_reference(model, ids)
    doc = cli("run", TEXT, "--model", str(old), "--layer", "2", "--json").json()
    assert_near(torch.tensor(doc["weights"]), ref["attentions"][2], **TOL)
    assert_near(torch.tensor(doc["context"]), ref["attn_out"][2], **TOL)


def test_permute_model_on_an_encoder_without_positions_is_equivariant(cli, encoders) -> None:  # noqa: ANN001
    """Without its position embeddings (and with no mask) an encoder cannot tell the two orders
    apart at any layer; with them it can. transformers' own BertModel with its position table
    zeroed gives the weights attncli shows for A without positions."""
    folder, model = encoders["bert"]
    a, b = "the cat sat on the mat", "the mat sat on the cat"
    doc = cli("permute", a, b, "--model", str(folder), "--layer", "-1", "--json").json()
    without, with_ = doc["without_positions"], doc["with_positions"]
    assert without["equivariant"] and without["max_abs_diff"] <= 1e-5
    assert not with_["equivariant"] and with_["max_abs_diff"] > 1e-2
    ids_a = _ids(folder, a)
    perm = doc["permutation"]
    assert [ids_a[p] for p in perm] == _ids(folder, b)
    reference = encoder_reference(model, ids_a)["attentions"][-1]  # (heads, T, T) positions on
    assert_near(torch.tensor(with_["weights_a"]), reference, **TOL)
    import copy

    zeroed = copy.deepcopy(model)
    with torch.no_grad():
        zeroed.base_model.embeddings.position_embeddings.weight.zero_()
    reference = encoder_reference(zeroed, ids_a)["attentions"][-1]  # (heads, T, T)
    assert_near(torch.tensor(without["weights_a"]), reference, **TOL)


def test_permute_model_on_a_decoder_is_refused_with_the_reason(cli, tmp_path: Path) -> None:  # noqa: ANN001
    from tests.llama_fixtures import save_family

    save_family(tmp_path, "llama", seed=0)
    res = cli("permute", "the cat sat", "sat the cat", "--model", str(tmp_path))
    assert res.code == 2 and res.err.count("\n") == 1
    assert "runs on an encoder" in res.err and "causal mask" in res.err
    # GPT-2's positions are a learned table added to its inputs, not RoPE inside every layer.
    gpt2 = cli("permute", "the cat sat", "sat the cat", "--model", "samples/toy-gpt2")
    assert gpt2.code == 2 and "causal mask" in gpt2.err and "RoPE" not in gpt2.err, gpt2.err
