"""One module per command; importing this package registers them all on the app, in help order."""

from attncli.cli.commands import (
    browse,
    causal,
    check,
    compare,
    demo,
    explain,
    generate,
    heads,
    lessons,
    models,
    run,
    scan,
    show,
    tokens,
)
from attncli.cli.commands.setup import config, doctor, pull  # setting attncli up, listed last

__all__ = ["browse", "causal", "check", "compare", "config", "demo", "doctor", "explain",
           "generate", "heads", "lessons", "models", "pull", "run", "scan", "show", "tokens"]
