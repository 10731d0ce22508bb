"""What a build without a C compiler costs: each command with attncli's C extensions and with
ATTNCLI_FUSED=0 (the switch both read: the same code paths as a build where they did not compile),
taking turns, the medians compared.

    .venv/bin/python bench/no_compiler.py              # 5 turns each
    .venv/bin/python bench/no_compiler.py --repeats 3

Cases: `heads` on the real SmolLM2 GGUF (its Q4_1 blocks dequantized by _dequant.c, or by the
gguf package's numpy), `generate` of 16 tokens on it, and a tiled `run` of 8,192 tokens (its
score passes in _fused.c, or in torch's operations). Each is a fresh process with its own
hidden-state cache off; wall time, and CPU time (user + system of the process and its threads)
from os.wait4. The machine may be shared: compare the ratios, which come from turns taken side by
side, not the seconds across runs; on a loaded machine the CPU times' ratio is the steadier.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "no_compiler.json"
BIN = Path(sys.executable).parent / "attncli"


def smollm2() -> str | None:
    """The real model's path from scripts/fetch_model.py (which fetches it once), or None."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_model.py"), "smollm2"],
                          capture_output=True, text=True, timeout=1800, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def seconds(args: list[str], fused: bool) -> tuple[float, float]:
    """Wall and CPU seconds of one attncli process, the C extensions on or off."""
    env = {**os.environ, "ATTNCLI_NO_CACHE": "1", "ATTNCLI_FUSED": "1" if fused else "0"}
    start = time.perf_counter()
    proc = subprocess.Popen([str(BIN), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"attncli {' '.join(args[:2])} failed: {proc.stderr.read()[-300:]!r}")
    return took, usage.ru_utime + usage.ru_stime


def case(name: str, args: list[str], repeats: int) -> dict:
    on, off = [], []
    for _ in range(repeats):  # side by side, so a busy stretch of the machine hits both
        on.append(seconds(args, True))
        off.append(seconds(args, False))
    row: dict = {"case": name}
    for k, unit in ((0, "wall"), (1, "cpu")):
        row[f"with_c_{unit}_s"] = statistics.median(t[k] for t in on)
        row[f"without_c_{unit}_s"] = statistics.median(t[k] for t in off)
        row[f"{unit}_ratio"] = row[f"without_c_{unit}_s"] / row[f"with_c_{unit}_s"]
    print(f"{name:<34} wall {row['with_c_wall_s']:6.2f} s → {row['without_c_wall_s']:6.2f} s "
          f"({row['wall_ratio']:.2f}×)   cpu {row['with_c_cpu_s']:6.2f} s → "
          f"{row['without_c_cpu_s']:6.2f} s ({row['cpu_ratio']:.2f}×)", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    model = smollm2()
    with tempfile.TemporaryDirectory() as tmp:
        book = Path(tmp) / "book.txt"
        book.write_text("Your journey starts with one step. " * 1170, encoding="utf-8")
        cases = [("run, tiled, 8,192 tokens, 12 heads",
                  ["run", "--file", str(book), "--variant", "multihead", "--heads", "12",
                   "--emb-dim", "768", "--impl", "tiled", "--json"])]
        if model is None:
            print("heads and generate not run: the real model could not be fetched")
        else:
            cases += [("heads, SmolLM2 Q4_1, 28 tokens",
                       ["heads", "--file", "samples/induction.txt", "--model", model]),
                      ("generate, SmolLM2 Q4_1, 16 tokens",
                       ["generate", "What is the capital of France?", "--model", model,
                        "--max-new-tokens", "16"])]
        for name, command in cases:
            rows.append(case(name, command, args.repeats))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeats": args.repeats, "load_avg": os.getloadavg(),
                                   "cases": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
