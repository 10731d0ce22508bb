"""--model and `attncli heads` as a user runs them, against transformers' own GPT-2."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from tests.gpt2_fixtures import hf_reference, save_hf_gpt2
from tests.tolerance import assert_near

TEXT = "The cat sat on the mat because it was tired"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, torch.nn.Module]:
    directory = tmp_path_factory.mktemp("gpt2")
    reference = save_hf_gpt2(directory, seed=7, n_layer=3, n_head=4, n_embd=64, n_positions=32)
    return directory, reference


def _reference(model: tuple[Path, torch.nn.Module], ids: list[int]) -> dict:
    return hf_reference(model[1], ids)


@pytest.mark.parametrize("layer", [0, 1, 2, -1])
def test_run_json_matches_transformers(cli, model, layer: int) -> None:  # noqa: ANN001
    doc = cli("run", TEXT, "--model", str(model[0]), "--layer", str(layer), "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    ref = _reference(model, ids)
    expected = ref["attentions"][layer]  # (heads, T, T)
    assert_near(torch.tensor(doc["weights"]), expected)
    assert_near(torch.tensor(doc["context"]), ref["attn"][layer])
    assert doc["variant"] == "gpt2" and doc["config"]["impl"] == "naive"
    assert doc["model"] == {"path": str(model[0] / "model.safetensors"), "layers": 3, "heads": 4,
                            "d_model": 64, "layer": layer % 3}


def test_explain_json_stages_match_transformers(cli, model) -> None:  # noqa: ANN001
    doc = cli("explain", TEXT, "--model", str(model[0]), "--layer", "1", "--json").json()
    ref = _reference(model, [t["id"] for t in doc["tokens"]])
    stages = doc["stages"]
    assert_near(torch.tensor(stages["inputs"]), ref["ln_1"][1])
    q, k, v = ref["qkv"][1].split(64, dim=-1)  # each (T, 64)
    heads_q = q.view(-1, 4, 16).transpose(0, 1)  # (heads, T, head_dim)
    assert_near(torch.tensor(stages["queries"]), heads_q)
    assert_near(torch.tensor(stages["context"]), ref["attn"][1])
    assert stages["masked"][0][0][1] is None


def test_run_table_says_what_rows_attend_over(cli, model) -> None:  # noqa: ANN001
    res = cli("run", TEXT, "--model", str(model[0]), "--layer", "2", "--head", "3")
    assert res.code == 0
    assert "GPT-2 layer 2 of 3" in res.out and "ln_1" in res.out and "head 3 of 4" in res.out


def test_a_gpt2_run_keeps_its_own_description(cli, model, tmp_path: Path) -> None:  # noqa: ANN001
    """The wording from before the family protocol, also when a saved run is shown again."""
    saved = tmp_path / "run.json"
    res = cli("run", TEXT, "--model", str(model[0]), "--save-json", str(saved))
    assert res.code == 0 and "A trained model, not the chapter-3 toy: each weight" in res.out
    shown = cli("show", str(saved))
    assert shown.code == 0 and "A trained model, not the chapter-3 toy: each weight" in shown.out
    assert "The checkpoint's own weights" not in res.out + shown.out


def _measures(weights: torch.Tensor) -> dict[str, float]:
    """Head measures computed directly, row by row (rows 1..T-1)."""
    n = weights.shape[-1]
    rows = range(1, n)
    w = weights.double()
    return {
        "entropy": sum(-sum(float(p) * math.log(p) for p in w[i] if p > 0) for i in rows) / (n - 1),
        "prev": sum(float(w[i, i - 1]) for i in rows) / (n - 1),
        "first": sum(float(w[i, 0]) for i in rows) / (n - 1),
        "self": sum(float(w[i, i]) for i in rows) / (n - 1),
        "distance": sum(sum(float(w[i, j]) * (i - j) for j in range(n)) for i in rows) / (n - 1),
    }


def test_heads_json_measures_every_head(cli, model) -> None:  # noqa: ANN001
    doc = cli("heads", TEXT, "--model", str(model[0]), "--json").json()
    ref = _reference(model, [t["id"] for t in doc["tokens"]])
    assert len(doc["heads"]) == 12
    assert [(h["layer"], h["head"]) for h in doc["heads"]] == [(L, h) for L in range(3)
                                                               for h in range(4)]
    for row in doc["heads"]:
        expected = _measures(ref["attentions"][row["layer"]][row["head"]])
        for name, value in expected.items():
            assert math.isclose(row[name], value, abs_tol=1e-5), (row, name)
    assert doc["model"]["layers"] == 3


def test_heads_sort_and_table(cli, model) -> None:  # noqa: ANN001
    doc = cli("heads", TEXT, "--model", str(model[0]), "--sort", "prev", "--json").json()
    prevs = [h["prev"] for h in doc["heads"]]
    assert prevs == sorted(prevs, reverse=True)
    res = cli("heads", TEXT, "--model", str(model[0]))
    assert res.code == 0 and "All 3 layers × 4 heads" in res.out and "L2" in res.out
    assert "entropy" in res.out and "distance" in res.out


@pytest.mark.parametrize(("args", "message"), [
    (("run", "x", "--variant", "qkv"), "--variant does not apply with --model"),
    (("run", "x", "--dropout", "0.1"), "--dropout does not apply with --model"),
    (("run", "x", "--encoding", "cl100k_base"), "the checkpoint's own tokenizer"),
    (("run", "x", "--layer", "3"), "layer 3 is out of range"),
    (("run", " ".join(["word"] * 40)), "more than this model's context of 32"),
    (("heads", "x", "--sort", "nope"), "unknown sort key 'nope'"),
    (("heads", "x"), "head measures need at least 2 tokens"),
])
def test_model_bad_input(cli, model, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    cli(*args, "--model", str(model[0])).assert_usage_error(message)


def test_model_missing_and_heads_without_model(cli, tmp_path: Path) -> None:  # noqa: ANN001
    res = cli("run", "x", "--model", str(tmp_path / "nothing"))
    assert res.code == 2 and res.err.count("\n") == 1
    res = cli("heads", "a b")
    assert res.code == 2 and "needs --model" in res.err
    res = cli("run", "--inputs", "samples/journey.json", "--model", str(tmp_path))
    assert res.code == 2 and "--inputs" in res.err
