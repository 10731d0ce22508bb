"""attncli: a command-line attention inspector, and its Python API.

    import attncli
    attncli.run("Your journey starts with one step", variant="causal").weights

`import attncli` is light: torch is imported when a function runs (see attncli/api/).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from attncli.version import __version__

API = ("run", "explain", "heads", "show", "view", "check", "generate", "Result", "HeadsResult",
       "CheckResult", "Generation", "AttnCliError")
__all__ = ["AttnCliError", "CheckResult", "Generation", "HeadsResult", "Result", "__version__",
           "check", "explain", "generate", "heads", "run", "show", "view"]

if TYPE_CHECKING:
    from attncli.api import (
        CheckResult,
        Generation,
        HeadsResult,
        Result,
        check,
        explain,
        generate,
        heads,
        run,
        show,
        view,
    )
    from attncli.errors import AttnCliError


def __getattr__(name: str) -> Any:
    """The API's names, imported on first use (PEP 562)."""
    if name == "AttnCliError":
        from attncli.errors import AttnCliError

        return AttnCliError
    if name in API:
        # Lazily: `import attncli` stays light (no torch until a function runs).
        return getattr(importlib.import_module("attncli.api"), name)
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")
