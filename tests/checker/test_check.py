"""`attncli check`: the book's classes pass, classes written differently pass, each planted bug
fails and is named, and bad files exit 2 in one line. The classes are in
tests/checker/check_classes/, written as a reader writes them (the manifest says what each should
give)."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from attncli.checker.cases import BOOK_INPUTS
from attncli.checker.kinds import KINDS, KindName
from attncli.checker.mistakes import MISTAKES
from attncli.checker.reference import Setting, forward, make_weights
from attncli.core.attention import MultiHeadAttention
from tests.tolerance import assert_near, near

CLASSES = Path(__file__).resolve().parent / "check_classes"
MANIFEST: dict[str, dict[str, Any]] = json.loads((CLASSES / "manifest.json").read_text())
EXIT = {"pass": 0, "fail": 1, "bad": 2}


def _path(name: str, tmp_path: Path) -> Path:
    if name.endswith(".txt"):  # a syntax error cannot live as a .py file ruff reads
        copy = tmp_path / MANIFEST[name]["copy_to"]
        shutil.copy(CLASSES / name, copy)
        return copy
    return CLASSES / name


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_class_gets_its_verdict(name: str, cli, tmp_path: Path) -> None:  # noqa: ANN001
    entry = MANIFEST[name]
    run = cli("check", f"{_path(name, tmp_path)}:{entry['class']}", "--json")
    assert run.code == EXIT[entry["expect"]], (run.out[-2000:], run.err)
    if entry["expect"] == "bad":
        assert run.out == ""
        assert run.err.startswith("attncli: error: ") and run.err.count("\n") == 1, run.err
        assert "Traceback" not in run.err
        return
    doc = run.json()
    assert doc["notice"].startswith("attncli check runs your code")
    assert doc["verdict"] == entry["expect"]
    assert doc["kind"] == entry["kind"]
    if entry["expect"] == "pass":
        assert all(case["pass"] for case in doc["cases"])
        assert doc["max_diff"] < 1e-5
        return
    named = [m["id"] for m in doc["diagnosis"]["mistakes"]]
    if entry["mistake"] is not None:
        assert named == [entry["mistake"]], doc["diagnosis"]
    else:  # it raised, returned no tensor or the wrong shape: said as the reader's
        assert named == []
        assert any(case["error"] for case in doc["cases"])


def test_the_bug_corpus_covers_ten_mistakes() -> None:
    planted = {e["mistake"] for e in MANIFEST.values() if e["mistake"]}
    assert len(planted) >= 10
    # Two are named from what the forward did, not from a switch of the reference.
    assert planted - {m.id for m in MISTAKES} == {"missing_contiguous", "keys_T_batched"}


def _book_weights(kind: KindName, s: Setting):  # noqa: ANN202
    return make_weights(KINDS[kind], s, seed=5)


@pytest.mark.parametrize("heads,d_out", [(1, 4), (2, 4), (3, 6), (2, 2)])
def test_the_reference_is_pytorchs_attention(heads: int, d_out: int) -> None:
    """With no mistake, reference.forward is SDPA's causal attention, then out_proj."""
    kind = KINDS[KindName.multihead]
    s = Setting(d_in=5, d_out=d_out, context_length=7, num_heads=heads)
    w = _book_weights(KindName.multihead, s)
    x = torch.randn(2, 7, 5, generator=torch.Generator().manual_seed(0))  # (b, T, d_in)
    ours = forward(kind, w, x, s)  # (b, T, d_out)

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(2, 7, heads, d_out // heads).transpose(1, 2)  # (b, h, T, hd)

    q, k, v = split(x @ w.W_query.T), split(x @ w.W_key.T), split(x @ w.W_value.T)
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, h, T, hd)
    merged = context.transpose(1, 2).reshape(2, 7, d_out)  # (b, T, d_out)
    assert w.out_proj is not None and w.out_bias is not None
    expected = merged @ w.out_proj.T + w.out_bias  # (b, T, d_out)
    assert_near(ours, expected)


