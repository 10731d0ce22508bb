"""Row-heavy output streams: a closed pipe (`| head`) stops the work at once, quietly, exit 0,
and the first line comes before the whole input is processed (under a memory limit the whole
would exceed)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT

CJK = "猫吃鱼狗吃肉我们一起学习注意力机制東京は日本の首都です"


def _limit(megabytes: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (megabytes * 2**20, megabytes * 2**20))
    return apply


def _first_lines(args: list[str], lines: int, megabytes: int, until: bytes | None = None,
                 size: int | None = None) -> tuple[list[bytes], int, bytes]:
    """Read lines (or up to the line that starts with until, and the next three; or size
    bytes), close the pipe, and return them with the exit code and stderr."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "attncli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT,
                            preexec_fn=_limit(megabytes))
    assert proc.stdout is not None and proc.stderr is not None
    got: list[bytes] = []
    seen = until is None
    while len(got) < lines or not seen:
        line = proc.stdout.readline() if size is None else proc.stdout.read(size)
        if not line:
            break
        got.append(line)
        if until is not None and line.startswith(until):
            seen, lines = True, len(got) + 3  # the title, the header, the rule, one row
    proc.stdout.close()  # the reader goes away, as `head` does
    err = proc.stderr.read()
    return got, proc.wait(timeout=600), err


def test_tokens_of_cjk_with_no_space_stop_at_a_closed_pipe(tmp_path: Path) -> None:
    big = tmp_path / "cjk.txt"  # 8 MB, no space and no punctuation: one pre-token per run
    big.write_text((CJK * (8_000_000 // (3 * len(CJK)) + 1))[:2_666_666], encoding="utf-8")
    # Tokenising it whole takes more than a gigabyte; the first piece a few megabytes.
    lines, code, err = _first_lines(["tokens", "--file", str(big)], 1, 1024)
    assert (code, err) == (0, b"") and lines[0].startswith(b"tokens (gpt2)")
    # The JSON is one line: read its first bytes, as `head -c` does.
    lines, code, err = _first_lines(["tokens", "--file", str(big), "--json"], 1, 1024, size=100)
    assert (code, err) == (0, b"")
    assert lines[0].startswith(b'{"kind":"tokens","encoding":"gpt2","tokens":[')


def test_a_long_runs_top_k_listing_stops_at_a_closed_pipe(tmp_path: Path) -> None:
    text = tmp_path / "long.txt"
    text.write_text(" hello world" * 1500, encoding="utf-8")  # 3,000 tokens: the tiled path
    args = ["run", "--file", str(text), "--variant", "multihead", "--num-heads", "4",
            "--rows", "0:3000", "--cols", "0:4"]
    lines, code, err = _first_lines(args, 1, 3072, until=b"Top 5 keys per query")
    assert (code, err) == (0, b"")
    assert lines[-3].startswith(b"query") and lines[-1].split()[:2] == [b"0", b"hello"]
    lines, code, err = _first_lines(args, 1, 3072)
    assert (code, err) == (0, b"") and lines[0].startswith(b"multi-head attention")


def test_heads_stops_at_a_closed_pipe() -> None:
    args = ["heads", "--file", "samples/toy-gpt2/probe.txt", "--allow-special", "--model",
            "samples/toy-gpt2"]
    lines, code, err = _first_lines(args, 1, 3072)
    assert (code, err) == (0, b"") and lines[0].startswith(b"All 3 layers")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.llama_fixtures import save_family

    folder = tmp_path_factory.mktemp("pipes") / "llama"
    save_family(folder, "llama", seed=3)
    return folder


def test_tokens_of_a_checkpoint_stop_at_a_closed_pipe(llama: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("The cat sat on the mat, 猫吃鱼. " * 100_000, encoding="utf-8")
    lines, code, err = _first_lines(["tokens", "--model", str(llama), "--file", str(big)], 4,
                                    1024)
    assert (code, err) == (0, b"")
    assert lines[0].startswith(b"tokens (llama/tokenizer.json)")
    assert lines[3].split()[:3] == [b"0", b"1", b"<|begin|>"]
