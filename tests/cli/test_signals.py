"""Ctrl-C, SIGTERM and SIGHUP at named moments: exit 130, 143 or 129 with one line, and only
whole --save/--save-json files, never a temporary one.

Deterministic: attncli signals itself at the phase that ATTNCLI_SELF_SIGNAL names (its start,
the start of a module's import, the input read, the middle of a save, between two saves), so no
test depends on when a signal lands or on the machine's load.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redteam.test_redteam import ATTNCLI, limit_memory

TIMEOUT_S = 600  # a hang guard only
LINES = {"INT": (130, b"attncli: error: interrupted\n"),
         "TERM": (143, b"attncli: error: terminated\n"),
         "HUP": (129, b"attncli: error: hung up\n")}
SAVE = ["run", "Your journey starts with one step", "--save-json", "o.json", "--save", "o.html"]


def default_signals() -> None:
    """Give the child Python's defaults for the signals under test: a test run started as a
    background job (or under nohup, or by a CI runner) has SIGINT ignored, which the child
    would inherit, and attncli rightly keeps an ignored signal ignored."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _run(cwd: Path, phase: str, args: list[str] = SAVE,
         ignore: signal.Signals | None = None) -> subprocess.CompletedProcess[bytes]:
    def child() -> None:
        limit_memory()
        default_signals()
        if ignore is not None:
            signal.signal(ignore, signal.SIG_IGN)  # as nohup, or a shell's background job

    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "ATTNCLI_SELF_SIGNAL": phase}
    return subprocess.run([str(ATTNCLI), *args], cwd=cwd, env=env, capture_output=True,
                          timeout=TIMEOUT_S, preexec_fn=child, check=False)


# (phase:signal, the files left whole)
CASES = [
    ("start:INT", set()),
    ("start:TERM", set()),
    ("import:torch:INT", set()),
    ("import:numpy:TERM", set()),
    ("import:torch._C:INT", set()),
    ("input:TERM", set()),
    ("save:INT", set()),  # in the middle of writing o.json's temporary file
    ("save:TERM", set()),
    ("save:HUP", set()),
    ("saved:INT", {"o.json"}),  # o.json whole, o.html not begun
    ("saved:TERM", {"o.json"}),
]


@pytest.mark.parametrize(("phase", "whole"), CASES, ids=[c[0] for c in CASES])
def test_a_signal_at_a_phase(tmp_path: Path, phase: str, whole: set[str]) -> None:
    proc = _run(tmp_path, phase)
    code, line = LINES[phase.rsplit(":", 1)[1]]
    assert (proc.returncode, proc.stderr) == (code, line), proc.stderr
    assert proc.stdout == b""
    assert set(os.listdir(tmp_path)) == whole  # no .attncli-*.tmp, no half file
    if "o.json" in whole:
        assert json.loads((tmp_path / "o.json").read_text())["variant"] == "causal"


def test_a_save_of_a_big_json_interrupted_half_way(tmp_path: Path) -> None:
    """Many pieces: the signal of the first piece ends the write, the old file stays."""
    (tmp_path / "long.txt").write_text(" ".join(f"word{i % 500}" for i in range(3000)))
    (tmp_path / "o.json").write_text("old")
    proc = _run(tmp_path, "save:TERM", ["run", "--file", "long.txt", "--save-json", "o.json"])
    assert (proc.returncode, proc.stderr) == LINES["TERM"], proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["long.txt", "o.json"]
    assert (tmp_path / "o.json").read_text() == "old"


def test_without_a_signal_the_saves_are_whole(tmp_path: Path) -> None:
    """The hook named for a phase that never comes: a normal run (the cases above can fail)."""
    proc = _run(tmp_path, "nowhere:INT")
    assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr
    assert set(os.listdir(tmp_path)) == {"o.json", "o.html"}
    assert (tmp_path / "o.html").read_text().rstrip().endswith("</html>")


