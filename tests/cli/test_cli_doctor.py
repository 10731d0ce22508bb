"""`attncli doctor`: the C extensions found from the package itself (never a list that goes
stale), torch's build, the folders, the settings; and what it says when an extension is missing
or switched off."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import torch

from attncli.models.stores import install
from tests.conftest import ROOT


def _declared_extensions() -> list[str]:
    """The Extension names setup.py declares, read from its source."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    return sorted(node.args[0].value for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Extension"
                  and isinstance(node.args[0], ast.Constant))


def test_every_extension_setup_py_builds_is_found_and_has_a_stub() -> None:
    """The .pyi stub is what finds an extension in an installed wheel (where no .c is): each
    extension setup.py declares has one, and doctor finds exactly those."""
    declared = _declared_extensions()
    assert len(declared) >= 2
    assert install.extension_names() == declared
    for name in declared:
        stub = ROOT.joinpath(*name.split(".")).with_suffix(".pyi")
        assert stub.is_file(), f"{name} has no .pyi stub"


def test_doctor_reports_extensions_torch_folders_and_settings(cli) -> None:  # noqa: ANN001
    doc = cli("doctor", "--json").json()
    assert [e["module"] for e in doc["extensions"]] == _declared_extensions()
    for row in doc["extensions"]:
        built = importlib.util.find_spec(row["module"]) is not None
        assert row["built"] is built and row["used"] is built
    assert doc["torch"]["version"] == torch.__version__
    assert doc["torch"]["cuda"] == torch.version.cuda
    assert doc["torch"]["threads"] == torch.get_num_threads()
    names = [f["name"] for f in doc["folders"]]
    assert names[:4] == ["attncli's models (attncli pull)", "hidden-state cache",
                         "Hugging Face cache", "Ollama's store"]
    assert doc["settings"]["model"] is None and doc["settings"]["path"].endswith("config.toml")
    assert set(doc["pulled"]) == {"smollm2", "minilm"}


def test_the_text_names_each_extension_and_what_its_absence_costs(cli) -> None:  # noqa: ANN001
    out = cli("doctor").out
    for name in _declared_extensions():
        assert f"  {name}: built, in use" in out
    assert "without them the same results come from torch's and numpy's operations" in out
    assert f"torch {torch.__version__}" in out


def test_a_missing_or_switched_off_extension_is_said(cli,  # noqa: ANN001
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    missing = _declared_extensions()[0]
    real = importlib.util.find_spec

    def find(name: str, *args: object) -> object:
        return None if name == missing else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find)
    out = cli("doctor").out
    assert f"  {missing}: not built (no C compiler when attncli was installed?)" in out
    monkeypatch.setenv("ATTNCLI_FUSED", "0")
    assert f"{_declared_extensions()[1]}: built, switched off by ATTNCLI_FUSED=0" in \
        cli("doctor").out


def test_a_library_without_a_stub_or_source_is_found_too(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension added later is listed whichever of its files is there."""
    package = tmp_path / "attncli"
    (package / "part").mkdir(parents=True)
    (package / "part" / "_new.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (package / "part" / "_other.c").write_text("", encoding="utf-8")
    (package / "part" / "__init__.pyi").write_text("", encoding="utf-8")
    (package / "part" / "_private.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(install, "PACKAGE", package)
    monkeypatch.setattr(install.importlib.machinery, "EXTENSION_SUFFIXES",
                        [".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so"])
    assert install.extension_names() == ["attncli.part._new", "attncli.part._other"]


@pytest.mark.parametrize("width", [40, 60, 80])
def test_the_report_reads_at_any_width(cli, width: int,  # noqa: ANN001
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    out = cli("doctor").out
    assert all(len(line) <= width for line in out.splitlines())
    assert "C extensions (" in out and "Folders" in out


@pytest.mark.parametrize("width", [40, 80])
@pytest.mark.parametrize("checkout", ["/w", "/check/work/main/a-long-folder/of-a-checkout"])
def test_doctor_lines_wrap_under_their_indent(cli, width: int, checkout: str,  # noqa: ANN001
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A long line (the platform, a folder's path) wraps under its own two-space indent, with no
    line wider than the terminal and no padding after the text; a heading that wraps (attncli's
    own path, wherever the checkout is) goes on two spaces in, its words unchanged."""
    import json

    from rich.console import Console

    from attncli.render.reports.doctor import render_doctor

    doc = json.loads(cli("doctor", "--json").out)
    doc["attncli"]["path"] = f"{checkout}/attncli"
    console = Console(width=width, color_system=None, force_terminal=False)
    with console.capture() as captured:
        console.print(render_doctor(doc))
    lines = captured.get().splitlines()
    for line in lines:
        assert len(line) <= width, line
        assert line == line.rstrip(), repr(line)
    python = next(i for i, line in enumerate(lines) if line.startswith("  Python "))
    heading, block = lines[:python], lines[python:lines.index("")]
    assert heading[0].startswith("attncli ") and all(line.startswith("  ") for line in heading[1:])
    assert "".join(line.strip() for line in heading).replace(" ", "") == (
        f"attncli {doc['attncli']['version']} at {checkout}/attncli".replace(" ", ""))
    assert (len(block) > 1 or width > 40) and all(line.startswith("  ") for line in block)


def test_a_cache_that_is_no_folder_is_said(cli, tmp_path: Path,  # noqa: ANN001
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A file or a device where a cache folder belongs was listed as if it were the folder
    (/dev/zero with no remark; the hidden cache's '0 files, 0.0 MB')."""
    (tmp_path / "file").write_bytes(b"")
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", "/dev/zero")
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE", str(tmp_path / "file"))
    out = cli("doctor").out
    assert "  attncli's models (attncli pull): /dev/zero (not a folder)\n" in out
    assert " ".join(out.split()).count("(not a folder)") == 2  # a long path wraps the line
    rows = cli("doctor", "--json").json()["folders"]
    assert [(r["exists"], r["error"]) for r in rows[:2]] == [(True, "not a folder")] * 2
