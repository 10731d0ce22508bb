"""tests/conftest.py's `process` marker: set from what a test does (the processes it starts,
itself or through a helper or fixture), never from the names it uses."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import _spawning

MODULE = '''
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import attncli_process


def _run(args):
    return subprocess.run(args, check=False)


@pytest.fixture
def outcomes():
    with ThreadPoolExecutor() as pool:
        return pool.submit(_run, ["true"]).result()


def test_calls_a_helper():
    _run(["true"])


def test_hands_a_helper_on(tmp_path):
    _in(tmp_path, attncli_process, "demo")


def test_requests_a_spawning_fixture(outcomes):
    assert outcomes


def test_shells_out():
    os.system("true")


@pytest.mark.parametrize(("system", "subprocess_like"), [("truecolor", 1)])
def test_a_parameter_named_system(system, subprocess_like):
    assert system.upper() and subprocess_like


def test_mentions_popen_in_a_string():
    assert "Popen" in "subprocess.Popen"
'''


def test_the_marker_follows_what_a_test_does(tmp_path: Path) -> None:
    path = tmp_path / "test_sample.py"
    path.write_text(MODULE, encoding="utf-8")
    found = _spawning(path)
    assert {"_run", "outcomes", "test_calls_a_helper", "test_hands_a_helper_on",
            "test_requests_a_spawning_fixture", "test_shells_out"} <= found
    assert not {"test_a_parameter_named_system", "test_mentions_popen_in_a_string"} & found
