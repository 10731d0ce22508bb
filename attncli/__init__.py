"""attncli: a command-line attention inspector, and its Python API.

    import attncli
    attncli.run("Your journey starts with one step", variant="causal").weights

`import attncli` is light: torch is imported when a function runs (see attncli/api/).
"""

from __future__ import annotations

# Nothing is imported here at all (typing and attncli.version included): the console script
# imports this package before attncli.cli.main() can turn Ctrl-C into its one line.
TYPE_CHECKING = False

API = ("run", "explain", "heads", "show", "view", "check", "generate", "ablate", "patch",
       "Result", "HeadsResult", "CheckResult", "Generation", "AblationResult", "PatchResult",
       "AttnCliError")
__all__ = ["AblationResult", "AttnCliError", "CheckResult", "Generation", "HeadsResult",
           "PatchResult", "Result", "__version__", "ablate", "check", "explain", "generate",
           "heads", "patch", "run", "show", "view"]

if TYPE_CHECKING:
    from typing import Any

    from attncli.api import (
        AblationResult,
        CheckResult,
        Generation,
        HeadsResult,
        PatchResult,
        Result,
        ablate,
        check,
        explain,
        generate,
        heads,
        patch,
        run,
        show,
        view,
    )
    from attncli.errors import AttnCliError
    from attncli.version import __version__


def __getattr__(name: str) -> Any:
    """The API's names and __version__, imported on first use (PEP 562)."""
    if name == "__version__":
        from attncli.version import __version__

        return __version__
    if name == "AttnCliError":
        from attncli.errors import AttnCliError

        return AttnCliError
    if name in API:
        # Lazily: `import attncli` stays light (no torch until a function runs).
        import importlib

        return getattr(importlib.import_module("attncli.api"), name)
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")
