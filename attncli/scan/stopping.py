"""The driver's loop: results written in parts as they come back, and what a signal does
meanwhile. Ctrl-C, SIGTERM or SIGHUP stops the wait for results at once; the results that have
come back are written, and the scan ends with ScanStopped (the CLI's exit 130, 143 or 129). A
signal that lands while a part is written is held until the part is whole, so it never falls
between a part's rename and forgetting the documents in it. A signal the driver's parent
ignores (nohup, a script's `cmd &`) stays ignored."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from attncli.errors import AttnCliError
from attncli.scan.store import ScanStore

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
Progress = Callable[[str, int, int], None]


class ScanStopped(AttnCliError):
    """A signal stopped the scan, once what had come back was written."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum


class Stopper:
    """Results into parts of part_size documents in store, until they end or a signal comes."""

    def __init__(self, store: ScanStore, part_size: int) -> None:
        self.store, self.part_size = store, part_size
        self.signum: int | None = None
        self.holding = False  # inside a part's write: a signal is only remembered
        self.written = 0
        self.buffer: list[dict[str, Any]] = []

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        if not self.holding:
            raise KeyboardInterrupt

    def drain(self, results: Iterator[list[dict[str, Any]]], before: int, total: int,
              progress: Progress | None = None) -> int:
        """Every result written (see the module); the number of documents written."""
        previous = {sig: signal.signal(sig, self._stop) for sig in STOPS
                    if signal.getsignal(sig) is not signal.SIG_IGN}
        try:
            try:
                for scored in results:
                    self.buffer += scored
                    if progress is not None:
                        progress("documents", before + self.written + len(self.buffer), total)
                    while len(self.buffer) >= self.part_size:
                        self._write(self.part_size)
                self._write(len(self.buffer))
                return self.written
            except BaseException:  # noqa: BLE001 - what a signal broke out of (Ray may wrap it)
                if self.signum is None:
                    raise
            self.holding = True  # stopped: the rest is written whatever comes now
            self._write(len(self.buffer))
            raise ScanStopped(self.signum, f"{before + self.written:,} documents are in "
                                           f"{self.store.out}; the same command resumes")
        finally:
            self.holding = True
            close = getattr(results, "close", None)
            if close is not None:
                close()  # the pool's processes or Ray's actors let go, without waiting
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _write(self, count: int) -> None:
        """The buffer's first count results as one part, with signals held meanwhile."""
        held = self.holding
        self.holding = True
        self.store.write(self.buffer[:count])
        self.written += min(count, len(self.buffer))
        self.buffer = self.buffer[count:]
        self.holding = held
        if self.signum is not None and not held:
            raise KeyboardInterrupt  # a signal held during the write
