"""`attncli doctor`."""

from __future__ import annotations

from typing import Annotated, Any

from attncli.cli.groups import Fields, command
from attncli.cli.options import Output
from attncli.errors import AttnCliError


@command()
def doctor(output: Annotated[Output, Fields("as_json")]) -> None:
    """Say what this install has: which C extensions are built and in use (and what their
    absence costs), torch's build and the devices it sees, and where attncli's folders are.

    The C extensions are found by the .pyi stub each ships with; where one did not compile (no C
    compiler at install time), attncli computes the same results with torch's and numpy's
    operations, more slowly. The folders: attncli's model cache (attncli pull), the
    hidden-state cache, the Hugging Face cache, Ollama's store, LM Studio's folder, and the
    settings file with the default model (attncli config).

    Examples:

      attncli doctor

      attncli doctor --json | jq '.extensions[] | {module, used}'
    """
    from attncli.models.stores.install import install
    from attncli.render.reports.doctor import render_doctor

    doc = install()
    doc["settings"] = _settings()
    output.deliver(doc, lambda out: render_doctor(doc))


def _settings() -> dict[str, Any]:
    """The settings file and the default model, or why they cannot be read."""
    from attncli.cli.settings import config_path, default_model
    from attncli.models.stores.paths import exists

    row: dict[str, Any] = {"path": None, "exists": False, "model": None, "error": None}
    try:
        path = config_path()
        row.update(path=str(path), exists=exists(path))
        found = default_model()
        row["model"] = None if found is None else {"model": found[0], "from": found[1]}
    except AttnCliError as err:
        row["error"] = str(err)
    return row
