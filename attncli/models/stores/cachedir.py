"""Where attncli keeps the models it fetches itself (scripts/fetch_model.py, run by make demo and
make test): the one copy of the rule.

It imports nothing beyond the standard library, so that scripts/fetch_model.py can load this file
by its path with the system Python, before attncli and its dependencies are installed.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "ATTNCLI_MODEL_CACHE"


def model_cache_dir() -> Path:
    """$ATTNCLI_MODEL_CACHE, else $XDG_CACHE_HOME/attncli/models, else ~/.cache/attncli/models;
    RuntimeError where no home folder can be found."""
    value = os.environ.get(ENV)
    if value:
        return Path(value).expanduser()
    base = xdg_base("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "attncli" / "models"


def xdg_base(var: str) -> str | None:
    """$var (XDG_CACHE_HOME, XDG_CONFIG_HOME) where it names an absolute folder (~ and ~user
    too: their expansion is); None where it is unset, empty or relative, which the XDG spec
    says to ignore (a relative one would put attncli's folders under whatever folder it runs
    in)."""
    value = os.environ.get(var, "")
    return value if value.startswith("~") or os.path.isabs(value) else None
