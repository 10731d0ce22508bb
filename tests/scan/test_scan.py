"""`attncli scan`: rows equal `heads --json`, resumable parts that survive SIGTERM and SIGKILL,
hostile corpora, the summary, and the Ray path equal to the local pool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT
from tests.gguf_fixtures import smollm2
from tests.tolerance import assert_near

TOY = str(ROOT / "samples" / "toy-gpt2")
# A scan that reaches its worker pool starts processes (spawned, each loading torch): such a test
# is marked `process`, as conftest marks one that starts attncli itself.
POOL = pytest.mark.process
DOCS = ["The cat sat on the mat because it was tired",
        "Alice went to the market and Alice bought bread and Alice went home",
        "one two three four one two three four one two three four",
        "Your journey starts with one step"]
HEAD_KEYS = ("entropy", "prev", "first", "self", "distance", "previous_token", "duplicate_token",
             "induction")


def _rows(out: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted((out / "heads").glob("part-*"))])


def _documents(out: Path) -> dict[str, list[Any]]:
    return pa.concat_tables([pq.read_table(p) for p in sorted(
        (out / "documents").glob("part-*"))]).to_pydict()


def _same_as_heads(cli, rows: pa.Table, doc_id: str, text: str, model: str) -> None:  # noqa: ANN001
    """doc_id's rows are `heads --json` on text: every head's measures and scores, each layer's
    sink. Within the house tolerance: a scan's workers run one torch thread, this process as
    many as the test run gives it, and two thread counts split a product's sums apart."""
    heads = cli("heads", text, "--model", model, "--json")
    assert heads.code == 0, heads.err
    expected = heads.json()
    mine = [r for r in rows.to_pylist() if r["document"] == doc_id]
    assert len(mine) == len(expected["heads"])
    by_head = {(r["layer"], r["head"]): r for r in mine}
    sinks = {s["layer"]: s for s in expected["layers"]}
    for row in expected["heads"]:
        got = by_head[(row["layer"], row["head"])]
        assert_near({k: got[k] for k in HEAD_KEYS}, {k: row[k] for k in HEAD_KEYS})
        sink = sinks[row["layer"]]
        assert_near(got["first_share"], sink["first_share"])
        assert_near(got["norm_ratio"], sink["norm_ratio"])


@POOL
def test_rows_equal_heads_json_on_the_toy_gpt2(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(DOCS) + "\n", encoding="utf-8")
    run = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"),
              "--workers", "2", "--json")
    assert run.code == 0, run.err
    summary = run.json()
    assert summary["scan"]["documents"] == {"scored": 4, "cut": 0, "skipped": 0,
                                            "tokens": summary["scan"]["documents"]["tokens"],
                                            "skipped_because": {}}
    rows = _rows(tmp_path / "out")
    for number, text in enumerate(DOCS, start=1):
        _same_as_heads(cli, rows, f"docs.txt:{number}", text, TOY)
    # The summary's mean is the mean of the rows; its share, the share of rows at the threshold.
    table = rows.to_pylist()
    l1h2 = [r["induction"] for r in table if (r["layer"], r["head"]) == (1, 2)]
    head = next(h for h in summary["heads"] if (h["layer"], h["head"]) == (1, 2))
    assert_near(head["induction"], sum(l1h2) / 4)
    assert head["share"]["induction"] == sum(v >= 0.4 for v in l1h2) / 4


@POOL
def test_rows_equal_heads_json_on_smollm2(cli, tmp_path: Path) -> None:  # noqa: ANN001
    model = str(smollm2())
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS[:2]), "utf-8")
    run = cli("scan", str(corpus), "--model", model, "--out", str(tmp_path / "out"),
              "--workers", "1", "--json")
    assert run.code == 0, run.err
    rows = _rows(tmp_path / "out")
    for number, text in enumerate(DOCS[:2], start=1):
        _same_as_heads(cli, rows, f"docs.jsonl:{number}", text, model)


