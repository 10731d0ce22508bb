"""scan's output folder on resume: a damaged part (truncated, garbage, the other table's file,
a folder, a file gone, rows of another part) is set aside and its documents are scanned again;
the parts left always agree, so the summary never counts a document whose rows are gone."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.errors import AttnCliError
from attncli.saved.kinds import load_saved
from attncli.scan.damage import SET_ASIDE
from attncli.scan.parts import part_name, parts
from attncli.scan.store import SETTINGS_KIND, ScanStore, check_out
from attncli.scan.summary import documents_summary, summarise
from attncli.scan.worker import COLUMNS, HEAD_COLUMNS, LAYER_COLUMNS, scored_document

LAYERS, HEADS = 2, 3
IDENTITY = {"corpus": "/c", "corpus_kind": ".txt", "model": "m"}


def _scored(doc_id: str, status: str = "scored") -> dict[str, Any]:
    if status == "skipped":
        return scored_document(doc_id, "skipped", 0, "fewer than 2 tokens")
    rows: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for layer in range(LAYERS):
        for head in range(HEADS):
            rows["document"].append(doc_id)
            rows["layer"].append(layer)
            rows["head"].append(head)
            for name in (*HEAD_COLUMNS, *LAYER_COLUMNS):
                rows[name].append(0.5)
    return scored_document(doc_id, status, 4, rows=rows)


def _scan(out: Path, count: int = 4) -> list[list[str]]:
    """count parts of 3 documents each (the last one's middle document skipped)."""
    store = ScanStore(out, IDENTITY, LAYERS, HEADS)
    written = []
    for k in range(count):
        ids = [f"doc{k}-{j}" for j in range(3)]
        store.write([_scored(i, "skipped" if (k, j) == (count - 1, 1) else "scored")
                     for j, i in enumerate(ids)])
        written.append(ids)
    return written


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(300))


def _as_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _rows_of_another(out: Path, number: int, table: str) -> None:
    """A part's file replaced by the same table's file of another part (garbage when that one
    is itself damaged past reading)."""
    other = out / table / part_name((number + 1) % len(parts(out / "documents")))
    if other.is_file():
        shutil.copy(other, out / table / part_name(number))
    else:
        _garbage(out / table / part_name(number))


def _other_table(out: Path, number: int, table: str) -> None:
    other = "heads" if table == "documents" else "documents"
    shutil.copy(out / other / part_name(number), out / table / part_name(number))


def _extra_rows(path: Path) -> None:
    table = pq.read_table(path)
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), path)


DAMAGE: dict[str, Callable[[Path, int, str], None]] = {
    "truncated": lambda out, n, t: _truncate(out / t / part_name(n)),
    "garbage": lambda out, n, t: _garbage(out / t / part_name(n)),
    "a folder": lambda out, n, t: _as_folder(out / t / part_name(n)),
    "deleted": lambda out, n, t: (out / t / part_name(n)).unlink(),
    "the other table's": _other_table,
    "another part's": _rows_of_another,
    "a row repeated": lambda out, n, t: _extra_rows(out / t / part_name(n)),
}


def _consistent(out: Path, store: ScanStore) -> None:
    """The documents the summary counts are exactly those whose rows are in the heads parts."""
    counted = documents_summary(out)
    heads = [pq.read_table(p) for p in parts(out / "heads").values()]
    documents = {d for t in heads for d in t.column("document").to_pylist()}
    rows = sum(t.num_rows for t in heads)
    assert counted["scored"] == len(documents) and rows == len(documents) * LAYERS * HEADS
    assert len(store.done()) == counted["scored"] + counted["skipped"]
    summary = summarise(out, 0.4, LAYERS, HEADS)
    assert summary["scan"]["documents"] == counted


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.tuples(st.sampled_from(sorted(DAMAGE)), st.integers(0, 3),
                                st.sampled_from(["heads", "documents"])),
                      min_size=1, max_size=3, unique_by=lambda k: k[1]))
