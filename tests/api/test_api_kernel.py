"""A real Jupyter kernel (ipykernel, driven by jupyter_client as a notebook front end is): a
result as a cell's last expression and attncli.show() both reach the notebook as the page
(text/html) beside the tables (text/plain)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import attncli
from tests.api.test_api import _frame
from tests.conftest import ROOT, SENTENCE
from tests.render.test_page import embedded, urls


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An ipykernel of this venv's python (a kernelspec written for it), and its client."""
    import os

    from jupyter_client.manager import start_new_kernel

    home = tmp_path_factory.mktemp("jupyter")
    spec = home / "kernels" / "attncli-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "attncli test", "language": "python"}))
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "JUPYTER_RUNTIME_DIR")}
    os.environ["JUPYTER_PATH"], os.environ["JUPYTER_RUNTIME_DIR"] = str(home), str(home / "rt")
    manager, client = start_new_kernel(kernel_name="attncli-test", startup_timeout=300,
                                       cwd=str(ROOT))
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _outputs(client: Any, code: str) -> list[dict[str, Any]]:
    """The display_data and execute_result bundles of one cell (it must not raise)."""
    found: list[dict[str, Any]] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] in ("display_data", "execute_result"):
            found.append(msg["content"]["data"])

    reply = client.execute_interactive(code, output_hook=hook, timeout=300)
    assert reply["content"]["status"] == "ok", reply["content"]
    return found


def test_a_result_as_the_cells_value_is_the_page(kernel: Any) -> None:
    outputs = _outputs(kernel, "import attncli\nattncli.run("
                               f"{SENTENCE!r}, variant='multihead', heads=2)")
    assert len(outputs) == 1
    page = _frame(outputs[0]["text/html"])
    expected = attncli.run(SENTENCE, variant="multihead", heads=2).to_dict()
    assert embedded(page) == expected and urls(page) == set()
    assert "Attention weights" in outputs[0]["text/plain"]


def test_show_in_a_notebook_displays_the_page(kernel: Any) -> None:
    outputs = _outputs(kernel, "import attncli\nattncli.show([[1.0, 0.0], [0.25, 0.75]], "
                               "tokens=['cat', 'sat'])")
    assert len(outputs) == 1
    doc = embedded(_frame(outputs[0]["text/html"]))
    assert doc == attncli.view([[1.0, 0.0], [0.25, 0.75]], ["cat", "sat"]).to_dict()
    assert "0.7500" in outputs[0]["text/plain"]
