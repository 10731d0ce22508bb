"""explain and the display options of run: every JSON stage against an independent recomputation,
--show, --query, --view, --rows/--cols, --lang, and each bad input as one line and exit 2."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import JOURNEY, SENTENCE
from tests.tolerance import assert_near


def reference(x: torch.Tensor, variant: str, d_out: int, heads: int, seed: int,
              dropout: float = 0.0) -> dict[str, torch.Tensor]:
    """The book's construction order and plain torch ops, independent of attncli.core.attention."""
    T, d_in = x.shape
    if variant == "simple":
        scores = (x @ x.T)[None]
        weights = torch.softmax(scores, dim=-1)
        return {"inputs": x, "scores": scores, "softmax": weights, "weights": weights,
                "context": weights[0] @ x}
    torch.manual_seed(seed)
    W_query, W_key, W_value = (nn.Linear(d_in, d_out, bias=False) for _ in range(3))
    out_proj = nn.Linear(d_out, d_out) if variant == "multihead" else None
    hd = d_out // heads
    with torch.no_grad():
        q, k, v = (W(x).view(T, heads, hd).transpose(0, 1) for W in (W_query, W_key, W_value))
        stages = {"inputs": x, "queries": q, "keys": k, "values": v, "scores": q @ k.mT}
        stages["scaled"] = stages["scores"] / math.sqrt(hd)
        logits = stages["scaled"]
        if variant != "qkv":
            future = torch.ones(T, T, dtype=torch.bool).triu(1)
            logits = stages["masked"] = logits.masked_fill(future, -torch.inf)
        stages["softmax"] = stages["weights"] = torch.softmax(logits, dim=-1)
        if dropout:
            stages["dropped"] = stages["weights"] = F.dropout(stages["softmax"], dropout)
        concat = (stages["weights"] @ v).transpose(0, 1).reshape(T, d_out)
        if out_proj is not None:
            stages["heads_context"], concat = concat, out_proj(concat)
        stages["context"] = concat
    return stages


def _tensor(value: object) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64).nan_to_num(nan=-math.inf)


def _nested_none_to_nan(value: object) -> object:
    if isinstance(value, list):
        return [_nested_none_to_nan(v) for v in value]
    return math.nan if value is None else value


CASES = [
    ("simple", ["--inputs", str(JOURNEY)], 3, 1, 123, 0.0),
    ("qkv", ["--inputs", str(JOURNEY), "--d-out", "2", "--seed", "789"], 2, 1, 789, 0.0),
    ("causal", [SENTENCE, "--d-out", "4"], 4, 1, 123, 0.0),
    ("causal", [SENTENCE, "--dropout", "0.5", "--seed", "3"], 8, 1, 3, 0.5),
    ("multihead", [SENTENCE, "--num-heads", "4"], 8, 4, 123, 0.0),
    ("multihead", ["--inputs", str(JOURNEY), "--d-out", "2"], 2, 2, 123, 0.0),
    ("multihead", [SENTENCE, "--dropout", "0.3"], 8, 2, 123, 0.3),
]


@pytest.mark.parametrize(("variant", "args", "d_out", "heads", "seed", "p"), CASES)
def test_every_stage_equals_an_independent_recomputation(
        cli, variant: str, args: list[str], d_out: int, heads: int, seed: int,  # noqa: ANN001
        p: float) -> None:
    doc = cli("explain", *args, "--variant", variant, "--json").json()
    x = torch.tensor(doc["stages"]["inputs"])
    expected = reference(x, variant, d_out, heads, seed, p)
    assert list(doc["stages"]) == [n for n in (
        "inputs", "queries", "keys", "values", "scores", "scaled", "masked", "softmax",
        "dropped", "weights", "heads_context", "context") if n in expected]
    for name, want in expected.items():
        got = _tensor(_nested_none_to_nan(doc["stages"][name]))
        assert_near(got, want.to(torch.float64), msg=f"stage {name}")
    assert doc["weights"] == doc["stages"]["weights"] and doc["context"] == doc["stages"]["context"]
    if "masked" in expected:
        masked = doc["stages"]["masked"]
        assert all((masked[h][i][j] is None) == (j > i) for h in range(heads)
                   for i in range(len(x)) for j in range(len(x)))


def test_dropout_kept_entries_are_the_weights_over_one_minus_p(cli) -> None:  # noqa: ANN001
    text = "one two three four five six seven eight nine ten"
    doc = cli("explain", text, "--variant", "multihead", "--dropout", "0.4", "--json").json()
    dropped, softmax = doc["stages"]["dropped"], doc["stages"]["softmax"]
    kept = zeroed = 0
    for dh, sh in zip(dropped, softmax, strict=True):
        for i, (drow, srow) in enumerate(zip(dh, sh, strict=True)):
            for j, (d, s) in enumerate(zip(drow, srow, strict=True)):
                if j > i:
                    assert d == 0.0 and s == 0.0
                elif d == 0.0:
                    zeroed += 1
                else:
                    kept += 1
                    assert_near(d, s / (1 - 0.4))
    assert kept > 0 and zeroed > 0


