"""Where one decode step's CPU time goes: each quantized product keyed by type and shape, the rest.

Opens a GGUF file as `generate` does (weights held where they fit), fills the caches with a
short prompt, then times --steps steps of the decoder (every layer's attention kept), each
product by `time.thread_time` around QuantizedMatrix.linear, and prints the medians over the
steps after the first, with the step's page faults (getrusage). One thread unless --threads.

    python bench/decode_split.py ~/.cache/attncli/bench/shapes/llama-8b-Q4_K_M.gguf \
        --numerics llama.cpp
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from options import thread_count

from attncli.models.family import open_model
from attncli.models.generate.engine import holds
from attncli.models.sources.gguf.qmatmul import QuantizedMatrix, llama_cpp_numerics

PROMPT = list(range(1, 17))  # 16 token ids: in every vocabulary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=thread_count, default=1)
    parser.add_argument("--numerics", default="float32", choices=("float32", "llama.cpp"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spent: dict[str, float] = defaultdict(float)
    plain = QuantizedMatrix.linear

    def timed(self: QuantizedMatrix, x: torch.Tensor,
              bias: torch.Tensor | None = None) -> torch.Tensor:
        start = time.thread_time()
        y = plain(self, x, bias)
        spent[f"{self.qtype.name} {self.shape[0]}x{self.shape[1]}"] += time.thread_time() - start
        return y

    QuantizedMatrix.linear = timed  # type: ignore[method-assign]
    steps: list[dict[str, float]] = []
    with llama_cpp_numerics(args.numerics == "llama.cpp"), torch.no_grad():
        model = open_model(str(args.path))
        decoder = model.decoder(0, len(PROMPT) + args.steps + 1, held=holds(model))
        decoder.prefill(PROMPT)  # type: ignore[attr-defined]  # the Llama family's decoder
        token = PROMPT[-1]
        for s in range(args.steps):
            spent.clear()
            before, start = resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
            _, logits = decoder.step_layers(token, len(PROMPT) + s)
            token = int(logits.argmax())
            after = resource.getrusage(resource.RUSAGE_SELF)
            faults = after.ru_minflt - before.ru_minflt + after.ru_majflt - before.ru_majflt
            row = dict(spent, step=time.thread_time() - start, faults=faults)
            row["rest"] = row["step"] - sum(spent.values())
            steps.append(row)
            print(f"step {s}: {row['step']:.3f} CPU s", file=sys.stderr)
    later = steps[1:] or steps
    names = sorted({name for row in later for name in row})
    print(json.dumps({name: statistics.median(row.get(name, 0.0) for row in later)
                      for name in names}, indent=1))


if __name__ == "__main__":
    main()
