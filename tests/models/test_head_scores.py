"""`heads`' scores, probes, --layers, labels and sinks: against TransformerLens's own detect_head
on a GPT-2, against the formulas written here on a Llama-family checkpoint (transformers eager),
and on the real SmolLM2 when it has been fetched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.conftest import ROOT
from tests.gguf_fixtures import smollm2
from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import byte_level_tokenizer, hf_reference, save_family
from tests.tolerance import assert_near

SCORES = ("previous_token", "duplicate_token", "induction")
TEXT = "the cat sat on the mat and the cat sat on the mat and the cat sat"
TL_NAMES = {"previous_token": "previous_token_head", "duplicate_token": "duplicate_token_head",
            "induction": "induction_head"}


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A random GPT-2 for attncli, and the same model as TransformerLens's TransformerBridge."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("scores-gpt2")
    model = save_hf_gpt2(folder, seed=5, lm_head=True, n_layer=2, n_head=4, n_embd=32,
                         n_positions=128)
    # The bridge wants a tokenizer beside the weights; the ids it runs are set per test.
    PreTrainedTokenizerFast(tokenizer_object=byte_level_tokenizer(), bos_token="<|begin|>",
                            eos_token="<|end|>").save_pretrained(folder)
    return folder, TransformerBridge.boot_transformers(str(folder), hf_model=model, device="cpu")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("scores-llama") / "llama"
    return folder, save_family(folder, "llama", seed=21)


def _tl_scores(bridge: Any, ids: list[int]) -> dict[str, np.ndarray]:
    from transformer_lens.head_detector import detect_head

    bridge.to_tokens = lambda *_a, **_k: torch.tensor([ids])  # exactly attncli's ids
    return {name: detect_head(bridge, "unused", tl).numpy() for name, tl in TL_NAMES.items()}


def _grid(doc: dict[str, Any], name: str) -> np.ndarray:
    layers = 1 + max(h["layer"] for h in doc["heads"])
    heads = 1 + max(h["head"] for h in doc["heads"])
    out = np.full((layers, heads), np.nan)
    for h in doc["heads"]:
        out[h["layer"], h["head"]] = h[name]
    return out


@pytest.mark.parametrize("probe", [False, True], ids=["text", "probe"])
def test_scores_match_transformer_lens_detect_head(cli, gpt2, probe: bool) -> None:  # noqa: ANN001
    folder, bridge = gpt2
    args = ("--probe", "induction", "--probe-length", "20") if probe else (TEXT,)
    doc = cli("heads", *args, "--model", str(folder), "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    assert len(set(ids)) < len(ids)  # repeated tokens: duplicate and induction are not all 0
    expected = _tl_scores(bridge, ids)
    for name in SCORES:
        assert_near(_grid(doc, name), expected[name])
    assert max(h["induction"] for h in doc["heads"]) > 0.01


def _formula(weights: np.ndarray, ids: list[int]) -> dict[str, float]:
    """TransformerLens's "mul" scores of one head (T, T), from its definitions."""
    n = len(ids)
    hits = dict.fromkeys(SCORES, 0.0)
    for i in range(n):
        for j in range(i + 1):
            w = float(weights[i, j])
            hits["previous_token"] += w * (j == i - 1)
            hits["duplicate_token"] += w * (j < i and ids[j] == ids[i])
            hits["induction"] += w * (0 < j < i and ids[j - 1] == ids[i])
    total = float(weights.sum())
    return {name: value / total for name, value in hits.items()}


