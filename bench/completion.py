"""What shell completion costs `attncli --help`: the same CLI with Typer's completion options and
without them, each a fresh process, taking turns, medians compared (and the bare interpreter);
with --against REV, the package as it was at git revision REV too.

    .venv/bin/python bench/completion.py                     # 21 turns each
    .venv/bin/python bench/completion.py --against a7ccc7e   # and the CLI before this change

Typer adds --install-completion and --show-completion to the root command when the app is built;
the first two cases differ only in that flag (attncli.cli.app's add_completion), set before the
CLI runs. Wall time and CPU time (user + system, from os.wait4) of each process: on a shared
machine the wall time swings with the load, the CPU time much less. Bytecode is compiled first
for every tree, as an install compiles it.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "completion.json"
RUN = ("import sys; sys.path.insert(0, {root!r}); from attncli.cli import app as a; "
       "a.app._add_completion = {flag}; sys.argv = ['attncli', '--help']; "
       "from attncli.cli import main; main()")


def measure(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(proc.stderr.read().decode()[-300:] if proc.stderr else "failed")
    return took, usage.ru_utime + usage.ru_stime


def checkout(revision: str, folder: Path) -> Path:
    """The attncli package at revision, unpacked into folder."""
    archive = subprocess.run(["git", "archive", revision, "attncli"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as raw:
        raw.write(archive)
        raw.seek(0)
        with tarfile.open(fileobj=raw) as tar:
            tar.extractall(folder, filter="data")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--against", metavar="REV", help="also the package at this revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"--help with completion": [sys.executable, "-c",
                                            RUN.format(root=str(ROOT), flag=True)],
                 "--help without completion": [sys.executable, "-c",
                                               RUN.format(root=str(ROOT), flag=False)]}
        trees = [ROOT]
        if args.against:
            old = checkout(args.against, Path(tmp))
            trees.append(old)
            cases[f"--help at {args.against}"] = [sys.executable, "-c", (
                f"import sys; sys.path.insert(0, {str(old)!r}); sys.argv = ['attncli', "
                "'--help']; from attncli.cli import main; main()")]
        cases["python -c pass"] = [sys.executable, "-c", "pass"]
        for tree in trees:
            compileall.compile_dir(tree / "attncli", quiet=1)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(args.repeats):  # in turns: a busy stretch of the machine hits every case
            for name, cmd in cases.items():
                runs[name].append(measure(cmd))
    medians = {name: {"wall_s": statistics.median(w for w, _ in r),
                      "cpu_s": statistics.median(c for _, c in r)} for name, r in runs.items()}
    for name, m in medians.items():
        print(f"{name:<32} wall {m['wall_s']:.3f} s   cpu {m['cpu_s']:.3f} s")
    cost = (medians["--help with completion"]["cpu_s"]
            - medians["--help without completion"]["cpu_s"])
    print(f"completion's cost: {cost * 1000:+.1f} ms of CPU (median of {args.repeats})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeats": args.repeats, "load_avg": os.getloadavg(),
                                   "medians": medians, "completion_cpu_s": cost}, indent=2)
                       + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