def test_the_reference_is_attnclis_own_multihead() -> None:
    """The reference and core/attention.py's MultiHeadAttention, with the same weights."""
    torch.manual_seed(123)
    module = MultiHeadAttention(3, 2, num_heads=2)
    s = Setting(3, 2, 6, num_heads=2)
    w = make_weights(KINDS[KindName.multihead], s, seed=0)
    w = type(w)(module.W_query.weight.detach(), module.W_key.weight.detach(),
                module.W_value.weight.detach(), out_proj=module.out_proj.weight.detach(),
                out_bias=module.out_proj.bias.detach())
    x = torch.tensor(BOOK_INPUTS)  # (6, 3)
    assert_near(forward(KINDS[KindName.multihead], w, x[None], s)[0],
                               module(x).context)
    # And the book's published context vectors for this seed (section 3.6.2).
    book = torch.tensor([[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593],
                         [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]])
    assert_near(forward(KINDS[KindName.multihead], w, x[None], s)[0], book,
                               atol=5e-5, rtol=0)


def test_dropout_in_the_reference_is_nn_dropouts() -> None:
    kind = KINDS[KindName.causal]
    s = Setting(3, 2, 6, dropout=0.5, seed=9)
    w = _book_weights(KindName.causal, s)
    x = torch.stack((torch.tensor(BOOK_INPUTS),) * 2)  # (2, 6, 3)
    torch.manual_seed(9)
    ours = forward(kind, w, x, s)  # (2, 6, 2)
    q, k, v = x @ w.W_query.T, x @ w.W_key.T, x @ w.W_value.T  # (2, 6, 2) each
    scores = (q @ k.transpose(1, 2)).masked_fill(torch.ones(6, 6).triu(1).bool(), -math.inf)
    torch.manual_seed(9)
    weights = torch.nn.Dropout(0.5)(torch.softmax(scores / math.sqrt(2), dim=-1))  # (2, 6, 6)
    assert_near(ours, weights @ v)


@pytest.mark.parametrize("mistake", [m for m in MISTAKES if m.weights is None],
                         ids=lambda m: m.id)
def test_every_mistake_changes_the_output(mistake) -> None:  # noqa: ANN001
    """A switch that changes nothing could never be told apart: each one differs somewhere."""
    kind = next(k for k in KINDS.values() if mistake.fits(k) and k.batched)
    settings = [Setting(4, 6, 8, num_heads=3 if kind.takes_heads else 1, dropout=p, training=t)
                for p in (0.0, 0.5) for t in (True, False)]
    x = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(1))
    differs = False
    for s in settings:
        w = make_weights(kind, s, seed=3)
        torch.manual_seed(0)
        right = forward(kind, w, x, s)
        torch.manual_seed(0)
        wrong = forward(kind, w, x, s, frozenset({mistake.id}))
        differs |= not near(right, wrong, equal_nan=True)
    assert differs


