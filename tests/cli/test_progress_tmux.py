"""Never wait in silence, in a real terminal (tmux): each wait of a second or more in heads,
browse, scan, models and generate shows the status line, naming its step, well within a second
of the command starting and before anything else is written; piped, stderr stays clean.

Every byte the command writes to the terminal is logged (tmux pipe-pane), so the first frame of
the status line is read as drawn, with the time the command's own clock gave it: a loaded machine
that is slow to show the pane cannot move that number. A loaded machine does delay the frame
itself (the status thread waits for a core, and for the interpreter while torch's libraries
load): the bound of a second is stretched by how much slower CPU work runs than on an idle core
while the command runs, measured beside it (on an idle machine, one second).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from attncli.cli.progress import DELAY_S
from tests.conftest import ROOT
from tests.llama_fixtures import save_family

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (make test-deps)")
TOY = str(ROOT / "samples" / "toy-gpt2")
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
# The status line as drawn: a spinner, what it is doing, the seconds since the command began.
STATUS = re.compile(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] (?P<what>\S.*?)\s+(?:\S.*?\s+)?(?P<s>\d+(?:\.\d)?) s")
WITHIN_S = 1.0
SAMPLE_S = 0.02  # CPU time of one sample of the machine's slowness


class Slowness:
    """While the block runs, how many times longer than their CPU time small pieces of CPU work
    take (1 on an idle core), sampled a fifth of the time so as to add little load."""

    def __init__(self) -> None:
        self.ratios: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.is_set():
            wall, cpu = time.perf_counter(), time.thread_time()
            while time.thread_time() - cpu < SAMPLE_S:
                pass
            self.ratios.append((time.perf_counter() - wall) / SAMPLE_S)
            self._done.wait(4 * SAMPLE_S)

    def __enter__(self) -> Slowness:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def bound(self) -> float:
        """WITHIN_S on an idle machine; past the delay, stretched by the median slowness."""
        factor = max(1.0, statistics.median(self.ratios)) if self.ratios else 1.0
        return DELAY_S + (WITHIN_S - DELAY_S) * factor


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, "-f", os.devnull, *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


SLOWNESS: list[Slowness] = []  # the running test's


@contextmanager
def terminal(command: str, tmp_path: Path) -> Iterator[tuple[str, Path, float]]:
    """A tmux server of the test's own running command at 100 × 30 once every byte of the pane
    is logged; yields its name, the log and when the command was let go (the test's clock)."""
    name, log, go = f"wait-{uuid.uuid4().hex[:8]}", tmp_path / "pane.log", tmp_path / "go"
    script = (f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.05; done; "
              f"cd {shlex.quote(str(ROOT))} && {command}; echo EXIT=$?; sleep 600")
    _tmux(name, "new-session", "-d", "-s", name, "-x", "100", "-y", "30", script)
    try:
        _tmux(name, "pipe-pane", "-o", "-t", name, f"cat >> {shlex.quote(str(log))}")
        with Slowness() as slowness:
            SLOWNESS[:] = [slowness]
            go.touch()
            yield name, log, time.monotonic()
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)


def _until(name: str, log: Path, marker: str, seconds: float = 600) -> str:
    """The pane's logged text (escapes removed) once marker is in it."""
    end = time.monotonic() + seconds  # a hang guard only
    text = ""
    while time.monotonic() < end:
        text = ANSI.sub("", log.read_bytes().decode("utf-8", "replace")) if log.exists() else ""
        if marker in text:
            return text
        time.sleep(0.1)
    pane = _tmux(name, "capture-pane", "-p", "-t", name)
    raise AssertionError(f"{marker!r} never showed; the pane:\n{pane}")


def _python(args: str, env: str = "") -> str:
    return (f"env -u NO_COLOR TERM=screen-256color {env} {shlex.quote(sys.executable)} -m attncli "
            f"{args}")