@pytest.mark.parametrize("args", [["tokens", "x"], ["--version"], ["models"]])
def test_commands_without_torch_too(tmp_path: Path, args: list[str]) -> None:
    proc = _run(tmp_path, "start:INT", args)
    assert (proc.returncode, proc.stderr) == LINES["INT"], proc.stderr


def test_a_signal_the_parent_ignores_stays_ignored(tmp_path: Path) -> None:
    """nohup, or `attncli ... &` in a script: SIGINT was ignored when attncli started."""
    proc = _run(tmp_path, "input:INT", ignore=signal.SIGINT)
    assert (proc.returncode, proc.stderr) == (0, b""), proc.stderr
    assert set(os.listdir(tmp_path)) == {"o.json", "o.html"}


HELD_IMPORT = """if True:
    import sys
    from attncli.cli import streams
    streams.catch_interrupts()  # ATTNCLI_SELF_SIGNAL=import:numpy:INT: Ctrl-C as numpy starts
    try:
        import torch
    except KeyboardInterrupt:
        import numpy
        print(streams.was_interrupted(), numpy.ndarray.__name__,
              "torch.nn.functional" in sys.modules, "numpy.linalg" in sys.modules)
"""


def test_ctrl_c_inside_the_torch_import_waits_for_its_end() -> None:
    """torch's C++ start-up imports numpy: a KeyboardInterrupt raised there could abort the
    process or leave torch without numpy. Held, it comes once both have loaded whole."""
    env = {**os.environ, "ATTNCLI_SELF_SIGNAL": "import:numpy:INT"}
    proc = subprocess.run([sys.executable, "-c", HELD_IMPORT], capture_output=True, text=True,
                          env=env, timeout=TIMEOUT_S, preexec_fn=default_signals, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "ndarray", "True", "True"], proc.stderr


EARLY = """if True:
    import os, signal, sys
    module = sys.argv[1]

    class SignalAt:  # Ctrl-C as the named module starts to import, the first time
        def find_spec(self, name, path=None, target=None):
            if name == module:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, SignalAt())
    sys.argv[1:] = ["tokens", "x"]
    from attncli.cli import main  # what the console script runs
    main()
"""


@pytest.mark.parametrize("module", ["typing", "attncli.version", "attncli.cli.streams", "typer",
                                    "rich", "attncli.cli.main", "attncli.core.tokens"])
def test_ctrl_c_while_modules_import_at_start_up_is_one_line(module: str) -> None:
    """From the console script's first import on: a signal while any module loads, attncli's
    own before its handlers are in place included, exits 130 with one line."""
    proc = subprocess.run([sys.executable, "-c", EARLY, module], capture_output=True,
                          env={**os.environ, "NO_COLOR": "1"}, timeout=TIMEOUT_S,
                          preexec_fn=default_signals, check=False)
    assert (proc.returncode, proc.stderr) == LINES["INT"], proc.stderr
    assert proc.stdout == b""


def test_a_ctrl_c_in_a_finalizer_prints_no_traceback() -> None:
    """A Ctrl-C that lands while a weakref finalizer runs (at the end of `cost`, say) is
    remembered; Python would print it as "Exception ignored in: <finalize ...> Traceback"."""
    code = ("import os, signal, weakref\n"
            "from attncli.cli import streams\n"
            "streams.catch_interrupts()\n"
            "class Box: pass\n"
            "box = Box()\n"
            "weakref.finalize(box, os.kill, os.getpid(), signal.SIGINT)\n"
            "del box\n"
            "class Loud:\n"
            "    def __del__(self): raise ValueError('still printed')\n"
            "Loud()\n"
            "print(streams.was_interrupted())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=TIMEOUT_S,
                          preexec_fn=default_signals, check=False)
    assert proc.stdout == b"True\n"
    assert b"KeyboardInterrupt" not in proc.stderr and b"finalize" not in proc.stderr
    assert b"ValueError: still printed" in proc.stderr  # other unraisable errors stay loud
