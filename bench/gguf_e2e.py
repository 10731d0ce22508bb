"""GGUF end to end (#22's targets): attncli on the real SmolLM2 GGUF beside transformers' loader.

(Not named gguf.py: a script's folder comes first on sys.path, and would hide the gguf package.)

    .venv/bin/python bench/gguf_e2e.py                  # both cases (several minutes)
    .venv/bin/python bench/gguf_e2e.py --cases heads    # only the 50-token heads overview
    .venv/bin/python bench/gguf_e2e.py --modes=--json   # the long run's --json output only

Each command is a fresh process; its wall time and peak RSS come from os.wait4's rusage of that
child (e2e.measure). The references are what a user would write with transformers: the same GGUF
loaded by AutoTokenizer and AutoModelForCausalLM (gguf_file=...), then one forward pass. Each
attncli command runs right after its reference, and the ratios compare the two.

heads: `attncli heads TEXT --model G` twice, against eager attention with output_attentions=True.
attncli keeps no cache of dequantized tensors (models/sources/gguf/source.py says why), so the
second run repeats the work with the file in the page cache, as the reference's run has it too.

run: `attncli run --model G --layer 29 --file F` on 8,000 tokens, against SDPA through the same
30 blocks (model.model: no LM head, which attncli does not compute either, and which would add
8,000 × 49,152 logits). The default output, a per-head summary and pooled heatmaps of every row,
is what a user types; --json adds each row's top-k keys, and records the path taken.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from e2e import fastest, measure  # this folder is on the path of a script run from it

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "gguf.json"
CASES = ("heads", "run")
HEADS_TEXT = ("When Mary and John went to the store, John gave a drink to Mary. The little robot "
              "walked into the old library, opened a dusty book and read its first page aloud "
              "while the rain kept falling on the roof of the quiet house by the river.")
LONG_TOKENS, CONTEXT = 8000, 8192
LAYER = 29
RUN_MODES = {"table": [], "--json": ["--json"]}
HEADS_RATIO, HEADS_AGAIN_RATIO, HEADS_PEAK_RATIO = 0.5, 0.3, 0.7
RUN_RATIO, RUN_PEAK_MB = 1.5, 2048
WORDS = ("the a of and to in is that it for on with as was at by from this an be or have not are "
         "but they one all were we when there can more if no out so said what up its about into "
         "than them only time people year way day man thing woman life child world school state "
         "family student group country problem hand part place case week company system program "
         "question work government number night point home water room mother area money story "
         "fact month lot right study book eye job word business issue side kind head house "
         "service friend father power hour game line").split()
# The reference: the same GGUF through transformers' own loader, and one forward pass.
REFERENCE = """
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, name, path = sys.argv[1:4]
tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, attn_implementation="{attn}")
ids = tokenizer(open(path, encoding="utf-8").read(), return_tensors="pt")["input_ids"]
with torch.no_grad():
    out = {forward}
print(tuple(ids.shape), tuple(out[0].shape))
"""
HEADS_REFERENCE = REFERENCE.format(attn="eager",
                                   forward="model(ids, output_attentions=True).attentions")
RUN_REFERENCE = REFERENCE.format(attn="sdpa", forward="model.model(ids)")


def model_path() -> Path | None:
    """The real model's path from scripts/fetch_model.py (which fetches it once), or None."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fetch_model.py"), "smollm2"],
        capture_output=True, text=True, check=False)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def real_model_setup(what: str) -> tuple[Path, str, Any] | None:
    """The real model, the attncli command and the model's tokenizer for a bench of the GGUF, with
    attncli byte-compiled first; None (saying so) where the model could not be fetched."""
    gguf = model_path()
    if gguf is None:
        print(f"{what} not run: the real model could not be fetched (scripts/fetch_model.py)")
        return None
    from transformers import AutoTokenizer

    # e2e.measure reads a child's stderr after it exits: transformers' progress bar could fill
    # the pipe and hold the child.
    os.environ["TQDM_DISABLE"] = "1"
    cli = str(Path(sys.executable).parent / "attncli")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "attncli")], check=True)
    return gguf, cli, AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def long_text(tokenizer: Any) -> str:
    """Seeded sentences of common English words, cut to LONG_TOKENS of the model's tokens."""
    rng = random.Random(22)
    sentences = (" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))).capitalize()
                 for _ in range(LONG_TOKENS // 6))
    ids = tokenizer(". ".join(sentences) + ".")["input_ids"]  # (more than LONG_TOKENS,)
    return str(tokenizer.decode(ids[:LONG_TOKENS]))


def count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text)["input_ids"])


def target(case: str, measure_: str, ours: float, ref: float | None, limit: float,
           peak_mb: float, met: bool) -> dict:
    """One row of the table: a measure of attncli against its reference, or a bound alone."""
    ratio = None if ref is None else ours / ref
    return {"case": case, "measure": measure_, "attncli": ours, "reference": ref,
            "ratio": ratio, "limit": limit, "peak_mb": peak_mb, "met": met}


