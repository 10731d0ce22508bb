"""`attncli scan`'s hostile options: numbers past any sensible bound, NaN, an --out that is a
link to nothing, a FIFO, a device or a kernel folder: each one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT

TOY = str(ROOT / "samples" / "toy-gpt2")


@pytest.mark.parametrize("args, message", [
    (["--workers", "9223372036854775808"], "'--workers': 9223372036854775808 is not in the "
                                           "range 1<=x<=1024"),
    (["--workers", "0"], "'--workers': 0 is not in the range 1<=x<=1024"),
    (["--threshold", "nan"], "--threshold must be from 0 to 1 (got nan)"),
    (["--threshold", "inf"], "'--threshold': inf is not in the range 0.0<=x<=1.0"),
    (["--threshold", "-inf"], "'--threshold': -inf is not in the range 0.0<=x<=1.0"),
    (["--max-tokens", "9223372036854775808"], "'--max-tokens': 9223372036854775808 is not in "
                                              "the range 2<=x<=1048576"),
    (["--part-size", "0"], "'--part-size': 0 is not in the range x>=1"),
])
def test_numbers_out_of_bounds_are_one_line(cli, tmp_path: Path, args: list[str],  # noqa: ANN001
                                            message: str) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("one two three\n", encoding="utf-8")
    cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"), *args
        ).assert_usage_error(message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make, message", [
    (lambda p: p.symlink_to(p.parent / "nowhere"), "is a link to"),
    (lambda p: os.mkfifo(p), "is a FIFO, socket or device, not a folder"),
    (lambda p: p.write_text("x"), "is a file, not a folder"),
])
def test_an_out_that_is_no_folder_is_one_line(cli, tmp_path: Path, make: object,  # noqa: ANN001
                                              message: str) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("one two three\n", encoding="utf-8")
    out = tmp_path / "out"
    make(out)  # type: ignore[operator]
    cli("scan", str(corpus), "--model", TOY, "--out", str(out)).assert_usage_error(message)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("out", ["/dev/null", "/dev/attncli-atlas", "/proc/self/atlas"])
def test_no_scan_goes_under_the_kernels_folders(cli, tmp_path: Path, out: str) -> None:  # noqa: ANN001
    corpus = tmp_path / "docs.txt"
    corpus.write_text("one two three\n", encoding="utf-8")
    cli("scan", str(corpus), "--model", TOY, "--out", out).assert_usage_error(
        "where no scan is written")
    assert not Path("/dev/attncli-atlas").exists()


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["heads"][0].update(previous_token=1e308),
     "heads[0].previous_token is 1e+308, not a share from 0 to 1"),
    (lambda d: d["heads"][0]["share"].update(induction=-3),
     "heads[0].share.induction is -3, not a share from 0 to 1"),
    (lambda d: d["scan"]["top"]["induction"][0].update(share=2e9),
     "scan.top.induction[0].share is 2000000000.0, not a share from 0 to 1"),
    (lambda d: d["layers"][0].update(first_share=7),
     "layers[0].first_share is 7, not a share from 0 to 1"),
    (lambda d: d["scan"]["top"].update(prev=True), "scan.top.prev is true"),
    (lambda d: d["scan"]["top"]["first"][0].pop("head"), "scan.top.first[0] has no 'head'"),
    (lambda d: d["heads"][0]["share"].update(self=1e308), "heads[0].share.self is 1e+308"),
], ids=["score", "share", "top", "sink", "top-prev", "top-first", "share-self"])
def test_show_of_a_summary_with_a_share_past_1_is_one_line(cli, tmp_path: Path, edit,  # noqa: ANN001
                                                          message: str) -> None:
    """A share of attention or of documents is drawn × 100 as a whole number: 1e308 was an
    OverflowError traceback (exit 1)."""
    summary = _summary(cli, tmp_path)
    doc = json.loads(summary.read_text(encoding="utf-8"))
    edit(doc)
    summary.write_text(json.dumps(doc), encoding="utf-8")
    for args in ((), ("--save", str(tmp_path / "page.html"))):
        cli("show", str(summary), *args).assert_usage_error(message)


def test_show_of_a_summary_layer_without_a_sink_share_draws_a_dash(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """A layer no document gave a sink share is null in the summary (scan/summary.py): shown as
    a dash (it was a TypeError traceback, exit 1)."""
    summary = _summary(cli, tmp_path)
    doc = json.loads(summary.read_text(encoding="utf-8"))
    doc["layers"][0]["first_share"] = None
    summary.write_text(json.dumps(doc), encoding="utf-8")
    run = cli("show", str(summary))
    assert run.code == 0, run.err
    assert "L0     –" in run.out
    assert cli("show", str(summary), "--save", str(tmp_path / "page.html")).code == 0


def test_show_json_of_a_summary_writes_its_strings_escaped(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """A part of the summary no renderer reads (scan.workers, scan.out) holding a lone surrogate
    (a JSON escape no output encoding holds) or a control character: --json writes it escaped, as
    every other kind's checked strings are (it was the file's own string, and a TypeError
    traceback, exit 1)."""
    summary = _summary(cli, tmp_path)
    doc = json.loads(summary.read_text(encoding="utf-8"))
    doc["scan"]["workers"] = ["\ud800"]
    doc["scan"]["out"] = "\x1b[2Jout"
    summary.write_text(json.dumps(doc), encoding="ascii")
    run = cli("show", str(summary), "--json")
    assert run.code == 0, run.err
    scan = run.json()["scan"]
    assert scan["workers"] == ["\\ud800"] and scan["out"] == "\\x1b[2Jout"


_SCANNED: list[str] = []  # the scan's summary, made once a worker: each case edits a copy


def _summary(cli, tmp_path: Path) -> Path:  # noqa: ANN001
    """A copy of a small scan's summary.json in tmp_path (the scan, 2 s, made once)."""
    if not _SCANNED:
        corpus = tmp_path / "docs.txt"
        corpus.write_text("the cat sat on the mat\none two three four\n", encoding="utf-8")
        run = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "scanned"),
                  "--workers", "1")
        assert run.code == 0, run.err
        _SCANNED.append((tmp_path / "scanned" / "summary.json").read_text(encoding="utf-8"))
    summary = tmp_path / "summary.json"
    summary.write_text(_SCANNED[0], encoding="utf-8")
    return summary


