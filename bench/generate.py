"""`attncli generate` per generated token on the real SmolLM2 GGUF, against transformers'
`generate` on the same file (its GGUF loader, float32), with and without its attentions.

    .venv/bin/python bench/generate.py                      # 48 tokens after the chat prompt
    .venv/bin/python bench/generate.py --new 24 --repeats 5 --threads 2

Each side writes exactly --new tokens greedily after the same prompt ids (no end token stops
it) in one process with the model loaded once; the time is the median of --repeats runs,
divided by --new, so a run's prompt pass is spread over its tokens as a user waits for it.
  attncli:            the generation loop (models/generate/engine.decode), every step keeping
                      its layers × heads weights; its prompt part and its answer steps are also
                      timed apart.
  transformers+attn:  generate(output_attentions=True, return_dict_in_generate=True), eager.
  transformers:       generate() without attentions (its default attention, sdpa).
The issue's targets: attncli ≤ 1.5× transformers+attn, ≤ 2× transformers. Results go to
bench/results/generate.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from options import thread_count

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "generate.json"
MODEL = Path("~/.cache/attncli/models/SmolLM2-135M-Instruct.Q4_1.gguf").expanduser()
PROMPT = "What is the capital of France? Answer in two sentences."


def median_seconds(run: Callable[[], object], repeats: int,
                   clock: Callable[[], float] = time.perf_counter) -> float:
    times = []
    for _ in range(repeats):
        start = clock()
        run()
        times.append(clock() - start)
    return statistics.median(times)


def _attncli(path: Path, new: int, repeats: int) -> tuple[list[int], dict[str, float]]:
    """The prompt ids, and attncli's seconds: whole run, prompt part, answer steps."""
    from attncli.models.family import open_model
    from attncli.models.generate.engine import decode
    from attncli.models.generate.prompt import build_prompt
    from attncli.models.generate.sampling import Sampling

    model = open_model(str(path))
    ids = build_prompt(model, str(path), PROMPT, None, False, False).ids
    sampling = Sampling(max_new_tokens=new)
    parts: list[tuple[float, float]] = []

    def run() -> None:
        start = time.perf_counter()
        first = None
        for step in decode(model, ids, sampling, frozenset()):
            if first is None:
                first = time.perf_counter()
            assert step.weights.shape[:2] == (model.spec.n_layer, model.spec.num_heads)
        end = time.perf_counter()
        assert first is not None
        parts.append((first - start, end - first))

    run()  # warm: the file's pages, torch's kernels
    parts.clear()
    total = median_seconds(run, repeats)
    prompt_part = statistics.median(p for p, _ in parts)
    steps = statistics.median(s for _, s in parts)
    return ids, {"total": total, "prompt": prompt_part, "answer_steps": steps}


def _transformers(path: Path, ids: list[int], new: int, repeats: int) -> dict[str, float]:
    from transformers import AutoModelForCausalLM

    out = {}
    for name, implementation, attentions in (("transformers+attn", "eager", True),
                                             ("transformers", "sdpa", False)):
        hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                  attn_implementation=implementation,
                                                  dtype=torch.float32).eval()
        given = torch.tensor([ids])

        def run(hf: object = hf, attentions: bool = attentions,
                given: torch.Tensor = given) -> None:
            with torch.no_grad():
                result = hf.generate(given, do_sample=False, max_new_tokens=new,  # type: ignore[attr-defined]
                                     min_new_tokens=new, output_attentions=attentions,
                                     return_dict_in_generate=True, pad_token_id=0)
            assert result.sequences.shape[1] == len(ids) + new

        run()  # warm
        out[name] = median_seconds(run, repeats)
        del hf
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=int, default=48, help="answer tokens written")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=thread_count, default=1,
                        help="torch threads, both sides")
    args = parser.parse_args()
    if not MODEL.is_file():
        sys.exit(f"no SmolLM2 at {MODEL}: `make model` fetches it")
    torch.set_num_threads(args.threads)
    ids, ours = _attncli(MODEL, args.new, args.repeats)
    theirs = _transformers(MODEL, ids, args.new, args.repeats)
    per_token = {"attncli": ours["total"] / args.new} | {
        name: seconds / args.new for name, seconds in theirs.items()}
    ratios = {"attncli / transformers+attn": per_token["attncli"] / per_token["transformers+attn"],
              "attncli / transformers": per_token["attncli"] / per_token["transformers"]}
    report = {"model": MODEL.name, "prompt_tokens": len(ids), "new_tokens": args.new,
              "threads": args.threads, "repeats": args.repeats,
              "ms_per_token": {k: round(v * 1e3, 2) for k, v in per_token.items()},
              "attncli_parts_ms": {"prompt": round(ours["prompt"] * 1e3, 1),
                                   "per_answer_step": round(ours["answer_steps"] / args.new
                                                            * 1e3, 2)},
              "ratios": {k: round(v, 2) for k, v in ratios.items()},
              "targets": {"attncli / transformers+attn": 1.5, "attncli / transformers": 2.0}}
    print(f"SmolLM2-135M Q4_1, {len(ids)} prompt tokens, {args.new} new, {args.threads} thread(s),"
          f" median of {args.repeats}")
    for name, seconds in per_token.items():
        print(f"  {name:<20} {seconds * 1e3:8.2f} ms per generated token")
    print(f"  attncli's prompt part {ours['prompt'] * 1e3:.0f} ms, then "
          f"{ours['answer_steps'] / args.new * 1e3:.2f} ms per answer step")
    for name, ratio in ratios.items():
        print(f"  {name}: {ratio:.2f}× (target ≤ {report['targets'][name]}×)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
