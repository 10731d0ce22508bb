"""#23's rollout target: `attncli run --measure rollout --rows a:b` on 8,000 tokens of the real
SmolLM2 GGUF, peak RSS bounded like the tiled path (≤ 2 GB).

    .venv/bin/python bench/rollout.py                 # rows 7990:8000 to the last layer
    .venv/bin/python bench/rollout.py --rows 0:10 --layer 15

One fresh process; its wall time and peak RSS come from os.wait4's rusage of that child
(e2e.measure). Beside it, for scale, the plain tiled run of the same layer and rows. What it
measured is printed and written to bench/results/rollout.json; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from e2e import measure  # this folder is on the path of a script run from it
from gguf_e2e import LONG_TOKENS, ROOT, count, long_text, real_model_setup

RESULTS = ROOT / "bench" / "results" / "rollout.json"
PEAK_MB = 2048


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="7990:8000")
    parser.add_argument("--layer", type=int, default=29)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    setup = real_model_setup("the rollout target was")
    if setup is None:
        return
    gguf, cli, tokenizer = setup
    report: dict = {"model": str(gguf), "rows": args.rows, "layer": args.layer,
                    "load_avg": os.getloadavg(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        text = long_text(tokenizer)
        text_file = Path(tmp) / "long.txt"
        text_file.write_text(text, encoding="utf-8")
        report["tokens"] = count(tokenizer, text)
        print(f"rollout: {report['tokens']:,} tokens (target {LONG_TOKENS:,}), rows {args.rows}, "
              f"layer {args.layer}", flush=True)
        base = [cli, "run", "--model", str(gguf), "--layer", str(args.layer), "--file",
                str(text_file), "--rows", args.rows, "--json"]
        for name, extra in (("tiled weights", []), ("rollout", ["--measure", "rollout"])):
            with open(Path(tmp) / "out.json", "wb") as out:
                run = measure(base + extra, stdout=out.fileno())
            run["case"] = name
            report["runs"].append(run)
            error = f"  exit {run['exit']}: {run['error']}" if run["exit"] else ""
            print(f"{name:<14} {run['seconds']:7.1f} s  {run['cpu_seconds']:7.1f} CPU s  "
                  f"peak {run['peak_mb']:6.0f} MB{error}", flush=True)
    rollout = report["runs"][-1]
    report["peak_target_mb"] = PEAK_MB
    report["met"] = rollout["exit"] == 0 and rollout["peak_mb"] <= PEAK_MB
    report["load_avg_after"] = os.getloadavg()
    print(f"rollout peak {rollout['peak_mb']:.0f} MB against ≤ {PEAK_MB} MB: "
          f"{'met' if report['met'] else 'MISSED'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
