"""The CLI as users run it: exit codes, strict JSON on stdout, one-line errors on stderr."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import JOURNEY, SENTENCE, attncli_process


def test_run_json_shape(cli) -> None:  # noqa: ANN001
    res = cli("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--json")
    assert res.code == 0 and res.err == ""
    doc = res.json()
    assert doc["variant"] == "multihead"
    assert set(doc) >= {"variant", "config", "tokens", "weights", "context"}
    assert len(doc["weights"]) == 2 and len(doc["weights"][1]) == 6
    assert doc["tokens"][1] == {"index": 1, "id": 7002, "text": " journey",
                                "bytes": b" journey".hex()}
    assert doc["config"]["seed"] == 123 and doc["config"]["heads"] == 2


def test_run_inputs_book_numbers(cli) -> None:  # noqa: ANN001
    doc = cli("run", "--inputs", str(JOURNEY), "--variant", "simple", "--json").json()
    assert [round(w, 4) for w in doc["weights"][0][1]] == [
        0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]
    assert [round(c, 4) for c in doc["context"][1]] == [0.4419, 0.6515, 0.5683]
    assert "bytes" not in doc["tokens"][0] and doc["tokens"][0]["id"] is None


def test_run_table(cli) -> None:  # noqa: ANN001
    res = cli("run", SENTENCE, "--variant", "causal")
    assert res.code == 0
    assert "Attention weights" in res.out and "Context vectors" in res.out


def test_byte_identical_json(cli) -> None:  # noqa: ANN001
    args = ("run", SENTENCE, "--variant", "multihead", "--dropout", "0.3", "--json")
    assert cli(*args).out == cli(*args).out


@pytest.mark.parametrize("extra", [(), ("--allow-special",)])
def test_tokens_json_of_a_long_text_is_the_whole_texts(cli, extra: tuple[str, ...],  # noqa: ANN001
                                                       tmp_path: Path) -> None:
    from attncli.core.result import TokenInfo
    from attncli.core.tokens import tokenize

    text = "Hi 猫 there,  <|endoftext|> [bold]x 🙂\n" * 400  # about 14,000 characters: 8 pieces
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    doc = cli("tokens", "--file", str(tmp_path / "t.txt"), "--json", *extra).json()
    # --file loses the text's one trailing newline.
    whole = tokenize(text.removesuffix("\n"), "gpt2", allow_special=bool(extra))
    assert doc == {"kind": "tokens", "encoding": "gpt2",
                   "tokens": [TokenInfo.of(p).to_dict() for p in whole]}


def test_tokens_json(cli) -> None:  # noqa: ANN001
    doc = cli("tokens", "猫吃鱼", "--json").json()
    assert len(doc["tokens"]) == 8
    assert bytes.fromhex("".join(t["bytes"] for t in doc["tokens"])).decode() == "猫吃鱼"


def test_version_and_help(cli) -> None:  # noqa: ANN001
    from attncli import __version__

    assert cli("--version").out.strip() == f"attncli {__version__}"
    for command in ("run", "tokens"):
        res = cli(command, "--help")
        assert res.code == 0 and "Examples" in res.out


BAD = [
    (("run", "   "), "empty"),
    (("run", "x", "--variant", "nope"), "nope"),
    (("run", "x", "--encoding", "nope"), "unknown encoding 'nope'"),
    (("run", "x", "--variant", "multihead", "--num-heads", "3"), "heads must divide d_out"),
    (("run", "x", "--dropout", "1.5"), "dropout must be in [0, 1)"),
    (("run", "x", "--emb-dim", "0"), "emb-dim must be a positive integer (got 0)"),
    (("run", "x", "--d-out", "-1"), "d-out must be a positive integer"),
    (("run", "x", "--variant", "multihead", "--num-heads", "0"), "heads must be a positive"),
    (("run", "--file", "/nonexistent/file.txt"), "does not exist"),
    (("run", "--inputs", "/nonexistent.json"), "does not exist"),
    (("run", "a b c d", "--context-length", "2"), "more than --context-length 2"),
    (("run", "x", "--head", "1"), "--head 1 is out of range"),
    (("run", "x", "--variant", "multihead", "--head", "-1"), "--head -1 is out of range"),
    (("run", "x", "--no-such-option"), "no-such-option"),
    (("run", "x", "--precision", "20"), "precision"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_one_line_exit_2(cli, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    cli(*args).assert_usage_error(message)


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "not valid JSON"), ("[[1, 2], [3]]", "different lengths"), ("[]", "no vectors"),
    ('[[1, "x"]]', "non-number"), ("[[NaN]]", "NaN"), ("[[Infinity, 1]]", "Infinity"),
])
def test_bad_inputs_file(cli, tmp_path: Path, content: str, message: str) -> None:  # noqa: ANN001
    path = tmp_path / "v.json"
    path.write_text(content)
    res = cli("run", "--inputs", str(path))
    assert res.code == 2 and message in res.err and res.err.count("\n") == 1


# Real subprocesses: pipes, stdin, colour and a closed pipe.

def test_subprocess_stdin_json_no_ansi() -> None:
    proc = attncli_process("run", "-", "--variant", "qkv", "--json", input="猫吃鱼\n".encode())
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["tokens"]) == 8 and b"\x1b[" not in proc.stdout


def test_subprocess_table_piped_has_no_colour() -> None:
    proc = attncli_process("run", SENTENCE, env={"COLUMNS": "80"})
    assert proc.returncode == 0 and b"\x1b[" not in proc.stdout
    assert b"Attention weights" in proc.stdout


def test_subprocess_forced_colour_and_no_color() -> None:
    coloured = attncli_process("run", SENTENCE, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert b"\x1b[" in coloured.stdout
    plain = attncli_process("run", SENTENCE, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert b"\x1b[38;" not in plain.stdout and b"\x1b[48;" not in plain.stdout


def test_subprocess_invalid_utf8_and_no_traceback() -> None:
    proc = attncli_process("run", "-", input=b"\xff\xfe bad")
    assert proc.returncode == 2
    assert b"Traceback" not in proc.stderr and b"not valid UTF-8" in proc.stderr


def test_subprocess_closed_pipe_is_quiet() -> None:
    import subprocess

    words = " ".join(["token"] * 200)
    cmd = (f"{sys.executable} -m attncli run '{words}' --variant multihead --json | head -c 100")
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          timeout=600, check=False)
    assert len(proc.stdout) == 100
    assert proc.stderr == b"", proc.stderr
    assert proc.returncode == 0


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_subprocess_tokens_closed_pipe_stops_quietly(extra: tuple[str, ...],
                                                     tmp_path: Path) -> None:
    import subprocess

    big = tmp_path / "big.txt"
    big.write_text(" hello [world]" * 40_000, encoding="utf-8")
    cmd = f"{sys.executable} -m attncli tokens --file {big} {' '.join(extra)} | head -1"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          timeout=600, check=False)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    first = proc.stdout.decode()
    # A streamed table cannot know its token count before its first row: the count comes last.
    assert first.startswith('{"kind":"tokens","encoding":"gpt2"' if extra else "tokens (gpt2)")


def test_subprocess_streamed_tokens_table_ends_with_its_count(tmp_path: Path) -> None:
    import subprocess

    big = tmp_path / "big.txt"
    big.write_text(" hello [world]" * 40_000, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "attncli", "tokens", "--file", str(big)],
                          capture_output=True, timeout=600, check=False,
                          env={**os.environ, "COLUMNS": "80"})
    lines = proc.stdout.decode().splitlines()
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert lines[3].split() == ["0", "23748", "hello", "20", "68", "65", "6c", "6c", "6f"]
    assert lines[-2].split() == ["159999", "60", "]", "5d"]
    assert lines[-1] == "160000 tokens (gpt2)" and len(lines) == 160000 + 4


def test_cycle_collector_is_off_while_loading_and_back_once_input_is_read() -> None:
    # A fresh interpreter: the console script's function, before its submodule shadows the name.
    script = """if True:
        import gc
        import attncli.cli
        entry = attncli.cli.main
        import attncli.cli.main as loaded
        loaded.main = lambda: print(gc.isenabled())
        entry()
        from attncli.cli.requests import read_source
        assert read_source("some text", None) == ("some text", None)
        print(gc.isenabled())
    """
    import subprocess

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_an_error_after_ctrl_c_is_reported_as_the_interruption(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Ctrl-C inside numpy's import, swallowed on the way: the next import of numpy fails.
    import attncli.cli.main as entry
    import attncli.cli.streams as streams

    class HalfLoaded:
        def main(self, **_: object) -> int:
            raise ImportError("cannot load module more than once per process")

    monkeypatch.setattr(entry.typer.main, "get_command", lambda _app: HalfLoaded())
    monkeypatch.setattr(streams, "_interrupted", True)
    assert entry.execute(["run", "x"]) == 130
    assert capsys.readouterr().err == "attncli: error: interrupted\n"
    monkeypatch.setattr(streams, "_interrupted", False)
    with pytest.raises(ImportError):  # without Ctrl-C, a real bug: not hidden
        entry.execute(["run", "x"])


def test_ctrl_c_inside_a_command_says_so(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # typer catches the KeyboardInterrupt inside a command and exits 130 without a word.
    import signal

    import attncli.cli.streams as streams
    import attncli.long.path as path
    from attncli.cli.main import execute

    def pressed(*_: object, **__: object) -> None:
        streams._on_interrupt(signal.SIGINT, None)  # what the handler does on Ctrl-C

    monkeypatch.setattr(streams, "_interrupted", False)
    monkeypatch.setattr(path, "prepare", pressed)  # where `run` calls it
    assert execute(["run", "Your journey"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "attncli: error: interrupted\n" and captured.out == ""
