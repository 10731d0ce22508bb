"""The Python API: attncli.run/explain/heads/view give the CLI's --json exactly (to_dict), the
tensors that JSON holds, a notebook page (an iframe of the interactive page: no URL) and the
CLI's tables as text; `import attncli` stays torch-free."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import attncli
from tests.conftest import JOURNEY, ROOT, SENTENCE
from tests.render.test_page import embedded, urls
from tests.tolerance import assert_near

TOY = str(ROOT / "samples" / "toy-gpt2")
LONG = " ".join(["the quick brown fox jumps over the lazy dog"] * 60)


def _json(cli, *args: str) -> Any:  # noqa: ANN001
    run = cli(*args, "--json")
    assert run.code == 0, run.err
    return run.json()


RUNS: list[tuple[dict[str, Any], tuple[str, ...]]] = [
    ({"text": SENTENCE, "variant": "simple"}, (SENTENCE, "--variant", "simple")),
    ({"text": SENTENCE, "variant": "qkv", "d_out": 4, "seed": 789},
     (SENTENCE, "--variant", "qkv", "--d-out", "4", "--seed", "789")),
    ({"text": SENTENCE, "variant": "causal", "dropout": 0.5},
     (SENTENCE, "--variant", "causal", "--dropout", "0.5")),
    ({"text": SENTENCE, "variant": "multihead", "heads": 2, "show": "scores,weights",
      "query": "journey"},
     (SENTENCE, "--variant", "multihead", "--num-heads", "2", "--show", "scores,weights",
      "--query", "journey")),
    ({"inputs": str(JOURNEY), "variant": "simple"}, ("--inputs", str(JOURNEY), "--variant",
                                                       "simple")),
    ({"text": "The cat sat on the mat", "model": TOY, "layer": 1},
     ("The cat sat on the mat", "--model", TOY, "--layer", "1")),
    ({"text": LONG, "variant": "multihead", "impl": "tiled", "rows": (10, 20), "cols": "0:30"},
     (LONG, "--variant", "multihead", "--impl", "tiled", "--rows", "10:20", "--cols", "0:30")),
]


@pytest.mark.parametrize("kwargs,args", RUNS, ids=lambda v: str(v)[:40])
def test_run_to_dict_is_the_clis_json(kwargs: dict[str, Any], args: tuple[str, ...],
                                      cli) -> None:  # noqa: ANN001
    result = attncli.run(kwargs.pop("text", None), **kwargs)
    assert result.to_dict() == _json(cli, "run", *args)


def test_weights_and_context_are_the_jsons_numbers_as_tensors(cli) -> None:  # noqa: ANN001
    result = attncli.run(SENTENCE, variant="multihead", heads=2)
    doc = _json(cli, "run", SENTENCE, "--variant", "multihead", "--num-heads", "2")
    assert isinstance(result.weights, torch.Tensor) and result.weights.shape == (2, 6, 6)
    assert result.weights.dtype == torch.float32
    assert torch.equal(result.weights, torch.tensor(doc["weights"]))
    assert torch.equal(result.context, torch.tensor(doc["context"]))
    assert result.tokens == [t["text"] for t in doc["tokens"]]
    assert result.token_ids == [t["id"] for t in doc["tokens"]]


def test_inputs_take_a_tensor_with_the_books_numbers() -> None:
    """The book's own `inputs` tensor, as a reader has it: the same as the JSON file's."""
    rows = json.loads(JOURNEY.read_text())
    vectors = rows["vectors"] if isinstance(rows, dict) else rows
    from_file = attncli.run(inputs=str(JOURNEY), variant="simple")
    from_tensor = attncli.run(inputs=torch.tensor(vectors), variant="simple",
                              tokens=from_file.tokens)
    assert torch.equal(from_file.weights, from_tensor.weights)
    # Section 3.3.1's weights of query 2 ("journey"), as printed in the book.
    book = torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    # 5e-5: the book prints four decimals, half a unit in the last place
    assert_near(from_tensor.weights[0, 1], book, atol=5e-5, rtol=0)
    batch = attncli.run(inputs=torch.tensor(vectors)[None], variant="simple")
    assert torch.equal(batch.weights, from_tensor.weights)


def test_explain_keeps_every_stage_as_the_clis_json(cli) -> None:  # noqa: ANN001
    result = attncli.explain(SENTENCE, variant="causal")
    doc = _json(cli, "explain", SENTENCE, "--variant", "causal")
    assert result.to_dict() == doc
    assert set(result.stages) == set(doc["stages"])
    masked = result.stages["masked"]
    assert masked.shape == (1, 6, 6)
    assert torch.isinf(masked[0, 0, 1:]).all() and (masked[0, 0, 1:] < 0).all()
    assert torch.equal(result.stages["softmax"], torch.tensor(doc["stages"]["softmax"]))
    text = str(result)
    assert "masked" in text.lower() and "softmax" in text.lower()


def test_explain_a_model_layer(cli) -> None:  # noqa: ANN001
    result = attncli.explain("The cat sat", model=TOY, layer=0)
    assert result.to_dict() == _json(cli, "explain", "The cat sat", "--model", TOY, "--layer",
                                     "0")


def test_heads_is_the_clis_json(cli) -> None:  # noqa: ANN001
    text = "The cat sat on the mat because it was tired"
    result = attncli.heads(text, model=TOY, sort="prev")
    assert result.to_dict() == _json(cli, "heads", text, "--model", TOY, "--sort", "prev")
    assert result.heads == result.to_dict()["heads"]
    page = _frame(result._repr_html_())
    assert urls(page) == set()
    assert embedded(page) == result.to_dict()


def _frame(markup: str) -> str:
    """The page inside the notebook's iframe (its srcdoc, unescaped)."""
    match = re.fullmatch(r'<iframe srcdoc="([^"]*)" title="[^"]*" sandbox="allow-scripts" '
                         r'style="[^"]*"></iframe>', markup)
    assert match is not None, markup[:300]
    return html.unescape(match.group(1))


