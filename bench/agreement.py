"""How often attncli's greedy answers are llama.cpp's own, token for token, on the same file.

The same prompt token ids go to both (the file's tokenizer, no chat template); each writes 32
tokens greedily: attncli through generate's decode loop (float32 activations on the quantized
blocks), llama.cpp through its CPU build (activations quantized to 8 bits, a float16 KV cache).
Reported per file: the prompts whose answers agree on every token, and the mean number of
leading tokens that agree. docs/performance.md states SmolLM2's figure;
tests/tools/test_bench_agreement.py checks it.

    python bench/agreement.py [--model FILE] [--prompts 20] [--new 32] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import llamacpp

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


def attncli_greedy(model: Path, prompts: list[list[int]], new: int) -> list[list[int]]:
    """attncli's greedy answer ids to each prompt, through generate's decode loop."""
    from attncli.models.family import open_model
    from attncli.models.generate.engine import decode
    from attncli.models.generate.sampling import Sampling

    loaded = open_model(str(model))
    return [[step.token_id for step in decode(loaded, ids, Sampling(max_new_tokens=new),
                                              frozenset())] for ids in prompts]


def prompt_ids(model: Path, count: int) -> list[list[int]]:
    """The first count prompts as the file's tokenizer encodes them."""
    from attncli.models.hf_tokens import source_tokenizer
    from attncli.models.sources.gguf import open_gguf

    tokenizer = source_tokenizer(open_gguf(model))
    return [list(tokenizer.encode(text).ids) for text in PROMPTS[:count]]


def agreement(model: Path, count: int = 20, new: int = 32, threads: int = 2) -> dict:
    """Both runtimes' greedy answers compared: whole answers and leading tokens that agree."""
    import torch

    torch.set_num_threads(threads)
    prompts = prompt_ids(model, count)
    ours = attncli_greedy(model, prompts, new)
    theirs = llamacpp.greedy(model, threads, prompts, new)
    leading = []
    for a, b in zip(ours, theirs, strict=True):
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                    min(len(a), len(b)))
        leading.append(same)
    return {"file": model.name, "prompts": count, "new": new,
            "whole": sum(a == b for a, b in zip(ours, theirs, strict=True)),
            "mean_leading": statistics.mean(leading), "leading": leading}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=SMOLLM2)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(agreement(args.model, args.prompts, args.new, args.threads)))


if __name__ == "__main__":
    main()
