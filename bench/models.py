"""`attncli models` on a big store (#36): an Ollama store of 3,000 manifests naming a few blobs.

    .venv/bin/python bench/models.py                          # 3,000 manifests, 3 blobs
    .venv/bin/python bench/models.py --manifests 300 --repeats 1

The blobs are the real SmolLM2 GGUF (scripts/fetch_model.py fetches it once), hard-linked into a
temporary store (copied where the link cannot be made), so each header is a real one: 49,152
tokens of vocabulary. Each blob's header is parsed once however many manifests name it; before
that, each manifest parsed its blob again (3,000 manifests: 184 s). attncli's own cache and the
other stores are pointed at empty folders. Each command is a fresh process (wall time, median).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_MEDIA = "application/vnd.ollama.image.model"


def model_path() -> Path | None:
    """The real model's path from scripts/fetch_model.py (which fetches it once), or None."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_model.py"),
                           "smollm2"],
                          capture_output=True, text=True, check=False)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def build_store(root: Path, gguf: Path, manifests: int, blobs: int) -> None:
    """manifests manifests under root/manifests, spread over blobs copies of gguf in root/blobs."""
    (root / "blobs").mkdir(parents=True)
    size = gguf.stat().st_size
    digests = [hashlib.sha256(f"blob {k}".encode()).hexdigest() for k in range(blobs)]
    for digest in digests:  # the digest is a name here: attncli never hashes a blob
        target = root / "blobs" / f"sha256-{digest}"
        try:
            os.link(gguf, target)
        except OSError:
            shutil.copyfile(gguf, target)
    for k in range(manifests):
        folder = root / "manifests" / "registry.ollama.ai" / "library" / f"model-{k:05d}"
        folder.mkdir(parents=True)
        layer = {"mediaType": MODEL_MEDIA, "digest": f"sha256:{digests[k % blobs]}", "size": size}
        (folder / "latest").write_text(json.dumps({"schemaVersion": 2, "layers": [layer]}))


def timed(args: list[str], env: dict[str, str], repeats: int) -> tuple[float, int]:
    """The median wall time of repeats fresh runs, and the last run's stdout size in bytes."""
    times, size = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(args, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
        size = len(done.stdout)
    return statistics.median(times), size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=3000)
    parser.add_argument("--blobs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    opts = parser.parse_args()
    gguf = model_path()
    if gguf is None:
        print("not run: the real model could not be fetched (scripts/fetch_model.py)")
        return 0
    cli = str(Path(sys.executable).parent / "attncli")
    with tempfile.TemporaryDirectory(prefix="attncli-models-", dir=gguf.parent.parent) as tmp:
        store = Path(tmp) / "ollama"
        build_store(store, gguf, opts.manifests, opts.blobs)
        empty = str(Path(tmp) / "none")
        env = {**os.environ, "OLLAMA_MODELS": str(store), "HF_HUB_CACHE": empty,
               "LMSTUDIO_MODELS": empty, "ATTNCLI_MODEL_CACHE": empty, "COLUMNS": "120",
               "NO_COLOR": "1"}
        print(f"attncli models: {opts.manifests:,} Ollama manifests over {opts.blobs} blobs "
              f"(SmolLM2's GGUF), median of {opts.repeats}")
        for label, args in (("--json", [cli, "models", "--json"]), ("table", [cli, "models"])):
            seconds, size = timed(args, env, opts.repeats)
            print(f"  models {label:<7} {seconds:6.2f} s   {size:,} bytes out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
