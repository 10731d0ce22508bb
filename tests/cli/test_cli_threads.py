"""The CLI's OpenMP wait policy: idle threads sleep (they spun on the dequantizer's cores),
unless the user chose a policy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from attncli.cli import quiet_threads
from tests.conftest import ROOT


def test_the_policy_is_passive_unless_the_user_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    quiet_threads()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    quiet_threads()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_the_console_entry_sets_it_before_torch_is_imported() -> None:
    """The policy is read once, when libgomp starts: main() must set it before any import."""
    probe = ("import os, sys, types\n"
             "fake = types.ModuleType('attncli.cli.main')\n"
             "fake.main = lambda: print(os.environ.get('OMP_WAIT_POLICY'),\n"
             "                          'torch' in sys.modules)\n"
             "sys.modules['attncli.cli.main'] = fake\n"
             "import attncli.cli\n"
             "attncli.cli.main()\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["PASSIVE", "False"]