def heads_case(cli: str, gguf: Path, text_file: Path, repeats: int) -> tuple[list, list]:
    """Two attncli heads runs after each reference run; the fastest of each side compared."""
    script = [sys.executable, "-c", HEADS_REFERENCE, str(gguf.parent), gguf.name, str(text_file)]
    command = [cli, "heads", text_file.read_text(encoding="utf-8"), "--model", str(gguf)]
    turns = [(measure(script), measure(command), measure(command)) for _ in range(repeats)]
    ref, first, again = (fastest([t[k] for t in turns]) for k in range(3))
    peak = max(first["peak_mb"], again["peak_mb"])
    rows = [target("heads, run 1", "wall s", first["seconds"], ref["seconds"], HEADS_RATIO,
                   first["peak_mb"], first["seconds"] <= HEADS_RATIO * ref["seconds"]),
            target("heads, run 2", "wall s", again["seconds"], ref["seconds"], HEADS_AGAIN_RATIO,
                   again["peak_mb"], again["seconds"] <= HEADS_AGAIN_RATIO * ref["seconds"]),
            target("heads", "peak MB", peak, ref["peak_mb"], HEADS_PEAK_RATIO, peak,
                   peak <= HEADS_PEAK_RATIO * ref["peak_mb"])]
    return rows, [{"side": side, **run} for side, run in
                  (("reference", ref), ("attncli run 1", first), ("attncli run 2", again))]


def run_case(cli: str, gguf: Path, text_file: Path, modes: list[str],
             repeats: int, folder: Path) -> tuple[list, list]:
    """Each output mode of the long run after its own SDPA reference run; the JSON's path kept."""
    script = [sys.executable, "-c", RUN_REFERENCE, str(gguf.parent), gguf.name, str(text_file)]
    rows, runs = [], []
    for mode in modes:
        command = [cli, "run", "--model", str(gguf), "--layer", str(LAYER), "--file",
                   str(text_file), *RUN_MODES[mode]]
        out = folder / "run.out"
        pairs = []
        for _ in range(repeats):
            with open(out, "wb") as stream:
                pairs.append((measure(script), measure(command, stdout=stream.fileno())))
        ref, ours = fastest([a for a, _ in pairs]), fastest([b for _, b in pairs])
        impl = tokens = None
        if mode == "--json" and ours["exit"] == 0:
            config = json.loads(out.read_text(encoding="utf-8"))["config"]
            impl, tokens = config["impl"], config["num_tokens"]
        done = ours["exit"] == 0
        rows.append(target(f"run --layer {LAYER}, {mode}", "wall s", ours["seconds"],
                           ref["seconds"], RUN_RATIO, ours["peak_mb"],
                           done and ours["seconds"] <= RUN_RATIO * ref["seconds"]))
        # Bounded memory on the tiled path (the table does not say which path it took).
        rows.append(target(f"run --layer {LAYER}, {mode}", "peak MB", ours["peak_mb"], None,
                           RUN_PEAK_MB, ours["peak_mb"],
                           done and impl in (None, "tiled") and ours["peak_mb"] <= RUN_PEAK_MB))
        runs += [{"side": "reference", "mode": mode, **ref},
                 {"side": "attncli", "mode": mode, "impl": impl, "num_tokens": tokens, **ours}]
        print(f"  {mode}: path {impl or '(not in this output)'}, output "
              f"{out.stat().st_size:,} bytes{'  ' + ours['error'] if ours['error'] else ''}",
              flush=True)
    return rows, runs


def print_table(rows: list[dict]) -> None:
    print(f"{'case':<24} {'measure':<8} {'attncli':>8} {'reference':>10} {'ratio':>6} "
          f"{'limit':>6} {'peak MB':>8}  met")
    for r in rows:
        ref = "-" if r["reference"] is None else f"{r['reference']:.2f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        print(f"{r['case']:<24} {r['measure']:<8} {r['attncli']:8.2f} {ref:>10} {ratio:>6} "
              f"{r['limit']:>6} {r['peak_mb']:8.0f}  {'met' if r['met'] else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="of the heads case")
    parser.add_argument("--run-repeats", type=int, default=1,
                        help="of the long run (minutes each)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    parser.add_argument("--modes", default=",".join(RUN_MODES),
                        help=f"the long run's outputs, of {', '.join(RUN_MODES)}")
    args = parser.parse_args()
    setup = real_model_setup("the GGUF targets were")
    if setup is None:
        return
    gguf, cli, tokenizer = setup
    report: dict = {"model": str(gguf), "load_avg": os.getloadavg(), "repeats": args.repeats,
                    "run_repeats": args.run_repeats, "targets": [], "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        if "heads" in args.cases.split(","):
            text_file = Path(tmp) / "heads.txt"
            text_file.write_text(HEADS_TEXT, encoding="utf-8")
            report["heads_tokens"] = count(tokenizer, HEADS_TEXT)
            print(f"heads: {report['heads_tokens']} tokens; best of {args.repeats}", flush=True)
            rows, runs = heads_case(cli, gguf, text_file, args.repeats)
            report["targets"] += rows
            report["runs"] += runs
        if "run" in args.cases.split(","):
            text, text_file = long_text(tokenizer), Path(tmp) / "long.txt"
            text_file.write_text(text, encoding="utf-8")
            report["run_tokens"] = count(tokenizer, text)
            if abs(report["run_tokens"] - LONG_TOKENS) > 1 or report["run_tokens"] > CONTEXT:
                raise SystemExit(f"the long text has {report['run_tokens']} tokens, "
                                 f"not {LONG_TOKENS} ± 1")
            print(f"run: {report['run_tokens']:,} tokens; best of {args.run_repeats}",
                  flush=True)
            rows, runs = run_case(cli, gguf, text_file, args.modes.split(","),
                                  args.run_repeats, Path(tmp))
            report["targets"] += rows
            report["runs"] += runs
    report["load_avg_after"] = os.getloadavg()
    print_table(report["targets"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
