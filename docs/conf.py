"""Sphinx configuration: Markdown pages read by MyST, the furo theme, the API from docstrings.

Built offline by `make docs` with warnings as errors: no intersphinx, no remote images."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # attncli from this checkout, for autodoc

from attncli.version import __version__  # noqa: E402

project = "attncli"
author = "the attncli authors"
copyright = "the attncli authors"  # noqa: A001  (Sphinx's name)
version = release = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

myst_heading_anchors = 3  # links to a section of another page: page.md#its-title
highlight_language = "text"  # a fence without a language is shown as it is
html_theme = "furo"
html_title = f"attncli {__version__}"
html_static_path = ["_static"]
autodoc_typehints = "description"
autodoc_member_order = "bysource"
