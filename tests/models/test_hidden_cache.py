"""The hidden-state cache: a repeated look equals a fresh pass exactly and is served from kept
streams; entries of another file, text or version, and corrupt or hostile files, are not used;
writers racing or failing leave whole entries or none, and the command still succeeds."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import gguf
import pytest
import torch

from attncli.core.request import Request
from attncli.models.hidden import passes
from attncli.models.hidden import store as hidden_store
from attncli.models.hidden.passes import cached_pass, hidden_key
from attncli.models.hidden.store import MAGIC, HiddenCache, cache_cap, evict
from attncli.models.run import open_checked
from tests.conftest import ROOT
from tests.gguf_fixtures import smollm2, write_model

TOY = str(ROOT / "samples" / "toy-gpt2")
TEXT = "the cat sat on the mat and the cat sat"
REAL = pytest.param("smollm2", marks=pytest.mark.slow)  # the real model: slow


@pytest.fixture(scope="module")
def llama_gguf(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("llama") / "tiny.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    return str(path)


def _model(kind: str, llama_gguf: str) -> str:
    return {"toy": TOY, "llama": llama_gguf}.get(kind) or str(smollm2())


def _looks(cli, model: str, layers: tuple[int, int]) -> list:  # noqa: ANN001
    out = []
    for args in (("run", "--layer", str(layers[0])), ("run", "--layer", str(layers[1])),
                 ("heads",)):
        done = cli(*args, TEXT, "--model", model, "--json")
        assert done.code == 0, done.err
        out.append(done.json())
    return out


@pytest.mark.parametrize("kind", ["toy", "llama", REAL])
def test_repeated_looks_equal_a_fresh_pass_and_are_served_from_the_cache(
        cli, kind: str, llama_gguf: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    model = _model(kind, llama_gguf)
    layers = (1, 0) if kind != "smollm2" else (20, 21)
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = _looks(cli, model, layers)
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    passes.STATS.clear()
    first = _looks(cli, model, layers)  # fills the cache
    computed = passes.STATS["computed"]
    passes.STATS.clear()
    again = _looks(cli, model, layers)
    assert first == fresh and again == fresh
    assert computed > 0 and passes.STATS["computed"] == 0 and passes.STATS["read"] > 0


@pytest.mark.slow
def test_a_deeper_layer_runs_one_block_past_the_kept_stream(cli) -> None:  # noqa: ANN001
    path = str(smollm2())
    assert cli("run", TEXT, "--model", path, "--layer", "20", "--json").code == 0
    passes.STATS.clear()
    assert cli("run", TEXT, "--model", path, "--layer", "21", "--json").code == 0
    # Stream 20 read; stream 21 computed from it: one block's MLP, not 21 of them. Block 20 ran
    # whole and 21's attention: both their weights kept.
    assert passes.STATS == {"read": 1, "computed": 1, "weights computed": 2}


def test_heads_from_the_cache_runs_no_mlp(cli, llama_gguf: str,  # noqa: ANN001
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.models.llama import model as llama_model

    assert cli("heads", TEXT, "--model", llama_gguf, "--json").code == 0
    calls = []
    real = llama_model.finish_block
    monkeypatch.setattr(llama_model, "finish_block",
                        lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    assert cli("heads", TEXT, "--model", llama_gguf, "--json").code == 0
    assert calls == []
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    assert cli("heads", TEXT, "--model", llama_gguf, "--json").code == 0
    assert calls == [0, 1]  # the check above can fail: without the cache each block's MLP runs


@pytest.mark.parametrize("kind", ["toy", "llama"])
def test_every_stage_of_a_served_layer_equals_a_fresh_one(kind: str, llama_gguf: str,
                                                          tmp_path: Path) -> None:
    req = Request(text=TEXT, model=_model(kind, llama_gguf))
    model = open_checked(req)
    ids = model.tokens(req).ids
    for layer in (0, 1, 1, 0):  # each served from what the looks before kept
        got = cached_pass(req, model, ids).attention(layer)
        want = model.attention(ids, layer)
        assert torch.equal(got.inputs, want.inputs)
        for stage, value in vars(want.output).items():
            other = getattr(got.output, stage)
            assert (other is None and value is None) or torch.equal(other, value), stage
    traced = list(cached_pass(req, model, ids).trace(1))
    for got_block, want_block in zip(traced, model.trace(ids, 1), strict=True):
        for name in ("residual", "weights", "values", "output"):
            assert torch.equal(getattr(got_block, name), getattr(want_block, name)), name
        assert torch.equal(got_block.w_o(), want_block.w_o())  # W_O, read where it was not


def _cache(tmp_path: Path, **changes: object) -> HiddenCache:
    key = {"files": [["/m.gguf", 10, 1, 1, 1, 1]], "ids": "abc", "attncli": "0.1.0", **changes}
    return HiddenCache(tmp_path / "c", 2**30, key, 5, 8)


def test_a_stream_stored_is_read_back_bit_for_bit(tmp_path: Path) -> None:
    stream = torch.randn(5, 8)
    stream[0, :3] = torch.tensor([-0.0, 1e-45, torch.finfo(torch.float32).max])  # as they were
    cache = _cache(tmp_path)
    cache.store(3, stream)
    back = cache.load(3)
    assert back is not None and torch.equal(back.view(torch.int32), stream.view(torch.int32))
    assert cache.load(2) is None  # another layer


@pytest.mark.parametrize("changes", [{"ids": "abd"}, {"attncli": "0.2.0"},
                                     {"files": [["/m.gguf", 10, 2, 1, 1, 1]]}])
def test_an_entry_of_another_text_version_or_file_is_not_used(tmp_path: Path,
                                                              changes: dict) -> None:
    other, cache = _cache(tmp_path, **changes), _cache(tmp_path)
    other.store(0, torch.randn(5, 8))
    shutil.copy(other.path(0), cache.path(0))  # under this key's own name
    assert cache.load(0) is None


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["payload", "truncated", "longer", "magic", "header size",
                                    "json", "symlink", "fifo", "folder", "empty"])
def test_a_damaged_or_hostile_entry_is_not_used(tmp_path: Path, damage: str) -> None:
    cache = _cache(tmp_path)
    cache.store(0, torch.randn(5, 8))
    path = cache.path(0)
    size = path.stat().st_size
    if damage == "payload":
        _flip(path, size - 3)
    elif damage == "truncated":
        os.truncate(path, size - 4)
    elif damage == "longer":
        path.write_bytes(path.read_bytes() + b"\0" * 4)
    elif damage == "magic":
        _flip(path, 0)
    elif damage == "header size":
        data = path.read_bytes()
        path.write_bytes(MAGIC + (2**62).to_bytes(8, "little") + data[len(MAGIC) + 8:])
    elif damage == "json":
        _flip(path, len(MAGIC) + 9)
    elif damage in ("symlink", "fifo", "folder", "empty"):
        path.unlink()
        if damage == "symlink":
            path.symlink_to("/dev/zero")
        elif damage == "fifo":
            os.mkfifo(path)  # opening it for reading must not wait for a writer
        elif damage == "folder":
            path.mkdir()
        else:
            path.touch()
    assert cache.load(0) is None


def test_a_corrupt_entry_on_disk_gives_the_fresh_result(cli, llama_gguf: str,  # noqa: ANN001
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("run", TEXT, "--model", llama_gguf, "--layer", "1", "--json")
    first = cli(*args)
    folder = Path(os.environ["ATTNCLI_HIDDEN_CACHE"])
    for entry in folder.iterdir():
        _flip(entry, entry.stat().st_size - 1)
    again = cli(*args)
    assert first.code == again.code == 0 and again.json() == first.json()


def test_a_touched_or_copied_model_file_is_another_key(llama_gguf: str, tmp_path: Path) -> None:
    copy = tmp_path / "copy.gguf"
    shutil.copy(llama_gguf, copy)
    keys = []
    for path in (str(copy), llama_gguf):
        req = Request(text=TEXT, model=path)
        model = open_checked(req)
        keys.append(hidden_key(req, model, model.tokens(req).ids))
    os.utime(copy, ns=(1, 1))
    req = Request(text=TEXT, model=str(copy))
    model = open_checked(req)
    touched = hidden_key(req, model, model.tokens(req).ids)
    assert keys[0] != keys[1] and touched != keys[0]
    assert hidden_key(Request(text=TEXT, model=str(copy)), model, [1, 2]) != touched


WRITER = """
import sys, torch
from pathlib import Path
from attncli.models.hidden.store import HiddenCache
key = {"files": [], "ids": "race"}
cache = HiddenCache(Path(sys.argv[1]), 2**30, key, 512, 1024)
stream = torch.full((512, 1024), float(sys.argv[2]))
for _ in range(20):
    cache.store(0, stream)
