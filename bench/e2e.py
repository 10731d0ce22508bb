"""End-to-end: the commands a user types, each a fresh process, beside an SDPA script.

    .venv/bin/python bench/e2e.py              # the run modes on 8,192 tokens, and tokens on 1 MB
    .venv/bin/python bench/e2e.py --repeats 1
    .venv/bin/python bench/e2e.py --cases top-k,cjk   # only the streamed listings' cases

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
# The long run's top-k listing over every query row (#14): the window needs --cols to fit memory,
# and prints its 8,192 rows per head too.
TOP_K_ROWS = ["--rows", f"0:{N_TOKENS}", "--cols", "0:8"]
CASES = ("run", "tokens", "top-k", "cjk")
# The reference: what a user would write to get the same attention from PyTorch.
SDPA_SCRIPT = f"""
import torch
import torch.nn.functional as F
torch.manual_seed(123)
q, k, v = (torch.randn(1, {HEADS}, {N_TOKENS}, {D_MODEL // HEADS}) for _ in range(3))
out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
print(out.shape)
"""


def _prose() -> str:
    """The project's English prose: the README, then each docs page (the README before it moved
    into docs/)."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md")
                                         if "_build" not in p.parts)]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def measure(cmd: list[str], stdout: int | None = subprocess.DEVNULL,
            shell: bool = False) -> dict:
    """Wall seconds and peak RSS (MB) of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, shell=shell)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    return {"seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_mb": usage.ru_maxrss / 1024, "exit": code,
            "error": err.strip().splitlines()[-1] if code and err.strip() else None}


def best(cmd: list[str], repeats: int, shell: bool = False) -> dict:
    """The fastest of repeats runs (peak RSS: the largest)."""
    return fastest([measure(cmd, shell=shell) for _ in range(repeats)])


def fastest(runs: list[dict]) -> dict:
    """The fastest run, with the largest peak RSS and the least CPU time of them all."""
    return {**min(runs, key=lambda r: r["seconds"]), "peak_mb": max(r["peak_mb"] for r in runs),
            "cpu_seconds": min(r["cpu_seconds"] for r in runs),
            "all_seconds": [r["seconds"] for r in runs]}


def run_modes(cli: str, text_file: Path, repeats: int) -> list[dict]:
    """Each mode against the SDPA script, their runs taking turns: on a shared machine the
    load drifts (and a virtual machine's CPUs are taken away at times), so each side gets the
    same chances, and the fastest of each is compared. CPU seconds (user + system) are shown
    beside: they hardly move with the load."""
    script = [sys.executable, "-c", SDPA_SCRIPT]
    rows = []
    for name, extra in MODES:
        command = [cli, *RUN, "--file", str(text_file), *extra]
        pairs = [(measure(script), measure(command)) for _ in range(repeats)]
        sdpa, row = fastest([a for a, _ in pairs]), fastest([b for _, b in pairs])
        row = {"mode": name, **row, "sdpa_seconds": sdpa["seconds"],
               "sdpa_cpu_seconds": sdpa["cpu_seconds"], "sdpa_peak_mb": sdpa["peak_mb"]}
        row["ratio"] = row["seconds"] / sdpa["seconds"]
        row["cpu_ratio"] = row["cpu_seconds"] / sdpa["cpu_seconds"]
        row["met"] = row["ratio"] <= RATIO_LIMIT and row["peak_mb"] <= PEAK_LIMIT_MB
        rows.append(row)
        print(f"{name:<20} {row['seconds']:6.2f} s {row['peak_mb']:4.0f} MB  SDPA script "
              f"{sdpa['seconds']:5.2f} s {sdpa['peak_mb']:4.0f} MB  {row['ratio']:.2f}×  "
              f"(CPU {row['cpu_seconds']:5.2f} s / {sdpa['cpu_seconds']:5.2f} s = "
              f"{row['cpu_ratio']:.2f}×)  {'met' if row['met'] else 'MISSED'}"
              f"{'  ' + row['error'] if row['error'] else ''}", flush=True)
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


def first_lines(cmd: list[str], marker: bytes) -> dict:
    """Wall seconds to the first line, to the first line after the one that starts with marker
    (the first row under its header and rule), and to exit; peak RSS (MB); lines printed."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = row = None
    lines, after = 0, -1
    for line in proc.stdout:
        lines += 1
        now = time.perf_counter() - start
        first = now if first is None else first
        if after < 0 and line.startswith(marker):
            after = lines
        if row is None and after > 0 and lines == after + 3:
            row = now
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace").strip()
    code = os.waitstatus_to_exitcode(status)
    return {"seconds": time.perf_counter() - start, "first_line_s": first, "first_row_s": row,
            "lines": lines, "peak_mb": usage.ru_maxrss / 1024, "exit": code,
            "error": err.splitlines()[-1] if code and err else None}


def top_k_case(cli: str, text_file: Path, repeats: int) -> list[dict]:
    """The long run's top-k listing (and window) over every query row: the first line, the
    first top-k row, completion, peak RSS."""
    cmd = [cli, *RUN, "--file", str(text_file), *TOP_K_ROWS]
    runs = [first_lines(cmd, b"Top 5 keys per query") for _ in range(repeats)]
    row = {"case": f"run … {' '.join(TOP_K_ROWS)}", **min(runs, key=lambda r: r["seconds"]),
           "peak_mb": max(r["peak_mb"] for r in runs), "all_seconds": [r["seconds"] for r in runs]}
    print(f"{row['case']:<32} first line {row['first_line_s']:5.2f} s, first top-k row "
          f"{row['first_row_s']:5.2f} s, done {row['seconds']:6.2f} s, {row['lines']:,} lines, "
          f"{row['peak_mb']:4.0f} MB{'  ' + row['error'] if row['error'] else ''}", flush=True)
    return [row]


def cjk_cases(cli: str, folder: Path, repeats: int) -> list[dict]:
    """`tokens | head -1` on about 1 MB of CJK text: prose with its punctuation, and the same
    characters with none (cut inside runs of letters), each against the whole table."""
    rows = []
    for name, text in (("CJK prose", cjk_text(True)), ("CJK, no punctuation", cjk_text(False))):
        path = folder / f"{name.split(',')[0].replace(' ', '-')}-{len(rows)}.txt"
        path.write_text(text, encoding="utf-8")
        head = best([f"{cli} tokens --file {path} | head -1"], repeats, shell=True)
        table = best([cli, "tokens", "--file", str(path)], repeats)
        as_json = best([cli, "tokens", "--file", str(path), "--json"], repeats)
        row = {"case": f"tokens {name}", "bytes": len(text.encode()), "head": head,
               "table": table, "json": as_json,
               "met": head["seconds"] <= HEAD_LIMIT_S and table["peak_mb"] <= TOKENS_PEAK_LIMIT_MB
               and table["seconds"] <= TOKENS_RATIO_LIMIT * as_json["seconds"]}
        rows.append(row)
        print(f"{row['case']:<28} | head -1 {head['seconds']:5.2f} s {head['peak_mb']:4.0f} MB; "
              f"table {table['seconds']:5.2f} s {table['peak_mb']:4.0f} MB; --json "
              f"{as_json['seconds']:5.2f} s  {'met' if row['met'] else 'MISSED'}", flush=True)
    return rows


def cjk_text(punctuation: bool) -> str:
    """About 1 MB of Chinese and Japanese, with its own punctuation or with none."""
    prose = ("我们一起学习注意力机制，猫吃鱼，狗吃肉。東京は日本の首都です。"
             "注意力让每个词元从前面的词元中读取信息。")
    if not punctuation:
        prose = "".join(ch for ch in prose if ch not in "，。")
    return (prose * (1_000_000 // len(prose.encode()) + 1))[:1_000_000 // 3]


def big_text() -> str:
    """About 1 MB of English prose (this project's README and docs pages, repeated)."""
    readme = _prose()
    return (readme * (1_000_000 // len(readme) + 1))[:1_000_000]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"which groups to run, of {', '.join(CASES)}")
    args = parser.parse_args()
    cases = args.cases.split(",")
    cli = str(Path(sys.executable).parent / "attncli")
    # Byte-compile the package as pip does when it installs one: with PYTHONDONTWRITEBYTECODE
    # set (as on some machines), an edited module would otherwise be compiled in every run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "attncli")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        text_file, big = Path(tmp) / "hello.txt", Path(tmp) / "prose.txt"
        text_file.write_text(" hello" * N_TOKENS, encoding="utf-8")
        big.write_text(big_text(), encoding="utf-8")
        print(f"end to end: `attncli {' '.join(RUN)} --file F`, F = ' hello' × {N_TOKENS:,}; "
              f"best of {args.repeats}; load average {os.getloadavg()[0]:.1f}")
        report: dict = {"load_avg": os.getloadavg(), "repeats": args.repeats}
        if "run" in cases:
            report["run"] = run_modes(cli, text_file, args.repeats)
        if "tokens" in cases:
            report["tokens"] = tokens_cases(cli, big, args.repeats)
        if "top-k" in cases:
            report["top_k"] = top_k_case(cli, text_file, args.repeats)
        if "cjk" in cases:
            report["tokens_cjk"] = cjk_cases(cli, Path(tmp), args.repeats)
    report["load_avg_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
