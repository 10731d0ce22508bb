"""`attncli check` on classes that run but misbehave: what their forward returns, exceptions
that cannot be printed, hostile file names, globals their file changes, and fork()."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.conftest import ROOT, attncli_process

CLASSES = ROOT / "tests" / "checker" / "check_classes"
RETURN = "return context_vec"


def _causal(**changes: str) -> str:
    source = (CLASSES / "book_causal.py").read_text(encoding="utf-8")
    for old, new in changes.items():
        assert old in source, old
        source = source.replace(old, new)
    return source


def _write(tmp_path: Path, source: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return path


def _api(path: Path) -> dict[str, Any]:
    import attncli

    return attncli.check(f"{path}:CausalAttention").to_dict()


RETURNS = [
    ("context_vec.sum()", "returned shape () (a 0-d tensor, one number)"),
    ("context_vec.to_sparse()", "returned a torch.sparse_coo tensor"),
    ("torch.nested.nested_tensor(list(context_vec))", "returned a nested tensor"),
    ("context_vec.to('meta')", "returned a tensor on the meta device"),
    ("context_vec + 0j", "returned a complex tensor (torch.complex64)"),
    ("()", "returned an empty tuple, not a tensor"),
    ("{'context': context_vec}", "returned a dict, not a tensor"),
    ("context_vec.numpy()", "returned a ndarray, not a tensor"),
    ("(t for t in context_vec)", "returned a generator, not a tensor"),
    ("((context_vec,),)", "returned a tuple whose first item is a tuple"),
    ("[None, context_vec]", "returned a list whose first item is a NoneType"),
    ("torch.Tensor._make_subclass(Odd, context_vec)", "a Odd that cannot be read: "
     "RuntimeError: no numbers here"),
]
ODD = '''

class Odd(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("no numbers here")
'''


@pytest.mark.parametrize("returned,said", RETURNS)
def test_whatever_forward_returns_is_one_failing_line(returned: str, said: str, cli,  # noqa: ANN001
                                                      tmp_path: Path) -> None:
    path = _write(tmp_path, _causal(**{RETURN: f"return {returned}"}) + ODD)
    run = cli("check", f"{path}:CausalAttention", "--json")
    assert run.code == 1, (run.out[-800:], run.err[-800:])
    doc = run.json()
    errors = {case["error"] for case in doc["cases"]}
    assert all(e is not None and said in e and "\n" not in e for e in errors), errors
    assert doc["diagnosis"]["mistakes"] == []
    text = cli("check", f"{path}:CausalAttention")
    assert text.code == 1 and "Traceback" not in text.out + text.err
    api = _api(path)
    assert api["verdict"] == "fail" and {c["error"] for c in api["cases"]} == errors


UNPRINTABLE = '''
class Nasty(Exception):
    def __str__(self):
        raise ValueError("and again")
'''


@pytest.mark.parametrize("raised,said", [
    ("raise Nasty()", "your forward raised Nasty: <Nasty that cannot be printed>"),
    ("raise ValueError('\\x1b[2J\\x1b[31mred\\nsecond line')",
     "your forward raised ValueError: \\x1b[2J\\x1b[31mred ("),
])
def test_what_their_forward_raises_is_one_escaped_line(raised: str, said: str, cli,  # noqa: ANN001
                                                       tmp_path: Path) -> None:
    path = _write(tmp_path, _causal(**{RETURN: raised}) + UNPRINTABLE)
    for args in (("--json",), ()):
        run = cli("check", f"{path}:CausalAttention", *args)
        assert run.code == 1, run.err
        assert "\x1b" not in run.out + run.err and "second line" not in run.out
        assert "Traceback" not in run.out + run.err
    errors = {case["error"] for case in cli("check", str(path), "--json").json()["cases"]}
    assert len(errors) == 1 and next(iter(errors)).startswith(said), errors


@pytest.mark.parametrize("source,said", [
    ("class Meta(type):\n    def __call__(cls, d_in, d_out, context_length, dropout):\n"
     "        raise RuntimeError('meta')\n"
     "class CausalAttention(torch.nn.Module, metaclass=type('M', (Meta, type(torch.nn.Module)), "
     "{})):\n    def __init__(self, d_in, d_out, context_length, dropout):\n"
     "        super().__init__()\n", "raised RuntimeError: meta"),
    ("class Meta(type(torch.nn.Module)):\n    @property\n    def __signature__(cls):\n"
     "        raise RuntimeError('no signature')\n"
     "class CausalAttention(torch.nn.Module, metaclass=Meta):\n    pass\n",
     "cannot read the constructor of CausalAttention"),
    ("class Meta(type):\n    def __new__(m, *a):\n        raise TypeError('no class')\n"
     "class CausalAttention(metaclass=Meta):\n    pass\n", "does not import: TypeError: no class"),
    ("raise Exception('\\x1b]0;title\\x07')\n", "Exception: \\x1b]0;title\\x07"),
    ("class Meta(type(torch.nn.Module)):\n    def __getattribute__(cls, name):\n"
     "        if name in ('__name__', '__qualname__', '__mro__', '__dict__'):\n"
     "            raise RuntimeError('\\x1b[31mno ' + name)\n"
     "        return super().__getattribute__(name)\n"
     "class CausalAttention(torch.nn.Module, metaclass=Meta):\n"
     "    def __init__(self, d_in, d_out, context_length, dropout):\n"
     "        super().__init__()\n", "CausalAttention"),
    ("class Nasty(Exception):\n    def __str__(self):\n        raise ValueError('x')\n"
     "raise Nasty()\n", "does not import: Nasty: <Nasty that cannot be printed>"),
])
def test_a_class_that_cannot_be_built_is_exit_2(source: str, said: str, cli,  # noqa: ANN001
                                               tmp_path: Path) -> None:
    import attncli
    from attncli.errors import AttnCliError

    path = _write(tmp_path, "import torch\n" + source)
    run = cli("check", f"{path}:CausalAttention")
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("attncli: error: ") and run.err.count("\n") == 1, run.err
    assert said in run.err and "\x1b" not in run.err
    with pytest.raises(AttnCliError, match="CausalAttention|import"):
        attncli.check(f"{path}:CausalAttention")


def test_a_five_thousand_character_file_name_is_one_short_line(cli) -> None:  # noqa: ANN001
    name = "a" * 5000 + ".py"
    run = cli("check", f"{name}:CausalAttention")
    assert run.code == 2 and run.err.count("\n") == 1 and len(run.err) < 300, run.err
    assert "no such file: aaaa" in run.err and "..." in run.err
    deep = "/".join(["d" * 200] * 25) + "/x.py"
    run = cli("check", deep)
    assert run.code == 2 and run.err.count("\n") == 1 and len(run.err) < 300, run.err


def test_an_esc_byte_in_a_file_name_is_escaped(cli, tmp_path: Path) -> None:  # noqa: ANN001
    path = _write(tmp_path, _causal(), "evil\x1b[31m.py")
    for args in (("--json",), ()):
        run = cli("check", f"{path}:CausalAttention", *args)
        assert run.code == 0, run.err
        assert "\x1b" not in run.out + run.err
    assert "evil\\x1b[31m.py" in cli("check", str(path), "--json").json()["target"]
    missing = cli("check", str(tmp_path / "gone\x1b[2J.py"))
    assert missing.code == 2 and "gone\\x1b[2J.py" in missing.err and "\x1b" not in missing.err


@pytest.mark.parametrize("line,said,verdict", [
    ("torch.set_default_dtype(torch.float64)", "torch.set_default_dtype(torch.float64)", "pass"),
    ("import sys\nsys.setrecursionlimit(80)", "sys.setrecursionlimit(80)", "pass"),
    ("torch.softmax = lambda t, dim: t.exp()", "replaced torch.softmax", "fail"),
    ("_real = torch.softmax\ntorch.softmax = lambda t, dim: _real(t, dim=dim)",
     "replaced torch.softmax", "pass"),
    ("torch.Tensor.masked_fill_ = lambda self, mask, value: self",  # so no mask: named
     "replaced torch.Tensor.masked_fill_", "fail mask_discarded"),
    ("del torch.nn.functional.dropout", "deleted torch.nn.functional.dropout", "fail"),
])
def test_their_globals_never_reach_the_reference(line: str, said: str, verdict: str, cli,  # noqa: ANN001
                                                 tmp_path: Path) -> None:
    """Their class runs with what their file set; the reference with torch's defaults, so a
    correct class passes and a changed softmax fails as theirs; the report names the change."""
    source = _causal().replace("import torch\n", f"import torch\n{line}\n", 1)
    path = _write(tmp_path, source)
    before = (torch.get_default_dtype(), sys.getrecursionlimit(), torch.softmax,
              torch.Tensor.masked_fill_, torch.nn.functional.dropout)
    run = cli("check", f"{path}:CausalAttention", "--json")
    verdict, *named = verdict.split()
    assert run.code == {"pass": 0, "fail": 1}[verdict], (run.out[-1500:], run.err)
    doc = run.json()
    assert doc["your_settings"] == [said]
    if verdict == "fail":  # their softmax is no known mistake; a masked_fill_ that does nothing is
        assert [m["id"] for m in doc["diagnosis"]["mistakes"]] == named
    text = cli("check", f"{path}:CausalAttention")
    assert said in " ".join(text.out.split())
    assert _api(path)["your_settings"] == [said]
    after = (torch.get_default_dtype(), sys.getrecursionlimit(), torch.softmax,
             torch.Tensor.masked_fill_, torch.nn.functional.dropout)
    assert after == before  # attncli.check leaves the session's globals as it found them


def test_a_first_swap_of_tensors_in_the_session_is_not_theirs(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """torch's first swap_tensors in a session (or a copy of a tensor subclass) leaves copyreg's
    cache, __slotnames__, on the class: their file doing so is no change of theirs (the suite's
    order once decided whether an earlier test had made that cache first)."""
    if "__slotnames__" in vars(torch.Tensor):
        monkeypatch.delattr(torch.Tensor, "__slotnames__")
    source = _causal().replace("import torch\n", "import torch\n"
                               "torch.utils.swap_tensors(torch.zeros(1), torch.zeros(1))\n", 1)
    run = cli("check", f"{_write(tmp_path, source)}:CausalAttention", "--json")
    assert run.code == 0, (run.out[-1500:], run.err)
    assert run.json()["your_settings"] == []


def test_torch_wrapping_its_own_functions_later_is_not_theirs(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The first import of torch._dynamo (by any test or library, after attncli's checker was
    imported) wraps torch.manual_seed in torch's own code: CI's order named it as the reader's.
    A reader's functools.wraps wrapper of a torch function is still theirs, and named."""
    import attncli.checker.defaults  # noqa: F401  (its book is taken before torch's wrapper)

    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(torch.manual_seed))
    path = _write(tmp_path, _causal())
    run = cli("check", f"{path}:CausalAttention", "--json")
    assert run.code == 0, (run.out[-1500:], run.err)
    assert run.json()["your_settings"] == []
    wraps = ("import functools\n_real = torch.softmax\n"
             "torch.softmax = functools.wraps(_real)(lambda t, dim: _real(t, dim=dim))")
    path = _write(tmp_path, _causal().replace("import torch\n", f"import torch\n{wraps}\n", 1),
                  "wraps.py")
    run = cli("check", f"{path}:CausalAttention", "--json")
    assert run.code == 0, (run.out[-1500:], run.err)
    assert run.json()["your_settings"] == ["replaced torch.softmax"]


