"""How often attncli's greedy answers are llama.cpp's own, token for token, on the same file.

The same prompt token ids go to both (the file's tokenizer, no chat template); each writes 32
tokens greedily: attncli through generate's decode loop, in each numerics asked for (float32:
float32 activations on the quantized blocks, a float32 KV cache; llama.cpp: activations
quantized to 8 bits with integer dot products and a float16 KV cache, as llama.cpp's CPU build
computes), and llama.cpp itself. Reported per file and numerics: the prompts whose answers
agree on every token, the mean number of leading tokens that agree, and over those leading
tokens (the same text so far on both sides) how far apart the two runtimes' log-probabilities
of the chosen token are. docs/performance.md states SmolLM2's figures;
tests/tools/test_bench_agreement.py checks them.

    python bench/agreement.py [--model FILE] [--prompts 20] [--new 32] [--threads 2]
                              [--numerics float32,llama.cpp]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

import llamacpp
from options import thread_count

SMOLLM2 = Path.home() / ".cache" / "attncli" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPTS = [
    "The capital of France is", "Water boils at a temperature of", "The largest planet in",
    "Once upon a time there was a", "To make a cup of tea, first", "The theory of relativity",
    "In the morning, the birds", "A good way to learn a language is", "The recipe calls for",
    "The history of the Roman Empire", "My favourite book is", "The stock market today",
    "Photosynthesis is the process by which", "The quick brown fox", "Python is a language",
    "The best way to stay healthy is", "During the winter, many animals",
    "The first man on the moon was", "A triangle has three", "The ocean covers most of",
]


def attncli_greedy(model: Path, prompts: list[list[int]], new: int,
                   numerics: str = "float32") -> list[tuple[list[int], list[float]]]:
    """attncli's greedy answers to each prompt through generate's decode loop: the ids and
    each one's log-probability."""
    from attncli.models.family import open_model
    from attncli.models.generate.engine import decode
    from attncli.models.generate.sampling import Sampling
    from attncli.models.sources.gguf.qmatmul import llama_cpp_numerics

    loaded = open_model(str(model))
    answers = []
    with llama_cpp_numerics(numerics == "llama.cpp"):
        for ids in prompts:
            steps = list(decode(loaded, ids, Sampling(max_new_tokens=new), frozenset()))
            answers.append(([s.token_id for s in steps], [math.log(s.prob) for s in steps]))
    return answers


def prompt_ids(model: Path, count: int) -> list[list[int]]:
    """The first count prompts as the file's tokenizer encodes them."""
    from attncli.models.hf_tokens import source_tokenizer
    from attncli.models.sources.gguf import open_gguf

    tokenizer = source_tokenizer(open_gguf(model))
    return [list(tokenizer.encode(text).ids) for text in PROMPTS[:count]]


def compare(ours: list[tuple[list[int], list[float]]],
            theirs: list[tuple[list[int], list[float]]]) -> dict:
    """Whole answers and leading tokens that agree, and |Δ log p| over the leading tokens."""
    leading, gaps = [], []
    for (a, lp_a), (b, lp_b) in zip(ours, theirs, strict=True):
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                    min(len(a), len(b)))
        leading.append(same)
        gaps += [abs(x - y) for x, y in zip(lp_a[:same], lp_b[:same], strict=True)]
    return {"whole": sum(a == b for (a, _), (b, _) in zip(ours, theirs, strict=True)),
            "mean_leading": statistics.mean(leading), "leading": leading,
            "logprob_gap_mean": statistics.mean(gaps) if gaps else None,
            "logprob_gap_max": max(gaps) if gaps else None}


def agreement(model: Path, count: int = 20, new: int = 32, threads: int = 2,
              numerics: str = "float32") -> dict:
    """Both runtimes' greedy answers compared, attncli computing in the numerics named."""
    import torch

    torch.set_num_threads(threads)
    prompts = prompt_ids(model, count)
    ours = attncli_greedy(model, prompts, new, numerics)
    theirs = llamacpp.greedy(model, threads, prompts, new)
    return {"file": model.name, "numerics": numerics, "prompts": count, "new": new,
            **compare(ours, theirs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=SMOLLM2)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--threads", type=thread_count, default=2)
    parser.add_argument("--numerics", default="float32,llama.cpp")
    args = parser.parse_args()
    for numerics in args.numerics.split(","):
        print(json.dumps(agreement(args.model, args.prompts, args.new, args.threads, numerics)),
              flush=True)


if __name__ == "__main__":
    main()
