"""The sdist, as pip installs it in a fresh venv, and what it holds (tests/e2e/installing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.installing import (
    build,
    check_a_fresh_venv_runs_the_readme_examples,
    check_the_sdist_holds_what_the_readme_and_docs_use,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("dist"), wheel=False)


def test_the_sdist_holds_what_the_readme_and_docs_use(built: dict[str, Path]) -> None:
    check_the_sdist_holds_what_the_readme_and_docs_use(built)


def test_pip_installs_the_sdist_and_the_readme_examples_run(built: dict[str, Path],
                                                           tmp_path: Path) -> None:
    check_a_fresh_venv_runs_the_readme_examples(built, "sdist", tmp_path, "pip")
