"""The docs site builds offline with no warning (warnings are errors, as in `make docs`), and
its pages are the ones the index promises."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Every test reads the site Sphinx builds once: slow (make check leaves it to make test).
pytestmark = pytest.mark.slow

DOCS = ROOT / "docs"
PAGES = sorted(str(p.relative_to(DOCS).with_suffix("")) for p in DOCS.rglob("*.md")
               if "_build" not in p.parts)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The site, built in-process as `make docs` builds it: -W --keep-going -b html."""
    sphinx = pytest.importorskip("sphinx.application", reason="the docs extra is not installed")
    out = tmp_path_factory.mktemp("html")
    warnings = io.StringIO()
    app = sphinx.Sphinx(str(DOCS), str(DOCS), str(out), str(out / ".doctrees"), "html",
                        status=None, warning=warnings, freshenv=True, warningiserror=True,
                        keep_going=True)
    app.build()
    assert app.statuscode == 0, warnings.getvalue()
    return out, warnings.getvalue()


def test_the_site_builds_with_no_warning(built: tuple[Path, str]) -> None:
    out, warnings = built
    assert warnings == ""
    assert [p for p in PAGES if not (out / f"{p}.html").is_file()] == []


def test_every_page_is_in_the_contents(built: tuple[Path, str]) -> None:
    """No orphan page: Sphinx warns of one only when it is not in any toctree."""
    out, _ = built
    assert len(PAGES) >= 25
    index = (out / "index.html").read_text(encoding="utf-8")
    for page in ("tutorial", "reference/index", "models", "api", "json", "performance",
                 "terminal", "extending", "architecture", "zh/index"):
        assert f'href="{page}.html"' in index, page


def test_the_api_page_has_each_public_function_from_its_docstring(
        built: tuple[Path, str]) -> None:
    import attncli

    out, _ = built
    page = (out / "api.html").read_text(encoding="utf-8")
    for name in ("run", "explain", "heads", "show", "view", "check", "generate"):
        assert f'id="attncli.{name}"' in page, name
        first = (getattr(attncli, name).__doc__ or "").strip().splitlines()[0]
        assert first and first.split()[0] in page


def test_nothing_on_the_site_is_fetched_from_the_network(built: tuple[Path, str]) -> None:
    out, _ = built
    remote = re.compile(r"<(?:img|script)[^>]*\bsrc=[\"']https?://"
                        r"|<link[^>]*\bhref=[\"']https?://")
    found = [str(p.relative_to(out)) for p in out.rglob("*.html")
             if remote.search(p.read_text(encoding="utf-8"))]
    assert found == []
    assert "sphinx.ext.intersphinx" not in (DOCS / "conf.py").read_text(encoding="utf-8")
