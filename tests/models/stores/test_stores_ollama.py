"""Ollama's store, built here as Ollama writes it (manifest/manifest.go, types/model/name.go)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from attncli.errors import AttnCliError
from attncli.models.stores.ollama import (
    ollama_models,
    ollama_root,
    parse_ollama_name,
    resolve_ollama,
)

GGUF = b"GGUF" + bytes(range(60))
MODEL = "application/vnd.ollama.image.model"
TENSOR = "application/vnd.ollama.image.tensor"
LIBRARY = "registry.ollama.ai/library"
PART80, PART350 = "8" * 80, "3" * 350
TIMEOUT_S = 300  # a hang guard only: the child's work takes well under a second


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add_blob(root: Path, data: bytes) -> tuple[str, Path]:
    """Store data as Ollama does: blobs/sha256-<hex of its sha256>."""
    digest = _digest(data)
    path = root / "blobs" / digest.replace(":", "-")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return digest, path


def _layer(media: str, data: bytes, root: Path) -> dict[str, Any]:
    digest, _ = _add_blob(root, data)
    return {"mediaType": media, "digest": digest, "size": len(data)}


def _write_manifest(root: Path, repo: str, name: str, tag: str, body: Any) -> Path:
    path = root / "manifests" / repo / name / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def _pull(root: Path, name: str = "smollm2", tag: str = "latest", repo: str = LIBRARY,
          data: bytes = GGUF) -> Path:
    """A model as `ollama pull` leaves it: a GGUF model layer, a template, a licence, params."""
    config = _layer("application/vnd.docker.container.image.v1+json",
                    b'{"model_format":"gguf","model_family":"llama"}', root)
    layers = [_layer(MODEL, data, root),
              _layer("application/vnd.ollama.image.template", b"{{ .Prompt }}", root),
              _layer("application/vnd.ollama.image.license", b"Apache-2.0", root),
              _layer("application/vnd.ollama.image.params", b'{"stop":["<|im_end|>"]}', root)]
    _write_manifest(root, repo, name, tag, {
        "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": config, "layers": layers})
    return root / "blobs" / _digest(data).replace(":", "-")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ollama-models"
    (root / "manifests").mkdir(parents=True)
    (root / "blobs").mkdir()
    monkeypatch.setenv("OLLAMA_MODELS", str(root))
    return root


def _refusal(model: str) -> str:
    with pytest.raises(AttnCliError) as caught:
        resolve_ollama(model)
    message = str(caught.value)
    assert "\n" not in message and message
    return message


# Ollama's own table (TestParseNameParts, TestNameIsValid): name -> manifest path under manifests/.
@pytest.mark.parametrize(("model", "path"), [
    ("ollama:llama3.2", "registry.ollama.ai/library/llama3.2/latest"),
    ("ollama:llama3.2:1b", "registry.ollama.ai/library/llama3.2/1b"),
    ("ollama:registry.ollama.ai/library/dolphin-mistral:7b-v2.6-dpo-laser-q6_K",
     "registry.ollama.ai/library/dolphin-mistral/7b-v2.6-dpo-laser-q6_K"),
    ("ollama:scheme://host:port/namespace/model:tag", "host:port/namespace/model/tag"),
    ("ollama:host/namespace/model:tag", "host/namespace/model/tag"),
    ("ollama:host:port/namespace/model:tag", "host:port/namespace/model/tag"),
    ("ollama:host/namespace/model", "host/namespace/model/latest"),
    ("ollama:host:port/namespace/model", "host:port/namespace/model/latest"),
    ("ollama:namespace/model", "registry.ollama.ai/namespace/model/latest"),
    ("ollama:model", "registry.ollama.ai/library/model/latest"),
    ("ollama:h/nn/mm:t", "h/nn/mm/t"),
    ("ollama:_why/_the/_lucky:_stiff", "_why/_the/_lucky/_stiff"),
    ("ollama:host:https/namespace/model:tag", "host:https/namespace/model/tag"),
    (f"ollama:{PART80}/{PART80}/{PART80}:{PART80}", f"{PART80}/{PART80}/{PART80}/{PART80}"),
    (f"ollama:{PART350}/{PART80}/{PART80}:{PART80}", f"{PART350}/{PART80}/{PART80}/{PART80}"),
])
def test_names_map_to_ollamas_manifest_paths(model: str, path: str) -> None:
    repo, name, tag = parse_ollama_name(model) or ("", "", "")
    assert f"{repo}/{name}/{tag}" == path


@pytest.mark.parametrize("model", ["gpt2", "org/name", "./ollama:x", "Ollama:x", "model.gguf"])
def test_other_names_are_not_ollama_names(model: str) -> None:
    assert parse_ollama_name(model) is None


# Ollama's invalid names (TestNameIsValid) and names that would leave the store.
@pytest.mark.parametrize("model", [
    "ollama:", "ollama:^", "ollama:mm:", "ollama:n/m:", "ollama:/nn/mm", "ollama://",
    "ollama://mm", "ollama:hh//", "ollama://mm:@", "ollama:00@", "ollama:@", "ollama:m@d",
    "ollama:-hh/nn/mm:tt", "ollama:hh/-nn/mm:tt", "ollama:hh/nn/-mm:tt", "ollama:hh/nn/mm:-tt",
    "ollama:host/name:space/model:tag", "ollama:..", "ollama:../../etc/passwd",
    "ollama:library/..", "ollama:a/../b", "ollama:llama:../../x", "ollama:a/b/c/d:t",
    "ollama:" + "m" * 81, "ollama:h" + "3" * 350 + "/n/m", "ollama:name\n:tag", "ollama:na me",
    "ollama:ns.dot/model",
])
def test_malformed_names_are_one_line(model: str) -> None:
    with pytest.raises(AttnCliError) as caught:
        parse_ollama_name(model)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and len(message) < 400
    assert "ollama:" in message


def test_root_follows_ollama_models_like_ollama(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("OLLAMA_MODELS", f" '{tmp_path}' ")  # Ollama trims spaces and quotes
    assert ollama_root() == tmp_path
    monkeypatch.setenv("OLLAMA_MODELS", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ollama_root() == tmp_path / "home" / ".ollama" / "models"


def test_a_pulled_model_resolves_to_its_gguf_blob(store: Path) -> None:
    blob = _pull(store, "smollm2", "135m")
    assert resolve_ollama("ollama:smollm2:135m") == blob.resolve()
    assert resolve_ollama("ollama:smollm2:135m").read_bytes() == GGUF


def test_latest_namespaces_and_hosts(store: Path) -> None:
    latest = _pull(store, "qwen3", data=GGUF + b"latest")
    user = _pull(store, "tiny", "q4", repo="registry.ollama.ai/someone", data=GGUF + b"user")
    other = _pull(store, "tiny", "q4", repo="localhost:5000/team", data=GGUF + b"host")
    assert resolve_ollama("ollama:qwen3") == latest.resolve()
    assert resolve_ollama("ollama:someone/tiny:q4") == user.resolve()
    assert resolve_ollama("ollama:registry.ollama.ai/someone/tiny:q4") == user.resolve()
    assert resolve_ollama("ollama:localhost:5000/team/tiny:q4") == other.resolve()


def test_a_symlinked_store_is_followed(store: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    blob = _pull(store, "smollm2")
    (tmp_path / "link").symlink_to(store)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "link"))
    assert resolve_ollama("ollama:smollm2") == blob.resolve()


def test_a_missing_model_names_the_tags_there_and_the_pull(store: Path) -> None:
    _pull(store, "smollm2", "135m")
    message = _refusal("ollama:smollm2:7b")
    assert "no model smollm2:7b" in message and "135m" in message
    assert "ollama pull smollm2:7b" in message


def test_no_store_is_one_line_naming_the_variable(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "absent"))
    assert "OLLAMA_MODELS" in _refusal("ollama:smollm2")
    assert ollama_models() == []


def _model_manifest(store: Path, layers: Any, name: str = "bad") -> None:
    _write_manifest(store, LIBRARY, name, "latest", {"schemaVersion": 2, "layers": layers})


@pytest.mark.parametrize(("body", "expected"), [
    ("{not json", "is not valid JSON"),
    ("", "is not valid JSON"),
    ([1, 2], "is not a JSON object"),
    ({"schemaVersion": 2}, "lists no layers"),
    ({"layers": []}, "lists no layers"),
    ({"layers": {"mediaType": MODEL}}, "lists no layers"),
    ({"layers": ["sha256:00"]}, "layer 0 is not a JSON object"),
    ({"layers": [{"mediaType": "application/vnd.ollama.image.template", "digest": _digest(b"t"),
                  "size": 1}]}, "has no model layer"),
    ({"layers": [{"mediaType": MODEL, "digest": "sha256:" + "0" * 63, "size": 1}]},
     "is not sha256:<64 hex digits>"),
    ({"layers": [{"mediaType": MODEL, "digest": "md5:" + "0" * 32, "size": 1}]},
     "is not sha256:<64 hex digits>"),
    ({"layers": [{"mediaType": MODEL, "digest": "sha256:" + "g" * 64, "size": 1}]},
     "is not sha256:<64 hex digits>"),
    ({"layers": [{"mediaType": MODEL, "digest": "sha256:../../../../etc/passwd", "size": 1}]},
     "is not sha256:<64 hex digits>"),
    ({"layers": [{"mediaType": MODEL, "digest": "sha256:" + "a" * 64 + "/../../x", "size": 1}]},
     "is not sha256:<64 hex digits>"),
    ({"layers": [{"mediaType": MODEL, "digest": 7, "size": 1}]}, "is not sha256:<64 hex digits>"),
    ({"layers": [{"mediaType": MODEL, "size": 1}]}, "is not sha256:<64 hex digits>"),
    ({"layers": [{"mediaType": MODEL, "digest": _digest(b"absent"), "size": 6}]},
     "is not in"),
])
def test_hostile_manifests_are_one_line(store: Path, body: Any, expected: str) -> None:
    _write_manifest(store, LIBRARY, "bad", "latest", body)
    assert expected in _refusal("ollama:bad")


def test_a_lying_size_and_a_non_integer_size_are_refused(store: Path) -> None:
    digest, _ = _add_blob(store, GGUF)
    _model_manifest(store, [{"mediaType": MODEL, "digest": digest, "size": len(GGUF) + 1}])
    assert f"holds {len(GGUF):,} bytes but its manifest says {len(GGUF) + 1:,}" in \
        _refusal("ollama:bad")
    _model_manifest(store, [{"mediaType": MODEL, "digest": digest, "size": "64"}])
    assert "is not a whole number of bytes" in _refusal("ollama:bad")


@pytest.mark.parametrize("data", [b"", b"\x00" * 64, b"PK\x03\x04" + bytes(60)])
def test_a_blob_that_is_not_gguf_is_refused_as_ollamas(store: Path, data: bytes) -> None:
    """An Ollama model layer is a GGUF file: a blob that is not one (an empty file, a damaged
    or foreign blob) is named as Ollama's, never read as a safetensors checkpoint."""
    _model_manifest(store, [_layer(MODEL, data, store)])
    message = _refusal("ollama:bad")
    assert message.startswith("bad:latest's model blob sha256-") and \
        f"is not a GGUF file (it starts with {data[:4]!r}, not b'GGUF';" in message, message
    assert "ollama pull bad:latest" in message
    listed = {entry["name"]: entry["error"] for entry in ollama_models()}
    assert listed == {"bad:latest": message}


