"""One module per command; importing this package registers them all on the app, in help order."""

from attncli.cli.commands import (
    browse,
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

__all__ = ["browse", "check", "compare", "demo", "explain", "generate", "heads", "lessons",
           "models", "run", "scan", "show", "tokens"]
