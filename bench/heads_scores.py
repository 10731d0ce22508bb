"""#23's target: `heads --probe induction` on SmolLM2 (30 × 9 heads, 100-token probe) within 1.2×
the time of `heads` on the same tokens without scores.

    .venv/bin/python bench/heads_scores.py [--repeats 5]

"Without scores" is the same pass in the same process on the same 101 ids, with the head scores
and the sinks (all that the probe adds to a plain `heads` run) replaced by constants: the
command has no switch that leaves them out. Each variant runs once to warm up, then --repeats
times, alternating; the medians are compared. The whole command's wall time, a fresh process
each repeat, is printed beside them for scale.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gguf_e2e import ROOT, model_path  # this folder is on the path of a script run from it

RESULTS = ROOT / "bench" / "results" / "heads_scores.json"
TARGET = 1.2


def _timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", help="a GGUF file (default: the real model, fetched once)")
    args = parser.parse_args()
    if args.model is None:
        gguf = model_path()
        if gguf is None:
            print("the probe target was not run: the real model could not be fetched "
                  "(scripts/fetch_model.py)")
            return
        args.model = str(gguf)
    sys.path.insert(0, str(ROOT))
    import torch

    import attncli.models.heads as heads_module
    from attncli.core.request import Request
    from attncli.models.heads import HeadsOptions
    from attncli.models.run import run_heads

    torch.set_num_threads(torch.get_num_threads())
    req = Request(text="", model=args.model)
    options = HeadsOptions(probe="induction", probe_length=50)
    scored = run_heads(req, options)
    num_tokens = len(scored.tokens)
    real_scores, real_sinks = heads_module.head_scores, heads_module.layer_sinks

    def unscored() -> None:
        heads_module.head_scores = lambda w, patterns: {  # type: ignore[assignment]
            n: torch.zeros(w.shape[:2]) for n in ("previous_token", "duplicate_token",
                                                  "induction")}
        heads_module.layer_sinks = lambda w, r: dict.fromkeys(  # type: ignore[assignment]
            ("first_share", "first_norm", "median_norm", "norm_ratio"), 0.0)
        try:
            run_heads(req, options)
        finally:
            heads_module.head_scores, heads_module.layer_sinks = real_scores, real_sinks

    unscored()  # warm-up of the other variant
    with_s, without_s = [], []
    for _ in range(args.repeats):
        with_s.append(_timed(lambda: run_heads(req, options)))
        without_s.append(_timed(unscored))
    command = [str(ROOT / ".venv" / "bin" / "attncli"), "heads", "--probe", "induction",
               "--model", args.model, "--json"]
    whole = [_timed(lambda: subprocess.run(command, check=True, capture_output=True))
             for _ in range(max(1, args.repeats // 2))]
    ratio = statistics.median(with_s) / statistics.median(without_s)
    result = {"model": Path(args.model).name, "num_tokens": num_tokens,
              "layers": scored.model.layers, "heads": scored.model.heads,
              "repeats": args.repeats, "with_scores_s": with_s, "without_scores_s": without_s,
              "median_with_s": statistics.median(with_s),
              "median_without_s": statistics.median(without_s), "ratio": ratio,
              "target": TARGET, "ok": ratio <= TARGET, "command_s": whole,
              "median_command_s": statistics.median(whole)}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"heads --probe induction, {num_tokens} tokens, {scored.model.layers} × "
          f"{scored.model.heads} heads: {statistics.median(with_s):.3f} s with scores, "
          f"{statistics.median(without_s):.3f} s without (median of {args.repeats}); ratio "
          f"{ratio:.3f}× (target ≤ {TARGET}×: {'ok' if ratio <= TARGET else 'MISSED'}); the "
          f"whole command {statistics.median(whole):.2f} s")


if __name__ == "__main__":
    main()
