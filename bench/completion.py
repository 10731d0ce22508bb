"""What shell completion costs `attncli --help`: the same CLI with Typer's completion options and
without them, each a fresh process, taking turns, medians compared (and the bare interpreter).

    .venv/bin/python bench/completion.py              # 21 turns each
    .venv/bin/python bench/completion.py --repeats 9

Typer adds --install-completion and --show-completion to the root command when the app is built;
the two cases differ only in that flag (attncli.cli.app's add_completion), set before the CLI
runs. The machine may be shared: compare within one run, not across runs.
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
RESULTS = ROOT / "bench" / "results" / "completion.json"
RUN = ("import sys; from attncli.cli import app as a; a.app._add_completion = {flag}; "
       "sys.argv = ['attncli', '--help']; from attncli.cli import main; main()")
CASES = {"--help with completion": [sys.executable, "-c", RUN.format(flag=True)],
         "--help without completion": [sys.executable, "-c", RUN.format(flag=False)],
         "python -c pass": [sys.executable, "-c", "pass"]}


def seconds(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode()[-300:])
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeats):  # in turns: a busy stretch of the machine hits every case
        for name, cmd in CASES.items():
            times[name].append(seconds(cmd))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, value in medians.items():
        print(f"{name:<28} {value:.3f} s (median of {args.repeats})")
    cost = medians["--help with completion"] - medians["--help without completion"]
    print(f"completion's cost: {cost * 1000:+.1f} ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeats": args.repeats, "load_avg": os.getloadavg(),
                                   "medians_s": medians, "cost_s": cost}, indent=2) + "\n",
                       encoding="utf-8")


if __name__ == "__main__":
    main()