"""


def test_two_writers_racing_leave_one_whole_entry(tmp_path: Path) -> None:
    folder = tmp_path / "race"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(value)])
               for value in (1.0, 2.0)]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    back = HiddenCache(folder, 2**30, {"files": [], "ids": "race"}, 512, 1024).load(0)
    assert back is not None and back.unique().tolist() in ([1.0], [2.0])
    assert [p.name for p in folder.iterdir() if not p.name.endswith("-0.hidden")] == []


def _small_files() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # no entry of this text fits
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


ARGS = ["run", TEXT * 5, "--model", TOY, "--layer", "1", "--json"]


@pytest.mark.parametrize("blocked", ["fsize", "a file", "/dev/null"])
def test_a_cache_that_cannot_be_written_does_not_fail_the_command(
        cli, tmp_path: Path, blocked: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The command prints what it prints with no cache at all, and one note. A file size limit
    needs a process of its own; a cache folder that is a file or a device is read in-process
    (each process of these cost 1.6 s of CPU), the note's once-a-process flag reset."""
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    uncached = cli(*ARGS)
    assert uncached.code == 0 and uncached.err == "", uncached.err
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    folder = Path(blocked) if blocked.startswith("/") else tmp_path / "cache"
    if blocked == "a file":
        folder.write_text("not a folder")
    if blocked == "fsize":
        env = {**os.environ, "ATTNCLI_HIDDEN_CACHE": str(folder), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-m", "attncli", *ARGS], capture_output=True,
                              env=env, timeout=600, check=False, preexec_fn=_small_files)
        code, out, err = done.returncode, done.stdout.decode(), done.stderr.decode()
    else:
        monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE", str(folder))
        monkeypatch.setattr(hidden_store, "_noted", [])
        got = cli(*ARGS)
        code, out, err = got.code, got.out, got.err
    assert code == 0, err
    assert json.loads(out) == uncached.json()
    assert err.count("\n") == 1 and err.startswith("attncli: note: hidden states not cached")
    if blocked == "fsize":
        assert list(folder.iterdir()) == []  # no half-written entry, no temporary file
    if blocked == "/dev/null":
        assert folder.is_char_device()


