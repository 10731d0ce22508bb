"""`attncli generate` as it writes: the answer streamed to stderr token by token (stdout stays
clean), and Ctrl-C mid-generation still shows what was written; before the first token, 130."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from attncli.cli.streams import SELF_SIGNAL
from attncli.errors import escaped
from tests.cli.test_signals import default_signals
from tests.conftest import ROOT
from tests.llama_fixtures import save_family

MANY = 1500  # more answer tokens than the run can write before its Ctrl-C
SEEN = 12  # streamed characters read before Ctrl-C is sent


def _limit(megabytes: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (megabytes * 2**20, megabytes * 2**20))
        default_signals()  # a suite run in the background has SIGINT ignored: not the child
    return apply


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("generate-interrupt") / "llama"
    # seed 22: its greedy answer to "the cat" runs past MANY tokens (seed 21 wrote the stop id
    # at 1,405, a few seconds in, so a Ctrl-C late on a loaded machine came after the answer)
    save_family(folder, "llama", seed=22, max_position_embeddings=4096)
    return folder


def _spelt(answer: list[dict[str, str]]) -> str:
    """The answer as it is streamed: its tokens' bytes read as UTF-8 (their labels without),
    control characters written out."""
    if any("bytes" not in t for t in answer):
        return "".join(t["text"] for t in answer)
    spelt = b"".join(bytes.fromhex(t["bytes"]) for t in answer)
    return escaped(spelt.decode("utf-8", "backslashreplace"), lines=True)


def _interrupted(tiny: Path, *extra: str, signum: int = signal.SIGINT,
                 cwd: Path = ROOT) -> tuple[int, str, str, bool]:
    """Start a long generation with --stream, read SEEN streamed characters from stderr, send
    signum: the exit code, stdout, stderr, and whether the run was still going when the
    characters had arrived."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "attncli", "generate", "the cat", "--model", str(tiny), "--raw",
         "--max-new-tokens", str(MANY), "--stream", *extra], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env, cwd=cwd, preexec_fn=_limit(6000))
    assert proc.stderr is not None
    streamed = b""
    while len(streamed.decode(errors="replace")) < SEEN:
        chunk = os.read(proc.stderr.fileno(), 1)
        if not chunk:
            break
        streamed += chunk
    running = proc.poll() is None
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out.decode(), (streamed + err).decode(), running


def test_ctrl_c_mid_generation_keeps_the_answer_in_the_json(tiny: Path) -> None:
    code, out, err, running = _interrupted(tiny, "--json")
    assert running, "the answer was streamed while the model was still writing"
    assert code == 0, err
    doc = json.loads(out)  # stdout holds the JSON only: the stream went to stderr
    assert doc["config"]["stopped"] == "interrupted"
    answer = [t["text"] for t in doc["answer"]]
    assert 0 < len(answer) < MANY and len(doc["steps"]) == len(answer)
    streamed = err.removesuffix("\n")
    assert streamed == _spelt(doc["answer"])  # every token shown was streamed, and only those
    assert "Traceback" not in err


def test_ctrl_c_as_a_token_is_streamed_lands_after_it_is_kept_and_shown(tiny: Path) -> None:
    # The signal arrives as the first token's stream begins (the self-signal hook): keeping the
    # token and streaming it are one step, so the run stops after it with the token in both
    # (before, the token was kept, the stream cut, and the JSON held a token never shown).
    run = subprocess.run([sys.executable, "-m", "attncli", "generate", "the cat", "--model",
                          str(tiny), "--raw", "--max-new-tokens", "8", "--stream", "--json"],
                         capture_output=True, cwd=ROOT, timeout=300, check=False,
                         env={**os.environ, "OMP_NUM_THREADS": "1", SELF_SIGNAL: "token:INT"},
                         preexec_fn=_limit(6000))
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["config"]["stopped"] == "interrupted" and len(doc["answer"]) == 1
    assert run.stderr.decode().removesuffix("\n") == _spelt(doc["answer"])


