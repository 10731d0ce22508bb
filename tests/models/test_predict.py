"""`run --predict K` and `explain --predict K` (the logit lens) against transformers' own logits,
on small random GPT-2 and Llama checkpoints with tied and untied embeddings; the real SmolLM2
against its final norm and token embedding dequantized by the gguf package; hostile K."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.core.request import Extract, Request
from attncli.models.run import run_model
from tests.gguf_fixtures import smollm2
from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import save_family
from tests.tolerance import assert_near

GPT2 = {"n_layer": 3, "n_head": 4, "n_embd": 32, "n_positions": 64, "vocab_size": 50257}
TEXT = "The cat sat on the mat because it was tired"
K = 5


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """name → (the folder attncli reads, the transformers model that wrote it)."""
    root = tmp_path_factory.mktemp("predict")
    return {
        "gpt2-tied": (root / "g1", save_hf_gpt2(root / "g1", seed=21, lm_head=True, **GPT2)),
        "gpt2-untied": (root / "g2", save_hf_gpt2(root / "g2", seed=22, lm_head=True,
                                                  tie_word_embeddings=False, **GPT2)),
        "llama-untied": (root / "l1", save_family(root / "l1", "llama", seed=23)),
        "llama-tied": (root / "l2", save_family(root / "l2", "llama", seed=24,
                                                tie_word_embeddings=True)),
    }


def _hf(model: Any, ids: list[int]) -> Any:
    with torch.no_grad():
        return model(torch.tensor([ids]), output_hidden_states=True)


def _final_norm(model: Any) -> Any:
    body = getattr(model, "transformer", None)
    return body.ln_f if body is not None else model.model.norm


def _check(entries: list[dict[str, Any]], logits: torch.Tensor, key: str = "top") -> None:
    """Each position's candidates are the top K of logits (T, vocab): ids, logits, softmax."""
    probs = torch.softmax(logits.double(), dim=-1)  # (T, vocab)
    want = logits.topk(K, dim=-1)  # (T, K)
    assert [e["index"] for e in entries] == list(range(logits.shape[0]))
    got_ids = torch.tensor([[c["id"] for c in e[key]] for e in entries])  # (T, K)
    assert torch.equal(got_ids, want.indices)
    got = torch.tensor([[c["logit"] for c in e[key]] for e in entries], dtype=torch.float64)
    assert_near(got, want.values.double())
    got = torch.tensor([[c["prob"] for c in e[key]] for e in entries], dtype=torch.float64)
    assert_near(got, probs.gather(-1, want.indices))


@pytest.mark.parametrize("name", ["gpt2-tied", "gpt2-untied", "llama-untied", "llama-tied"])
def test_predictions_and_the_lens_match_transformers(models, name: str) -> None:  # noqa: ANN001
    folder, model = models[name]
    tied = model.get_output_embeddings().weight.data_ptr() == \
        model.get_input_embeddings().weight.data_ptr()
    assert tied == name.endswith("-tied")  # the checkpoint is what the test says it is
    layer = 1  # below the last: transformers' last hidden state already has the final norm
    result = run_model(Request(text=TEXT, model=str(folder), layer=layer, predict=K),
                       Extract(stages=(), lens=True))
    ids = [t.id for t in result.tokens]
    assert result.predictions is not None and len(ids) > 5
    out = _hf(model, ids)
    _check(result.predictions, out.logits[0])
    # The logit lens: the stream leaving block `layer` through the final norm and the head.
    lens = model.get_output_embeddings()(_final_norm(model)(out.hidden_states[layer + 1][0]))
    _check(result.predictions, lens.detach(), "lens")


def test_run_json_table_and_page(cli, models, tmp_path: Path) -> None:  # noqa: ANN001
    folder, model = models["llama-untied"]
    page = tmp_path / "p.html"
    doc = cli("run", TEXT, "--model", str(folder), "--predict", "3", "--json", "--save",
              str(page)).json()
    tokens, predictions = doc["tokens"], doc["predictions"]
    assert len(predictions) == len(tokens)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    by_id = {i: name for name, i in tokenizer.items()}
    for entry, token in zip(predictions, tokens, strict=True):
        assert set(entry) == {"index", "token", "top"} and entry["token"] == token["text"]
        probs = [c["prob"] for c in entry["top"]]
        assert len(probs) == 3 and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-6
        for c in entry["top"]:
            if c["id"] in by_id:
                assert set(c) == {"id", "text", "bytes", "prob", "logit"}
            else:  # the model has 384 rows, its tokenizer 320 entries
                assert set(c) == {"id", "text", "prob", "logit"} and c["text"] == f"<id {c['id']}>"
    # The page holds exactly the JSON, and its script builds the section with text only.
    data = re.search(r'<script type="application/json" id="attncli-data">(.*?)</script>',
                     page.read_text(), re.S)
    assert data is not None
    assert json.loads(data.group(1).replace("<\\/", "</"))["predictions"] == predictions
    assert "innerHTML" not in page.read_text() and "attncli-predictions" in page.read_text()
    table = cli("run", TEXT, "--model", str(folder), "--predict", "2")
    assert table.code == 0 and "Next-token predictions, top 2" in table.out
    first = predictions[0]["top"][0]
    # The label is the JSON's visible text quoted once: its escapes are not escaped again.
    shown = first["text"]
    assert (f"'{shown}'" if len(shown) <= 16 else f"'{shown[:15]}…'") in table.out


