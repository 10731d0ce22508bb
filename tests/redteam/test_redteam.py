"""The red-team pass of issue 9, kept: hostile invocations of the installed attncli, by class.

Each case is the exact shell command, run in a fresh working directory under a 3 GiB
address-space limit. It must exit with the code given, write at most one line on stderr (the line
given), never a traceback, and leave no file but the ones it was asked to write.

A case whose subject is the process (its streams, its terminal, /dev/stdout, a shell redirection,
pipe or other setup step) runs as a real subprocess of bash, with a timeout. Every other case is
one plain `attncli ARGS` (after at most an `ln -s TARGET NAME;`, made with os.symlink) whose
outcome (exit code, stderr line, files written) is decided inside attncli.cli.main.execute: it
runs in-process through the `cli` fixture, in its own fresh directory, with this process's soft
RLIMIT_AS set to 3 GiB past what it holds for the call (so attncli's estimates see at least the
address space a fresh process would have). Where such a case's words hold a `$` expansion, bash
itself expands them (printf, no attncli, no torch) into the very argv the process would get.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.gpt2_fixtures import tiny_tensors

ATTNCLI = Path(sys.executable).parent / "attncli"
TOY = ROOT / "samples" / "toy-gpt2"
MEMORY_LIMIT = 3 * 2**30
TIMEOUT_S = 600  # a hang guard only: no case depends on the machine's speed


def limit_memory() -> None:
    """In the child: a regression fails with MemoryError here instead of exhausting the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _address_space() -> int:
    """Bytes of address space this process holds now."""
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))


@contextmanager
def memory_headroom(headroom: int = MEMORY_LIMIT) -> Iterator[None]:
    """In-process: this process's soft RLIMIT_AS set to headroom bytes past what it holds now,
    for the block, then restored, so that an in-process run of attncli sees an address-space
    limit as a child under limit_memory does (and a regression fails instead of exhausting the
    machine)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + headroom
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def shell(command: str, cwd: Path, env: dict[str, str] | None = None,
          timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[bytes]:
    """Run command with bash in cwd, `attncli` being the installed console script."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", **(env or {})}
    script = f"attncli() {{ {shlex.quote(str(ATTNCLI))} \"$@\"; }}\n{command}"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=full_env, capture_output=True,
                          timeout=timeout, preexec_fn=limit_memory)


def save_tensors(path: Path, tensors: dict) -> None:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path))