def test_each_damaged_part_is_set_aside_and_the_rest_agree(
        tmp_path_factory: pytest.TempPathFactory, kinds: list[tuple[str, int, str]]) -> None:
    out = tmp_path_factory.mktemp("scan") / "out"
    written = _scan(out)
    for kind, number, table in kinds:
        DAMAGE[kind](out, number, table)
    store = ScanStore(out, IDENTITY, LAYERS, HEADS)
    _consistent(out, store)
    kept = set(store.done())
    for number, ids in enumerate(written):
        damaged = any(n == number for _, n, _ in kinds)
        if not damaged:  # an intact part stays, unless another part took its documents first
            assert set(ids) <= kept or any(k == "another part's" for k, _, _ in kinds)
        elif not set(ids) <= kept:
            assert not set(ids) & kept  # a part is trusted whole, or not at all
    # A documents file gone is what a killed scan leaves (its heads file is debris, cleared).
    if any((kind, table) != ("deleted", "documents") for kind, _, table in kinds):
        assert len(store.set_aside) >= 1
    for line in store.set_aside:
        assert line.startswith("part-") and ": " in line
    # A scan of the documents set aside makes the folder whole again.
    missing = [i for ids in written for i in ids if i not in kept]
    store.write([_scored(i) for i in missing])
    again = ScanStore(out, IDENTITY, LAYERS, HEADS)
    assert again.set_aside == []
    assert again.done() == {i for ids in written for i in ids}
    _consistent(out, again)


@pytest.mark.parametrize("kind", sorted(DAMAGE))
@pytest.mark.parametrize("table", ["heads", "documents"])
def test_one_damage_of_each_kind(tmp_path: Path, kind: str, table: str) -> None:
    out = tmp_path / "out"
    written = _scan(out, 3)
    DAMAGE[kind](out, 1, table)
    store = ScanStore(out, IDENTITY, LAYERS, HEADS)
    _consistent(out, store)
    if (kind, table) == ("deleted", "heads") or kind != "deleted":
        assert [line.split(":")[0] for line in store.set_aside] == [part_name(1)]
        assert sorted(os.listdir(out / SET_ASIDE))  # kept for a look
    assert store.done() == set(written[0]) | set(written[2])
    assert store.next_part == 3


def test_a_table_folder_that_is_a_file_is_set_aside(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _scan(out, 2)
    shutil.rmtree(out / "heads")
    (out / "heads").write_text("not a folder")
    store = ScanStore(out, IDENTITY, LAYERS, HEADS)
    assert store.set_aside[0] == "heads: not a folder"
    assert store.done() == set() and (out / "heads").is_dir()
    _consistent(out, store)


def test_scan_json_says_its_kind_and_one_written_before_resumes(tmp_path: Path) -> None:
    """scan.json carries its "kind" (the corpus's kind is "corpus_kind"), show names it, and
    a folder whose scan.json was written before, the corpus's kind under "kind", resumes."""
    out = tmp_path / "out"
    written = _scan(out, 1)
    held = json.loads((out / "scan.json").read_text(encoding="utf-8"))
    assert held == {"kind": SETTINGS_KIND, **IDENTITY}
    with pytest.raises(AttnCliError, match=r"^show cannot draw a scan's settings \(its "
                                           r"scan.json\) JSON; run `attncli show "
                                           r"OUT/summary.json`"):
        load_saved(str(out / "scan.json"))
    old = {"corpus": "/c", "kind": ".txt", "model": "m"}
    (out / "scan.json").write_text(json.dumps(old), encoding="utf-8")
    assert ScanStore(out, IDENTITY, LAYERS, HEADS).done() == set(written[0])
    assert json.loads((out / "scan.json").read_text(encoding="utf-8")) == held  # rewritten
    with pytest.raises(AttnCliError, match=r"holds a scan with other settings \(corpus_kind\)"):
        ScanStore(out, {**IDENTITY, "corpus_kind": "folder"}, LAYERS, HEADS)


def test_a_scan_json_that_is_not_an_object_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _scan(out, 1)
    (out / "scan.json").write_text("[1, 2]")
    with pytest.raises(AttnCliError, match="scan.json holds no scan's settings"):
        ScanStore(out, IDENTITY, LAYERS, HEADS)


@pytest.mark.parametrize("make, message", [
    (lambda p: p.symlink_to(p.parent / "nowhere"), "is a link to .*nowhere, which does not"),
    (lambda p: p.write_text("x"), "is a file, not a folder"),
    (lambda p: os.mkfifo(p), "is a FIFO, socket or device, not a folder"),
    (lambda p: (p.parent / "file").write_text("x"), "Not a directory"),
])
def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path: Path, make: Any,
                                                    message: str) -> None:
    out = tmp_path / "out"
    make(out)
    target = tmp_path / "file" / "sub" if message == "Not a directory" else out
    with pytest.raises(AttnCliError, match=message):
        check_out(target)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("out", ["/dev/atlas", "/proc/self/atlas", "/sys/atlas", "/dev/null"])