@pytest.mark.parametrize("width", [40, 100])
def test_the_table_reads_on_a_narrow_terminal(cli, models, monkeypatch, width: int) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", str(width))
    folder, _ = models["gpt2-tied"]
    run = cli("explain", TEXT, "--model", str(folder), "--layer", "1", "--predict", "2",
              "--show", "weights")
    assert run.code == 0, run.err
    table = run.out[run.out.index("Next-token predictions"):]
    assert all(len(line) <= width for line in table.splitlines())
    assert "layer 1 lens" in table and "final layer" in table
    # Each position's index starts a row, in order, whether candidates sit side by side or not.
    rows = [int(m) for m in re.findall(r"^\s*(\d+)\s+'", table, re.M)]
    assert rows == list(range(len(rows))) and len(rows) == 10


def test_tiled_path_predicts_the_rows_window(cli, models) -> None:  # noqa: ANN001
    folder, _ = models["llama-untied"]
    whole = cli("run", TEXT, "--model", str(folder), "--predict", "3", "--json").json()
    tiled = cli("run", TEXT, "--model", str(folder), "--predict", "3", "--json", "--impl",
                "tiled", "--rows", "3:6").json()
    assert tiled["config"]["impl"] == "tiled"
    assert [e["index"] for e in tiled["predictions"]] == [3, 4, 5]
    for got, want in zip(tiled["predictions"], whole["predictions"][3:6], strict=True):
        assert [c["id"] for c in got["top"]] == [c["id"] for c in want["top"]]
        assert_near(torch.tensor([c["prob"] for c in got["top"]]),
                    torch.tensor([c["prob"] for c in want["top"]]))
    cli("run", TEXT, "--model", str(folder), "--predict", "3", "--impl",
        "tiled").assert_usage_error("needs --rows A:B")


@pytest.mark.parametrize(("args", "message"), [
    (["--predict", "0"], "--predict must be 1 or more (got 0)"),
    (["--predict", "-1"], "--predict must be 1 or more (got -1)"),
    (["--predict", str(10**9)], "more than the model's vocabulary of 50,257 tokens"),
])
def test_hostile_k_is_one_line(cli, models, args: list[str], message: str) -> None:  # noqa: ANN001
    folder, _ = models["gpt2-tied"]
    cli("run", TEXT, "--model", str(folder), *args).assert_usage_error(message)


@pytest.mark.parametrize("command", ["run", "explain"])
def test_predict_needs_a_model(cli, command: str) -> None:  # noqa: ANN001
    cli(command, TEXT, "--predict", "3").assert_usage_error("--predict applies with --model")


@pytest.mark.slow
def test_smollm2_top1_is_the_argmax_of_its_own_unembedding(cli) -> None:  # noqa: ANN001
    """Structure, and the final norm and unembedding recomputed here from the GGUF's own
    output_norm and token_embd (tied), dequantized by the gguf package, not by attncli."""
    import gguf

    from attncli.models.family import open_model

    path = smollm2()
    text = "The capital of France is Paris. The capital of Italy is"
    doc = cli("explain", text, "--model", str(path), "--layer", "20", "--predict", "3", "--json",
              "--show", "weights").json()
    predictions = doc["predictions"]
    ids = [t["id"] for t in doc["tokens"]]
    assert len(predictions) == len(ids) and all(len(e["top"]) == len(e["lens"]) == 3
                                                for e in predictions)
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors if t.name in ("output_norm.weight",
                                                                "token_embd.weight")}
    assert "output.weight" not in {t.name for t in reader.tensors}  # tied embeddings
    norm, embed = (torch.from_numpy(gguf.quants.dequantize(tensors[n].data, tensors[n].tensor_type)
                                    .copy()) for n in ("output_norm.weight", "token_embd.weight"))
    field = reader.fields["llama.attention.layer_norm_rms_epsilon"]
    eps = float(field.parts[field.data[0]][0])
    model = open_model(str(path))
    hidden = {t.layer: t.output for t in model.trace(ids, last_layer=29) if t.layer in (20, 29)}
    for layer, key in ((29, "top"), (20, "lens")):
        h = hidden[layer]  # (T, 576)
        logits = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * norm) @ embed.T
        probs = torch.softmax(logits, dim=-1)  # (T, 49152)
        assert [e[key][0]["id"] for e in predictions] == logits.argmax(-1).tolist()
        got = torch.tensor([e[key][0]["prob"] for e in predictions])
        assert_near(got, probs.max(-1).values)
    italy = predictions[-1]["top"][0]
    assert italy["text"] == " Rome" and bytes.fromhex(italy["bytes"]) == b" Rome"


@pytest.mark.parametrize("values,says", [
    ([1.0, float("nan")], "the logits are not numbers (NaN)"),
    ([float("nan"), float("inf")], "the logits are not numbers (NaN)"),
    ([1.0, float("inf")], "the logits overflowed float32: the checkpoint's numbers are too large"),
    ([float("-inf"), 1.0], "the logits overflowed float32"),
])
def test_logits_that_are_not_finite_are_named_for_what_they_are(values: list[float],
                                                                says: str) -> None:
    """A NaN was refused as an overflow; an infinity still is one."""
    from attncli.errors import AttnCliError
    from attncli.models.predict import check_logits

    check_logits(torch.tensor([[1.0, -2.0]]))  # finite: no refusal
    with pytest.raises(AttnCliError, match=re.escape(says)) as caught:
        check_logits(torch.tensor([values]))  # (1, vocab)
    assert ("NaN" in says) != ("overflowed" in str(caught.value))