def test_repr_html_is_the_page_in_an_iframe_with_no_url() -> None:
    result = attncli.run(SENTENCE, variant="multihead", heads=2)
    markup = result._repr_html_()
    page = _frame(markup)
    assert page.startswith("<!DOCTYPE html>")
    assert embedded(page) == result.to_dict()
    assert urls(html.unescape(markup)) == set() and urls(page) == set()
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    assert "default-src 'none'" in page
    assert len(markup) < 200_000  # the page's code once, and the run's numbers


def test_view_draws_a_users_own_weights(cli, tmp_path: Path) -> None:  # noqa: ANN001
    weights = torch.softmax(torch.randn(2, 4, 4, requires_grad=True), dim=-1)  # (h, N, N)
    tokens = ["a", "b", "c", "d"]
    shown = attncli.view(weights, tokens)
    saved = tmp_path / "w.json"
    saved.write_text(json.dumps({"tokens": tokens, "weights": weights.tolist()}))
    assert shown.to_dict() == _json(cli, "show", str(saved))
    assert torch.equal(shown.weights, weights.detach())
    run = cli("show", str(saved))
    assert str(shown) == run.out.rstrip("\n")
    assert embedded(_frame(shown._repr_html_())) == shown.to_dict()
    batch = attncli.view(weights[None])  # (1, h, N, N): a batch of one
    assert torch.equal(batch.weights, weights.detach())


@pytest.mark.parametrize("weights,message", [
    (torch.ones(2, 2, 3, 3), "weights hold a batch of 2"),
    (torch.ones(3), "weights must be [N][N] or [H][N][N] (got 1 dimensions)"),
    ([[0.5, 0.5], [0.5]], "row 1 has 1 values, expected 2"),
    ([[0.5, float("nan")], [0.5, 0.5]], "weights"),
])
def test_view_refuses_bad_weights_in_one_error(weights: Any, message: str) -> None:
    with pytest.raises(attncli.AttnCliError, match=re.escape(message)):
        attncli.view(weights)


def test_show_prints_the_tables_outside_a_notebook(capsys: pytest.CaptureFixture[str]) -> None:
    attncli.show([[1.0, 0.0], [0.25, 0.75]], tokens=["cat", "sat"])
    out = capsys.readouterr().out
    assert "0.2500" in out and "0.7500" in out and "cat" in out and "sat" in out
    assert "\x1b[" not in out  # not a terminal: no colour


