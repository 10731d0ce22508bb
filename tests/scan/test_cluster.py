"""scan on Ray: a cluster that is not there is one line in seconds (nothing listening, or a
port that never answers), a Ray that never finishes joining is given up, Ray's own lines stay
off, and Ctrl-C or SIGTERM while a local cluster starts keeps its exit (130, 143). Only loopback
or the test's own network namespace is ever a target."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from attncli.errors import AttnCliError
from attncli.scan import cluster
from attncli.scan.cluster import check_ray, check_reachable, join_ray, ray_target
from tests.conftest import ROOT
from tests.scan.test_scan import DOCS, ISOLATED, TOY, _alive

GENEROUS_S = 120  # a bound no healthy run comes near, at any load: the bug was minutes


@pytest.mark.parametrize("address, target", [
    ("127.0.0.1:6379", ("127.0.0.1", 6379)),
    ("[::1]:6380", ("::1", 6380)),
    ("ray://127.0.0.1:10002", ("127.0.0.1", 10002)),
    ("ray://localhost", ("localhost", 10001)),
    ("local", None), ("auto", None), ("10.1.2.3", None), ("host:port", None),
    ("127.0.0.1:0", None), ("127.0.0.1:70000", None),
])
def test_the_host_and_port_an_address_names(address: str, target: object) -> None:
    assert ray_target(address) == target


@pytest.mark.parametrize("address, port", [
    ("127.0.0.1:99999", "99999"), ("127.0.0.1:0", "0"), ("127.0.0.1:-5", "-5"),
    ("ray://head:70000", "70000"), ("[::1]:65536", "65536"),
    ("127.0.0.1:1 ", "'1 '"), ("host:port", "'port'"), ("127.0.0.1:６３７９", "'６３７９'"),
])
def test_a_port_that_is_no_port_number_is_one_line_at_once(address: str, port: str) -> None:
    # Ray itself retries such an address (a trailing space too) for JOIN_S, then says only that
    # it did not join
    with pytest.raises(AttnCliError, match=rf"^--ray {re.escape(address)}: the port must be "
                       rf"a number from 1 to 65535 \(got {port}\)$"):
        check_ray(address)


def _closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def blackholed() -> Iterator[int]:
    """A loopback port whose listener never accepts and whose queue is full: a connection
    to it waits, as one to an unroutable address does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    held = socket.create_connection(("127.0.0.1", port))  # fills the queue
    try:
        yield port
    finally:
        held.close()
        server.close()


def test_nothing_listening_is_one_line_at_once() -> None:
    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(AttnCliError, match=rf"^--ray 127.0.0.1:{port}: no Ray cluster answers "
                       rf"at 127.0.0.1:{port} \(Connection refused\)$"):
        check_reachable(f"127.0.0.1:{port}")
    assert time.monotonic() - start < GENEROUS_S


def test_a_port_that_never_answers_is_given_up(blackholed: int) -> None:
    start = time.monotonic()
    with pytest.raises(AttnCliError, match=r"no Ray cluster answers .* \(nothing within 1 s\)"):
        check_reachable(f"127.0.0.1:{blackholed}", timeout=1.0)
    assert 1.0 <= time.monotonic() - start < GENEROUS_S


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A `ray` whose init does what the test says; the environment it sets, restored."""
    calls = types.SimpleNamespace(init=lambda **kwargs: None, kwargs=[], shutdowns=0)

    def init(**kwargs: object) -> None:
        calls.kwargs.append(kwargs)
        calls.init(**kwargs)

    def shutdown() -> None:
        calls.shutdowns += 1

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(init=init, shutdown=shutdown))
    for name in ("RAY_BACKEND_LOG_LEVEL", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_TMPDIR"):
        monkeypatch.setenv(name, "")  # remembered: restored after the test, whatever is set
        monkeypatch.delenv(name)
    return calls


@pytest.fixture
def listening() -> Iterator[int]:
    """A loopback port that accepts connections (and says nothing)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = int(server.getsockname()[1])
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join()
    server.close()