def test_several_model_layers_are_refused(store: Path) -> None:
    layers = [_layer(MODEL, GGUF, store), _layer(MODEL, GGUF + b"2", store)]
    _model_manifest(store, layers)
    assert "has 2 model layers" in _refusal("ollama:bad")


def test_the_per_tensor_layout_is_refused_by_name(store: Path) -> None:
    layers = [{**_layer(TENSOR, b"st" + bytes([i]), store), "name": f"model.layers.{i}.weight"}
              for i in range(3)]
    layers.append(_layer("application/vnd.ollama.image.json", b"{}", store))
    _model_manifest(store, layers)
    message = _refusal("ollama:bad")
    assert "per-tensor layout" in message and "3 layers of" in message and TENSOR in message


def test_symlinks_out_of_the_store_are_refused(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.gguf"
    outside.write_bytes(GGUF)
    digest = _digest(GGUF)
    (store / "blobs" / digest.replace(":", "-")).symlink_to(outside)
    _model_manifest(store, [{"mediaType": MODEL, "digest": digest, "size": len(GGUF)}])
    assert "points outside Ollama's store" in _refusal("ollama:bad")
    fake = tmp_path / "manifest.json"
    fake.write_text(json.dumps({"layers": [_layer(MODEL, GGUF + b"x", store)]}))
    target = store / "manifests" / LIBRARY / "evil"
    target.mkdir(parents=True)
    (target / "latest").symlink_to(fake)
    assert "points outside Ollama's store" in _refusal("ollama:evil")


def test_a_symlinked_blob_inside_the_store_is_followed(store: Path) -> None:
    _, real = _add_blob(store, GGUF)
    digest = "sha256:" + "a" * 64
    (store / "blobs" / digest.replace(":", "-")).symlink_to(real)
    _model_manifest(store, [{"mediaType": MODEL, "digest": digest, "size": len(GGUF)}])
    assert resolve_ollama("ollama:bad") == real.resolve()


def _in_child(code: str, store: Path) -> list[str]:
    """stdout lines of code run in a child under a memory limit (a hang fails at the guard)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "OLLAMA_MODELS": str(store)}, preexec_fn=limit,
                          timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


CHILD = ("from attncli.errors import AttnCliError\n"
         "from attncli.models.stores.ollama import resolve_ollama, ollama_models\n"
         "for name in {names!r}:\n"
         "    try:\n        print(resolve_ollama(name))\n"
         "    except AttnCliError as err:\n        print(err)\n"
         "for entry in ollama_models():\n    print(entry['name'], '->', entry['error'])\n")


def test_a_symlink_loop_and_a_folder_are_one_line(store: Path) -> None:
    folder = store / "manifests" / LIBRARY / "loop"
    folder.mkdir(parents=True)
    (folder / "latest").symlink_to(folder / "latest")
    assert "cannot look at" in _refusal("ollama:loop")
    assert _refusal("ollama:loop").endswith(": a loop of symbolic links")  # not "RuntimeError"
    (folder / "dir").mkdir()
    assert "is not a regular file" in _refusal("ollama:loop:dir")


def test_fifos_are_refused_without_opening_them(store: Path) -> None:
    folder = store / "manifests" / LIBRARY / "pipe"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "latest")  # an open() would wait for a writer forever
    digest = "sha256:" + "b" * 64
    os.mkfifo(store / "blobs" / digest.replace(":", "-"))
    _model_manifest(store, [{"mediaType": MODEL, "digest": digest, "size": 1}])
    lines = _in_child(CHILD.format(names=["ollama:pipe", "ollama:bad"]), store)
    assert len(lines) == 4 and all("is not a regular file" in line for line in lines), lines
    assert lines[2].startswith("bad:latest -> ") and lines[3].startswith("pipe:latest -> ")


def test_a_huge_manifest_is_refused_before_reading_under_a_memory_limit(store: Path) -> None:
    path = store / "manifests" / LIBRARY / "huge" / "latest"
    path.parent.mkdir(parents=True)
    with open(path, "wb") as stream:
        stream.truncate(2 * 2**30)  # sparse: 2 GiB of zeros, taking no disk
    lines = _in_child(CHILD.format(names=["ollama:huge"]), store)
    assert len(lines) == 2 and all("more than the 16 MiB attncli reads" in line for line in lines)


def test_the_listing_names_every_manifest_and_never_raises(store: Path, tmp_path: Path) -> None:
    good = _pull(store, "smollm2", "135m")
    user = _pull(store, "tiny", "q4", repo="registry.ollama.ai/someone", data=GGUF + b"u")
    _write_manifest(store, LIBRARY, "broken", "latest", "{oops")
    layers = [_layer(TENSOR, b"t", store)]
    _model_manifest(store, layers, name="mlx")
    _write_manifest(store, "localhost:5000/team", "gone", "v1",
                    {"layers": [{"mediaType": MODEL, "digest": _digest(b"no"), "size": 2}]})
    (store / "manifests" / LIBRARY / "loop").mkdir()
    (store / "manifests" / LIBRARY / "loop" / "latest").symlink_to("latest")
    (store / "manifests" / LIBRARY / "odd\x1bname").mkdir()
    (store / "manifests" / LIBRARY / "odd\x1bname" / "latest").write_text("{}")
    (store / "manifests" / LIBRARY / "shallow-file").write_text("{}")  # not 4 levels down: skipped
    listed = {entry["name"]: entry for entry in ollama_models()}
    assert sorted(listed) == sorted(["smollm2:135m", "someone/tiny:q4", "broken:latest",
                                     "mlx:latest", "localhost:5000/team/gone:v1", "loop:latest",
                                     "odd\\x1bname:latest"])
    assert listed["smollm2:135m"] == {"name": "smollm2:135m", "source": "ollama",
                                      "path": str(good.resolve()), "size": len(GGUF),
                                      "error": None}
    assert listed["someone/tiny:q4"]["path"] == str(user.resolve())
    errors = {name: entry["error"] for name, entry in listed.items() if entry["error"]}
    assert set(errors) == set(listed) - {"smollm2:135m", "someone/tiny:q4"}
    assert "per-tensor layout" in errors["mlx:latest"]
    assert "is not valid JSON" in errors["broken:latest"]
    assert "is not in" in errors["localhost:5000/team/gone:v1"]
    assert "not a valid Ollama name" in errors["odd\\x1bname:latest"]
    assert all("\n" not in error and "\x1b" not in error for error in errors.values())


def test_an_unreadable_folder_in_the_store_is_skipped(store: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _pull(store, "smollm2")
    _pull(store, "hidden", repo="locked.example/team")
    scandir = os.scandir

    def refusing(path: str | os.PathLike[str]) -> object:
        if Path(path).name == "locked.example":  # as a folder of mode 000 does for a non-root user
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    assert [entry["name"] for entry in ollama_models()] == ["smollm2:latest"]


def test_the_listing_never_walks_out_of_the_store(store: Path, tmp_path: Path) -> None:
    _pull(store, "smollm2")
    outside = tmp_path / "elsewhere"
    _pull(outside, "secret")
    (store / "manifests" / "evil.example").symlink_to(outside / "manifests" / "registry.ollama.ai")
    (store / "manifests" / LIBRARY / "alias").symlink_to(store / "manifests" / LIBRARY / "smollm2")
    assert [entry["name"] for entry in ollama_models()] == ["alias:latest", "smollm2:latest"]


def test_the_listing_walk_is_bounded(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(10):
        _pull(store, f"m{i}", data=GGUF + bytes([i]))
    assert len(ollama_models()) == 10
    monkeypatch.setattr("attncli.models.stores.ollama.MAX_ENTRIES", 16)
    assert len(ollama_models()) < 10