def _scan_process(corpus: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Python's own Ctrl-C: a test run started in the background has SIGINT ignored, which
    # attncli, rightly, would keep ignoring.
    return subprocess.Popen([sys.executable, "-m", "attncli", "scan", str(corpus), "--model",
                             TOY, "--out", str(out), "--workers", "1", "--part-size", "3",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


# Each signal's documented exit and line (docs/terminal.md), once what came back is written.
STOPPED = {signal.SIGTERM: (143, "terminated"), signal.SIGINT: (130, "interrupted")}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_killed_scan_resumes_with_every_document_once(cli, tmp_path: Path,  # noqa: ANN001
                                                       sig: int) -> None:
    corpus = tmp_path / "many.txt"
    lines = [f"{DOCS[k % 4]} number {k}" for k in range(150)]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = _scan_process(corpus, out)
    deadline = time.monotonic() + 300
    while len(list((out / "documents").glob("part-*"))) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    children = _children(proc.pid)
    assert children  # the pool's worker (and the resource tracker)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    if sig in STOPPED:
        code, line = STOPPED[sig]
        assert proc.returncode == code, err
        assert err.decode().startswith(f"attncli: error: {line}: ")
        assert err.decode().endswith("; the same command resumes\n")
        assert len(err.decode().splitlines()) == 1
    assert len(_documents(out)["document"]) < 150  # stopped before the end
    # The resume in-process (its pool's worker is still a process): what is checked is what
    # the killed process left, and a driver's start (torch's import) cost 1.7 s of CPU a case.
    resumed = cli("scan", str(corpus), "--model", TOY, "--out", str(out), "--workers", "1",
                  "--part-size", "3", "--json")
    assert resumed.code == 0, resumed.err
    ids = _documents(out)["document"]
    assert sorted(ids) == sorted(f"many.txt:{k}" for k in range(1, 151))  # each exactly once
    keys = [(r["document"], r["layer"], r["head"]) for r in _rows(out).to_pylist()]
    assert len(keys) == len(set(keys)) == 150 * 3 * 4
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert resumed.json()["scan"]["documents"]["scored"] == 150
    assert [c for c in children if _alive(c)] == []  # no worker outlived its killed driver


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie, dead but not reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@POOL
def test_hostile_lines_are_skipped_and_counted(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "bad.jsonl"
    corpus.write_bytes(b'{"text": "A good line of text here"}\n{"body": "no text field"}\n'
                       b'{"text": "caf\xe9 latin-1"}\nnot json\n[1, 2]\n{"text": 7}\n\n'
                       b'{"text": "x"}\n')
    run = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"),
              "--workers", "1", "--json")
    assert run.code == 0, run.err
    docs = run.json()["scan"]["documents"]
    assert (docs["scored"], docs["skipped"]) == (1, 7)
    assert docs["skipped_because"] == {"no field 'text'": 2, "not UTF-8": 1, "not JSON": 1,
                                       "field 'text' is not a string": 1, "empty line": 1,
                                       "fewer than 2 tokens": 1}


def test_a_100_mb_document_is_read_only_up_to_its_byte_limit(tmp_path: Path) -> None:
    from attncli.scan.corpus import documents

    folder = tmp_path / "corpus"
    folder.mkdir()
    with open(folder / "huge.txt", "wb") as file:
        for _ in range(100):
            file.write(b"word " * (2**20 // 5))
    (tmp_path / "lines.txt").write_bytes(b"short one\n" + b"w " * (50 * 2**20) + b"\nlast\n")
    tracemalloc.start()
    found = list(documents(folder, "text", 2**16))
    lines = list(documents(tmp_path / "lines.txt", "text", 2**16))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 2**20
    assert [(d.id, len(d.text or ""), d.cut_bytes) for d in found] == [("huge.txt", 2**16, True)]
    assert [(d.id, d.text, d.cut_bytes) for d in lines][::2] == [("lines.txt:1", "short one",
                                                                  False),
                                                                 ("lines.txt:3", "last", False)]
    assert lines[1].cut_bytes and len(lines[1].text or "") == 2**16


@POOL
def test_a_huge_document_is_cut_at_max_tokens(cli, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "big.txt").write_text("the cat sat " * 200_000, encoding="utf-8")
    (folder / "small.txt").write_text("a small one here", encoding="utf-8")
    os.mkfifo(folder / "pipe")  # opened, it would block the scan forever
    run = cli("scan", str(folder), "--model", TOY, "--out", str(tmp_path / "out"),
              "--workers", "1", "--max-tokens", "20", "--json")
    assert run.code == 0, run.err
    docs = run.json()["scan"]["documents"]
    assert (docs["scored"], docs["cut"], docs["skipped_because"]) == \
        (2, 1, {"not a regular file": 1})
    table = _documents(tmp_path / "out")
    assert dict(zip(table["document"], table["tokens"], strict=True))["big.txt"] == 20
    skip = cli("scan", str(folder), "--model", TOY, "--out", str(tmp_path / "skip"),
               "--workers", "1", "--max-tokens", "20", "--too-long", "skip", "--json")
    assert skip.json()["scan"]["documents"]["skipped_because"] == {
        "not a regular file": 1, "over the byte limit": 1}


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "holds no files"),
    (lambda p: pq.write_table(pa.table({"body": ["x y z"]}), p), "has no column 'text'"),
    (lambda p: None, "cannot read corpus"),
    (lambda p: p.write_text("a b"), "expected a folder, .txt, .jsonl or .parquet"),
])
def test_corpora_that_cannot_be_read_are_one_line(cli, tmp_path: Path, make: Any,  # noqa: ANN001
                                                  message: str) -> None:
    corpus = tmp_path / ("corpus.parquet" if "column" in message else
                         "corpus.csv" if "expected" in message else "corpus")
    make(corpus)
    cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out")
        ).assert_usage_error(message)
    assert not (tmp_path / "out").exists()


@POOL
def test_a_resume_with_other_settings_is_refused(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(DOCS[:2]), encoding="utf-8")
    out = str(tmp_path / "out")
    assert cli("scan", str(corpus), "--model", TOY, "--out", out, "--workers", "1").code == 0
    cli("scan", str(corpus), "--model", TOY, "--out", out, "--max-tokens", "9"
        ).assert_usage_error("holds a scan with other settings (max_tokens)")
    again = cli("scan", str(corpus), "--model", TOY, "--out", out, "--workers", "1", "--json")
    assert again.json()["scan"]["this_run"] == 0  # nothing left to do, nothing counted twice
    assert len(_documents(tmp_path / "out")["document"]) == 2


def test_without_pyarrow_scan_says_what_to_install(cli, tmp_path: Path,  # noqa: ANN001
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    cli("scan", str(tmp_path), "--model", TOY, "--out", str(tmp_path / "out")
        ).assert_usage_error("pip install 'attncli[scan]'")


@POOL
def test_show_reads_the_summary_and_draws_its_page(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(DOCS), encoding="utf-8")
    run = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"),
              "--workers", "1")
    assert run.code == 0, run.err
    assert "4 documents scored" in run.out and "Share of documents" in run.out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    shown = cli("show", str(tmp_path / "out" / "summary.json"))
    assert shown.code == 0, shown.err
    assert shown.out == run.out
    as_json = cli("show", str(tmp_path / "out" / "summary.json"), "--json")
    assert as_json.json() == summary
    page = tmp_path / "page.html"
    assert cli("show", str(tmp_path / "out" / "summary.json"), "--save", str(page)).code == 0
    assert "scanModel" in page.read_text() and '"scan"' in page.read_text()
    broken = {**summary, "scan": {**summary["scan"], "top": {"induction": [{"layer": 99}]}}}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    cli("show", str(tmp_path / "broken.json")).assert_usage_error("scan.top")


# Ray 2.60's gcs_server and raylets listen on every interface even when started with
# _node_ip_address='127.0.0.1' (seen with `ss -ltnp`): the Ray run is made in a network namespace
# of its own (`unshare --net`), where loopback is the only interface there is, so nothing of it
# can be reached from, or reach, any other address.
ISOLATED = ["unshare", "--net", "sh", "-c", 'ip link set lo up 2>/dev/null; exec "$@"', "sh"]


def _isolated_ray_scan(*args: str) -> subprocess.CompletedProcess[str]:
    """attncli scan --ray local in a network namespace that holds loopback alone."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run([*ISOLATED, sys.executable, "-m", "attncli", "scan", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def test_the_ray_path_equals_the_local_pool(cli, tmp_path: Path) -> None:  # noqa: ANN001
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("Ray is not installed here (pip install 'attncli[cluster]')")
    probe = subprocess.run([*ISOLATED, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("no network namespace can be made here (unshare --net needs root or user "
                    "namespaces), and Ray's servers listen on every interface")
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(DOCS), encoding="utf-8")
    local = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "local"),
                "--workers", "2", "--json")
    on_ray = _isolated_ray_scan(str(corpus), "--model", TOY, "--out", str(tmp_path / "ray"),
                                "--workers", "2", "--ray", "local", "--json")
    assert on_ray.returncode == 0, on_ray.stderr[-2000:]
    assert on_ray.stderr == ""  # Ray's own lines and notices stay off without --ray-logs

    def ordered(table: pa.Table) -> list[dict[str, Any]]:
        return sorted(table.to_pylist(), key=lambda r: (r["document"], r["layer"], r["head"]))

    assert ordered(_rows(tmp_path / "ray")) == ordered(_rows(tmp_path / "local"))
    strip = ("ray", "out")
    assert {k: v for k, v in json.loads(on_ray.stdout)["scan"].items() if k not in strip} == \
        {k: v for k, v in local.json()["scan"].items() if k not in strip}


@POOL
def test_a_parquet_corpus_is_read_by_its_column(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "shard.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "body": [DOCS[0], None, DOCS[1]]}), corpus,
                   row_group_size=2)
    run = cli("scan", str(corpus), "--model", TOY, "--field", "body", "--out",
              str(tmp_path / "out"), "--workers", "1", "--json")
    assert run.code == 0, run.err
    assert run.json()["scan"]["documents"]["skipped_because"] == {"null text": 1}
    rows = _rows(tmp_path / "out")
    _same_as_heads(cli, rows, "shard.parquet:2", DOCS[1], TOY)
    pq.write_table(pa.table({"body": [1, 2]}), tmp_path / "ints.parquet")
    cli("scan", str(tmp_path / "ints.parquet"), "--model", TOY, "--field", "body", "--out",
        str(tmp_path / "o2")).assert_usage_error("column 'body' is int64, not text")


@pytest.mark.parametrize("how", [("--ray", "local"), ()])
def test_without_ray_the_ray_path_says_what_to_install(cli, tmp_path: Path,  # noqa: ANN001
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       how: tuple[str, ...]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setenv("RAY_ADDRESS", "local")  # the option's environment variable
    corpus = tmp_path / "docs.txt"
    corpus.write_text(DOCS[0], encoding="utf-8")
    cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"), *how
        ).assert_usage_error("--ray needs Ray: pip install 'attncli[cluster]'")
    assert not (tmp_path / "out").exists()  # refused before anything is written


@POOL
def test_an_out_folder_inside_the_corpus_is_not_read_as_documents(cli,  # noqa: ANN001
                                                                  tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text(DOCS[0], encoding="utf-8")
    (folder / "sub" / "b.txt").write_text(DOCS[1], encoding="utf-8")
    for _ in range(2):  # the second run finds the first's parts in the folder it walks
        run = cli("scan", str(folder), "--model", TOY, "--out", str(folder / "atlas"),
                  "--workers", "1", "--json")
        assert run.code == 0, run.err
    assert sorted(_documents(folder / "atlas")["document"]) == ["a.txt", "sub/b.txt"]
    assert run.json()["scan"]["this_run"] == 0


# File names a filesystem allows that are not UTF-8, or that a terminal would obey.
HOSTILE_NAMES = [b"caf\xe9.txt", b"caf\\xe9.txt", b"new\nline", b"\x1b[31mred\x1b[0m",
                 b"-rf", b"[bold]markup", b"x" * 200]


@POOL
def test_any_file_name_is_scanned_once_and_resumed(cli, tmp_path: Path) -> None:  # noqa: ANN001
    folder = os.path.join(os.fsencode(tmp_path), b"corpus \x1b]0;title\x07 [red]x \xff")
    os.mkdir(folder)
    for k, name in enumerate(HOSTILE_NAMES):
        with open(os.path.join(folder, name), "wb") as file:
            file.write(DOCS[k % 4].encode())
    corpus, out = os.fsdecode(folder), str(tmp_path / "out")
    run = cli("scan", corpus, "--model", TOY, "--out", out, "--workers", "1")
    assert run.code == 0, run.err
    assert "\x1b" not in run.out and "\x07" not in run.out  # escaped, never obeyed
    heading = " ".join(run.out.split("\n\n")[0].split())  # the title, however it wraps
    assert "over a corpus · " in heading and "corpus \\x1b]0;title\\x07 [red]x \\xff" in heading
    assert f"{len(HOSTILE_NAMES)} documents scored" in run.out
    again = cli("scan", corpus, "--model", TOY, "--out", out, "--workers", "1", "--json")
    assert again.json()["scan"]["this_run"] == 0  # every document known by its stored name
    ids = _documents(tmp_path / "out")["document"]
    assert len(ids) == len(set(ids)) == len(HOSTILE_NAMES)
    assert "caf\\xe9.txt" in ids and "caf\\\\xe9.txt" in ids  # the byte, and the text
    shown = cli("show", str(tmp_path / "out" / "summary.json"))
    assert shown.code == 0 and shown.out == run.out


@POOL
def test_a_resume_over_damaged_parts_scans_their_documents_again(cli, tmp_path: Path  # noqa: ANN001
                                                                 ) -> None:
    corpus, out = tmp_path / "docs.txt", tmp_path / "out"
    corpus.write_text("\n".join(f"{DOCS[k % 4]} {k}" for k in range(6)), encoding="utf-8")
    args = ("scan", str(corpus), "--model", TOY, "--out", str(out), "--workers", "1",
            "--part-size", "2", "--json")
    assert cli(*args).code == 0
    (out / "heads" / "part-00001.parquet").unlink()  # rows gone, documents file kept
    (out / "documents" / "part-00002.parquet").write_bytes(b"PAR1 not really")
    again = cli(*args)
    assert again.code == 0, again.err
    assert again.err.startswith("attncli: note: 2 damaged part(s) set aside in ")
    assert again.err.count("\n") == 1 and "their documents are scanned again" in again.err
    summary = again.json()["scan"]
    assert (summary["documents"]["scored"], summary["this_run"]) == (6, 4)
    assert sorted(_documents(out)["document"]) == sorted(f"docs.txt:{k}" for k in range(1, 7))
    assert len(_rows(out)) == 6 * 3 * 4  # every document's rows, once


@POOL
def test_a_summary_that_cannot_be_written_is_one_line(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """summary.json is written last: where it cannot be (a folder in its place), one line
    names it, and the parts written stand for the same command to resume."""
    corpus, out = tmp_path / "docs.txt", tmp_path / "out"
    corpus.write_text("\n".join(DOCS[:2]), encoding="utf-8")
    args = ("scan", str(corpus), "--model", TOY, "--out", str(out), "--workers", "1", "--json")
    assert cli(*args).code == 0
    (out / "summary.json").unlink()
    (out / "summary.json").mkdir()
    cli(*args).assert_usage_error(f"cannot write {out / 'summary.json'}: Is a directory; the "
                                  "parts before it are kept, and the same command resumes")
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []
    (out / "summary.json").rmdir()
    again = cli(*args)
    assert (again.code, again.json()["scan"]["documents"]["scored"]) == (0, 2)