def toy_with_config(folder: Path, **changes: object) -> None:
    """The toy checkpoint (linked) with its config.json changed."""
    folder.mkdir()
    config = json.loads((TOY / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    (folder / "model.safetensors").symlink_to(TOY / "model.safetensors")


def make_fixtures(cwd: Path) -> None:
    """The hostile inputs the cases read, written before the snapshot of the directory."""
    (cwd / "wide.json").write_text(json.dumps([[1.0] * 100_000]))
    (cwd / "deep.json").write_text("[" * 3000 + "]" * 3000)
    (cwd / "bigint.json").write_text("[[" + "9" * 500 + ", 1]]")
    (cwd / "hugeint.json").write_text("[[" + "9" * 5000 + ", 1]]")
    (cwd / "surrogate.json").write_text('{"tokens": ["a\\ud800", "b"], "vectors": [[1], [2]]}')
    escapes = ["\x1b]0;owned\x07", "red\x1b[31m", "two\nlines", "\x9b2J"]
    (cwd / "escapes.json").write_text(json.dumps({"tokens": escapes,
                                                  "vectors": [[1, 2], [3, 4], [5, 6], [7, 8]]}))
    (cwd / "long.txt").write_text(" a" * 10_000)
    toy_with_config(cwd / "layers", n_layer=10_000_000)
    toy_with_config(cwd / "strhead", n_head="4")
    far = tiny_tensors()
    far["h.100000000.ln_1.weight"] = far["h.0.ln_1.weight"].clone()
    save_tensors(cwd / "far" / "model.safetensors", far)
    nan = tiny_tensors()
    nan["h.0.attn.c_attn.weight"][0, 0] = math.nan
    save_tensors(cwd / "nan" / "model.safetensors", nan)
    odd = cwd / os.fsdecode(b"model-\xff")
    odd.mkdir()
    for name in ("config.json", "model.safetensors"):
        (odd / name).symlink_to(TOY / name)


# (class, command, exit code, text of the one stderr line or None for no line, files written)
CASES = [
    ("sizes", "attncli run x --emb-dim 100000", 2,
     "--emb-dim 100000 needs a 50,257 × 100,000 embedding table (20.1 GB)", ()),
    ("sizes", "attncli run x --d-out 1000000000", 2,
     "--d-out 1000000000 needs three 8 × 1,000,000,000 weight matrices", ()),
    ("sizes", "attncli run x --context-length 1000000000000", 2,
     "--context-length 1000000000000 needs a 1,000,000,000,000 × 8 positional", ()),
    ("sizes", "attncli run --inputs wide.json", 2, "--inputs 100,000-wide vectors needs", ()),
    ("sizes", "attncli run --file long.txt --impl naive", 2,
     "--impl naive on 10,000 tokens × 1 head(s) needs", ()),
    ("sizes", "attncli run --file /dev/zero", 2, "--file '/dev/zero' goes on past the 64 MiB", ()),
    ("sizes", "attncli run --inputs /dev/zero", 2, "goes on past the 64 MiB", ()),
    ("sizes", "attncli tokens - </dev/zero", 2, "standard input goes on past the 64 MiB", ()),
    ("sizes", "attncli run hi --model layers", 2, "claims n_layer=10,000,000, but", ()),
    ("sizes", "attncli run hi --model far --num-heads 2", 2,
     "names a tensor for layer 100,000,000", ()),
    ("streams", 'attncli run "x" <&-', 0, None, ()),
    ("streams", 'attncli tokens "x" <&-', 0, None, ()),
    ("streams", "attncli demo --no-pause <&-", 0, None, ()),
    ("streams", f"attncli heads 'hello world' --model {TOY} <&-", 0, None, ()),
    # A stdout closed (>&-) or full (>/dev/full) under run, tokens, --version and --save-json
    # /dev/stdout: tests/cli/test_cli_streams.py, every command in both modes, each stderr whole
    # and no file left behind. Here, `models` with this machine's own model cache:
    ("streams", "attncli models >&-", 1, "write error: Bad file descriptor", ()),
    ("streams", "PYTHONIOENCODING=latin-1 attncli tokens '猫 €'", 0, None, ()),
    ("streams", "PYTHONIOENCODING=ascii attncli run '猫 €' --variant simple", 0, None, ()),
    ("streams", "attncli run x --num-heads 0 2>&-", 2, None, ()),
    ("streams", "set -o pipefail; { sleep 0.3; attncli --version; } | true", 0, None, ()),
    ("streams", "set -o pipefail; { sleep 0.3; attncli tokens 'a b c'; } | true", 0, None, ()),
    ("streams", "set -o pipefail; { sleep 0.3; attncli run x --json; } | true", 0, None, ()),
    ("streams", "set -o pipefail; { sleep 0.3; attncli run x --save-json /dev/stdout; } | true",
     0, None, ()),
    ("hostile", "attncli run --inputs deep.json", 2, "nested more than 1,024 deep", ()),
    ("hostile", "attncli run --inputs bigint.json", 2, "a non-finite number (too large for a", ()),
    ("hostile", "attncli run --inputs hugeint.json", 2, "a non-finite number (too large for", ()),
    ("hostile", "attncli run --inputs surrogate.json --variant simple", 0, None, ()),
    ("hostile", "attncli run --inputs escapes.json --variant simple --draw heatmap", 0, None, ()),
    ("hostile", "attncli run --inputs escapes.json --save o.svg --save-json o.json", 0, None,
     ("o.svg", "o.json")),
    ("terminal", "COLUMNS=0 attncli run x --save o.txt", 0, None, ("o.txt",)),
    ("terminal", "COLUMNS=100000000 attncli demo --no-pause", 0, None, ()),
    ("terminal", "COLUMNS=-5 attncli tokens x", 0, None, ()),
    ("seeds", "attncli run x --seed 18446744073709551616", 2,
     "--seed 18446744073709551616 is out of range (use -9223372036854775808.."
     "18446744073709551615)", ()),
    ("seeds", "attncli run x --seed -9223372036854775809", 2, "is out of range", ()),
    ("seeds", "attncli run x --seed 18446744073709551615", 0, None, ()),
    ("small", f"attncli run x --save {'a' * 256}.txt", 2, "File name too long", ()),
    ("small", f"attncli run x --model {'a' * 300}", 2, "File name too long", ()),
    ("small", f"attncli run --file {'a' * 300}", 2, "File name too long", ()),
    ("small", f"attncli run x --save {'a' * 250}.txt", 0, None, (f"{'a' * 250}.txt",)),
    ("small", "attncli run x --model \"$(printf 'a\\nb\\033[31m')\"", 2,
     "no such file or directory: a\\nb\\x1b[31m", ()),
    ("small", "attncli run hello --model $'model-\\xff'", 0, None, ()),
    ("small", "attncli run '!#' --model nan --num-heads 2", 2,
     "tensor h.0.attn.c_attn.weight of the checkpoint holds NaN", ()),
    ("small", "attncli run hi --model strhead", 2,
     "config.json: n_head must be a positive integer (got '4')", ()),
    ("files", "attncli run x --save o.txt --save-json ./o.txt", 2, "name the same file", ()),
    ("files", "ln -s o.txt link.txt; attncli run x --save o.txt --save-json link.txt", 2,
     "name the same file", ("link.txt",)),
    ("files", "attncli run x --json --save-json /dev/stdout", 0, None, ()),
    ("files", "attncli run x --save-json /dev/null", 0, None, ()),
    ("files", "mknod dev c 1 3 && attncli run x --save-json dev --save ln.txt && test -c dev",
     0, None, ("dev", "ln.txt")),
    ("files", "attncli run x --save-json nowhere/o.json", 2, "does not exist", ()),
    ("files", "attncli run x --save-json /dev/attncli-new.json", 2,
     "--save-json '/dev/attncli-new.json' does not exist, and attncli creates no file under /dev",
     ()),
    ("files", "attncli run x --save /proc/attncli.txt", 2, "creates no file under /proc", ()),
    ("files", "ln -s /dev/attncli-new o.json; attncli run x --save-json o.json", 2,
     "creates no file under /dev", ("o.json",)),
    ("files", "mkfifo f; { cat f >/dev/null & }; attncli run x --save-json f; test -p f", 0,
     None, ("f",)),
]


SHELL_SYNTAX = set(";&|<>`")  # a redirection, pipe, second command or command substitution
PROCESS_CLASSES = ("streams", "terminal")  # the process's own descriptors, its environment
LINK_FIRST = re.compile(r"ln -s (\S+) (\S+); (attncli .*)")  # a symbolic link, then attncli


def in_process_case(kind: str, command: str) -> tuple[tuple[str, str] | None, list[str]] | None:
    """(the symbolic link `ln -s TARGET NAME;` makes first or None, the arguments) of a case that
    runs in-process, or None for one that needs a real process: one about the process's streams
    or terminal, one that names /dev/stdout (the process's own descriptor 1), or any command that
    is more than one plain attncli invocation, after such a link."""
    link = None
    if (first := LINK_FIRST.fullmatch(command)) is not None:
        link, command = (first[1], first[2]), first[3]
    if kind in PROCESS_CLASSES or "/dev/stdout" in command or SHELL_SYNTAX & set(command):
        return None
    words = shell_words(command) if "$" in command else shlex.split(command)
    return (link, words[1:]) if words[0] == "attncli" else None


def shell_words(command: str) -> list[str]:
    """The words bash makes of command (`$'..'` quoting, `$(..)` substitutions), decoded as Python
    decodes a process's argv (the file-system encoding, undecodable bytes as surrogates)."""
    words = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True,
                           timeout=TIMEOUT_S, check=True).stdout.split(b"\0")[:-1]
    return [os.fsdecode(word) for word in words]


def _attack(workdir: Path, command: str
            ) -> tuple[subprocess.CompletedProcess[bytes], set[str], Path]:
    """Run one case in its own fresh directory: the process, the names it added there, and the
    directory."""
    workdir.mkdir()
    make_fixtures(workdir)
    before = set(os.listdir(workdir))
    proc = shell(command, workdir)
    return proc, set(os.listdir(workdir)) - before, workdir


@pytest.fixture(scope="module")
def attacks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case that needs a real process, run three at a time: each one mostly waits for
    torch to load."""
    root = tmp_path_factory.mktemp("redteam")
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {case[1]: pool.submit(_attack, root / f"case{k}", case[1])
                   for k, case in enumerate(CASES) if in_process_case(case[0], case[1]) is None}
    return {command: future.result() for command, future in futures.items()}


def run_in(workdir: Path, cli: Any, monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    """attncli args in-process with workdir as the working directory, under memory_headroom."""
    monkeypatch.chdir(workdir)
    with memory_headroom():
        return cli(*args)


@pytest.mark.parametrize(("kind", "command", "code", "line", "written"), [
    # A case that needs a real process is marked so, as conftest marks a test that starts one.
    pytest.param(*case, id=f"{case[0]}-{i}",
                 marks=pytest.mark.process if in_process_case(case[0], case[1]) is None else ())
    for i, case in enumerate(CASES)])
def test_hostile_invocation(request: pytest.FixtureRequest, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch, cli: Any, kind: str,
                            command: str, code: int, line: str | None,
                            written: tuple[str, ...]) -> None:
    case = in_process_case(kind, command)
    if case is None:
        proc, added, _ = request.getfixturevalue("attacks")[command]
        returncode, stdout = proc.returncode, proc.stdout
        err = proc.stderr.decode("utf-8", "replace")
    else:
        workdir = tmp_path / "case"
        workdir.mkdir()
        make_fixtures(workdir)
        before = set(os.listdir(workdir))
        link, args = case
        if link is not None:
            os.symlink(link[0], workdir / link[1])
        got = run_in(workdir, cli, monkeypatch, *args)
        added = set(os.listdir(workdir)) - before
        returncode, stdout, err = got.code, got.out.encode("utf-8", "replace"), got.err
    assert returncode == code, err
    assert "Traceback" not in err
    if line is None:
        assert err == "", err
    else:
        assert err.count("\n") == 1 and err.startswith("attncli: error: "), err
        assert line in err, err
        assert "\x1b" not in err
    assert added == set(written)
    if code == 0 and "--json" in command and "|" not in command:
        for doc in stdout.splitlines():  # each JSON document is one line
            json.loads(doc, parse_constant=_strict)


def _strict(name: str) -> None:
    raise AssertionError(f"non-strict JSON: {name}")


def test_labels_never_reach_the_terminal_raw(tmp_path: Path, cli: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process: what is checked is the text attncli writes, whatever stdout is."""
    make_fixtures(tmp_path)
    for view in ("table", "heatmap"):
        got = run_in(tmp_path, cli, monkeypatch, "run", "--inputs", "escapes.json", "--variant",
                     "simple", "--view", view)
        assert got.code == 0
        stdout = got.out.encode("utf-8", "replace")
        assert b"\x1b" not in stdout and b"\x07" not in stdout
        assert b"\xc2\x9b" not in stdout  # C1 CSI
        assert view == "heatmap" or "\\x1b]0;owned\\x07" in stdout.decode()
    doc = run_in(tmp_path, cli, monkeypatch, "run", "--inputs", "escapes.json", "--json").json()
    assert [t["text"] for t in doc["tokens"]] == ["\\x1b]0;owned\\x07", "red\\x1b[31m",
                                                  "two\\nlines", "\\x9b2J"]
    doc = run_in(tmp_path, cli, monkeypatch, "run", "--inputs", "surrogate.json", "--json").json()
    assert doc["tokens"][0]["text"] == "a\\ud800"


def test_bare_attncli_prints_help_plainly(tmp_path: Path) -> None:
    """Bare `attncli` is a usage mistake (exit 2), but its stderr is the help, not an error."""
    proc = shell("attncli", tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == b""
    err = proc.stderr.decode()
    assert err.startswith("Usage: attncli") and "error" not in err.lower()


def test_columns_zero_still_saves_the_view(attacks: dict[str, Any]) -> None:
    """The process of the case above of that command (COLUMNS=0 is read by a real process)."""
    proc, _, workdir = attacks["COLUMNS=0 attncli run x --save o.txt"]
    assert proc.returncode == 0 and proc.stdout.strip()
    assert "Attention weights" in (workdir / "o.txt").read_text()


def test_save_json_to_stdout_is_the_json(tmp_path: Path) -> None:
    proc = shell("attncli run x --save-json /dev/stdout >out.json", tmp_path)
    assert proc.returncode == 0
    text = (tmp_path / "out.json").read_text()
    doc = json.loads(text[:text.index("\n") + 1])
    assert doc["variant"] == "causal"
