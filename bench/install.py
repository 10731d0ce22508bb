"""What a user's install costs: attncli's wheel (built here from the sdist) installed into a
fresh environment by pip, pipx and uv, each timed, and the environment's size on disk measured.

    .venv/bin/python bench/install.py                 # pip, pipx and uv
    .venv/bin/python bench/install.py --paths pip,uv

torch comes from the CPU wheel in /opt/wheels (--find-links): it stands in for PyTorch's CPU
index (https://download.pytorch.org/whl/cpu), which the documented commands name and this machine
cannot reach; everything else comes from PyPI, with the installers' caches off, so each install
downloads what a first install downloads, and pip's own configuration off (PIP_CONFIG_FILE:
this machine's adds local mirrors). pipx itself is installed into a scratch venv first (not
timed). Times are wall seconds on a shared machine: read them as the order of magnitude.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "install.json"
WHEELS = Path(os.environ.get("WHEELS", "/opt/wheels"))
TORCH = "torch==2.13.0+cpu"  # the local CPU wheel's version, named so no other torch is taken


def build(out: Path) -> tuple[Path, Path]:
    """The sdist built from this tree, and the wheel built from that sdist."""
    run = [sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
           "print(getattr(b, sys.argv[1])(sys.argv[2]))"]
    name = subprocess.run([*run, "build_sdist", str(out)], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip().splitlines()[-1]
    sdist = out / name
    with tarfile.open(sdist) as archive:
        archive.extractall(out, filter="data")
    source = out / name.removesuffix(".tar.gz")
    wheel = subprocess.run([*run, "build_wheel", str(out)], cwd=source, capture_output=True,
                           text=True, check=True).stdout.strip().splitlines()[-1]
    return sdist, out / wheel


def size(folder: Path) -> int:
    """Bytes of the files under folder (links not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed: {done.stderr[-600:]}")
    return took


def install(path: str, wheel: Path, tmp: Path) -> dict:
    """One install path into a fresh place under tmp: its time, its size, what it made."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))},
           "PIP_NO_CACHE_DIR": "1", "UV_NO_CACHE": "1", "PIP_CONFIG_FILE": os.devnull}
    where = tmp / path
    if path == "pip":
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
        took = timed([str(where / "bin" / "pip"), "install", "-q", "--find-links", str(WHEELS),
                      str(wheel), TORCH], env)
        exe = where / "bin" / "attncli"
    elif path == "pipx":
        tools = tmp / "pipx-itself"
        subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
        subprocess.run([str(tools / "bin" / "pip"), "install", "-q", "pipx"], check=True)
        env |= {"PIPX_HOME": str(where), "PIPX_BIN_DIR": str(where / "bin")}
        took = timed([str(tools / "bin" / "pipx"), "install", str(wheel), "--pip-args",
                      f"--find-links {WHEELS} {TORCH}"], env)
        exe = where / "bin" / "attncli"
    else:
        uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        env |= {"UV_TOOL_DIR": str(where / "tools"), "UV_TOOL_BIN_DIR": str(where / "bin")}
        took = timed([uv, "tool", "install", "--find-links", str(WHEELS), "--with", TORCH,
                      str(wheel)], env)
        exe = where / "bin" / "attncli"
    check = subprocess.run([str(exe), "doctor", "--json"], capture_output=True, text=True,
                           check=True)
    doc = json.loads(check.stdout)
    return {"path": path, "seconds": round(took, 1), "bytes": size(where),
            "torch": doc["torch"]["version"],
            "extensions_built": sum(e["built"] for e in doc["extensions"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default="pip,pipx,uv")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        sdist, wheel = build(tmp / "dist")
        print(f"sdist {sdist.stat().st_size / 1e6:.1f} MB, wheel {wheel.stat().st_size / 1e6:.1f}"
              f" MB ({wheel.name})", flush=True)
        for path in args.paths.split(","):
            row = install(path, wheel, tmp)
            rows.append(row)
            print(f"{path:<5} {row['seconds']:6.1f} s  {row['bytes'] / 1e6:7.0f} MB  "
                  f"torch {row['torch']}  C extensions built: {row['extensions_built']}",
                  flush=True)
        report = {"sdist_bytes": sdist.stat().st_size, "wheel_bytes": wheel.stat().st_size,
                  "load_avg": os.getloadavg(), "installs": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