def _check_waits(text: str, output: str, took: float) -> list[str]:
    """The steps the status line named, having checked it came first and within a second."""
    if took < WITHIN_S:
        pytest.skip(f"the whole command took {took:.2f} s here: no wait of a second to show")
    first = STATUS.search(text)
    assert first is not None, f"no status line before the output:\n{text[:3000]}"
    bound = SLOWNESS[0].bound() if SLOWNESS else WITHIN_S
    assert float(first.group("s")) <= bound, (first.group(0), bound)  # the command's own clock
    assert output in text[first.end():], "the output came before the status line"
    return [m.group("what").strip() for m in STATUS.finditer(text[:text.index(output)])]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("waits") / "llama"
    save_family(folder, "llama", seed=21)
    return str(folder)


def test_heads_names_its_steps_while_it_works(tmp_path: Path) -> None:
    with terminal(_python(f"heads 'The cat sat on the mat. The cat sat on the mat.' --model "
                          f"{TOY}"), tmp_path) as (name, log, start):
        text = _until(name, log, "EXIT=")
        took = time.monotonic() - start
    assert "EXIT=0" in text
    steps = _check_waits(text, "All 3 layers", took)
    assert any(s.startswith(("importing torch", "opening ", "tokenizing", "running the layers"))
               for s in steps), steps


def test_generate_shows_the_wait_then_the_answer_where_it_was(tmp_path: Path,
                                                              llama: str) -> None:
    with terminal(_python(f"generate 'the cat' --model {llama} --max-new-tokens 4 --raw"),
                  tmp_path) as (name, log, start):
        text = _until(name, log, "EXIT=")
        took = time.monotonic() - start
    assert "EXIT=0" in text
    _check_waits(text, "answer:", took)


def test_models_says_which_store_it_lists(tmp_path: Path) -> None:
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    os.symlink(TOY, fetched / "toy-gpt2")
    env = (f"ATTNCLI_MODEL_CACHE={fetched} HF_HUB_CACHE={tmp_path / 'hub'} "
           f"OLLAMA_MODELS={tmp_path / 'ollama'} LMSTUDIO_MODELS={tmp_path / 'lms'}")
    with terminal(_python("models", env), tmp_path) as (name, log, start):
        text = _until(name, log, "EXIT=")
        took = time.monotonic() - start
    assert "EXIT=0" in text
    _check_waits(text, "1 model attncli can read", took)


@pytest.mark.process  # scan's worker pool
def test_scan_shows_its_start_before_its_bar(tmp_path: Path) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("The cat sat on the mat.\nA b c d a b c d\n", encoding="utf-8")
    with terminal(_python(f"scan {corpus} --model {TOY} --out {tmp_path / 'out'} --workers 1"),
                  tmp_path) as (name, log, start):
        text = _until(name, log, "EXIT=")
        took = time.monotonic() - start
    assert "EXIT=0" in text
    _check_waits(text, "documents scored", took)


def test_browse_shows_the_wait_before_the_app_takes_the_screen(tmp_path: Path) -> None:
    with terminal(_python(f"browse 'The cat sat on the mat' --model {TOY}"), tmp_path) as (
            name, log, start):
        raw = b""
        end = time.monotonic() + 600  # a hang guard only
        while b"\x1b[?1049h" not in raw and time.monotonic() < end:  # the app's screen
            time.sleep(0.1)
            raw = log.read_bytes() if log.exists() else b""
        took = time.monotonic() - start
        before = ANSI.sub("", raw[:raw.index(b"\x1b[?1049h")].decode("utf-8", "replace"))
        _tmux(name, "send-keys", "-t", name, "q")
        assert "EXIT=0" in _until(name, log, "EXIT=")
    _check_waits(before + "APP", "APP", took)


def test_quiet_and_a_pipe_show_nothing(tmp_path: Path) -> None:
    with terminal(_python(f"heads 'The cat sat on the mat' --model {TOY} --quiet"),
                  tmp_path) as (name, log, _):
        text = _until(name, log, "EXIT=")
    assert "EXIT=0" in text and STATUS.search(text) is None
    piped = subprocess.run([sys.executable, "-m", "attncli", "heads", "The cat sat on the mat",
                            "--model", TOY], capture_output=True, timeout=600, check=False)
    assert piped.returncode == 0 and piped.stderr == b""
