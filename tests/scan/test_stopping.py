"""scan's driver loop and signals: Ctrl-C, SIGTERM and SIGHUP stop the wait for results at
once, what came back is written, and the scan ends with the signal's own exit; a signal during
a part's write waits for the part to be whole; an ignored signal stays ignored."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from attncli.scan.stopping import ScanStopped, Stopper


class FakeStore:
    """Records each part written; can signal itself half-way through a write."""

    def __init__(self, signal_in_write: int | None = None) -> None:
        self.out = Path("/tmp/out")
        self.parts: list[list[str]] = []
        self.signal_in_write = signal_in_write

    def write(self, scored: list[dict[str, Any]]) -> None:
        if not scored:
            return
        if self.signal_in_write is not None:
            os.kill(os.getpid(), self.signal_in_write)  # lands in the middle of this write
            self.signal_in_write = None
        self.parts.append([s["document"] for s in scored])


def _results(batches: int, signal_after: int | None = None,
             closed: list[bool] | None = None) -> Iterator[list[dict[str, Any]]]:
    try:
        for k in range(batches):
            if k == signal_after:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while waiting for batch k
            yield [{"document": f"d{k}-{j}"} for j in range(2)]
    finally:
        if closed is not None:
            closed.append(True)


@pytest.fixture(autouse=True)
def _default_handlers() -> Iterator[None]:
    """Each test starts from Python's own handlers, and leaves them as it found them."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM,
                                                    signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_results_are_written_in_parts_of_part_size() -> None:
    store = FakeStore()
    assert Stopper(store, 3).drain(_results(4), 0, 8) == 8  # type: ignore[arg-type]
    assert [len(p) for p in store.parts] == [3, 3, 2]


def test_ctrl_c_stops_the_wait_and_writes_what_came_back() -> None:
    store, closed = FakeStore(), []
    with pytest.raises(ScanStopped) as stop:
        Stopper(store, 5).drain(_results(10, signal_after=3, closed=closed), 7, 27)  # type: ignore[arg-type]
    assert stop.value.signum == signal.SIGINT
    assert str(stop.value) == "13 documents are in /tmp/out; the same command resumes"
    assert sum(map(len, store.parts)) == 6  # the three batches that came back, nothing more
    assert closed == [True]  # the pool let go
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_during_a_write_waits_for_the_part() -> None:
    store = FakeStore(signal_in_write=signal.SIGTERM)
    with pytest.raises(ScanStopped) as stop:
        Stopper(store, 2).drain(_results(5), 0, 10)  # type: ignore[arg-type]
    assert stop.value.signum == signal.SIGTERM
    assert store.parts == [["d0-0", "d0-1"]]  # whole, and nothing written after it


def test_an_ignored_signal_stays_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # nohup, a script's `cmd &`
    store = FakeStore()
    assert Stopper(store, 4).drain(_results(6, signal_after=2), 0, 12) == 12  # type: ignore[arg-type]
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_signal_a_library_wraps_in_its_own_error_still_stops_the_scan() -> None:
    def wrapping() -> Iterator[list[dict[str, Any]]]:
        yield [{"document": "d0"}]
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # Ray's get turns the interrupt into its own
        except KeyboardInterrupt:
            raise RuntimeError("task cancelled") from None
        yield [{"document": "never"}]

    store = FakeStore()
    with pytest.raises(ScanStopped) as stop:
        Stopper(store, 5).drain(wrapping(), 0, 2)  # type: ignore[arg-type]
    assert stop.value.signum == signal.SIGTERM and store.parts == [["d0"]]
