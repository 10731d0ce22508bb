"""Stores and caches under a folder that may not be searched (mode 000, another user's home):
Python's Path.exists and is_dir raise PermissionError there, and doctor, pull, config set and every
--model NAME ended in a traceback. Each must say what it can, in one line where it refuses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attncli.models.stores import install
from attncli.models.stores.names import find_pulled
from attncli.models.stores.paths import exists, folder_state

# root reads a folder of mode 000 anyway; without these two capabilities it is refused as a
# user is
DROP = "-dac_override,-dac_read_search"
TIMEOUT_S = 300  # a hang guard only


@pytest.fixture
def locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder whose contents cannot be looked at: os.stat below it is EACCES, as the kernel
    answers for a folder without search permission."""
    folder = tmp_path / "locked"
    folder.mkdir()
    real_stat = os.stat

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(folder) + os.sep in os.fsdecode(path):  # type: ignore[arg-type]
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    return folder


def test_paths_under_it_are_not_there_and_say_why(locked: Path, tmp_path: Path) -> None:
    assert not exists(locked / "models")
    assert folder_state(locked / "models") == (False, "cannot be looked at: Permission denied")
    assert folder_state(tmp_path / "absent") == (False, None)
    assert folder_state(tmp_path) == (True, None)
    (tmp_path / "file").write_bytes(b"")
    assert folder_state(tmp_path / "file") == (True, "not a folder")


def test_doctor_and_the_names_never_raise(locked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var, name in (("ATTNCLI_MODEL_CACHE", "c"), ("OLLAMA_MODELS", "o"),
                      ("LMSTUDIO_MODELS", "l"), ("HF_HUB_CACHE", "h"),
                      ("ATTNCLI_HIDDEN_CACHE", "hidden")):
        monkeypatch.setenv(var, str(locked / name))
    rows = {row["name"]: row for row in install.folders()}
    assert all(row["exists"] is False and row["error"] == "cannot be looked at: Permission denied"
               for row in rows.values()), rows
    assert install.pulled() == {"smollm2": False, "minilm": False}
    assert find_pulled("smollm2") is None


def _unprivileged() -> list[str]:
    """The prefix under which a folder of mode 000 refuses this process: none for a user, setpriv
    without root's override for root; skips where neither can be had."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    prefix = [setpriv or "setpriv", f"--inh-caps={DROP}", f"--bounding-set={DROP}"]
    if setpriv is None or subprocess.run([*prefix, "true"], check=False).returncode != 0:
        pytest.skip("root here cannot give up its override of folder permissions (setpriv)")
    return prefix


@pytest.mark.parametrize("args", [
    ("doctor",), ("doctor", "--json"), ("pull",), ("pull", "smollm2"), ("models",),
    ("config", "set", "model", "smollm2"), ("run", "the cat", "--model", "smollm2"),
    ("run", "the cat", "--model", "llama3.2:1b"),
])  # fmt: skip
def test_a_real_home_that_cannot_be_searched(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A real process, HOME (every store under it) and the settings below a folder of mode 000:
    exit 0 or one line and exit 2, never a traceback."""
    prefix = _unprivileged()
    locked = tmp_path / "locked"
    (locked / "home").mkdir(parents=True)
    locked.chmod(0)
    env = {k: v for k, v in os.environ.items() if not k.startswith(
        ("ATTNCLI_", "OLLAMA_", "LMSTUDIO_", "HF_", "HUGGINGFACE_", "XDG_"))}
    env.update(HOME=str(locked / "home"), ATTNCLI_CONFIG=str(tmp_path / "config.toml"),
               PIP_INDEX_URL="http://127.0.0.1:9/simple")  # never the network
    try:
        proc = subprocess.run([*prefix, sys.executable, "-m", "attncli", *args],
                              capture_output=True, text=True, env=env, timeout=TIMEOUT_S,
                              check=False)
    finally:
        locked.chmod(0o700)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr)
    if proc.returncode == 2:
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("attncli: error: ")
    if args[0] == "doctor" and len(args) == 1:
        assert "cannot be looked at: Permission denied" in " ".join(proc.stdout.split())


def test_a_real_ollama_blob_that_cannot_be_read(tmp_path: Path) -> None:
    """A blob of mode 000 in a store that can be read: --model is one line naming it, and
    `models` lists it as unreadable with the same reason."""
    prefix = _unprivileged()
    store = tmp_path / "ollama"
    blob = store / "blobs" / ("sha256-" + "a" * 64)
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"GGUF" + bytes(60))
    blob.chmod(0)
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "locked" / "latest"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"layers": [{"mediaType": "application/vnd.ollama.image.model", '
                        f'"digest": "sha256:{"a" * 64}", "size": 64}}]}}')
    env = {**os.environ, "OLLAMA_MODELS": str(store), "HOME": str(tmp_path)}
    run = [*prefix, sys.executable, "-m", "attncli"]
    proc = subprocess.run([*run, "run", "the cat", "--model", "locked"], capture_output=True,
                          text=True, env=env, timeout=TIMEOUT_S, check=False)
    reason = "cannot read locked:latest's model blob sha256-aaaaaaaaaaaa… in "
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"attncli: error: {reason}")
    assert proc.stderr.endswith(": Permission denied\n")
    listed = subprocess.run([*run, "models", "--json"], capture_output=True, text=True, env=env,
                            timeout=TIMEOUT_S, check=False)
    assert listed.returncode == 0, listed.stderr
    assert reason in listed.stdout and "Permission denied" in listed.stdout
