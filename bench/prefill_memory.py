"""What a held decoder's prefill holds at its peak: `generate`'s prompt pass alone, its RSS
sampled by a thread (resident, and of that the file's mapped pages) and charged to the stage
running at the time (the embedding, each layer's q/k/v, attention, o_proj and feed-forward).

Run it in a fresh process: the peak is the process's own (getrusage), so one file and one
prompt length a run. The ids are bench/runtime.py's, as attncli tokenises its text.

    python bench/prefill_memory.py ~/.cache/attncli/bench/shapes/llama-1b-Q4_K_M.gguf 2000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from options import thread_count

PAGE = os.sysconf("SC_PAGE_SIZE")


class Sampler(threading.Thread):
    """Every few ms: resident and file-backed bytes (/proc/self/statm), the most of each seen
    while each stage ran."""

    def __init__(self, every_s: float = 0.002) -> None:
        super().__init__(daemon=True)
        self.every_s, self.stage, self.done = every_s, "start", threading.Event()
        self.layer = -1  # the layer whose stages run
        self.peaks: dict[str, tuple[int, int]] = {}

    def now(self) -> tuple[int, int]:
        """Resident and file-backed bytes now."""
        with open("/proc/self/statm", "rb") as statm:
            fields = statm.read().split()
        return int(fields[1]) * PAGE, int(fields[2]) * PAGE

    def run(self) -> None:
        with open("/proc/self/statm", "rb") as statm:
            while not self.done.is_set():
                statm.seek(0)
                fields = statm.read().split()
                resident, shared = int(fields[1]) * PAGE, int(fields[2]) * PAGE
                key = self.stage if self.layer < 0 else f"{self.layer}:{self.stage}"
                if resident > self.peaks.get(key, (0, 0))[0]:
                    self.peaks[key] = (resident, shared)
                time.sleep(self.every_s)


def staged(sampler: Sampler, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """function, telling sampler which stage runs while it does."""

    def run(*args: Any, **kwargs: Any) -> Any:
        before, sampler.stage = sampler.stage, stage
        try:
            return function(*args, **kwargs)
        finally:
            sampler.stage = before

    return run


def layered(sampler: Sampler, function: Callable[..., Any]) -> Callable[..., Any]:
    """A method (self, layer, ...), telling sampler that layer's stages come next (the
    prefill asks for each layer's RoPE tables as it starts the layer)."""

    def run(self: Any, layer: int, *args: Any) -> Any:
        sampler.layer = layer
        return function(self, layer, *args)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("tokens", type=int)
    parser.add_argument("--threads", type=thread_count, default=1)
    args = parser.parse_args()

    import torch
    from runtime import token_ids

    from attncli.models.family import open_model
    from attncli.models.generate.engine import generation_bytes, holds
    from attncli.models.llama import block, decode, qkv, rope

    torch.set_num_threads(args.threads)
    ids = token_ids(args.file, args.tokens)
    sampler = Sampler()
    sampler.start()
    model = open_model(str(args.file))
    held = holds(model, generation_bytes(model, len(ids), 0))  # as generate decides
    sampler.stage = "decoder"
    decoder = model.decoder(0, len(ids) + 1, held=held)
    opened = sampler.now()
    sampler.stage = "glue"  # the prefill's code outside the stages below
    decode.embed = staged(sampler, "embed", decode.embed)
    decode._prefill_context = staged(sampler, "attention", decode._prefill_context)
    rope.LayerRopes.__getitem__ = layered(sampler, rope.LayerRopes.__getitem__)
    qkv.Projection.__call__ = staged(sampler, "qkv", qkv.Projection.__call__)
    block.Finish.__call__ = staged(sampler, "finish", block.Finish.__call__)
    block.FeedForward.__call__ = staged(sampler, "feed-forward", block.FeedForward.__call__)
    start = time.perf_counter(), time.process_time()
    with torch.no_grad():
        decoder.prefill(ids)  # type: ignore[attr-defined]
    wall, cpu = time.perf_counter() - start[0], time.process_time() - start[1]
    sampler.done.set()
    sampler.join()
    after = sampler.now()
    print(json.dumps({
        "file": str(args.file), "file_bytes": args.file.stat().st_size, "tokens": len(ids),
        "held": held, "threads": args.threads, "prefill_s": wall, "prefill_cpu_s": cpu,
        "cache_bytes": decoder.cache_bytes(),  # type: ignore[attr-defined]
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "opened_rss": opened[0], "after_rss": after[0], "after_file_backed": after[1],
        "stages": {k: [r, s] for k, (r, s) in sampler.peaks.items()}}))


if __name__ == "__main__":
    main()