def test_the_least_recently_used_entries_go_first(tmp_path: Path) -> None:
    caches = [_cache(tmp_path, ids=str(k)) for k in range(4)]
    for k, cache in enumerate(caches):
        cache.store(0, torch.randn(5, 8))
        os.utime(cache.path(0), ns=(k * 10**9, k * 10**9))
    assert caches[0].load(0) is not None  # used now: the most recent
    size = caches[0].path(0).stat().st_size
    evict(tmp_path / "c", 2 * size)
    assert [c.path(0).exists() for c in caches] == [True, False, False, True]


def test_a_text_whose_streams_exceed_the_cap_is_not_cached(
        cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE_MAX", "1K")
    done = cli("run", TEXT, "--model", TOY, "--layer", "1", "--json")
    assert done.code == 0 and done.err == ""
    assert not Path(os.environ["ATTNCLI_HIDDEN_CACHE"]).exists()


@pytest.mark.parametrize(("value", "size"), [("", 2 * 2**30), ("123", 123), ("500M", 500 * 2**20),
                                             ("2GiB", 2 * 2**30), ("0", 0)])
def test_the_cap_reads_sizes(monkeypatch: pytest.MonkeyPatch, value: str, size: int) -> None:
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE_MAX", value)
    assert cache_cap() == size


@pytest.mark.parametrize("value", ["lots", "-5", "²", "1.5G", "G"])
def test_a_bad_cap_is_a_usage_error(cli, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                    value: str) -> None:
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE_MAX", value)
    cli("run", TEXT, "--model", TOY, "--json").assert_usage_error(
        f"ATTNCLI_HIDDEN_CACHE_MAX must be a size such as 500M or 2G (got {value!r})")


def test_no_cache_reads_and_writes_nothing(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    passes.STATS.clear()
    assert cli("heads", TEXT, "--model", TOY, "--json").code == 0
    assert not Path(os.environ["ATTNCLI_HIDDEN_CACHE"]).exists() and passes.STATS == {}
    req = Request(text=TEXT, model=TOY)
    assert cached_pass(req, open_checked(req), [1, 2]).cache is None


def test_browse_shares_the_streams_run_kept(cli, llama_gguf: str,  # noqa: ANN001
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.browse.source import model_source

    req = Request(text=TEXT, model=llama_gguf)
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = model_source(req).get(1).weights  # (heads, T, T) from its own pass
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    assert cli("run", TEXT, "--model", llama_gguf, "--layer", "1", "--json").code == 0
    passes.STATS.clear()
    again = model_source(req)
    assert again.get(1).weights.tobytes() == fresh.tobytes()
    assert passes.STATS["read"] > 0


@pytest.mark.parametrize("kind", ["llama", REAL])
def test_tiled_looks_equal_a_fresh_pass_and_keep_their_own_streams(
        cli, kind: str, llama_gguf: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    model = _model(kind, llama_gguf)
    layers = ("1", "0") if kind == "llama" else ("20", "21")

    def tiled(layer: str) -> dict:
        done = cli("run", TEXT, "--model", model, "--layer", layer, "--impl", "tiled", "--json")
        assert done.code == 0, done.err
        return done.json()

    assert cli("run", TEXT, "--model", model, "--layer", layers[0], "--json").code == 0
    passes.STATS.clear()
    first = [tiled(layers[0])]
    assert passes.STATS["read"] == 0  # the naive pass's streams are not the fused path's
    first.append(tiled(layers[1]))
    passes.STATS.clear()
    again = [tiled(layer) for layer in layers]
    assert passes.STATS["computed"] == 0 and passes.STATS["read"] == 2
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    assert first == again == [tiled(layer) for layer in layers]


@pytest.mark.parametrize("kind", ["toy", "llama"])
def test_predictions_and_the_kvcache_lesson_from_the_cache_equal_fresh_ones(
        cli, kind: str, llama_gguf: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    model = _model(kind, llama_gguf)
    commands = [("run", TEXT, "--model", model, "--layer", "1", "--predict", "3", "--json"),
                ("kvcache", TEXT, "--model", model, "--layer", "1", "--json")]
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = [cli(*args).json() for args in commands]
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    first = [cli(*args).json() for args in commands]
    passes.STATS.clear()
    again = [cli(*args).json() for args in commands]
    assert first == again == fresh and passes.STATS["computed"] == 0


def test_a_checkpoint_gone_since_it_was_read_is_run_without_the_cache(
        llama_gguf: str, tmp_path: Path) -> None:
    copy = tmp_path / "gone.gguf"
    shutil.copy(llama_gguf, copy)
    req = Request(text=TEXT, model=str(copy))
    model = open_checked(req)
    ids = model.tokens(req).ids
    want = model.attention(ids, 1).output.weights
    copy.unlink()
    looked = cached_pass(req, model, ids)
    assert looked.cache is None and torch.equal(looked.attention(1).output.weights, want)


def test_the_folder_stays_within_its_cap_across_texts(
        cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    words = TEXT.split()
    entry = 4 * (64 * 4 * len(words) + 4096)  # toy-gpt2: 3 + 1 streams of T × 64, and headers
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE_MAX", str(2 * entry))
    folder = Path(os.environ["ATTNCLI_HIDDEN_CACHE"])
    for k in range(6):
        text = " ".join(words[k:] + words[:k])  # as many tokens, another text each time
        assert cli("heads", text, "--model", TOY, "--json").code == 0
        assert sum(p.stat().st_size for p in folder.iterdir()) <= 2 * entry
    assert len(list(folder.iterdir())) >= 4  # the last text whole, at least
