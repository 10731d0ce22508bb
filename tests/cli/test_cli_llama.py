"""run, explain, heads and tokens with a Llama-family --model, as a user runs them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.models.llama.model import window_mask
from tests.llama_fixtures import hf_reference, save_family
from tests.tolerance import assert_near

TEXT = "The cat sat on the mat 猫吃鱼 because it was tired"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("llama-cli")
    return {"llama": (root / "llama", save_family(root / "llama", "llama", seed=11)),
            "mistral": (root / "mistral", save_family(root / "mistral", "mistral", seed=12,
                                                      tokenizer="sp")),
            "qwen3": (root / "qwen3", save_family(root / "qwen3", "qwen3", seed=13))}


def with_nulls(rows: list) -> tuple[torch.Tensor, torch.Tensor]:
    """JSON weights as a tensor (null read as 0) and where the nulls were."""
    t = torch.tensor([[[math.nan if w is None else w for w in row] for row in head]
                      for head in rows])  # (heads, T, T)
    return torch.nan_to_num(t, nan=0.0), torch.isnan(t)


@pytest.mark.parametrize(("name", "layer"), [("llama", 1), ("mistral", -1), ("qwen3", 0)])
def test_run_json_matches_transformers(cli, models, name: str, layer: int) -> None:
    folder, model = models[name]
    doc = cli("run", TEXT, "--model", str(folder), "--layer", str(layer), "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    ref = hf_reference(model, ids)
    windows = {"llama": None, "mistral": 5, "qwen3": None}
    weights, nulls = with_nulls(doc["weights"])
    # Weights are the softmax's output: every masked key, future or past the window, holds
    # exactly 0.0 there, as in transformers (the masked stage holds null; tables show ·).
    assert not nulls.any()
    masked = window_mask(len(ids), windows[name]).expand_as(weights)  # (heads, T, T)
    assert torch.equal(weights[masked], torch.zeros(int(masked.sum())))
    assert torch.equal(ref["attentions"][layer][masked], torch.zeros(int(masked.sum())))
    assert_near(weights, ref["attentions"][layer])
    assert_near(torch.tensor(doc["context"]), ref["attn_out"][layer])
    head_dim = 12 if name == "qwen3" else 8
    assert doc["variant"] == "llama"
    assert doc["model"] == {"path": str(folder), "architecture": name, "layers": 3, "heads": 4,
                            "kv_heads": 2, "head_dim": head_dim, "d_model": 32,
                            "rope_theta": 10000.0, "rope_scaling": "default",
                            "sliding_window": windows[name], "layer": layer % 3,
                            "window": windows[name]}
    bos = "<s>" if name == "mistral" else "<|begin|>"
    assert doc["config"]["tokenizer"] == {"file": "tokenizer.json", "bos": bos,
                                          "added_before": [bos], "added_after": []}
    assert doc["tokens"][0] == {"index": 0, "id": 1, "text": bos, "bytes": bos.encode().hex()}


def test_explain_json_has_the_rope_and_norm_stages(cli, models) -> None:
    doc = cli("explain", TEXT, "--model", str(models["qwen3"][0]), "--json").json()
    stages = doc["stages"]
    for name in ("queries", "keys", "queries_norm", "keys_norm", "queries_rope", "keys_rope",
                 "scores", "masked", "softmax", "context"):
        assert stages[name] is not None, name
    assert len(stages["queries_rope"]) == 4 and len(stages["queries_rope"][0][0]) == 12
    assert stages["masked"][0][0][1] is None  # the future is masked: null, not -inf


def test_keys_past_the_window_are_masked_as_future_keys_are(cli, models) -> None:
    """null in explain's masked stage, exactly 0.0 in softmax and weights (as future keys
    are); · in the table."""
    folder = str(models["mistral"][0])
    doc = cli("explain", TEXT, "--model", folder, "--head", "3", "--json").json()
    num_tokens = len(doc["tokens"])
    assert num_tokens > 5
    expected = window_mask(num_tokens, 5)  # (T, T) future and keys i - 5 or older
    assert torch.equal(with_nulls(doc["stages"]["masked"])[1][0], expected)
    for stage in ("softmax", "weights"):
        weights, nulls = with_nulls(doc["stages"][stage])
        assert not nulls.any(), stage
        assert torch.equal(weights[0][expected], torch.zeros(int(expected.sum()))), stage
        assert (weights[0][~expected] > 0).all(), stage
    table = cli("run", TEXT, "--model", folder, "--head", "3", "--draw", "table",
                "--precision", "2", "--rows", "6:7", "--cols", "0:7").out
    row = next(line for line in table.splitlines() if line.startswith("6 "))
    cells = row.split()[-7:]  # keys 0..6 of query 6, which sees keys 2..6
    assert cells[:2] == ["·", "·"] and "·" not in cells[2:], row


def test_explain_shows_rope_and_kv_groups_in_the_terminal(cli, models) -> None:
    out = cli("explain", TEXT, "--model", str(models["mistral"][0]), "--head", "3").out
    assert "Rotary position embedding (RoPE)" in out
    assert "head 3 of 4 · kv head 1 of 2" in out
    assert "sliding window 5" in out


def test_run_terminal_titles_name_the_kv_group(cli, models) -> None:
    out = cli("run", TEXT, "--model", str(models["llama"][0])).out
    assert "llama layer 0 of 3" in out
    assert "head 1 of 4 · kv head 0 of 2" in out and "head 2 of 4 · kv head 1 of 2" in out


def test_heads_json_has_every_query_head_and_its_kv_group(cli, models) -> None:
    doc = cli("heads", TEXT, "--model", str(models["llama"][0]), "--json").json()
    assert [(h["layer"], h["head"], h["kv_head"]) for h in doc["heads"]] == [
        (layer, head, head // 2) for layer in range(3) for head in range(4)]
    assert doc["model"]["kv_heads"] == 2


def test_tokens_model_uses_the_checkpoints_tokenizer(cli, models) -> None:
    from tokenizers import Tokenizer

    folder = models["mistral"][0]
    doc = cli("tokens", TEXT, "--model", str(folder), "--json").json()
    reference = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(TEXT)
    assert [t["id"] for t in doc["tokens"]] == reference.ids
    assert doc["tokenizer"]["bos"] == "<s>"


def test_allow_special_means_what_it_means_for_gpt2(cli, models) -> None:
    folder = str(models["llama"][0])
    plain = cli("tokens", "a<|end|>", "--model", folder, "--json").json()["tokens"]
    special = cli("tokens", "a<|end|>", "--model", folder, "--json",
                  "--allow-special").json()["tokens"]
    assert 2 not in [t["id"] for t in plain]  # spelled out as ordinary text
    assert [t["id"] for t in special][-1] == 2


def test_options_that_cannot_apply_are_refused(cli, models) -> None:
    folder = str(models["llama"][0])
    cli("run", TEXT, "--model", folder, "--num-heads", "2").assert_usage_error(
        "heads=2 disagrees with num_attention_heads=4 in config.json")
    cli("run", TEXT, "--model", folder, "--encoding", "cl100k_base").assert_usage_error(
        "not --encoding cl100k_base")


def test_a_refused_key_is_one_line_exit_2(cli, models, tmp_path: Path) -> None:
    import json
    import shutil

    folder = Path(shutil.copytree(models["llama"][0], tmp_path / "m"))
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "longrope", "rope_theta": 10000.0}
    (folder / "config.json").write_text(json.dumps(config))
    got = cli("run", TEXT, "--model", str(folder))
    assert got.code == 2
    assert got.err.startswith("attncli: error: config.json sets rope_scaling.rope_type=")
    assert len(got.err.strip().splitlines()) == 1


def test_show_picks_the_llama_stages(cli, models) -> None:
    folder = str(models["qwen3"][0])
    doc = cli("run", TEXT, "--model", folder, "--show", "queries_rope,keys_norm", "--json").json()
    assert list(doc["stages"]) == ["queries_rope", "keys_norm"]
    assert "Keys after k_norm" in cli("run", TEXT, "--model", folder, "--show", "keys_norm").out
    cli("run", TEXT, "--model", str(models["llama"][0]), "--show", "keys_norm"
        ).assert_usage_error("this llama run has no keys_norm stage")


def test_a_query_names_the_keys_behind_its_window(cli, models) -> None:
    """The ranked view lists only the keys the window lets query 8 see (4..8), and names the
    rest as masked: the future, and keys 0..3 behind the window of 5."""
    out = cli("run", TEXT, "--model", str(models["mistral"][0]), "--head", "3",
              "--query", "8").out
    ranked = [int(line.split()[0]) for line in out.split("attends to", 1)[1].splitlines()[1:]
              if line[:1].isdigit()]
    assert sorted(ranked) == [4, 5, 6, 7, 8]
    assert "keys 0–3: masked (past the sliding window of 5), weight 0" in out
    assert "keys 9–" in out and "masked (future tokens)" in out