def test_a_class_made_under_float64_in_a_session_passes() -> None:
    """A notebook that set float64 before it defined the class: the class runs in float64."""
    import attncli
    from attncli.checker.load import import_file

    cls = import_file(str(CLASSES / "book_mha.py")).MultiHeadAttention
    torch.set_default_dtype(torch.float64)
    try:
        result = attncli.check(cls)
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
    assert result.passed, str(result)
    assert result.to_dict()["your_settings"] == ["torch.set_default_dtype(torch.float64)"]


def _fork_once(tmp_path: Path, marker: Path) -> str:
    """A line that forks the first time only; a child that runs on writes marker and ends, so
    a regression fails the test instead of forking a process per case (or running pytest on)."""
    once = str(tmp_path / "forked")
    return (f"(__import__('os').path.exists({once!r}) or open({once!r}, 'w').close() or "
            f"__import__('os').fork()) or (open({str(marker)!r}, 'a').write('x'), "
            "__import__('posix')._exit(0))")


@pytest.mark.parametrize("where", ["import", "init", "forward"])
def test_a_fork_in_their_code_never_runs_attncli_in_the_child(where: str,
                                                              tmp_path: Path) -> None:
    """The child ends as it comes out of fork(): one report, one set of exit lines."""
    marker = tmp_path / "child_ran"
    fork = _fork_once(tmp_path, marker)
    if where == "import":
        source = _causal().replace("import torch\n", f"import torch\n{fork}\n", 1)
    elif where == "init":
        source = _causal(**{"super().__init__()": f"super().__init__()\n        {fork}"})
    else:
        source = _causal(**{RETURN: f"{fork}\n        {RETURN}"})
    path = _write(tmp_path, source)
    run = attncli_process("check", f"{path}:CausalAttention", "--json")
    assert run.returncode == 0, run.stderr[-1500:]
    assert json.loads(run.stdout)["verdict"] == "pass"  # one JSON document, not two
    assert run.stderr == b""
    assert not marker.exists()  # the child ran no line of theirs after the fork, nor ours
    (tmp_path / "forked").unlink()  # the text report: forked afresh
    text = attncli_process("check", f"{path}:CausalAttention")
    assert text.stdout.count(b"PASS:") == 1 and text.stderr == b""