def test_llama_scores_and_sinks_against_the_formulas(cli, llama) -> None:  # noqa: ANN001
    folder, model = llama
    doc = cli("heads", TEXT, "--model", str(folder), "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    ref = hf_reference(model, ids)
    for h in doc["heads"]:
        weights = ref["attentions"][h["layer"]][h["head"]].double().numpy()
        for name, value in _formula(weights, ids).items():
            assert_near(h[name], value, msg=(h["layer"], h["head"], name))
    assert [s["layer"] for s in doc["layers"]] == [0, 1, 2]
    for s in doc["layers"]:
        att = ref["attentions"][s["layer"]].double().numpy()  # (heads, T, T)
        norms = np.linalg.norm(ref["hidden_states"][s["layer"]].double().numpy(), axis=-1)
        assert_near(s["first_share"], att[:, 1:, 0].mean())
        assert_near(s["first_norm"], norms[0])
        assert_near(s["median_norm"], float(np.median(norms[1:])))
        assert_near(s["norm_ratio"], norms[0] / np.median(norms[1:]))


def test_probe_is_seeded_repeated_and_recorded(cli, llama) -> None:  # noqa: ANN001
    folder = str(llama[0])

    def probe(*extra: str) -> dict[str, Any]:
        return cli("heads", "--probe", "induction", "--probe-length", "12", *extra, "--model",
                   folder, "--json").json()

    first, again, other = probe(), probe(), probe("--probe-seed", "1")
    p = first["config"]["probe"]
    assert p["ids"] == again["config"]["probe"]["ids"] != other["config"]["probe"]["ids"]
    assert {k: p[k] for k in ("kind", "length", "seed", "bos")} == {
        "kind": "induction", "length": 12, "seed": 0, "bos": True}
    assert p["ids"] == [t["id"] for t in first["tokens"]] and len(p["ids"]) == 25
    assert p["ids"][0] == 1  # the tokenizer's <|begin|> BOS
    assert p["ids"][1:13] == p["ids"][13:]
    assert all(i >= 3 for i in p["ids"][1:])  # no special token drawn
    # Labels: the probed score only, at or above the threshold.
    for h in probe("--threshold", "0.05")["heads"]:
        assert h["labels"] == (["induction"] if h["induction"] >= 0.05 else [])


def test_layers_threshold_and_measures(cli, llama) -> None:  # noqa: ANN001
    folder = str(llama[0])
    whole = cli("heads", TEXT, "--model", folder, "--json").json()
    part = cli("heads", TEXT, "--model", folder, "--layers", "1:3", "--json").json()
    assert part["config"]["layers"] == [1, 3] and whole["config"]["layers"] == [0, 3]
    assert part["heads"] == [h for h in whole["heads"] if h["layer"] >= 1]
    assert part["layers"] == whole["layers"][1:]
    # Without --probe every score at or above the threshold labels the head.
    for h in cli("heads", TEXT, "--model", folder, "--threshold", "0.1", "--json").json()["heads"]:
        assert h["labels"] == [n for n in SCORES if h[n] >= 0.1]
    for measure in ("norm", "rollout"):
        doc = cli("heads", TEXT, "--model", folder, "--measure", measure, "--json").json()
        assert doc["config"]["measure"] == measure
        assert doc["heads"] == whole["heads"]  # scores and measures: the raw weights
    out = cli("heads", TEXT, "--model", folder, "--layers", "2:", "--sort", "induction").out
    assert "Layers 2–2 of 3" in out and "Head scores × 100" in out and "Sinks per layer" in out


def test_show_reads_it_back_and_refuses_a_bad_file(cli, llama, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "h.json"
    res = cli("heads", "--probe", "induction", "--probe-length", "6", "--model", str(llama[0]),
              "--layers", "1:", "--save-json", str(path))
    assert res.code == 0, res.err
    saved = path.read_text()
    doc = json.loads(saved)
    assert cli("show", str(path), "--json").json() == doc
    shown = cli("show", str(path))
    assert shown.code == 0 and "induction" in shown.out
    for change, message in [
            (lambda d: d["config"]["probe"]["ids"].pop(), "config.probe.ids has"),
            (lambda d: d["heads"][0]["labels"].append("sink"), "labels[0]"),
            (lambda d: d["layers"][0].update(first_share="x"), "layers[0].first_share"),
            (lambda d: d["config"].update(layers=[2, 1]), "config.layers[1]"),
            (lambda d: d["config"].update(threshold=3), "config.threshold")]:
        bad = json.loads(saved)
        change(bad)
        path.write_text(json.dumps(bad))
        cli("show", str(path)).assert_usage_error(message)


@pytest.mark.parametrize(("args", "message"), [
    (("x y", "--layers", "2:9"), "--layers 2:9 is out of range"),
    (("x y", "--layers", "a:b"), "--layers 'a:b' is not a window"),
    (("x y", "--layers", "2:1"), "--layers 2:1 selects nothing"),
    (("x y", "--probe", "induction"), "give no TEXT or --file"),
    (("--probe", "induction", "--probe-length", "0"), "--probe-length"),
    (("--probe", "induction", "--probe-length", "100000"), "--probe-length"),
    (("--probe", "induction", "--probe-seed", str(2**64)), "--probe-seed 18446744073709551616 is "
     "out of range"),
    (("--probe", "induction", "--probe-seed", str(-2**63 - 1)), "--probe-seed"),
    (("x y", "--threshold", "2"), "--threshold"),
    (("x y", "--sort", "inductions"), "unknown sort key 'inductions'"),
])
def test_bad_input_is_one_line(cli, llama, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    cli("heads", *args, "--model", str(llama[0])).assert_usage_error(message)


@pytest.mark.slow
def test_smollm2_probe_finds_its_heads(cli) -> None:  # noqa: ANN001
    """Measured on SmolLM2-135M-Instruct Q4_1 (100-token probe after <|im_start|>, seed 0)."""
    doc = cli("heads", "--probe", "induction", "--model", str(smollm2()), "--json").json()
    by_induction = sorted(doc["heads"], key=lambda h: -h["induction"])
    # A perfect induction head scores about 0.5 here: the first 51 rows have no earlier copy.
    assert {h["layer"] for h in by_induction[:3]} <= {17, 18}
    assert by_induction[0]["induction"] > 0.35
    top_previous = max(doc["heads"], key=lambda h: h["previous_token"])
    assert (top_previous["layer"], top_previous["head"]) == (16, 0)
    assert top_previous["previous_token"] > 0.8
    shares = {s["layer"]: s["first_share"] for s in doc["layers"]}
    assert min(shares[k] for k in range(12, 30)) > 0.3  # sinks from layer 12 on
    assert all(s["norm_ratio"] > 10 for s in doc["layers"][12:29])


def test_a_probe_longer_than_the_context_names_the_longest_that_fits(cli) -> None:  # noqa: ANN001
    toy = ROOT / "samples" / "toy-gpt2"
    positions = json.loads((toy / "config.json").read_text())["n_positions"]
    longest = (positions - 1) // 2  # twice the probe after <|endoftext|>
    res = cli("heads", "--probe", "induction", "--probe-length", str(longest + 1), "--model",
              str(toy))
    res.assert_usage_error(f"use a --probe-length of at most {longest}")
    ok = cli("heads", "--probe", "induction", "--probe-length", str(longest), "--model", str(toy),
             "--json")
    assert ok.code == 0 and len(ok.json()["config"]["probe"]["ids"]) == positions - 1


def test_the_grid_names_each_score_apart_with_few_heads(cli, monkeypatch) -> None:  # noqa: ANN001
    """4 heads are 12 columns of cells: the block of a score is widened to its name."""
    monkeypatch.setenv("COLUMNS", "100")
    toy = ROOT / "samples" / "toy-gpt2"
    out = cli("heads", "--probe", "induction", "--model", str(toy)).out.splitlines()
    header = next(line for line in out if "previous_token" in line and "induction" in line)
    assert header.split() == ["previous_token", "duplicate_token", "induction"]
    start = header.index("duplicate_token")
    for line in out[out.index(header) + 2:out.index(header) + 5]:  # the rows of L0..L2
        assert line.startswith("L") and line[start - 1] == " " and line[start + 1].isdigit()
