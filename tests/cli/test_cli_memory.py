"""attncli/machine.py's refusal before torch or numpy loads under a tight address-space limit
(ulimit -v), and the CLI's one line where a library or buffer finds no room: each was a C crash
or a Python traceback (exit 1 or 134) where the one-line memory refusal belongs."""

from __future__ import annotations

import resource
import subprocess
import sys
from typing import Any

import pytest

from attncli import machine
from attncli.errors import AttnCliError
from tests.conftest import ROOT

MiB = 2**20


def test_check_loadable_counts_numpy_with_torch_where_torch_loads_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    need = machine.LOAD_SPACE["torch"] + machine.LOAD_SPACE["numpy"]
    monkeypatch.setattr(machine, "_address_space_left", lambda: need - 1)
    monkeypatch.delitem(sys.modules, "numpy")  # put back afterwards
    with pytest.raises(AttnCliError, match=r"loading torch maps about .* \(ulimit -v\) leaves"):
        machine.check_loadable("torch")
    monkeypatch.setattr(machine, "_address_space_left", lambda: need)
    machine.check_loadable("torch")
    monkeypatch.setattr(machine, "_address_space_left", lambda: None)  # no limit: no check
    machine.check_loadable("torch")


@pytest.mark.parametrize(("args", "package"), [
    (("run", "hi"), "torch"),  # was dlopen's ImportError traceback, exit 1 (or a bad_alloc abort)
    (("show", str(ROOT / "samples" / "journey.json")), "numpy")])  # was OpenBLAS's exit 1
def test_a_tight_ulimit_is_one_line_before_the_libraries_load(args: tuple[str, ...],
                                                               package: str) -> None:
    limit = (120 if package == "numpy" else 300) * MiB

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))

    ran = subprocess.run([sys.executable, "-m", "attncli", *args], capture_output=True,
                         timeout=120, check=False, preexec_fn=limited)
    err = ran.stderr.decode()
    assert ran.returncode == 2 and ran.stdout == b"", err
    assert err.startswith(f"attncli: error: out of memory: loading {package} maps about")
    assert err.count("\n") == 1 and "(ulimit -v)" in err


@pytest.mark.parametrize("message", [
    "unable to mmap 90868376 bytes from file <m.safetensors>: Cannot allocate memory (12)",
    "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory",
    "can't start new thread"])
def test_a_library_with_no_room_is_one_line(cli: Any, monkeypatch: pytest.MonkeyPatch,
                                            message: str) -> None:
    from attncli.cli import main

    def no_room() -> None:
        raise RuntimeError(message)

    monkeypatch.setattr(main, "check_threads_setting", no_room)
    ran = cli("tokens", "hi")
    assert ran.code == 2 and ran.out == "" and ran.err.count("\n") == 1
    assert ran.err.startswith("attncli: error: out of memory: the address-space limit")
    monkeypatch.setattr(main, "check_threads_setting", lambda: (_ for _ in ()).throw(
        RuntimeError("a bug of attncli's own")))
    with pytest.raises(RuntimeError, match="own"):  # anything else is not hidden
        cli("tokens", "hi")


def test_torchs_allocator_message_is_the_size_it_asked_for(cli: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's allocator names its source line, its code and the bytes it tried: the line says
    the size, not the rest."""
    from attncli.cli import main

    def no_room() -> None:
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                           "can't allocate memory: you tried to allocate 706815396 bytes. Error "
                           "code 12 (Cannot allocate memory)")

    monkeypatch.setattr(main, "check_threads_setting", no_room)
    ran = cli("tokens", "hi")
    assert ran.code == 2 and ran.out == ""
    assert ran.err == ("attncli: error: out of memory: the address-space limit (ulimit -v) or "
                       "the machine's memory is too small for this run (one allocation of "
                       "707 MB did not fit)\n")