def test_a_ray_that_never_joins_is_given_up(fake_ray: types.SimpleNamespace, listening: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    forever = threading.Event()
    fake_ray.init = lambda **kwargs: forever.wait()
    monkeypatch.setattr(cluster, "JOIN_S", 0.5)
    with pytest.raises(AttnCliError, match=rf"^--ray 127.0.0.1:{listening}: Ray did not join "
                       r"the Ray cluster within 0.5 s$"):
        join_ray(f"127.0.0.1:{listening}", 1)
    forever.set()
    assert fake_ray.kwargs == [{"address": f"127.0.0.1:{listening}", "log_to_driver": False,
                                "configure_logging": False}]
    assert os.environ["RAY_BACKEND_LOG_LEVEL"] == "error"  # Ray's C++ log: errors only


def test_an_error_of_ray_init_is_its_first_line(fake_ray: types.SimpleNamespace) -> None:
    def fail(**kwargs: object) -> None:
        raise RuntimeError("The current node timed out during startup.\nMore lines.")

    fake_ray.init = fail
    os.environ["RAY_TMPDIR"] = "/tmp/elsewhere"
    with pytest.raises(AttnCliError, match=r"^--ray local: cannot start a local Ray cluster "
                       r"\(The current node timed out during startup.\) "
                       r"\(RAY_TMPDIR='/tmp/elsewhere'\)$"):
        join_ray("local", 2)
    assert fake_ray.kwargs[0]["num_cpus"] == 2 and fake_ray.kwargs[0]["_node_ip_address"] == \
        "127.0.0.1"


def test_ray_logs_when_asked(fake_ray: types.SimpleNamespace) -> None:
    leave = join_ray("local", 1, logs=True)
    leave()
    assert fake_ray.kwargs[0]["log_to_driver"] is True and fake_ray.shutdowns == 1
    assert "RAY_BACKEND_LOG_LEVEL" not in os.environ


@pytest.mark.parametrize("folder, message", [
    ("relative/tmp", "RAY_TMPDIR must be an absolute path"),
    (str(ROOT / "README.md"), "is not a folder"),
])
def test_a_bad_ray_tmpdir_is_one_line(fake_ray: types.SimpleNamespace, folder: str,
                                      message: str) -> None:
    os.environ["RAY_TMPDIR"] = folder
    with pytest.raises(AttnCliError, match=message):
        join_ray("local", 1)
    assert fake_ray.kwargs == []  # Ray never asked


def _ray_installed() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip("Ray is not installed here (pip install 'attncli[cluster]')")


@pytest.mark.parametrize("how", ["--ray", "RAY_ADDRESS"])
def test_an_unreachable_cluster_is_one_line_and_no_ray_logs(tmp_path: Path, how: str) -> None:
    _ray_installed()
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(DOCS), encoding="utf-8")
    address = f"127.0.0.1:{_closed_port()}"
    env = {**os.environ, "RAY_ADDRESS": address} if how == "RAY_ADDRESS" else dict(os.environ)
    args = ["--ray", address] if how == "--ray" else []
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "attncli", "scan", str(corpus), "--model", TOY,
                          "--out", str(tmp_path / "out"), *args], env=env, capture_output=True,
                         text=True, timeout=GENEROUS_S * 5, check=False)
    assert time.monotonic() - start < GENEROUS_S
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (f"attncli: error: --ray {address}: no Ray cluster answers at "
                          f"{address} (Connection refused)\n")
    assert not (tmp_path / "out").exists()  # refused before anything is written


def _isolated_ok() -> None:
    _ray_installed()
    probe = subprocess.run([*ISOLATED, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("no network namespace can be made here, and Ray's servers listen on "
                    "every interface")


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@pytest.mark.parametrize("sig, code, line", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_a_signal_while_a_local_ray_starts_keeps_its_exit(tmp_path: Path, sig: int, code: int,
                                                         line: str) -> None:
    _isolated_ok()
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(f"{DOCS[k % 4]} {k}" for k in range(400)), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen([*ISOLATED, sys.executable, "-m", "attncli", "scan", str(corpus),
                             "--model", TOY, "--out", str(tmp_path / "out"), "--workers", "1",
                             "--ray", "local"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + GENEROUS_S * 5
    while not any(_name(p) == "gcs_server" for p in _descendants(proc.pid)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    started = _descendants(proc.pid)
    proc.send_signal(sig)  # Ray is starting (or the scan has just begun)
    _, err = proc.communicate(timeout=GENEROUS_S)
    assert proc.returncode == code, err  # not Ray's own SIGTERM handler's exit 15
    assert len(err.splitlines()) == 1 and err.startswith(f"attncli: error: {line}")
    deadline = time.monotonic() + GENEROUS_S
    while [p for p in started if _alive(p)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(p, _name(p)) for p in started if _alive(p)] == []  # Ray's processes went too


def test_an_address_that_never_answers_is_one_line_in_seconds(tmp_path: Path,
                                                              blackholed: int) -> None:
    _ray_installed()
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(DOCS), encoding="utf-8")
    address = f"127.0.0.1:{blackholed}"
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "attncli", "scan", str(corpus), "--model", TOY,
                          "--out", str(tmp_path / "out"), "--ray", address], capture_output=True,
                         text=True, timeout=GENEROUS_S * 5, check=False)
    assert time.monotonic() - start < GENEROUS_S
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (f"attncli: error: --ray {address}: no Ray cluster answers at "
                          f"{address} (nothing within 5 s)\n")