@pytest.mark.parametrize("name", ["alt_mha_raw_out.py", "alt_mha_raw_out_t.py"])
def test_a_square_raw_out_projection_is_tried_both_ways_with_a_bug(name: str, cli,  # noqa: ANN001
                                                                    tmp_path: Path) -> None:
    """The mistake is still named when the orientation of W_out had to be tried."""
    source = (CLASSES / name).read_text(encoding="utf-8")
    scaled = "attn_scores / keys.shape[-1] ** 0.5"
    assert scaled in source
    path = _write(tmp_path, source.replace(scaled, "attn_scores"))
    run = cli("check", f"{path}:MultiHeadAttention", "--json")
    assert run.code == 1, run.err
    doc = run.json()
    assert [m["id"] for m in doc["diagnosis"]["mistakes"]] == ["no_scale"]
    assert doc["copied"]["map"]["W_out"].startswith("out_proj")


def test_the_watch_on_dot_T_is_taken_away_afterwards(cli) -> None:  # noqa: ANN001
    run = cli("check", str(CLASSES / "bug_keys_T_batched.py"), "--json")
    assert run.code == 1 and "\x1b" not in run.err
    assert [m["id"] for m in run.json()["diagnosis"]["mistakes"]] == ["keys_T_batched"]
    assert "T" not in vars(torch.Tensor)
    assert torch.ones(2, 3).T.shape == (3, 2)


