"""The hidden-state cache on disk (models/hidden/store.py): an entry whose checksum holds but
whose numbers are NaN or infinite, or whose header is nested past any parser's depth, is a miss
and is removed, and the look equals a fresh one; eviction removes only the cache's own files;
a folder that cannot be found or written is one escaped note and the command runs."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import gguf
import pytest
import torch

from attncli.models.hidden import store
from attncli.models.hidden.store import ALIGN, MAGIC, HiddenCache, evict
from tests.conftest import ROOT
from tests.gguf_fixtures import write_model

TOY = str(ROOT / "samples" / "toy-gpt2")
TEXT = "the cat sat on the mat and the cat sat"


@pytest.fixture(scope="module")
def llama_gguf(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("llama") / "tiny.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    return str(path)


def _cache(folder: Path, ids: str = "abc") -> HiddenCache:
    key = {"files": [["/m.gguf", 10, 1, 1, 1, 1]], "ids": ids, "attncli": "0.1.0"}
    return HiddenCache(folder, 2**30, key, 5, 8)


def _parts(path: Path) -> tuple[dict, bytes]:
    """An entry's JSON header and its payload."""
    data = path.read_bytes()
    size = int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8 + size
    return json.loads(data[len(MAGIC) + 8:start]), data[start + -start % ALIGN:]


def _write(path: Path, header: bytes, payload: bytes) -> None:
    start = len(MAGIC) + 8 + len(header)
    path.write_bytes(MAGIC + len(header).to_bytes(8, "little") + header
                     + bytes(-start % ALIGN) + payload)


def _poison(path: Path, value: float) -> None:
    """The entry's numbers with value in the middle, and a checksum that holds for them."""
    header, payload = _parts(path)
    floats = torch.frombuffer(bytearray(payload), dtype=torch.float32)  # (n,)
    floats[len(floats) // 2] = value
    header["sha256"] = hashlib.sha256(floats.numpy().tobytes()).hexdigest()
    _write(path, json.dumps(header, sort_keys=True).encode(), floats.numpy().tobytes())


def _deepen(path: Path) -> None:
    """The entry's header replaced by JSON nested 100,000 deep."""
    _write(path, b"[" * 100_000 + b"]" * 100_000, _parts(path)[1])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_an_entry_holding_nan_or_inf_under_a_valid_checksum_is_a_miss_and_removed(
        tmp_path: Path, value: float) -> None:
    cache = _cache(tmp_path)
    cache.store(0, torch.randn(5, 8))
    _poison(cache.path(0), value)
    assert cache.load(0) is None
    assert not cache.path(0).exists()


def test_an_entry_whose_header_is_nested_100_000_deep_is_a_miss_and_removed(
        tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.store(0, torch.randn(5, 8))
    _deepen(cache.path(0))
    assert cache.load(0) is None
    assert not cache.path(0).exists()


def test_a_stream_of_nan_or_inf_is_not_kept(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    for value in (float("nan"), float("inf")):
        stream = torch.randn(5, 8)
        stream[2, 3] = value
        cache.store(0, stream)
        assert not cache.path(0).exists()


@pytest.mark.parametrize("damage", [_poison, _deepen])
def test_a_look_over_poisoned_entries_equals_a_fresh_one(
        cli, llama_gguf: str, damage) -> None:  # noqa: ANN001
    args = ("run", TEXT, "--model", llama_gguf, "--layer", "1", "--json")
    first = cli(*args)
    folder = Path(os.environ["ATTNCLI_HIDDEN_CACHE"])
    entries = sorted(folder.iterdir())
    for entry in entries:
        damage(entry) if damage is _deepen else damage(entry, float("nan"))
    again = cli(*args)
    assert first.code == again.code == 0, again.err
    assert again.json() == first.json() and again.err == ""
    for entry in entries:  # each removed and kept again, whole
        header, payload = _parts(entry)
        assert hashlib.sha256(payload).hexdigest() == header["sha256"]
        assert torch.isfinite(torch.frombuffer(bytearray(payload), dtype=torch.float32)).all()


def test_eviction_removes_only_the_caches_own_files(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    caches = [_cache(folder, str(k)) for k in range(4)]
    for k, cache in enumerate(caches):
        cache.store(0, torch.randn(5, 8))
        os.utime(cache.path(0), ns=(k * 10**9, k * 10**9))  # the oldest first
    size = caches[0].path(0).stat().st_size
    outside = tmp_path / "outside.hidden"  # ours in form, but only linked to from the folder
    outside.write_bytes(caches[0].path(0).read_bytes())
    foreign = {"notes.hidden": b"not attncli's" * 1000, "empty.hidden": b"",
               "near.hidden": MAGIC[:-1]}
    for name, data in foreign.items():
        (folder / name).write_bytes(data)
        os.utime(folder / name, ns=(0, 0))  # older than every entry
    (folder / "link.hidden").symlink_to(outside)
    os.mkfifo(folder / "pipe.hidden")  # never opened for a read that would wait
    (folder / "dir.hidden").mkdir()
    stale = folder / ".part-dead.hidden"
    stale.write_bytes(caches[1].path(0).read_bytes())
    os.utime(stale, ns=(0, 0))  # a writer that died long ago
    evict(folder, 2 * size)
    assert [c.path(0).exists() for c in caches] == [False, False, True, True]
    assert {p.name for p in folder.iterdir()} == {
        *foreign, "link.hidden", "pipe.hidden", "dir.hidden", caches[2].path(0).name,
        caches[3].path(0).name}  # the stale temporary file was the cache's own
    assert outside.read_bytes()[:len(MAGIC)] == MAGIC
    assert (folder / "notes.hidden").read_bytes() == foreign["notes.hidden"]


def test_foreign_files_do_not_count_against_the_cap(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    caches = [_cache(folder, str(k)) for k in range(2)]
    for cache in caches:
        cache.store(0, torch.randn(5, 8))
    (folder / "big.hidden").write_bytes(b"\0" * 2**20)  # far past the cap, and not ours
    evict(folder, 2 * caches[0].path(0).stat().st_size)
    assert all(c.path(0).exists() for c in caches) and (folder / "big.hidden").exists()


@pytest.mark.parametrize("variable", ["ATTNCLI_HIDDEN_CACHE", "XDG_CACHE_HOME"])
def test_a_cache_folder_under_an_unknown_user_is_a_note_and_the_command_runs(
        cli, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:  # noqa: ANN001
    monkeypatch.setattr(store, "_noted", [])
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = cli("run", TEXT, "--model", TOY, "--json")
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    monkeypatch.delenv("ATTNCLI_HIDDEN_CACHE")
    monkeypatch.setenv(variable, "~no_such_user_of_attncli/x")
    done = cli("run", TEXT, "--model", TOY, "--json")
    assert done.code == 0 and done.json() == fresh.json()
    assert done.err == ("attncli: note: hidden states not cached in ~no_such_user_of_attncli/x "
                        "(its home folder cannot be found); results are unaffected\n")


def test_the_note_escapes_the_folder_it_names(cli, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                               tmp_path: Path) -> None:
    monkeypatch.setattr(store, "_noted", [])
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    folder = blocker / "\x1b]0;owned\x07[bold]x\u202e"
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE", str(folder))
    done = cli("run", TEXT, "--model", TOY, "--json")
    assert done.code == 0
    assert done.err == (f"attncli: note: hidden states not cached in {blocker}/\\x1b]0;owned"
                        "\\x07[bold]x\\u202e (Not a directory); results are unaffected\n")
