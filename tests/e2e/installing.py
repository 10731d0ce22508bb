"""A user's first hour, in fresh venvs (tests/e2e/test_install_sdist.py and test_install_wheel.py,
two files so that the two installs, minutes each, run on two workers at once): the sdist installed
by pip, and the wheel built from it installed by uv (by pip where uv is missing), torch's CPU wheel
from the machine's wheel folder (standing in for PyTorch's CPU index) and the rest from PyPI; then
`attncli pull smollm2 samples` and the README's five examples, each printing what the README
shows. SmolLM2 comes from attncli's cache (no test downloads a model): the test skips, saying why,
where the model, the torch wheel or the network is missing."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import venv
from dataclasses import replace
from pathlib import Path

import pytest

from attncli.models.stores.pull import PULLABLE
from tests.conftest import ROOT
from tests.readme_blocks import README, Example, differences, document_blocks, examples, stages

WHEELS = Path(os.environ.get("WHEELS", "/opt/wheels"))
CPU_TORCH = sorted(WHEELS.glob("torch-*+cpu-*.whl"))
BUILD = ("import sys; from setuptools import build_meta as b; "
         "print(getattr(b, sys.argv[1])(sys.argv[2]))")
README_FILES = ("samples/journey.json", "samples/induction.txt", "samples/my_attention.py",
                "LICENSE", "Makefile", "requirements/test.lock", "scripts/fetch_model.py",
                "scripts/test-matrix.sh", "docs/install.md",
                "docs/_static/causal.svg", "attncli/long/_fused.c", "attncli/long/_fused.pyi",
                "attncli/models/sources/gguf/_dequant.c", "tests/conftest.py")


def _pypi() -> str | None:
    """Why PyPI cannot be used here, or None."""
    try:
        urllib.request.urlopen("https://pypi.org/simple/typer/", timeout=30).close()
    except OSError as err:
        return f"PyPI cannot be reached ({err})"
    return None


def _smollm2() -> Path | None:
    from attncli.models.stores.fetched import fetched_root
    from attncli.models.stores.pull import in_place

    model = PULLABLE["smollm2"]
    return fetched_root() if in_place(model, fetched_root()) else None


def build(out: Path, wheel: bool = True) -> dict[str, Path]:
    """The sdist built from this tree into out, its files unpacked, and (where wheel) the wheel
    built from them: the sdist's test installs the sdist alone, and a wheel's build compiles the
    C extensions (9 s of CPU)."""
    out.mkdir(parents=True, exist_ok=True)
    # One sdist build at a time in this tree (both install tests build one, on two workers):
    # setuptools writes its egg-info folder in the tree, and two builds at once corrupt it.
    with (ROOT / "setup.py").open("rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        name = subprocess.run([sys.executable, "-c", BUILD, "build_sdist", str(out)], cwd=ROOT,
                              capture_output=True, text=True, timeout=900, check=True)
    sdist = out / name.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as archive:
        archive.extractall(out, filter="data")
    source = out / sdist.name.removesuffix(".tar.gz")
    if not wheel:
        return {"sdist": sdist, "source": source}
    made = subprocess.run([sys.executable, "-c", BUILD, "build_wheel", str(out)], cwd=source,
                          capture_output=True, text=True, timeout=900, check=True)
    return {"sdist": sdist, "source": source,
            "wheel": out / made.stdout.strip().splitlines()[-1]}


def check_the_sdist_holds_what_the_readme_and_docs_use(built: dict[str, Path]) -> None:
    with tarfile.open(built["sdist"]) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert [f for f in README_FILES if f not in names] == []
    pages = [str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
             if "_build" not in p.parts]
    assert [p for p in pages if p not in names] == []
    used = set(re.findall(r"samples/[\w./-]+", README.read_text(encoding="utf-8")))
    assert used and [u for u in used if u.rstrip(".") not in names] == []
    assert not any("__pycache__" in n or n.endswith((".so", ".pyc")) for n in names)


def _examples() -> list[Example]:
    """The README's examples: each `$ attncli …` of its console and text blocks."""
    return [e for b in document_blocks() if b.source == "README.md" and b.shows_commands
            for e in examples(b)]


