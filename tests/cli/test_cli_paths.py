"""Paths as typed: a bare `-` is standard input, `./-` (or any other spelling) the file named -,
for --file, --inputs and `show FILE` alike, as --help and the README promise."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from tests.redteam.test_redteam import TOY, memory_headroom

Run = Callable[..., CompletedProcess[bytes]]


@pytest.fixture
def _run(cli: Any, monkeypatch: pytest.MonkeyPatch) -> Run:
    """attncli in-process in a folder, its standard input holding the bytes given, under a
    memory limit: which path is stdin is decided inside attncli (a real process's pipe into
    stdin: tests/cli/test_cli.py and the red team's `tokens - </dev/zero`)."""
    def run(cwd: Path, *args: str, stdin: bytes) -> CompletedProcess[bytes]:
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        with memory_headroom():
            got = cli(*args)
        return CompletedProcess(list(args), got.code, got.out.encode(), got.err.encode())

    return run


def _texts(doc: dict) -> list[str]:
    return [token["text"] for token in doc["tokens"]]


@pytest.mark.parametrize("dash", ["./-", "-"])
def test_file_dash(_run: Run, tmp_path: Path, dash: str) -> None:
    (tmp_path / "-").write_text("from the file\n")
    for args in (["tokens", "--file", dash, "--json"], ["run", "--file", dash, "--json"],
                 ["kvcache", "--file", dash, "--json"]):
        proc = _run(tmp_path, *args, stdin=b"piped in\n")
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        tokens = doc["steps"] if args[0] == "kvcache" else doc["tokens"]
        assert len(tokens) == 3, doc
        if args[0] != "kvcache":
            assert _texts(doc) == (["from", " the", " file"] if dash == "./-"
                                   else ["p", "iped", " in"]), args


def test_heads_file_dash(_run: Run, tmp_path: Path) -> None:
    (tmp_path / "-").write_text("The cat sat on the mat\n")
    proc = _run(tmp_path, "heads", "--file", "./-", "--model", str(TOY), "--json",
                stdin=b"a b\n")
    assert proc.returncode == 0, proc.stderr
    assert _texts(json.loads(proc.stdout)) == ["The", " cat", " sat", " on", " the", " mat"]


@pytest.mark.parametrize("dash", ["./-", "-"])
def test_inputs_dash(_run: Run, tmp_path: Path, dash: str) -> None:
    (tmp_path / "-").write_text(json.dumps({"tokens": ["f1", "f2"], "vectors": [[1, 2], [3, 4]]}))
    piped = json.dumps({"tokens": ["s1"], "vectors": [[5, 6]]}).encode()
    proc = _run(tmp_path, "run", "--inputs", dash, "--variant", "simple", "--json", stdin=piped)
    assert proc.returncode == 0, proc.stderr
    assert _texts(json.loads(proc.stdout)) == (["f1", "f2"] if dash == "./-" else ["s1"])


@pytest.mark.parametrize("dash", ["./-", "-", "sub/../-"])
def test_show_dash(_run: Run, tmp_path: Path, dash: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "-").write_text(json.dumps([[0.25, 0.75], [0.5, 0.5]]))
    piped = json.dumps([[1.0]]).encode()
    proc = _run(tmp_path, "show", dash, "--json", stdin=piped)
    assert proc.returncode == 0, proc.stderr
    weights = json.loads(proc.stdout)["weights"]
    assert weights == ([[[1.0]]] if dash == "-" else [[[0.25, 0.75], [0.5, 0.5]]])


def test_a_missing_dash_file_is_named_as_typed(_run: Run, tmp_path: Path) -> None:
    proc = _run(tmp_path, "tokens", "--file", "./-", stdin=b"piped\n")
    assert (proc.returncode, proc.stderr) == (2, b"attncli: error: --file './-' does not exist\n")
    proc = _run(tmp_path, "run", "--inputs", "./-", stdin=b"[[1]]")
    assert (proc.returncode, proc.stderr) == (2, b"attncli: error: --inputs './-' does not "
                                                 b"exist\n")
    proc = _run(tmp_path, "show", "./-", stdin=b"[[1]]")
    assert (proc.returncode, proc.stderr) == (2, b"attncli: error: FILE './-' does not exist\n")


def test_help_says_so(cli) -> None:  # noqa: ANN001
    for command in ("run", "tokens", "kvcache"):
        out = " ".join(cli(command, "--help").out.split())
        assert "'-': standard input; a file named - is ./-" in out, command