def test_ipython_shows_the_page_as_html_and_the_tables_as_text() -> None:
    """What Jupyter and VS Code ask of an object (IPython's display formatter): the page as
    text/html, the CLI's tables as text/plain."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    result = attncli.run(SENTENCE, variant="causal")
    data, _ = shell.display_formatter.format(result)
    assert embedded(_frame(data["text/html"])) == result.to_dict()
    assert "Attention weights" in data["text/plain"] and "journey" in data["text/plain"]


def test_plain_ipython_shows_rich_text(tmp_path: Path) -> None:
    code = ("import attncli; attncli.show([[1.0, 0.0], [0.25, 0.75]], tokens=['cat', 'sat']); "
            "r = attncli.run('one two', variant='simple'); r")
    proc = subprocess.run([sys.executable, "-m", "IPython", "--no-banner", "--colors=nocolor",
                           "-c", code], capture_output=True, text=True, timeout=300,
                          check=False, cwd=ROOT, env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin",
                                                      "HOME": str(tmp_path)})  # its profile
    assert proc.returncode == 0, proc.stderr
    assert "0.7500" in proc.stdout and "cat" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_import_attncli_does_not_import_torch() -> None:
    code = ("import sys, attncli; a = 'torch' in sys.modules; f = attncli.run; "
            "b = 'torch' in sys.modules; print(a, b, callable(f), attncli.__version__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:3] == ["False", "False", "True"]


@pytest.mark.parametrize("call,message", [
    (lambda: attncli.run(SENTENCE, varient="causal"), "has no option 'varient' (did you mean "
     "'variant'?)"),
    (lambda: attncli.run(SENTENCE, inputs=[[1.0]]), "give text, file= or inputs=, exactly one"),
    (lambda: attncli.run(inputs=[[1.0, 2.0], [1.0]]), "vectors have different lengths"),
    (lambda: attncli.run(inputs=[[1.0, float("inf")]]), "non-finite"),
    (lambda: attncli.run(SENTENCE, variant="nope"), "unknown variant 'nope'"),
    (lambda: attncli.run(SENTENCE, rows=(1, 2, 3)), "rows must be 'a:b' or a pair of integers"),
    (lambda: attncli.run(SENTENCE, rows=b"\x01\x03"), "rows must be 'a:b' or a pair of integers"),
    (lambda: attncli.run(SENTENCE, dropout=2.0), "dropout must be in [0, 1)"),
    (lambda: attncli.run(123), "text must be a string"),
    (lambda: attncli.explain(SENTENCE, lang="fr"), "unknown lang 'fr'"),
    (lambda: attncli.heads("x", model=TOY, probe="induction"), "runs on its own random tokens"),
    (lambda: attncli.check(int), "int is not a torch.nn.Module"),
    (lambda: attncli.check("nowhere.py:X"), "no such file"),
    (lambda: attncli.run(SENTENCE, heads="2"), "heads must be an integer or None (got str"),
    (lambda: attncli.run(SENTENCE, emb_dim=8.5), "emb_dim must be an integer (got float 8.5)"),
    (lambda: attncli.run(SENTENCE, heads=True, variant="multihead"), "(got bool True)"),
    (lambda: attncli.run(SENTENCE, model=5), "model must be a string or None"),
    (lambda: attncli.run(file=5), "file must be a string"),
    (lambda: attncli.run(SENTENCE, head="0"), "head must be an integer or None"),
    (lambda: attncli.run(SENTENCE, show=["scores", 5]), "show must be 'scores,weights' or"),
    (lambda: attncli.run(SENTENCE, precision=99), "precision must be in 0..8 (got 99)"),
    (lambda: attncli.run("   "), "the input text is empty"),
    (lambda: attncli.run(inputs=torch.randn(2, 3, 4)), "or a batch of one, (1, T, d_in) (got "
     "shape (2, 3, 4))"),
    (lambda: attncli.heads("x", model=TOY, threshold="x"), "threshold must be a number"),
    (lambda: attncli.heads("x", model=TOY, probe_length=0), "probe_length must be in 1..4096"),
    (lambda: attncli.heads("x", model=5), "model must be a string (got int 5)"),
    (lambda: attncli.view(torch.rand(6, 6, device="meta")), "cannot read the weights"),
    (lambda: attncli.view(torch.rand(0, 0)), "weights are empty (shape (0, 0))"),
    (lambda: attncli.view(torch.rand(2, 2, dtype=torch.complex64)), "must be real numbers"),
    (lambda: attncli.view("w.json"), "`attncli show FILE` reads a saved file"),
    (lambda: attncli.view([[1.0, 0.0], [0.0, 1.0]], [1, 2]), "tokens must be a list of strings"),
])
def test_bad_calls_raise_one_attncli_error(call: Any, message: str) -> None:
    with pytest.raises(attncli.AttnCliError, match=re.escape(message)):
        call()


def test_reprs_are_one_line() -> None:
    result = attncli.run(SENTENCE, variant="multihead", heads=2)
    assert repr(result) == "<attncli.Result multihead: 6 tokens, 2 heads, naive>"
    assert repr(attncli.heads("The cat sat", model=TOY)).startswith("<attncli.HeadsResult ")


def test_the_readmes_python_examples_print_what_they_show(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ```pycon blocks of the README and the docs (docs/api.md), run as doctests in the
    repository root."""
    import doctest

    from tests.readme_blocks import DOCUMENTS

    text = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)
    blocks = re.findall(r"```pycon\n(.*?)```", text, re.S)
    assert blocks
    monkeypatch.chdir(ROOT)
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE)
    for k, block in enumerate(blocks):
        test = parser.get_doctest(block, {}, f"pycon block {k}", "docs", 0)
        assert test.examples
        runner.run(test)
    assert runner.failures == 0