def _run(example: Example, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """The example's command line in bash (jq in Python where it is missing)."""
    pipeline = stages(example.command) or []
    command = example.command
    if len(pipeline) > 1 and shutil.which("jq") is None:
        command = " ".join(pipeline[0])  # the filter is applied below
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env,
                          capture_output=True, timeout=1800, check=False)
    out = proc.stdout.decode("utf-8", "replace")
    if command != example.command:
        from tests.readme_blocks import jq_equivalent

        out = jq_equivalent(pipeline[1][1:], out)
    return proc.returncode, out + proc.stderr.decode("utf-8", "replace")


def _from_answer(example: Example, printed: str) -> tuple[Example, str]:
    """generate's output from its `answer:` line on: the lines above name the model's path in
    the cache of the machine it ran on."""
    if not any(line.startswith("answer:") for line in example.shown):
        return example, printed
    shown = example.shown[next(k for k, s in enumerate(example.shown) if s.startswith("answer:")):]
    lines = printed.splitlines()
    start = next((k for k, s in enumerate(lines) if s.startswith("answer:")), 0)
    return replace(example, shown=shown), "\n".join(lines[start:])


def _uv() -> str | None:
    """The uv beside this venv's Python (the Makefile installs it), or on PATH, or None."""
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else shutil.which("uv")


def check_a_fresh_venv_runs_the_readme_examples(built: dict[str, Path], artifact: str,
                                                tmp_path: Path, installer: str) -> None:
    """artifact ("sdist" or "wheel") installed by installer ("pip" or "uv") into a fresh venv,
    then the README's examples run from a user's folder."""
    if not CPU_TORCH:
        pytest.skip(f"no CPU torch wheel in {WHEELS} (it stands in for PyTorch's CPU index)")
    reason = _pypi()
    if reason:
        pytest.skip(reason)
    cache = _smollm2()
    if cache is None:
        pytest.skip("SmolLM2 is not in attncli's cache: make test fetches it, no test downloads it")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    torch = CPU_TORCH[-1].name.split("-")[1]  # 2.13.0+cpu
    uv = _uv() if installer == "uv" else None
    # pip compiles every module it installs (torch's, sympy's, networkx's: about 15 s of CPU),
    # most of which no attncli command imports; uv compiles none. Neither is what is checked: the
    # examples' processes write the bytecode of what they import (below), as uv's venv does.
    command = ([uv, "pip", "install", "-q", "--python", str(env_dir / "bin" / "python")]
               if uv is not None else [str(env_dir / "bin" / "pip"), "install", "-q",
                                       "--no-compile"])
    installed = subprocess.run(
        [*command, "--find-links", str(WHEELS), str(built[artifact]), f"torch=={torch}"],
        capture_output=True, text=True, timeout=3600, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    home = tmp_path / "user"
    home.mkdir()
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "ATTNCLI_MODEL_CACHE": str(cache), "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    # A user's Python writes bytecode as it imports: under PYTHONDONTWRITEBYTECODE (set on the
    # test machine) every process of a uv-installed venv, which holds none, compiled torch's
    # modules again (3 s of CPU each); here the first writes them and the rest read them.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    pulled = subprocess.run(["attncli", "pull", "smollm2", "samples"], cwd=home, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.splitlines() == [str(cache / PULLABLE["smollm2"].target), "samples"]
    doctor = subprocess.run(["attncli", "doctor", "--json"], cwd=home, env=env,
                            capture_output=True, text=True, timeout=600, check=True)
    assert str(env_dir) in doctor.stdout and '"built":true' in doctor.stdout.replace(" ", "")
    failures = []
    for example in _examples():
        code, printed = _run(example, {**env, "COLUMNS": str(example.width)}, home)
        wanted = 1 if re.search(r"#.*\bexits? 1\b", example.command) else 0
        shown, printed = _from_answer(example, printed)
        diff = differences(shown, printed, [])
        if code != wanted or diff:
            failures.append(f"`{example.command}` exited {code}:\n{diff or printed[-2000:]}")
    assert len(_examples()) >= 5
    assert failures == [], "\n\n".join(failures)
