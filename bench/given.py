"""A given answer teacher-forced (`generate --answer`) against one `run --model` pass over the
same prompt + answer, and the occlusion view's masked passes, on the real SmolLM2 GGUF.

    .venv/bin/python bench/given.py [--answer-tokens 64] [--repeats 3]

In one process, the model loaded once, each the median of --repeats:
  given:      models/generate/given.teacher_forced over prompt + answer (every layer's weights
              of the answer's rows, the value norms and the logits): the --answer path.
  run:        the family's trace over the same ids, every layer, each block's weights kept
              (what `run --model --layer -1` walks through), no logits.
  occlusion:  models/generate/occlusion.occlusion over a 40-token prompt and 40-token answer,
              each token but the first its own span (39 masked passes, batched), beside one
              look: the same trace as run, over those 80 tokens; in wall and in CPU seconds
              (the process's, every thread's: on a loaded machine the CPU time holds better).
With --commands, the commands themselves instead, as a user runs them, each the median of
--repeats in turn: `attncli generate PROMPT --raw --answer ANSWER` against `attncli run PROMPT
ANSWER --layer -1` (the same tokens through every layer), their start, the model's opening and
the tokenizer included, each with an empty hidden-state cache.
The issue's targets: given ≤ 1.2× run; occlusion ≤ 20 s. A ratio measured beside the other in the
same process holds on a loaded machine better than either time does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from generate import median_seconds  # noqa: E402  (bench/ is the script's folder, first on sys.path)

MODEL = Path("~/.cache/attncli/models/SmolLM2-135M-Instruct.Q4_1.gguf").expanduser()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(MODEL))
    parser.add_argument("--answer-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-occlusion", action="store_true")
    parser.add_argument("--commands", action="store_true")
    args = parser.parse_args()
    if args.commands:
        print(json.dumps(commands(args.model, args.repeats), indent=2))
        return
    from attncli.models.family import open_model
    from attncli.models.generate.given import teacher_forced
    from attncli.models.generate.occlusion import occlusion

    model = open_model(args.model)
    prompt = list(range(1000, 1040))
    answer = list(range(2000, 2000 + args.answer_tokens))

    def run_pass() -> None:
        for trace in model.trace(prompt + answer, model.spec.n_layer - 1):
            trace.weights.sum()

    given = median_seconds(lambda: teacher_forced(model, prompt, answer), args.repeats)
    run = median_seconds(run_pass, args.repeats)
    report = {"answer_tokens": args.answer_tokens, "given_s": given, "run_s": run,
              "ratio": given / run}
    if not args.no_occlusion:
        short = list(range(2000, 2040))

        def look() -> None:
            for trace in model.trace(prompt + short, model.spec.n_layer - 1):
                trace.weights.sum()

        spans = [[j] for j in range(1, len(prompt))]
        look()  # every layer's weights read once, so that neither side pays for the first read
        one = median_seconds(look, args.repeats)
        one_cpu = median_seconds(look, args.repeats, clock=time.process_time)
        start, start_cpu = time.perf_counter(), time.process_time()
        occlusion(model, prompt, short, spans)
        report["occlusion_40x40_s"] = time.perf_counter() - start
        report["occlusion_40x40_cpu_s"] = time.process_time() - start_cpu
        report["one_look_80_s"], report["one_look_80_cpu_s"] = one, one_cpu
        report["occlusion_per_look"] = report["occlusion_40x40_s"] / one
        report["occlusion_per_look_cpu"] = report["occlusion_40x40_cpu_s"] / one_cpu
    print(json.dumps(report, indent=2))


PROMPT = ("The history of the city goes back to a small fishing village on the river, where "
          "traders from the north and the south met every summer to sell salt, wool and dried "
          "fish to each other.")
ANSWER = (" Over the centuries the village grew into a market town, then a walled city with a "
          "cathedral, a university and a harbour that sent ships to every port of the known "
          "world, until a great fire in the year 1666 burned most of it down, and the people "
          "built it again in stone.")  # 62 tokens of SmolLM2's, after 40 of the prompt


def commands(model: str, repeats: int) -> dict[str, float]:
    """The two commands' medians, run in turn (a loaded machine slows both alike)."""
    import os
    import subprocess
    import tempfile

    attncli = str(Path(sys.executable).with_name("attncli"))
    # --view raw: the one pass alone (the default view adds occlusion's or value's passes)
    lines = {"given": [attncli, "generate", PROMPT, "--raw", "--answer", ANSWER, "--view", "raw",
                       "--model", model],
             "run": [attncli, "run", PROMPT + ANSWER, "--layer", "-1", "--model", model]}
    times: dict[str, list[float]] = {name: [] for name in lines}
    for _ in range(repeats):
        for name, line in lines.items():
            # A fresh hidden-state cache each time: run's repeats would read the first one's
            # streams back instead of running the layers.
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "ATTNCLI_HIDDEN_CACHE": cache}
                start = time.perf_counter()
                subprocess.run(line, capture_output=True, check=True, env=env)
                times[name].append(time.perf_counter() - start)
    given, run = (sorted(times[n])[len(times[n]) // 2] for n in ("given", "run"))
    return {"given_command_s": given, "run_command_s": run, "ratio": given / run}


if __name__ == "__main__":
    main()
