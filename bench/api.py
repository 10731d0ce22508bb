"""The Python API and `attncli check` as a user meets them, each a fresh process, beside an SDPA
script in the same run.

    .venv/bin/python bench/api.py              # median of 7
    .venv/bin/python bench/api.py --repeats 3

import attncli should cost next to nothing (its target: under 0.3 s, torch not imported); the
first attncli.run pays torch's import, as the SDPA script does. The machine may be shared: each
case runs beside its reference, and the ratio compares the two.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "Your journey starts with one step"
BIN = Path(sys.executable).parent
SDPA = ("import torch, torch.nn.functional as F; q = k = v = torch.randn(1, 2, 6, 4); "
        "F.scaled_dot_product_attention(q, k, v, is_causal=True)")
CASES = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("import attncli", [sys.executable, "-c", "import attncli"]),
    ("import torch (reference)", [sys.executable, "-c", "import torch"]),
    ("SDPA script, 6 tokens (reference)", [sys.executable, "-c", SDPA]),
    ("attncli.run(...).weights", [sys.executable, "-c",
                                  f"import attncli; attncli.run({SENTENCE!r}, "
                                  "variant='multihead', heads=2).weights"]),
    ("attncli run ... --json", [str(BIN / "attncli"), "run", SENTENCE, "--variant",
                                "multihead", "--heads", "2", "--json"]),
    ("attncli.run(...)._repr_html_()", [sys.executable, "-c",
                                        f"import attncli; attncli.run({SENTENCE!r})"
                                        "._repr_html_()"]),
    ("attncli check (a pass: book_mha.py)", [str(BIN / "attncli"), "check",
                                             "tests/checker/check_classes/book_mha.py"]),
    ("attncli check (a fail, diagnosed)", [str(BIN / "attncli"), "check",
                                           "samples/my_attention.py"]),
    ("attncli check (a fail no mistake explains)", [str(BIN / "attncli"), "check",
                                                    "tests/checker/check_classes/bad_wrong_shape.py"]),
]


def seconds(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"{'case':45} {'median s':>9} {'min s':>7}")
    for name, cmd in CASES:
        times = [seconds(cmd) for _ in range(args.repeats)]
        print(f"{name:45} {statistics.median(times):9.3f} {min(times):7.3f}")
    code = "import sys, attncli; attncli.run; print('torch' in sys.modules)"
    torch = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    print(f"torch imported by import attncli and attncli.run's lookup: {torch}")


if __name__ == "__main__":
    main()
