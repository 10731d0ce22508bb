"""The wheel built from the sdist, as uv installs it in a fresh venv (pip where uv is missing):
tests/e2e/installing.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.installing import build, check_a_fresh_venv_runs_the_readme_examples

pytestmark = pytest.mark.slow


def test_uv_installs_the_wheel_and_the_readme_examples_run(tmp_path: Path) -> None:
    built = build(tmp_path / "dist")
    check_a_fresh_venv_runs_the_readme_examples(built, "wheel", tmp_path, "uv")
