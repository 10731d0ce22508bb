"""End-to-end: the commands a user types, each a fresh process, beside an SDPA script.

    .venv/bin/python bench/e2e.py              # the run modes on 8,192 tokens, and tokens on 1 MB
    .venv/bin/python bench/e2e.py --repeats 1

Wall time and peak RSS of each command come from os.wait4's rusage of that child alone. The
machine may be shared: each mode runs right after its own SDPA script, and the ratio compares
the two; compare ratios, not absolute seconds across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "e2e.json"
N_TOKENS, D_MODEL, HEADS = 8192, 768, 12
RUN = ["run", "--variant", "multihead", "--heads", str(HEADS), "--emb-dim", str(D_MODEL)]
MODES = [("table", []), ("table --rows 0:4", ["--rows", "0:4"]), ("--json", ["--json"]),
         ("--json --rows 0:4", ["--json", "--rows", "0:4"]),
         ("--view heatmap", ["--view", "heatmap"])]
RATIO_LIMIT, PEAK_LIMIT_MB = 1.5, 700
TOKENS_RATIO_LIMIT, TOKENS_PEAK_LIMIT_MB, HEAD_LIMIT_S = 2.0, 300, 1.5
# The reference: what a user would write to get the same attention from PyTorch.
SDPA_SCRIPT = f"""
import torch
import torch.nn.functional as F
torch.manual_seed(123)
q, k, v = (torch.randn(1, {HEADS}, {N_TOKENS}, {D_MODEL // HEADS}) for _ in range(3))
out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
print(out.shape)
"""


def measure(cmd: list[str], stdout: int | None = subprocess.DEVNULL,
            shell: bool = False) -> dict:
    """Wall seconds and peak RSS (MB) of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, shell=shell)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    return {"seconds": wall, "peak_mb": usage.ru_maxrss / 1024, "exit": code,
            "error": err.strip().splitlines()[-1] if code and err.strip() else None}


def best(cmd: list[str], repeats: int, shell: bool = False) -> dict:
    """The fastest of repeats runs (peak RSS: the largest)."""
    runs = [measure(cmd, shell=shell) for _ in range(repeats)]
    fastest = min(runs, key=lambda r: r["seconds"])
    return {**fastest, "peak_mb": max(r["peak_mb"] for r in runs),
            "all_seconds": [r["seconds"] for r in runs]}


def run_modes(cli: str, text_file: Path, repeats: int) -> list[dict]:
    """Each mode right after its own run of the SDPA script: on a shared machine the load
    drifts, so each ratio compares two runs made under about the same load."""
    script = [sys.executable, "-c", SDPA_SCRIPT]
    rows = []
    for name, extra in MODES:
        sdpa = best(script, repeats)
        row = {"mode": name, **best([cli, *RUN, "--file", str(text_file), *extra], repeats),
               "sdpa_seconds": sdpa["seconds"], "sdpa_peak_mb": sdpa["peak_mb"]}
        row["ratio"] = row["seconds"] / sdpa["seconds"]
        row["met"] = row["ratio"] <= RATIO_LIMIT and row["peak_mb"] <= PEAK_LIMIT_MB
        rows.append(row)
        print(f"{name:<20} {row['seconds']:7.2f} s  {row['peak_mb']:5.0f} MB  SDPA script "
              f"{sdpa['seconds']:6.2f} s {sdpa['peak_mb']:4.0f} MB  {row['ratio']:.2f}×  "
              f"{'met' if row['met'] else 'MISSED'}{'  ' + row['error'] if row['error'] else ''}",
              flush=True)
    return rows


def tokens_cases(cli: str, big: Path, repeats: int) -> list[dict]:
    """#14's targets: the tokens table against --json on a 1 MB file, and `| head -1`."""
    as_json = best([cli, "tokens", "--file", str(big), "--json"], repeats)
    table = best([cli, "tokens", "--file", str(big)], repeats)
    head = best([f"{cli} tokens --file {big} | head -1"], repeats, shell=True)
    rows = [{"case": "tokens --json", **as_json},
            {"case": "tokens (table)", **table, "ratio": table["seconds"] / as_json["seconds"],
             "met": table["seconds"] <= TOKENS_RATIO_LIMIT * as_json["seconds"]
             and table["peak_mb"] <= TOKENS_PEAK_LIMIT_MB},
            {"case": "tokens | head -1", **head, "met": head["seconds"] <= HEAD_LIMIT_S}]
    for row in rows:
        ratio = f"  {row['ratio']:.2f}× --json" if "ratio" in row else ""
        state = "" if "met" not in row else ("  met" if row["met"] else "  MISSED")
        print(f"{row['case']:<20} {row['seconds']:7.2f} s  {row['peak_mb']:6.0f} MB{ratio}{state}",
              flush=True)
    return rows


def big_text() -> str:
    """About 1 MB of English prose (this project's README, repeated)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return (readme * (1_000_000 // len(readme) + 1))[:1_000_000]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    cli = str(Path(sys.executable).parent / "attncli")
    with tempfile.TemporaryDirectory() as tmp:
        text_file, big = Path(tmp) / "hello.txt", Path(tmp) / "prose.txt"
        text_file.write_text(" hello" * N_TOKENS, encoding="utf-8")
        big.write_text(big_text(), encoding="utf-8")
        print(f"end to end: `attncli {' '.join(RUN)} --file F`, F = ' hello' × {N_TOKENS:,}; "
              f"best of {args.repeats}; load average {os.getloadavg()[0]:.1f}")
        report = {"load_avg": os.getloadavg(), "repeats": args.repeats,
                  "run": run_modes(cli, text_file, args.repeats)}
        report["tokens"] = tokens_cases(cli, big, args.repeats)
    report["load_avg_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