def test_a_document_past_the_models_context_names_the_option_that_fits(cli,  # noqa: ANN001
                                                                       tmp_path: Path) -> None:
    """The toy's context is 128 positions, --max-tokens 512 by default: a long document is
    skipped with the scan's own fix (it said "shorten the text", of a corpus)."""
    corpus = tmp_path / "docs.txt"
    corpus.write_text("the cat sat on the mat\n" + "word " * 300 + "\n", encoding="utf-8")
    run = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"), "--json",
              "--workers", "1")
    assert run.code == 0, run.err
    reasons = run.json()["scan"]["documents"]["skipped_because"]
    assert [r for r in reasons if r.endswith("give --max-tokens 128 or less")] != [], reasons


def test_more_workers_than_memory_holds_is_one_line_before_any_starts(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """Each local worker is a process holding torch and the model: --workers 1024 on a corpus
    of many documents would start hundreds of them, and the kernel's OOM killer would end the
    scan, or another program. Refused in one line, before --out is made, naming how many fit;
    a corpus of fewer documents starts no more workers than it has documents."""
    import attncli.machine as machine
    from attncli.scan.pool import WORKER_BYTES

    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(f"the cat sat on the mat {k}" for k in range(300)),
                      encoding="utf-8")
    monkeypatch.setattr(machine, "memory_available", lambda: 20 * WORKER_BYTES)
    out = tmp_path / "out"
    cli("scan", str(corpus), "--model", TOY, "--out", str(out), "--workers", "1024"
        ).assert_usage_error("--workers 1024 starts up to 300 processes, each loading torch "
                             "and the model")
    assert "give --workers 10 or fewer" in cli(
        "scan", str(corpus), "--model", TOY, "--out", str(out), "--workers", "11").err
    assert not out.exists()
    few = tmp_path / "few.txt"
    few.write_text("the cat sat\na dog ran", encoding="utf-8")
    monkeypatch.setattr(machine, "memory_available", lambda: 4 * WORKER_BYTES)
    monkeypatch.setattr("attncli.scan.run.run_local", lambda *a: iter(()))  # no pool started
    assert cli("scan", str(few), "--model", TOY, "--out", str(out), "--workers", "1024",
               "--json").code == 0  # two documents: at most two workers, which fit


@pytest.mark.parametrize("cores, memory_workers, default", [(2, 20, 2), (64, 5, 5), (8, 0, 1)])
def test_the_default_workers_are_the_cores_that_memory_holds(
        monkeypatch: pytest.MonkeyPatch, cores: int, memory_workers: int, default: int) -> None:
    """Without --workers, a scan takes the usable cores, but no more workers than half the
    memory available holds (at least one): a many-core machine with little memory is not
    refused by its own default."""
    import attncli.machine as machine
    from attncli.scan import pool

    monkeypatch.setattr(pool, "usable_cores", lambda: cores)
    monkeypatch.setattr(machine, "memory_available",
                        lambda: 2 * memory_workers * pool.WORKER_BYTES + 1)
    assert pool.default_workers() == default
    if default > 1:
        pool.check_workers(default, 10_000)  # the default passes its own check