def test_explain_journey_in_the_terminal(cli) -> None:  # noqa: ANN001
    res = cli("explain", "--inputs", str(JOURNEY), "--variant", "simple", "--lang", "en")
    assert res.code == 0 and res.err == ""
    assert "Step 1 of 4 · Inputs X" in res.out
    assert "0.1385" in res.out and "0.4419" in res.out


def test_lang_option_and_locale_default(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    args = ("explain", "--inputs", str(JOURNEY), "--variant", "causal", "--d-out", "2")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    zh = cli(*args)
    assert "因果掩码" in zh.out and "第 1 步" in zh.out
    assert "Causal mask" in cli(*args, "--lang", "en").out
    # JSON keys and numbers never change with the language.
    assert cli(*args, "--json").out == cli(*args, "--json", "--lang", "en").out


def test_run_show_picks_stages(cli) -> None:  # noqa: ANN001
    res = cli("run", SENTENCE, "--show", "scores,weights,context")
    assert res.code == 0
    assert "Attention scores ω = Q·Kᵀ" in res.out and "Attention weights used" in res.out
    doc = cli("run", SENTENCE, "--show", "context,scores", "--json").json()
    assert list(doc["stages"]) == ["context", "scores"]
    assert "stages" not in cli("run", SENTENCE, "--json").json()


def test_query_view_and_json(cli) -> None:  # noqa: ANN001
    res = cli("run", "--inputs", str(JOURNEY), "--variant", "simple", "--query", "journey")
    assert "What query 1 ('journey') attends to" in res.out
    lines = [line.split() for line in res.out.splitlines() if "█" in line]
    assert [line[-1] for line in lines] == [
        "0.2379", "0.2333", "0.1581", "0.1385", "0.1240", "0.1082"]
    doc = cli("run", SENTENCE, "--variant", "multihead", "--query", " starts", "--json").json()
    assert doc["query"] == {"index": 2, "token": " starts",
                            "weights": [head[2] for head in doc["weights"]]}
    assert cli("explain", SENTENCE, "--query", "2", "--json").json()["query"]["index"] == 2


def test_heatmap_view_and_windows(cli) -> None:  # noqa: ANN001
    words = " ".join(f"w{i}" for i in range(40))
    res = cli("run", words, "--draw", "heatmap", "--rows", "10:14", "--cols", "5:25")
    assert res.code == 0
    lines = res.out.splitlines()
    heat = lines[lines.index(next(line for line in lines if line.startswith("Attention"))) + 1:]
    assert heat[0].split() == ["5", "10", "15", "20"]
    # Below the ticks, the column labels written downwards, then the rows.
    start = next(k for k, line in enumerate(heat) if line.startswith("10 "))
    assert [line.split()[0] for line in heat[start:start + 4]] == ["10", "11", "12", "13"]
    doc = cli("run", words, "--rows", "10:14", "--cols", "5:", "--json").json()
    assert doc["window"] == {"rows": [10, 14], "cols": [5, len(doc["tokens"])]}
    assert len(doc["weights"][0]) == len(doc["tokens"])
    auto = cli("run", words)
    assert "[ ░▒▓█]" in auto.out and "cut" not in auto.out


BAD = [
    (("run", SENTENCE, "--rows", "a:b"), "--rows 'a:b' is not a window"),
    (("run", SENTENCE, "--rows", "1:2:3"), "is not a window"),
    (("run", SENTENCE, "--rows", "4:2"), "--rows 4:2 selects nothing"),
    (("run", SENTENCE, "--cols", "0:7"), "--cols 0:7 is out of range: this run has 6 tokens"),
    (("explain", SENTENCE, "--rows", "-9:"), "out of range"),
    (("run", SENTENCE, "--query", "6"), "--query 6 is out of range: this run has 6 tokens"),
    (("run", SENTENCE, "--query", "nope"), "--query 'nope' matches no token; the tokens are: "
                                           "0 'Your', 1 ' journey'"),
    (("run", "the cat the", "--query", "the"), "--query 'the' matches 2 tokens: 0 'the', "
                                                "2 ' the'; give the index"),
    (("run", SENTENCE, "--show", "nope"), "--show: unknown name 'nope' (choose from inputs,"),
    (("run", SENTENCE, "--show", ""), "--show needs a comma-separated list"),
    (("run", SENTENCE, "--show", "scores,scores"), "--show lists 'scores' more than once"),
    (("run", SENTENCE, "--variant", "qkv", "--show", "masked"),
     "--show masked: this qkv run has no masked stage; it has inputs"),
    (("explain", SENTENCE, "--show", "dropped"), "dropped needs --dropout > 0"),
    (("run", SENTENCE, "--view", "pie"), "'pie' is not one of"),
    (("explain", SENTENCE, "--lang", "fr"), "'fr' is not one of 'en', 'zh'"),
    (("explain", SENTENCE, "--head", "1"), "--head 1 is out of range"),
    (("explain", SENTENCE, "--variant", "simple", "--dropout", "0.1"), "--dropout applies to"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_one_line_exit_2(cli, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    cli(*args).assert_usage_error(message)