def _write(tmp_path: Path, body: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text("import torch\nimport torch.nn as nn\n\n" + body, encoding="utf-8")
    return path


def _book_source(name: str, **changes: str) -> str:
    """One of the book's classes in the corpus, each change (a line of it) made."""
    source = (CLASSES / name).read_text(encoding="utf-8")
    for old, new in changes.items():
        assert old in source, old
        source = source.replace(old, new)
    return source


def _book_mha_source(**changes: str) -> str:
    return _book_source("book_mha.py", **changes)


def test_two_mistakes_together_are_named_together(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "two.py"
    path.write_text(_book_mha_source(**{
        "attn_scores / keys.shape[-1] ** 0.5": "attn_scores",
        "context_vec = self.out_proj(context_vec)": "pass"}), encoding="utf-8")
    run = cli("check", f"{path}:MultiHeadAttention", "--json")
    assert run.code == 1, run.err
    ids = [m["id"] for m in run.json()["diagnosis"]["mistakes"]]
    assert ids == ["no_scale + no_out_proj"]


def test_an_unknown_bug_says_so_and_shows_the_first_row(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "odd.py"
    path.write_text(_book_mha_source(**{
        "context_vec = self.out_proj(context_vec)":
            "context_vec = self.out_proj(context_vec) * 1.5"}), encoding="utf-8")
    run = cli("check", str(path))  # FILE.py alone: its one nn.Module class
    assert run.code == 1, run.err
    lines = run.out.splitlines()
    assert lines[0].startswith("attncli check runs your code")
    assert "None of the known mistakes matches" in run.out
    assert "The first row that differs: book inputs, batch 1, batch 0, token 0 ('Your')" \
        in run.out.replace("\n", " ")
    doc = cli("check", str(path), "--json").json()
    first = doc["diagnosis"]["first_difference"]
    assert first["yours"] == pytest.approx([v * 1.5 for v in first["book"]], rel=1e-5)


def test_pass_says_so_first_that_it_runs_your_code(cli) -> None:  # noqa: ANN001
    run = cli("check", f"{CLASSES / 'book_causal.py'}:CausalAttention")
    assert run.code == 0, run.err
    assert run.out.splitlines()[0].startswith("attncli check runs your code:")
    assert "PASS: your CausalAttention equals the book's CausalAttention on all 7 cases" in \
        run.out.replace("\n", " ")
    assert "weights copied into yours by the book's names" in run.out.replace("\n", " ")


def test_help_says_it_runs_your_code(cli) -> None:  # noqa: ANN001
    run = cli("check", "--help")
    assert run.code == 0
    assert "THIS RUNS YOUR CODE" in run.out


def test_what_your_code_prints_stays_off_the_json(cli) -> None:  # noqa: ANN001
    run = cli("check", f"{CLASSES / 'bad_prints.py'}:CausalAttention", "--json")
    assert run.code == 0
    assert run.json()["verdict"] == "pass"
    assert "hello from import" in run.err and "hello from forward" in run.err


@pytest.mark.parametrize("target,message", [
    ("{d}/nowhere.py:X", "no such file"),
    ("{d}:X", "is a directory"),
    ("{d}/two.py", "holds 2 nn.Module classes (A, B): name one"),
    ("{d}/two.py:C", "has no class 'C' (its classes: A, B)"),
    ("{d}/two.py:f", "is a function, not a class"),
    ("{d}/raises.py:A", "your A(d_in=3, d_out=2, context_length=6, dropout=0.0) raised "
     "RuntimeError: no (raises.py, line 6)"),
    ("{d}/norm.py:A", "cannot copy the book's weights into yours"),
    ("{d}/empty.py:A", "your class has no weights"),
])
def test_bad_targets_exit_2_in_one_line(target: str, message: str, cli,  # noqa: ANN001
                                        tmp_path: Path) -> None:
    _write(tmp_path, "class A(nn.Module):\n    pass\n\n\nclass B(nn.Module):\n    pass\n\n\n"
           "def f():\n    pass\n", "two.py")
    _write(tmp_path, "class A(nn.Module):\n    def __init__(self, d_in, d_out, context_length, "
           "dropout):\n        raise RuntimeError('no')\n", "raises.py")
    _write(tmp_path, "class A(nn.Module):\n    def __init__(self, d_in, d_out, context_length, "
           "dropout):\n        super().__init__()\n        self.q = nn.Linear(d_in, d_out)\n"
           "        self.norm = nn.LayerNorm(d_in)\n        self.extra = nn.Parameter("
           "torch.ones(2, 2, 2))\n", "norm.py")
    _write(tmp_path, "class A(nn.Module):\n    def __init__(self, d_in, d_out, context_length, "
           "dropout):\n        super().__init__()\n", "empty.py")
    cli("check", target.format(d=tmp_path)).assert_usage_error(message)


def test_kind_can_be_given_and_is_checked(cli) -> None:  # noqa: ANN001
    cli("check", str(CLASSES / "book_causal.py"), "--kind", "nope").assert_usage_error(
        "unknown kind 'nope'")
    run = cli("check", str(CLASSES / "book_causal.py"), "--kind", "causal", "--json")
    assert run.code == 0 and run.json()["kind"] == "causal"


def test_the_python_api_checks_a_class_and_leaves_the_seed_alone() -> None:
    import attncli
    from attncli.checker.load import import_file

    cls = import_file(str(CLASSES / "bug_no_out_proj.py")).MultiHeadAttention
    torch.manual_seed(42)
    before = torch.get_rng_state()
    report = attncli.check(cls)
    assert torch.equal(before, torch.get_rng_state())
    assert not report.passed
    assert [m["id"] for m in report.to_dict()["diagnosis"]["mistakes"]] == ["no_out_proj"]
    assert "Diagnosis: no_out_proj" in str(report)


def test_a_float64_class_is_run_in_its_own_dtype(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "f64.py"
    path.write_text(_book_mha_source(**{
        "self.out_proj = nn.Linear(d_out, d_out)":
            "self.out_proj = nn.Linear(d_out, d_out)\n        self.double()"}), encoding="utf-8")
    run = cli("check", str(path), "--json")
    assert run.code == 0, run.out[-1500:]


def test_sys_exit_in_the_readers_code_is_bad_input_not_a_pass(cli,  # noqa: ANN001
                                                               tmp_path: Path) -> None:
    path = tmp_path / "quits.py"
    path.write_text(_book_mha_source(**{
        "b, num_tokens, d_in = x.shape": "raise SystemExit(0)"}), encoding="utf-8")
    cli("check", str(path)).assert_usage_error(
        "your MultiHeadAttention's forward exited (SystemExit 0)")


def _book_causal_source(**changes: str) -> str:
    return _book_source("book_causal.py", **changes)


def _check_json(cli, path: Path, *extra: str) -> tuple[int, Any]:  # noqa: ANN001
    run = cli("check", str(path), "--json", *extra)
    return run.code, (run.json() if run.code in (0, 1) else run.err)


def test_unnamed_projections_declared_out_of_order_still_pass(cli,  # noqa: ANN001
                                                               tmp_path: Path) -> None:
    """lin_b is the key, declared first: the names do not say, so the orders are tried."""
    path = tmp_path / "anon.py"
    source = _book_causal_source(**{"self.W_query": "self.lin_a", "self.W_key": "self.lin_b",
                                    "self.W_value": "self.lin_c"})
    lines = source.splitlines()
    a = next(i for i, line in enumerate(lines) if "self.lin_a = nn.Linear" in line)
    lines[a], lines[a + 1] = lines[a + 1], lines[a]  # lin_b (the key) declared first
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, doc = _check_json(cli, path)
    assert code == 0, doc
    assert doc["copied"]["how"] == "shapes" and doc["copied"]["guessed_order"]
    assert doc["copied"]["map"] == {"lin_a": "W_query", "lin_b": "W_key", "lin_c": "W_value"}
    # A real bug is still found with the roles guessed.
    path.write_text(path.read_text().replace("keys.shape[-1] ** 0.5", "1"), encoding="utf-8")
    code, doc = _check_json(cli, path)
    assert code == 1 and [m["id"] for m in doc["diagnosis"]["mistakes"]] == ["no_scale"]


def test_parameters_the_book_lacks_are_named_and_left_alone(cli,  # noqa: ANN001
                                                            tmp_path: Path) -> None:
    path = tmp_path / "extra.py"
    path.write_text(_book_causal_source(**{
        "self.dropout = nn.Dropout(dropout)":
            "self.dropout = nn.Dropout(dropout)\n        self.unused = nn.Linear(d_in, d_out)\n"
            "        self.norm = nn.LayerNorm(d_out)\n"
            "        self.scale = nn.Parameter(torch.ones(1))"}), encoding="utf-8")
    code, doc = _check_json(cli, path)
    assert code == 0, doc
    assert set(doc["copied"]["ignored"]) == {"unused (2, 3)", "norm.weight (2,)",
                                             "norm.bias (2,)", "scale (1,)"}


@pytest.mark.parametrize("change,message", [
    ({"super().__init__()": "super().__init__()\n        self.train = None"},
     "your CausalAttention.train(True) raised TypeError"),
    ({"nn.Linear(d_in, d_out, bias=qkv_bias)": "nn.LazyLinear(d_out, bias=qkv_bias)"},
     "is lazy (nn.LazyLinear)"),
    ({"b, num_tokens, d_in = x.shape": "import os\n        os._exit(0)"},
     "your CausalAttention's forward exited (SystemExit 0)"),
])
def test_the_readers_code_fails_in_one_line(change: dict[str, str], message: str, cli,  # noqa: ANN001
                                            tmp_path: Path) -> None:
    path = tmp_path / "theirs.py"
    path.write_text(_book_causal_source(**change), encoding="utf-8")
    cli("check", str(path)).assert_usage_error(message)


@pytest.mark.parametrize("returned,error", [
    ("raise GeneratorExit('x')", "your forward raised GeneratorExit: x"),
    ("return torch.full((b, num_tokens, self.d_out), float('nan'))", None),
    ("return torch.zeros(b, num_tokens, self.d_out, dtype=torch.complex64)",
     "your forward returned a complex tensor"),
])
def test_outputs_no_mistake_can_explain(returned: str, error: str | None, cli,  # noqa: ANN001
                                        tmp_path: Path) -> None:
    path = tmp_path / "odd.py"
    path.write_text(_book_causal_source(**{"b, num_tokens, d_in = x.shape":
                                           f"b, num_tokens, d_in = x.shape\n        {returned}"}),
                    encoding="utf-8")
    code, doc = _check_json(cli, path)
    assert code == 1, doc
    assert doc["diagnosis"]["mistakes"] == []  # NaN everywhere matches no mistake
    if error is not None:
        assert all(error in case["error"] for case in doc["cases"])


def test_a_wrapper_by_another_name_is_told_to_say_so(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "stacked.py"
    path.write_text((CLASSES / "book_wrapper.py").read_text().replace(
        "MultiHeadAttentionWrapper", "Stacked"), encoding="utf-8")
    code, doc = _check_json(cli, f"{path}:Stacked")
    assert code == 1
    assert "as the book's MultiHeadAttentionWrapper: give --kind wrapper" in \
        doc["cases"][0]["error"]
    code, doc = _check_json(cli, f"{path}:Stacked", "--kind", "wrapper")
    assert code == 0, doc
    assert doc["copied"]["map"]["heads.1.W_key"] == "W_key (head 1)"


def test_the_books_wrapper_prints_the_books_numbers() -> None:
    """Listing 3.4's output for torch.manual_seed(123), from the reference's wrapper forward
    with the weights of the book's own CausalAttention heads."""
    from attncli.checker.load import import_file
    from attncli.checker.reference import Weights

    module = import_file(str(CLASSES / "book_wrapper.py"))
    torch.manual_seed(123)
    wrapper = module.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    heads = tuple(Weights(h.W_query.weight.detach(), h.W_key.weight.detach(),
                          h.W_value.weight.detach()) for h in wrapper.heads)
    x = torch.stack((torch.tensor(BOOK_INPUTS),) * 2)  # (2, 6, 3)
    s = Setting(3, 2, 6, num_heads=2)
    ours = forward(KINDS[KindName.wrapper], replace(heads[0], heads=heads), x, s)
    book = torch.tensor([[-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257],
                         [-0.6300, -0.0632, 0.6202, 0.3860], [-0.5675, -0.0843, 0.5478, 0.3589],
                         [-0.5526, -0.0981, 0.5321, 0.3428], [-0.5299, -0.1081, 0.5077, 0.3493]])
    assert_near(ours[0], book, atol=5e-5, rtol=0)
    assert_near(ours, wrapper(x).detach())


def test_nothing_of_theirs_reaches_stdout_not_even_fd_1() -> None:
    path = CLASSES.parent / "check_classes" / "book_causal.py"
    source = path.read_text(encoding="utf-8").replace(
        "import torch\n", "import os\nimport sys\n\nimport torch\n\nos.write(1, b'FD1\\n')\n"
        "sys.__stdout__.write('DUNDER\\n')\n", 1)
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        mine = Path(folder) / "loud.py"
        mine.write_text(source, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "attncli", "check", str(mine), "--json"],
                              capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "pass"
    assert b"FD1" in proc.stderr and b"DUNDER" in proc.stderr


@pytest.mark.parametrize("target,message", [
    ("", "give your class as FILE.py:Class"),
    ("-", "standard input cannot be imported"),
    ("{book}:", "give the class after the colon"),
    ("{book}:1bad", "'1bad' is not a class name"),
    ("{fifo}", "is not a regular file"),
    ("/dev/null", "is not a regular file"),
])
def test_targets_that_name_no_class_file(target: str, message: str, cli,  # noqa: ANN001
                                         tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    named = target.format(book=CLASSES / "book_causal.py", fifo=fifo)
    cli("check", named).assert_usage_error(message)


def test_constructors_called_as_they_can_be(cli, tmp_path: Path) -> None:  # noqa: ANN001
    star = tmp_path / "star.py"
    star.write_text(_book_causal_source(**{
        "def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):":
            "def __init__(self, *args, **kwargs):\n"
            "        d_in, d_out, context_length, dropout = args[:4]\n"
            "        qkv_bias = kwargs.get('qkv_bias', False)"}), encoding="utf-8")
    cli("check", str(star)).assert_usage_error("(or give --kind)")
    assert _check_json(cli, star, "--kind", "causal")[0] == 0
    only = tmp_path / "only.py"
    only.write_text(_book_causal_source(**{
        "def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):":
            "def __init__(self, d_in, d_out, context_length, dropout, /, qkv_bias=False):"}),
        encoding="utf-8")
    assert _check_json(cli, only)[0] == 0
    cli("check", str(CLASSES / "book_causal.py"), "--kind", "multihead").assert_usage_error(
        "does not take the arguments of the book's MultiHeadAttention")
