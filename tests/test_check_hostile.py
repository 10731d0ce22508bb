"""`attncli check` on classes that run but misbehave: what their forward returns, exceptions
that cannot be printed, hostile file names, globals their file changes, and fork()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CLASSES = Path(__file__).resolve().parent / "check_classes"
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
