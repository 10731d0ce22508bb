"""#47's targets: `ablate --heads all` on SmolLM2 (270 heads, 50 tokens) and `patch` on SmolLM2
within 30 s; attribution patching within 5× one look, on the 8B-shaped Q4_K file too.

    .venv/bin/python bench/causal.py                  # SmolLM2 from scripts/fetch_model.py
    .venv/bin/python bench/causal.py --model PATH --repeats 1
    .venv/bin/python bench/causal.py --attribution-only --model 8B.gguf --repeats 1

(8B.gguf: the 8B-shaped Q4_K_M file bench/runtime.py --sizes 8b makes from bench/shapes.py's
LLAMA_8B, in ~/.cache/attncli/bench/shapes/llama-8b-Q4_K_M.gguf).

Each command is the whole process a user runs (`attncli ... --json > /dev/null`), with the
hidden-state cache off (ATTNCLI_NO_CACHE=1) so each repeat does all its work; wall and CPU time
(the process's user + system) are medians of the repeats, and its peak resident memory the
largest. One look, `attncli run` on the clean
text (the model opened, the text run to its last layer), runs in the same rounds as the
reference the ratios divide by: on a shared machine the seconds move with the load, the ratios
much less. `heads --probe induction` on ablate's tokens is listed beside, as a second look.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "causal.json"
SMOLLM2 = Path.home() / ".cache" / "attncli" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
REPEAT = 25  # random tokens, twice, after BOS: 51 tokens
CLEAN = "The Eiffel Tower is in the city of Paris, and the Colosseum is in the city of"
CORRUPT = "The Eiffel Tower is in the city of Rome, and the Colosseum is in the city of"


def _timed(args: list[str]) -> tuple[float, float, float]:
    """Wall and CPU seconds and peak resident MB of one attncli process."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "attncli", *args, "--json"],
                             stdout=subprocess.DEVNULL,
                             env={**os.environ, "ATTNCLI_NO_CACHE": "1"})
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"attncli {' '.join(args[:1])} failed")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(SMOLLM2))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--attribution-only", action="store_true",
                        help="one look and attribution patching alone (the 8B-shaped file)")
    args = parser.parse_args()
    model = ["--model", args.model]
    commands = {
        "one look (run)": ["run", CLEAN, *model],
        "heads --probe induction": ["heads", "--probe", "induction", "--probe-length",
                                    str(REPEAT), *model],
        "ablate --heads all": ["ablate", "--repeat", str(REPEAT), "--heads", "all", *model],
        "patch (exact)": ["patch", CLEAN, CORRUPT, "--tokens", " Rome", " Paris", *model],
        "patch --attribution --no-exact": ["patch", CLEAN, CORRUPT, "--tokens", " Rome",
                                           " Paris", "--attribution", "--no-exact", *model],
    }
    if args.attribution_only:  # texts of the same length in a byte-level vocabulary too
        other, tokens = CLEAN.replace("Paris", "Milan"), [" t", "s"]
        commands = {"one look (run)": ["run", CLEAN, "--layer", "-1", *model],  # every layer
                    "patch --attribution --no-exact": [
                        "patch", CLEAN, other, "--tokens", *tokens, "--attribution",
                        "--no-exact", *model]}
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for _ in range(args.repeats):  # interleaved rounds: a load change falls on all alike
        for name, command in commands.items():
            times[name].append(_timed(command))
    look = statistics.median(w for w, _, _ in times["one look (run)"])
    rows = {}
    for name, found in times.items():
        wall = statistics.median(w for w, _, _ in found)
        cpu = statistics.median(c for _, c, _ in found)
        peak = max(m for _, _, m in found)
        rows[name] = {"wall_s": wall, "cpu_s": cpu, "peak_mb": peak, "to_one_look": wall / look}
        print(f"{name:34} {wall:7.1f} s wall {cpu:7.1f} s CPU {peak:7.0f} MB  "
              f"{wall / look:5.2f}× one look")
    results = RESULTS.with_name("causal-attribution.json") if args.attribution_only else RESULTS
    RESULTS.parent.mkdir(exist_ok=True)
    results.write_text(json.dumps({"model": args.model, "repeats": args.repeats,
                                   "threads": os.cpu_count(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