def test_every_mistake_is_said_in_chinese() -> None:
    from attncli.checker.mistakes import MISSING_CONTIGUOUS, MISTAKES, TRANSPOSE_2D
    from attncli.i18n.check import MISTAKES_ZH

    ids = {m.id for m in MISTAKES} | {MISSING_CONTIGUOUS[0], TRANSPOSE_2D[0]}
    assert set(MISTAKES_ZH) == ids


@pytest.mark.parametrize("name,said", [
    ("bug_no_scale.py",
     "诊断：no_scale：softmax 之前没有把注意力分数除以 √d_k。书中的类犯了这个错误后"),
    ("bug_keys_T_batched.py", "诊断：keys_T_batched：在批量的 (b, T, d_out) 张量上用 keys.T"),
    ("bug_wrapper_heads_reversed.py:MultiHeadAttentionWrapper",
     "诊断：heads_reversed：各头按相反的顺序拼接"),
    ("book_mha.py",
     "PASS：你的 MultiHeadAttention 在全部 8 个用例上与书中的 MultiHeadAttention 一致"),
])
def test_the_report_speaks_lang_zh(name: str, said: str, cli) -> None:  # noqa: ANN001
    import attncli

    run = cli("check", str(CLASSES / name), "--lang", "zh")
    flat = "".join(run.out.split())
    assert run.code in (0, 1) and "".join(said.split()) in flat, run.out
    assert "attnclicheck会运行你的代码" in flat and "用例" in flat
    assert "book inputs" not in run.out and "Diagnosis" not in run.out
    english = cli("check", str(CLASSES / name), "--json").json()
    assert cli("check", str(CLASSES / name), "--json", "--lang", "zh").json() == english
    api = str(attncli.check(str(CLASSES / name), lang="zh"))
    assert "".join(said.split()) in "".join(api.split())
    if name == "bug_keys_T_batched.py":  # seen in what the forward did: no such claim
        assert "书中的类犯了这个错误后" not in flat
        assert english["diagnosis"]["mistakes"][0]["explains_output"] is False


