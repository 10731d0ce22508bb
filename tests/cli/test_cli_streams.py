"""Every command on a stdout that fails: closed (`>&-`) and full (`>/dev/full`) give exit 1 and
one line, `attncli: error: write error: ...`; a closed pipe (`| true`, its reader gone before
the first write) ends quietly with exit 0. Never "Exception ignored", never a traceback.

The closed pipe is made deterministic: its read end is closed before attncli starts, so every
write fails, whenever it comes.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import full_device
from tests.redteam.test_redteam import ATTNCLI, TOY, limit_memory, memory_headroom

TIMEOUT_S = 600  # a hang guard only: nothing here depends on how fast the machine is
COMMANDS = [
    ("tokens", "x"),
    ("tokens", "x", "--json"),
    ("run", "x"),
    ("run", "x", "--json"),
    ("run", "x", "--save-json", "/dev/stdout"),
    ("explain", "x"),
    ("heads", "The cat sat on the mat", "--model", str(TOY)),
    ("compare", "x"),
    ("show", "weights.json"),
    ("show", "weights.json", "--json"),
    ("models",),
    ("models", "--json"),
    ("demo", "--no-pause"),
    ("cost", "--max-tokens", "256"),
    ("flash", "x"),
    ("permute", "猫吃鱼", "鱼吃猫"),
    ("kvcache", "x"),
    ("--help",),
    ("run", "--help"),
    ("--version",),
]
MODES = {"closed": ("write error: Bad file descriptor", 1),
         "full": ("write error: No space left on device", 1),
         "closed pipe": (None, 0)}


def _run(cwd: Path, args: tuple[str, ...], mode: str) -> subprocess.CompletedProcess[bytes]:
    """attncli args with stdout closed, on /dev/full, or on a pipe nobody reads."""
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "HF_HUB_CACHE": str(cwd / "hub")}
    command = [str(ATTNCLI), *args]
    if mode == "closed":  # `>&-`: the shell closes descriptor 1 before attncli starts
        command = ["bash", "-c", 'exec >&- && exec "$@"', "bash", *command]
        return subprocess.run(command, cwd=cwd, env=env, stderr=subprocess.PIPE,
                              timeout=TIMEOUT_S, preexec_fn=limit_memory, check=False)
    if mode == "full":
        with open(full_device(), "r+b") as full:  # never created: see full_device
            return subprocess.run(command, cwd=cwd, env=env, stdout=full, stderr=subprocess.PIPE,
                                  timeout=TIMEOUT_S, preexec_fn=limit_memory, check=False)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone: every write fails with EPIPE
    try:
        return subprocess.run(command, cwd=cwd, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=TIMEOUT_S,
                              preexec_fn=limit_memory, check=False)
    finally:
        os.close(write_end)


@pytest.fixture(scope="module")
def streams_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working directory of every case: a weights file for `show`, an empty model cache."""
    cwd = tmp_path_factory.mktemp("streams")
    (cwd / "weights.json").write_text(json.dumps([[0.5, 0.5], [0.1, 0.9]]))
    (cwd / "hub").mkdir()
    return cwd


@pytest.fixture(scope="module")
def outcomes(streams_dir: Path) -> dict[tuple[Any, ...], Any]:
    """Every command in every mode, two at a time (each mostly loads torch)."""
    cwd = streams_dir
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {(args, mode): pool.submit(_run, cwd, args, mode)
                   for args in COMMANDS for mode in MODES}
    return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c[:3]) for c in COMMANDS])
def test_a_failing_stdout(outcomes: dict[tuple[Any, ...], Any], args: tuple[str, ...],
                          mode: str) -> None:
    proc = outcomes[(args, mode)]
    line, code = MODES[mode]
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == code, err
    assert err == ("" if line is None else f"attncli: error: {line}\n"), err


def test_no_case_leaves_a_file(outcomes: dict[tuple[Any, ...], Any], streams_dir: Path) -> None:
    """Nothing half-written: after every command in every mode, the directory is as it was."""
    assert len(outcomes) == len(COMMANDS) * len(MODES)
    assert sorted(os.listdir(streams_dir)) == ["hub", "weights.json"]
    assert os.listdir(streams_dir / "hub") == []


def test_a_reader_that_stops_after_one_byte(tmp_path: Path) -> None:
    """`| head -c 1` on output far larger than a pipe holds: exit 0, nothing on stderr."""
    for args in (["demo", "--no-pause"], ["tokens", "word " * 20_000],
                 ["run", "x", "--save-json", "/dev/stdout"]):
        command = 'set -o pipefail; "$@" | head -c 1 >/dev/null'
        proc = subprocess.run(["bash", "-c", command, "bash", str(ATTNCLI), *args], cwd=tmp_path,
                              env={**os.environ, "NO_COLOR": "1"}, capture_output=True,
                              timeout=TIMEOUT_S, preexec_fn=limit_memory, check=False)
        assert (proc.returncode, proc.stderr) == (0, b""), (args, proc.stderr)


def test_a_save_to_a_full_device_is_a_write_error(tmp_path: Path, cli: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """--save-json /dev/full, a device whose writes fail: exit 1, one line naming it. In-process:
    the file is one attncli opens by name, not one of its standard streams."""
    monkeypatch.chdir(tmp_path)
    with memory_headroom():
        got = cli("run", "x", "--save-json", str(full_device()))
    assert got.code == 1, got.err
    assert got.err == ("attncli: error: write error: --save-json '/dev/full': No space "
                       "left on device\n")