def test_the_sample_notebook_runs_whole(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import runpy

    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "samples" / "notebook.py"), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "torch.Size([2, 6, 6])"
    assert "True" in lines and lines[-1] == "False split_no_transpose"


def test_huge_tensors_are_refused_before_any_copy() -> None:
    """A view of 17 G cells holds one number: the estimate refuses it before tolist()."""
    import resource

    huge = torch.zeros(1).expand(64, 16384, 16384)  # (H, N, N) without the memory
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:  # what this worker maps already, plus 4 GiB
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + 4 * 2**30, hard))
    try:
        with pytest.raises(attncli.AttnCliError, match="17,179,869,184 numbers"):
            attncli.view(huge)
        with pytest.raises(attncli.AttnCliError, match="inputs of shape"):
            attncli.run(inputs=torch.zeros(1).expand(2**20, 2**14), variant="simple")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


HOSTILE = "a\x1b[2J\x1b]0;owned\x07\r\x00\x7f\x9b\u202eb"
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_an_error_is_made_clean_as_the_clis_line_writes_it() -> None:
    """Every control character written out when the error is made, as `tokens` shows them."""
    err = attncli.AttnCliError(f"unknown variant {HOSTILE}\nnext line")
    assert str(err) == ("unknown variant a\\x1b[2J\\x1b]0;owned\\x07\\r\\x00\\x7f\\x9b\\u202eb"
                        "\\nnext line")
    assert str(attncli.AttnCliError(str(err))) == str(err)  # escaping twice changes nothing


@pytest.mark.parametrize("call", [
    lambda: attncli.run(HOSTILE, variant=HOSTILE),
    lambda: attncli.run(HOSTILE, query=HOSTILE),
    lambda: attncli.run(HOSTILE, show=HOSTILE),
    lambda: attncli.run(HOSTILE, rows=HOSTILE),
    lambda: attncli.run(HOSTILE, encoding=HOSTILE),
    lambda: attncli.run(file=f"/nonexistent/{HOSTILE}.txt"),
    lambda: attncli.run(inputs=[[1.0, 2.0]], tokens=[HOSTILE, HOSTILE, HOSTILE]),
    lambda: attncli.heads(HOSTILE, model=f"/nonexistent/{HOSTILE}.gguf"),
    lambda: attncli.view([[1.0]], tokens=[HOSTILE, HOSTILE]),
    lambda: attncli.view([[HOSTILE]]),
], ids=["variant", "query", "show", "rows", "encoding", "file", "tokens", "model", "view-tokens",
        "view-cell"])
def test_the_apis_errors_hold_no_control_character(call: Any) -> None:
    with pytest.raises(attncli.AttnCliError) as caught:
        call()
    message = str(caught.value)
    assert CONTROLS.findall(message) == [] and message.strip() != ""


def test_view_sizes_nested_lists_from_their_outer_lengths(monkeypatch: pytest.MonkeyPatch) -> None:
    """[[0.0]*20000]*20000 is refused before a single cell is read: its rows cannot be walked."""

    class Untouchable(list):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            raise AssertionError("a cell was read before the size was estimated")

    monkeypatch.setattr("attncli.machine.available_bytes", lambda: 16 * 2**30)
    row = Untouchable([0.0] * 20000)
    with pytest.raises(attncli.AttnCliError, match=r"shape \(20000, 20000\) \(400,000,000 "):
        attncli.view([row] * 20000)
