"""Red team, the hub cache: `models` and `--model NAME` read it defensively. A refs/main that is
not UTF-8, a loop of links, a dangling link, a file where a folder should be, a folder that
cannot be read, control characters in names: one line (or a row saying why), never a traceback,
no raw escape byte on the terminal, strict JSON."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.redteam.test_redteam import memory_headroom
from tests.redteam.test_redteam_configs import run_process

TOY = ROOT / "samples" / "toy-gpt2"
CONTROL = "\x1b]0;owned\x07\x1b[31m\x9b2J\n"  # OSC title, BEL, CSI colour, C1 CSI, newline


def _snapshot(cache: Path, repo: str, name: str = "abc") -> Path:
    folder = cache / f"models--{repo}" / "snapshots" / name
    shutil.copytree(TOY, folder)
    return folder


@pytest.fixture()
def hostile_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache holding one good GPT-2 and one folder of each hostile kind."""
    cache = tmp_path / "hub"
    _snapshot(cache, "Org--good")
    bad_ref = _snapshot(cache, "Org--badref").parent.parent
    (bad_ref / "refs").mkdir()
    (bad_ref / "refs" / "main").write_bytes(b"\xff\xfe\x00abc")
    escape_ref = _snapshot(cache, "Org--escaperef").parent.parent
    (escape_ref / "refs").mkdir()
    (escape_ref / "refs" / "main").write_text("../../../../etc")
    loop = cache / "models--Org--loop"
    loop.mkdir(parents=True)
    os.symlink(loop / "snapshots", loop / "snapshots")  # a link to itself
    dangling = _snapshot(cache, "Org--dangling")
    (dangling / "model.safetensors").unlink()
    os.symlink(cache / "blobs" / "gone", dangling / "model.safetensors")
    (cache / "models--Org--file").mkdir()
    (cache / "models--Org--file" / "snapshots").write_text("not a folder")
    (cache / "models--Org--plainfile").write_text("not a folder either")
    _snapshot(cache, "Org--" + CONTROL.replace("/", "_"))
    _snapshot(cache, "Org--bytes\udcff")  # a name that is not UTF-8
    bad_config = _snapshot(cache, "Org--hugeint")
    (bad_config / "config.json").write_text('{"n_layer": ' + "9" * 5000 + "}")
    deep = _snapshot(cache, "Org--deep")
    (deep / "config.json").write_text("[" * 5000 + "]" * 5000)
    eps = _snapshot(cache, "Org--eps")
    config = json.loads((eps / "config.json").read_text())
    (eps / "config.json").write_text(json.dumps({**config, "layer_norm_epsilon": 1e300}))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "no-attncli"))
    return cache


def test_models_json_lists_the_good_one_and_says_why_for_each_other(cli,
                                                                    hostile_cache: Path) -> None:
    got = cli("models", "--json")
    assert got.code == 0, got.err
    doc = got.json()
    names = [row["name"] for row in doc["models"]]
    assert "Org/good" in names
    reasons = {row["name"]: row["reason"] for row in doc["unreadable"]}
    assert "non-finite" in reasons["Org/hugeint"]
    assert "nested more than" in reasons["Org/deep"]
    assert "layer_norm_epsilon" in reasons["Org/eps"]
    assert "no model.safetensors" in reasons["Org/dangling"]
    assert "no snapshot" in reasons["Org/loop"] and "no snapshot" in reasons["Org/file"]
    assert "no snapshot" in reasons["Org/plainfile"]
    assert "Org/bytes\\xff" in names  # the undecodable byte, escaped: JSON stays UTF-8
    # refs/main that is not a plain name falls back to the snapshot that is there.
    assert {"Org/badref", "Org/escaperef"} <= set(names)


def test_models_table_holds_no_raw_control_character(cli, hostile_cache: Path) -> None:
    got = cli("models")
    assert got.code == 0, got.err
    shown = got.out.replace("\n", "")
    assert not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in shown), repr(got.out)
    assert "\\x1b]0;owned\\x07" in got.out and "\\x9b2J\\n" in got.out
    assert "cannot read:" in got.out


def test_models_as_a_real_run_on_a_hostile_cache(hostile_cache: Path) -> None:
    for args in (("models",), ("models", "--json")):
        proc = run_process(*args, env={"HF_HUB_CACHE": str(hostile_cache)})
        assert proc.returncode == 0, proc.stderr
        assert b"Traceback" not in proc.stderr and proc.stderr == b""
        assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    doc = json.loads(proc.stdout)
    assert any(row["name"] == "Org/good" for row in doc["models"])


def test_a_hostile_cache_through_hf_home(hostile_cache: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "hub").symlink_to(hostile_cache)
    proc = run_process("models", "--json", env={"HF_HUB_CACHE": "", "HF_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cache"] == str(home / "hub")


# (name, what its line names, whether a real process runs it too): in-process, each is decided
# inside attncli; a fresh process also reads the numbers and the nesting whose limits are the
# interpreter's own (int digits, recursion depth), where the in-process run starts deep in pytest.
@pytest.mark.parametrize(("name", "named", "real"), [
    ("Org/loop", "not in the local Hugging Face cache", False),
    ("Org/file", "not in the local Hugging Face cache", False),
    ("Org/dangling", "model.safetensors in", False),
    ("Org/hugeint", "non-finite", True),
    ("Org/deep", "nested more than", True),
])
def test_a_hostile_cached_name_is_one_line(cli, hostile_cache: Path, name: str,
                                           named: str, real: bool) -> None:
    with memory_headroom():
        cli("run", "hi", "--model", name).assert_usage_error(named)
    if real:
        proc = run_process("run", "hi", "--model", name,
                           env={"HF_HUB_CACHE": str(hostile_cache)})
        err = proc.stderr.decode()
        assert proc.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert named in err, err


def test_a_cache_that_cannot_be_listed_is_one_line(cli, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod 000 does not stop root, so the cache is made unlistable another way: a file
    inside a folder with no search permission is what root still reads; a path through a
    regular file (ENOTDIR) and a name past NAME_MAX (ENAMETOOLONG) fail for everyone."""
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "no-attncli"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / ("n" * 300)))
    got = cli("models", "--json")
    assert got.code in (0, 2), got.err
    if got.code == 0:
        assert got.json()["models"] == []
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "afile" / "hub"))
    assert cli("models", "--json").json()["models"] == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 folder anyway")
def test_an_unreadable_snapshot_is_listed_as_unreadable(cli, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hub"
    folder = _snapshot(cache, "Org--locked")
    folder.chmod(0)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "no-attncli"))
    try:
        doc = cli("models", "--json").json()
    finally:
        folder.chmod(0o755)
    assert [row["name"] for row in doc["unreadable"]] == ["Org/locked"]


def test_an_unreadable_config_is_a_row_not_a_traceback(cli, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, chmod cannot make config.json unreadable; a folder named config.json can."""
    cache = tmp_path / "hub"
    folder = _snapshot(cache, "Org--dirconfig")
    (folder / "config.json").unlink()
    (folder / "config.json").mkdir()
    os.symlink(folder / "config.json", folder / "loop.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    doc = cli("models", "--json").json()
    assert doc["unreadable"][0]["reason"] == "no config.json"
    cli("run", "hi", "--model", "Org/dirconfig").assert_usage_error("")
