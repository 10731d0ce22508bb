"""bench/options.py: every bench script's --threads refuses a count below 1 in argparse's one
error line, where torch.set_num_threads(0) ended the run in a RuntimeError's traceback."""

from __future__ import annotations

import argparse
import sys

import pytest

from tests.tools.benches import bench_module

SCRIPTS = ("decode_split", "agreement", "runtime", "receipt", "dense", "families", "generate",
           "scale")


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("given", ["0", "-1", "two"])
def test_a_thread_count_below_one_is_one_line(script: str, given: str,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    module = bench_module(script)
    args = ["model.gguf"] if script == "decode_split" else []  # its one positional argument
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *args, "--threads", given])
    with pytest.raises(SystemExit) as exited:
        module.main()
    assert exited.value.code == 2
    said = "must be a whole number of threads, 1 or more (got 'two')" if given == "two" \
        else f"must be 1 or more threads (got {given})"
    last = capsys.readouterr().err.rstrip("\n").splitlines()[-1]
    assert last == f"{script}.py: error: argument --threads: {said}"


def test_a_thread_count_of_one_or_more_is_taken() -> None:
    thread_count = bench_module("options").thread_count
    assert [thread_count(text) for text in ("1", "2", "16")] == [1, 2, 16]


def test_scale_takes_a_list_of_thread_counts_each_checked() -> None:
    thread_counts = bench_module("options").thread_counts
    assert thread_counts("1,2, 4") == [1, 2, 4]
    with pytest.raises(argparse.ArgumentTypeError, match="must be 1 or more threads"):
        thread_counts("1,0")
