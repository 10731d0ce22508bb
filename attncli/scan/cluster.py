"""Ray: joining a cluster (or starting a throwaway one on this machine) in a way the user can
always leave, and the scan's actors on it.

An address is tried before Ray sees it: a TCP connection to its port within CONNECT_S, so a
cluster that is not there is one line in seconds, not Ray's minutes of retries. ray.init runs
on a thread of its own while the driver waits for it (at most JOIN_S, or START_S for `local`),
answering Ctrl-C meanwhile; the thread lives as long as the scan, because Ray ties the
processes of a local cluster to the thread that started them. Ray's own lines (its C++ core's
log, its Python logger's notices, its workers' output, and what it writes to stderr while it
starts) stay off unless --ray-logs.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from attncli.errors import AttnCliError
from attncli.scan.pool import Batch, Scored
from attncli.scan.worker import ScanSettings, Scorer

CONNECT_S = 5.0  # a TCP connection to the cluster's port, before Ray is asked
JOIN_S = 30.0  # ray.init joining a cluster that answered
START_S = 120.0  # ray.init starting a local one (Ray gives up on its own after about 30 s)
CLIENT_PORT = 10001  # ray://HOST without a port: Ray Client's own
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class RayScorer(Scorer):
    """The Ray actor: a Scorer (its model loaded once) on a node of the cluster."""


def check_ray(address: str = "local") -> None:
    """Ray importable, or one line saying what to install. A cluster on this machine's
    loopback is joined there: Ray otherwise swaps 127.0.0.1 for the machine's own address,
    where a cluster started on loopback does not answer."""
    _check_port(address)
    target = ray_target(address)
    if target is not None and target[0] in LOOPBACK:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read at import
    try:
        import ray  # noqa: F401
    except ImportError:
        raise AttnCliError("--ray needs Ray: pip install 'attncli[cluster]'") from None


def ray_target(address: str) -> tuple[str, int] | None:
    """The host and port an address names (HOST:PORT, [IPv6]:PORT, ray://HOST[:PORT]); None
    for `local`, `auto` or an address without a port, which Ray reads itself."""
    client = address.startswith("ray://")
    rest = address.removeprefix("ray://").split("/", 1)[0]
    host, colon, port = rest.rpartition(":")
    if not colon or "]" in port:  # no port: ray:// has its own, a bare host has none
        host, port = (rest, str(CLIENT_PORT)) if client else ("", "")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def _check_port(address: str) -> None:
    """One line for a HOST:PORT whose port is no port's number (99999, -5, '1 '), which Ray
    would retry for JOIN_S and then say only that it did not join."""
    rest = address.removeprefix("ray://").split("/", 1)[0]
    host, colon, port = rest.rpartition(":")
    if not (colon and host and port) or "]" in port:
        return  # no port: Ray reads such an address itself
    number = re.fullmatch(r"[+-]?[0-9]+", port) is not None
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise AttnCliError(f"--ray {address}: the port must be a number from 1 to 65535 "
                           f"(got {port if number else repr(port)})")


def join_ray(address: str, workers: int, logs: bool = False) -> Callable[[], None]:
    """The cluster at address joined (`local`: started on this machine's loopback, for
    workers actors), or one line saying why not; returns how to leave it."""
    check_ray(address)
    if address == "local":
        _check_temp_dir()
    else:
        check_reachable(address)
    if not logs:  # read when ray.init starts the core worker
        os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    import ray

    logging.getLogger("ray").setLevel(logging.INFO if logs else logging.ERROR)
    quiet: dict[str, Any] = {"log_to_driver": logs, "configure_logging": logs}
    if address == "local":
        keeper = _Keeper(lambda: ray.init(address="local", num_cpus=workers,
                                          include_dashboard=False,
                                          _node_ip_address="127.0.0.1", **quiet))
    else:
        keeper = _Keeper(lambda: ray.init(address=address, **quiet))
    waited = START_S if address == "local" else JOIN_S
    with _stderr_off(not logs):  # lines Ray writes before its log level is read
        keeper.start()
        joined = keeper.joined.wait(waited)
    if not joined:
        raise AttnCliError(f"--ray {address}: Ray did not {_what(address)} within "
                           f"{waited:g} s{_temp_dir_hint(address)}")
    if keeper.error is not None:
        reason = str(keeper.error).strip().splitlines()
        raise AttnCliError(f"--ray {address}: cannot {_what(address)} ("
                           f"{reason[0][:300] if reason else type(keeper.error).__name__})"
                           f"{_temp_dir_hint(address)}")

    def leave() -> None:
        try:
            ray.shutdown()
        finally:
            keeper.release.set()

    return leave


def check_reachable(address: str, timeout: float = CONNECT_S) -> None:
    """One line when nothing answers at the address's port within timeout seconds."""
    target = ray_target(address)
    if target is None:
        return
    host, port = target

    def connect() -> None:
        with socket.create_connection((host, port), timeout=timeout):
            pass

    probe = _Keeper(connect, linger=False)  # a name lookup has no timeout of its own
    probe.start()
    if not probe.joined.wait(timeout + 1.0) or isinstance(probe.error, TimeoutError):
        raise AttnCliError(f"--ray {address}: no Ray cluster answers at {host}:{port} "
                           f"(nothing within {timeout:g} s)")
    if isinstance(probe.error, OSError):
        why = probe.error.strerror or str(probe.error) or type(probe.error).__name__
        raise AttnCliError(f"--ray {address}: no Ray cluster answers at {host}:{port} ({why})")


def run_ray(settings: ScanSettings, batches: Iterable[Batch], workers: int) -> Iterator[Scored]:
    """Each batch scored by one of workers Ray actors on the cluster joined."""
    import ray
    from ray.exceptions import RayError
    from ray.util import ActorPool

    try:
        actor = ray.remote(num_cpus=1)(RayScorer)
        pool = ActorPool([actor.remote(settings) for _ in range(workers)])
        for batch in batches:
            while not pool.has_free():
                yield pool.get_next_unordered()
            pool.submit(lambda a, b: a.score_batch.remote(b), batch)
        while pool.has_next():
            yield pool.get_next_unordered()
    except RayError as err:
        reason = str(err).strip().splitlines()
        raise AttnCliError(f"a Ray worker failed ({reason[0][:300] if reason else 'no reason'})"
                           "; the parts written are kept, and the same command resumes"
                           ) from None


class _Keeper(threading.Thread):
    """call on a thread of its own; joined is set once it returns (error: what it raised). The
    thread then waits for release (linger), so what call started stays tied to a live thread."""

    def __init__(self, call: Callable[[], Any], linger: bool = True) -> None:
        super().__init__(daemon=True, name="attncli-ray")
        self.call, self.linger = call, linger
        self.joined, self.release = threading.Event(), threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.call()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting driver as it is
            self.error = err
        finally:
            self.joined.set()
        if self.linger:
            self.release.wait()


@contextmanager
def _stderr_off(off: bool) -> Iterator[None]:
    """Inside: file descriptor 2 on /dev/null (when off); back as it was however it ends, so
    attncli's own line, Ctrl-C's included, is seen."""
    if not off:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield  # no stderr to quiet
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _what(address: str) -> str:
    return "start a local Ray cluster" if address == "local" else "join the Ray cluster"


def _check_temp_dir() -> None:
    """RAY_TMPDIR, when set, an absolute path that is a folder or can be made one."""
    folder = os.environ.get("RAY_TMPDIR")
    if folder is None:
        return
    if not os.path.isabs(folder):
        raise AttnCliError(f"--ray local: RAY_TMPDIR must be an absolute path (got {folder!r})")
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise AttnCliError(f"--ray local: RAY_TMPDIR {folder!r} is not a folder")


def _temp_dir_hint(address: str) -> str:
    folder = os.environ.get("RAY_TMPDIR")
    return f" (RAY_TMPDIR={folder!r})" if address == "local" and folder else ""