def test_an_unknown_lang_is_bad_input(cli) -> None:  # noqa: ANN001
    import attncli
    from attncli.errors import AttnCliError

    assert cli("check", str(CLASSES / "book_causal.py"), "--lang", "fr").code == 2
    with pytest.raises(AttnCliError, match="unknown lang 'fr'"):
        attncli.check(str(CLASSES / "book_causal.py"), lang="fr")


def test_a_fork_in_their_forward_under_the_python_api(tmp_path: Path) -> None:
    """In a notebook the child of their fork() ends too: the session gets one result."""
    import attncli

    marker = tmp_path / "child_ran"
    fork = _fork_once(tmp_path, marker)
    path = _write(tmp_path, _causal(**{RETURN: f"{fork}\n        {RETURN}"}))
    assert attncli.check(f"{path}:CausalAttention").passed
    assert not marker.exists()


def test_a_default_device_of_meta_in_their_file_is_said(cli, tmp_path: Path) -> None:  # noqa: ANN001
    source = _causal().replace("import torch\n", "import torch\ntorch.set_default_device('meta')\n",
                               1)
    run = cli("check", f"{_write(tmp_path, source)}:CausalAttention", "--json")
    assert run.code == 1, run.err
    doc = run.json()
    assert "torch.set_default_device('meta')" in doc["your_settings"]
    assert {c["error"] for c in doc["cases"]} == {
        "your parameters are on the meta device, not the CPU"}
    assert torch.get_default_device() == torch.device("cpu")


@pytest.mark.parametrize("where", ["forward", "import"])
def test_a_keyboardinterrupt_their_code_raises_is_one_line_not_a_silent_130(
        where: str, cli, tmp_path: Path) -> None:  # noqa: ANN001
    """No Ctrl-C was pressed: their `raise KeyboardInterrupt` is theirs, one line and exit 2, as
    their SystemExit is (it was a silent exit 130, as if the reader had interrupted)."""
    source = (_causal(**{RETURN: "raise KeyboardInterrupt"}) if where == "forward"
              else "raise KeyboardInterrupt\n" + _causal())
    path = _write(tmp_path, source)
    for args in ((), ("--json",)):
        run = cli("check", f"{path}:CausalAttention", *args)
        assert run.code == 2 and run.out == "", (run.code, run.err)
        assert run.err.startswith("attncli: error: ") and run.err.count("\n") == 1, run.err
        assert "KeyboardInterrupt" in run.err, run.err


@pytest.mark.parametrize("swap,code", [("sys.stderr = None", 0),
                                       ("sys.stderr = open(os.devnull, 'w'); sys.exit(3)", 2)])
def test_their_sys_stderr_is_theirs_only_while_their_code_runs(swap: str, code: int, cli,  # noqa: ANN001
                                                              tmp_path: Path) -> None:
    """A class that swaps sys.stderr (to silence warnings, say) leaves attncli's own: a pass
    was exit 1 (the last flush met None), an error line went to /dev/null."""
    path = _write(tmp_path, "import os, sys\n" + _causal(
        **{"    def forward(self, x):\n": f"    def forward(self, x):\n        {swap}\n"}))
    run = cli("check", f"{path}:CausalAttention")
    assert run.code == code, run.err
    assert sys.stderr is not None
    if code:
        assert run.err == "attncli: error: your CausalAttention's forward exited (SystemExit 3)\n"


def test_the_signal_handlers_their_code_sets_are_theirs_only_while_it_runs(
        cli, tmp_path: Path) -> None:  # noqa: ANN001
    """A class that ignores Ctrl-C (SIG_IGN in forward) left it ignored for the rest of the
    check: attncli's handler is back once their code returns."""
    import signal

    path = _write(tmp_path, "import signal\n" + _causal(**{"    def forward(self, x):\n": (
        "    def forward(self, x):\n        signal.signal(signal.SIGINT, signal.SIG_IGN)\n")}))
    before = signal.getsignal(signal.SIGINT)
    run = cli("check", f"{path}:CausalAttention")
    assert run.code == 0, run.err
    assert signal.getsignal(signal.SIGINT) is before