def _signalled_in_views(tiny: Path, signum: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    """A generation of 4 tokens whose process signals itself as its views begin."""
    return subprocess.run([sys.executable, "-m", "attncli", "generate", "the cat", "--model",
                           str(tiny), "--raw", "--max-new-tokens", "4", *extra],
                          capture_output=True, cwd=ROOT, timeout=300, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "100",
                               SELF_SIGNAL: f"views:{signum}"}, preexec_fn=_limit(6000))


def test_ctrl_c_while_the_views_are_made_keeps_the_answer_and_its_raw_weights(tiny: Path) -> None:
    # Before, a Ctrl-C after the answer (the value norms, the occlusion passes) ended the run
    # with 130 and lost the answer; now it is kept, with the raw weights and a note.
    run = _signalled_in_views(tiny, "INT", "--view", "occlusion", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["config"]["stopped"] == "max_new_tokens" and len(doc["answer"]) == 4
    assert doc["config"]["view"] == "raw" and "occlusion" not in doc
    assert run.stderr.decode() == ("attncli: interrupted while the views were made: showing "
                                   "the answer's raw attention weights\n")
    shown = _signalled_in_views(tiny, "INT")  # the default view, as a table
    assert shown.returncode == 0 and "raw attention weights" in shown.stdout.decode()
    assert "Traceback" not in shown.stderr.decode()


def test_sigterm_while_the_views_are_made_ends_with_143(tiny: Path) -> None:
    run = _signalled_in_views(tiny, "TERM", "--json")
    assert run.returncode == 143 and run.stdout == b""
    assert run.stderr.decode().endswith("attncli: error: terminated\n")


def test_a_second_ctrl_c_in_the_views_ends_the_run(cli, tiny: Path,  # noqa: ANN001
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The first Ctrl-C stopped the answer; one more while its views are made means "stop".
    import attncli.models.generate.run as run

    decode = run.decode

    def two_tokens(*args: object, **kwargs: object):  # noqa: ANN202
        for n, step in enumerate(decode(*args, **kwargs)):  # type: ignore[arg-type]
            yield step
            if n == 1:
                raise KeyboardInterrupt

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "decode", two_tokens)
    monkeypatch.setattr(run, "occlusion", interrupted)
    result = cli("generate", "the cat", "--model", str(tiny), "--raw", "--view", "occlusion",
                 "--json")
    assert result.code == 130 and result.out == ""
    monkeypatch.setattr(run, "decode", decode)  # one Ctrl-C, in the views: the answer is kept
    from attncli.records.asking import GenerationRequest, Sampling

    kept = run.generate_model(GenerationRequest(model=str(tiny), prompt="the cat", raw=True,
                                                view="occlusion",
                                                sampling=Sampling(max_new_tokens=3)))
    assert kept.view == "raw" and kept.occlusion is None and len(kept.answer) == 3


def test_ctrl_c_mid_generation_shows_the_view_of_what_was_written(tiny: Path) -> None:
    code, out, err, running = _interrupted(tiny)
    assert running and code == 0, err
    assert "stopped: interrupted" in out and "answer: " in out
    # the default view of what was written: occlusion, its passes few on a short prompt
    assert "top 3 prompt tokens (drop)" in out and "occlusion: " in out and "Traceback" not in err


def test_ctrl_c_mid_generation_saves_what_was_written(tiny: Path, tmp_path: Path) -> None:
    # The Ctrl-C that stopped the model is spent: --save still writes the view (before, the
    # remembered signal ended the save with 130 and nothing written).
    saved = tmp_path / "answer.txt"
    code, out, err, running = _interrupted(tiny, "--save", str(saved), cwd=tmp_path)
    assert running and code == 0, err
    text = saved.read_text()
    assert "stopped: interrupted" in text and "answer: " in text and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == [saved.name]  # no temporary file left


# Runs attncli with SIGINT sent from inside torch's reading of a safetensors tensor (its C code
# calls UntypedStorage.__getitem__ back, twice a read), at the NTH callback after the second
# answer token.
_IN_A_READ = """
import os, signal, sys
import torch.storage
import attncli.activity as activity
import attncli.cli

armed = []
counted, getitem = activity.counted, torch.storage.UntypedStorage.__getitem__

def counting(what, done, total):
    armed.extend([False] * (int(os.environ["NTH"]) - 1) + [True]
                 if (what, done) == ("answer tokens", 2) else [])
    counted(what, done, total)

def read(self, *args, **kwargs):
    if armed and armed.pop(0):
        os.kill(os.getpid(), signal.SIGINT)
    return getitem(self, *args, **kwargs)

activity.counted, torch.storage.UntypedStorage.__getitem__ = counting, read
sys.argv = ["attncli", *sys.argv[1:]]
attncli.cli.main()
"""


@pytest.mark.parametrize("nth", [1, 2])
def test_ctrl_c_inside_a_tensor_read_stops_the_answer_and_keeps_it(tiny: Path, nth: int) -> None:
    # Before, torch turned a KeyboardInterrupt raised inside its second callback into a
    # ValueError (exit 130, the answer lost); the read now holds it. The occlusion passes read
    # tensors too: there the Ctrl-C the answer spent must not be raised again (130 before).
    run = subprocess.run([sys.executable, "-c", _IN_A_READ, "generate", "the cat", "--model",
                          str(tiny), "--raw", "--max-new-tokens", "40", "--json"],
                         capture_output=True, cwd=ROOT, timeout=300, check=False,
                         env={**os.environ, "OMP_NUM_THREADS": "1", "NTH": str(nth)},
                         preexec_fn=_limit(6000))
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    doc = json.loads(run.stdout)
    assert doc["config"]["stopped"] == "interrupted" and len(doc["answer"]) in (2, 3)
    assert doc["config"]["view"] == "occlusion" and doc["occlusion"]


def test_sigterm_mid_generation_ends_with_143_and_writes_nothing(tiny: Path) -> None:
    # Ctrl-C is the user's "stop here"; SIGTERM (a supervisor, `timeout`) ends the run.
    code, out, err, running = _interrupted(tiny, "--json", signum=signal.SIGTERM)
    assert running and code == 143 and out == "", err
    assert err.rstrip("\n").endswith("attncli: error: terminated") and "Traceback" not in err


def test_ctrl_c_before_the_first_token_ends_with_130(cli, tiny: Path,  # noqa: ANN001
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import attncli.models.generate.run as run

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "decode", interrupted)
    result = cli("generate", "the cat", "--model", str(tiny), "--json")
    assert result.code == 130 and result.out == ""  # nothing to show: no partial JSON


def test_no_stream_when_stderr_is_not_a_terminal(tiny: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "attncli", "generate", "the cat", "--model",
                          str(tiny), "--max-new-tokens", "4", "--json"], capture_output=True,
                         cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300,
                         check=False, preexec_fn=_limit(6000))
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    assert len(json.loads(run.stdout)["answer"]) <= 4


def test_a_terminal_on_stderr_gets_the_stream_by_default(tiny: Path) -> None:
    import pty

    main, side = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "attncli", "generate", "the cat", "--model",
                             str(tiny), "--raw", "--max-new-tokens", "5", "--json"],
                            stdout=subprocess.PIPE, stderr=side, cwd=ROOT,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, preexec_fn=_limit(6000))
    os.close(side)
    out, _ = proc.communicate(timeout=300)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal's other side is closed: all is read
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    assert proc.returncode == 0
    answer = "".join(t["text"] for t in json.loads(out)["answer"])
    # The status line (importing, opening, reading the prompt) goes before the first token: after
    # the cursor's return ("\x1b[?25h") and the erasing of the line, the answer alone is written.
    tail = shown.decode().replace("\r\n", "\n").split("\x1b[?25h")[-1]
    assert re.sub(r"^(\r|\x1b\[[0-9;]*[A-K])*", "", tail) == answer + "\n"