def test_no_scan_is_written_under_the_kernels_folders(out: str) -> None:
    with pytest.raises(AttnCliError, match=f"lies under /{out.split('/')[1]}, where no scan"):
        check_out(Path(out))


@pytest.mark.parametrize("failing", ["heads", "documents"])
def test_a_full_disk_is_a_write_error_naming_the_part_that_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    """A part that meets a full disk: exit 1 (a failed write, as for --save-json), the part it
    was writing named (it named documents/ for a heads/ part too), and the parts before kept."""
    out = tmp_path / "out"
    store = ScanStore(out, IDENTITY, LAYERS, HEADS)
    store.write([_scored("doc0")])
    real = pq.write_table

    def full(table: pa.Table, path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path).parent.name == failing:
            raise OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on "
                              "device")
        real(table, path, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", full)
    with pytest.raises(AttnCliError) as caught:
        store.write([_scored("doc1")])
    assert caught.value.exit_code == 1
    assert str(caught.value).startswith(f"write error: {out / failing / 'part-00001.parquet'}: "
                                        "No space left on device;"), caught.value
    assert sorted(p.name for p in (out / "documents").iterdir()) == ["part-00000.parquet"]


def test_the_same_model_by_another_path_resumes(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A model given as a path is held resolved: the same folder named from another working
    folder, or through a link, is the same scan; a model that is no path here is held as it is,
    and another model is still refused."""
    (tmp_path / "models" / "toy").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "models" / "toy")
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    store = ScanStore(out, {**IDENTITY, "model": "models/toy"}, LAYERS, HEADS)
    store.write([_scored("doc0")])
    held = json.loads((out / "scan.json").read_text(encoding="utf-8"))
    assert held["model"] == str((tmp_path / "models" / "toy").resolve())
    monkeypatch.chdir(tmp_path / "models")
    for model in ("toy", "./toy/", str(tmp_path / "link")):
        assert ScanStore(out, {**IDENTITY, "model": model}, LAYERS, HEADS).done() == {"doc0"}
    with pytest.raises(AttnCliError, match=r"holds a scan with other settings \(model\)"):
        ScanStore(out, {**IDENTITY, "model": "smollm2"}, LAYERS, HEADS)


def test_a_scan_json_holding_a_relative_model_resumes_from_its_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scan.json written when the model was held as given: the same command, from the same
    folder, resumes, and the model is held resolved from then on."""
    (tmp_path / "toy").mkdir()
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    store = ScanStore(out, {**IDENTITY, "model": "toy"}, LAYERS, HEADS)
    store.write([_scored("doc0")])
    (out / "scan.json").write_text(json.dumps({"kind": SETTINGS_KIND, **IDENTITY,
                                               "model": "toy"}), encoding="utf-8")
    assert ScanStore(out, {**IDENTITY, "model": "toy"}, LAYERS, HEADS).done() == {"doc0"}
    held = json.loads((out / "scan.json").read_text(encoding="utf-8"))
    assert held["model"] == str((tmp_path / "toy").resolve())
