"""The hidden-state cache (#37): first look against the looks after it, on the real SmolLM2 GGUF,
and whether a cache of dequantized weights would pay for itself.

    .venv/bin/python bench/hidden_cache.py                # both parts
    .venv/bin/python bench/hidden_cache.py --part looks   # only the whole-process looks
    .venv/bin/python bench/hidden_cache.py --synthetic 16 # also a random 16-layer, d=1024
                                                          # Q4_1 Llama (~0.2 GB): a bigger pass

looks: `run --layer 20`, `run --layer 21`, `heads` on one text, each a fresh process (wall time
from e2e.measure), first with an empty cache folder, then the same three again, then the three
with ATTNCLI_NO_CACHE=1. The target: a look served from the cache ≤ 0.2× a first look on big
models (on a 135M model the process start dominates; the ratio of the passes' own time is what
grows with the model).

passes: the same looks inside one process, as CPU seconds: what the cache saves of the pass
itself, without the interpreter's start (which dominates on a 135M model).

dequant: every tensor of the file dequantized (the work a pass repeats), against the same float32
tensors read back from one file in the page cache, as a dequantized-weights cache would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "hidden_cache.json"
MODEL = Path("~/.cache/attncli/models/SmolLM2-135M-Instruct.Q4_1.gguf").expanduser()
TEXT = " ".join(["The quick brown fox jumps over the lazy dog while the cat watches it."] * 4)
LOOKS = [("run --layer 20", ["run", "--layer", "20"]), ("run --layer 21", ["run", "--layer", "21"]),
         ("heads", ["heads"])]


def synthetic(folder: Path, layers: int, d: int = 1024, ffn: int = 4096) -> Path:
    """A random Llama GGUF of layers blocks, width d (tests/gguf_fixtures' writer, rescaled so
    the residual stream stays finite), quantized to Q4_1 as SmolLM2 is."""
    import gguf
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from tests import gguf_fixtures as fx

    kept, fx.LAYERS = fx.LAYERS, layers  # the fixtures' module constant: a bigger model
    try:
        path = folder / f"synthetic-{layers}x{d}.gguf"
        writer, vocab = fx._writer(path, "llama", "gpt2", "smollm", True, d, ffn)
        for name, w in fx.hf_weights("llama", vocab, 0, d, ffn).items():
            gname, data = fx.to_gguf("llama", name, w)
            if data.ndim == 2:  # fan-in scaling: activations keep their size block after block
                data = (data * (2 / np.sqrt(data.shape[1]))).astype(np.float32)
                kind = gguf.GGMLQuantizationType.Q4_1
            else:
                data, kind = np.ones_like(data), gguf.GGMLQuantizationType.F32
            writer.add_tensor(gname, gguf.quants.quantize(data, kind), raw_dtype=kind)
        fx._finish(writer)
    finally:
        fx.LAYERS = kept
    return path


def looks(model: Path, commands: list[tuple[str, list[str]]] = LOOKS) -> dict:
    """Wall and CPU seconds of each look: first (empty cache), again (served), and with the
    cache off."""
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as folder:
        for phase, extra in (("first", {}), ("again", {}), ("off", {"ATTNCLI_NO_CACHE": "1"})):
            os.environ.update({"ATTNCLI_HIDDEN_CACHE": folder, **extra})
            for name, args in commands:
                cmd = [sys.executable, "-m", "attncli", *args, TEXT, "--model", str(model),
                       "--json"]
                run = measure(cmd)
                assert run["exit"] == 0, run["error"]
                out.setdefault(name, {})[phase] = round(run["seconds"], 2)
                out[name][f"{phase}_cpu"] = round(run["cpu_seconds"], 2)
            os.environ.pop("ATTNCLI_NO_CACHE", None)
    startup = measure([sys.executable, "-m", "attncli", "run", "x", "--model", str(model),
                       "--layer", "0", "--json"])["seconds"]
    return {"looks": out, "startup_layer0_s": round(startup, 2)}


def passes_cpu(model: Path, layers: tuple[int, int]) -> dict:
    """CPU seconds of each look inside one process (no interpreter start, no imports): cache
    off, then first and again through an empty cache folder. CPU time, not wall time: the
    machine this runs on is shared, and CPU time is what a look costs on any of them."""
    from attncli.core.request import Request
    from attncli.models.run import run_heads, run_model

    def cpu(call: object) -> float:
        start = time.process_time()
        call()  # type: ignore[operator]
        return round(time.process_time() - start, 3)

    commands = [(f"run --layer {k}", lambda k=k: run_model(Request(text=TEXT, model=str(model),
                                                                     layer=k)))
                for k in layers] + [("heads", lambda: run_heads(Request(text=TEXT,
                                                                         model=str(model))))]
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as folder:
        os.environ.update({"ATTNCLI_HIDDEN_CACHE": folder, "ATTNCLI_NO_CACHE": "1"})
        commands[0][1]()  # imports, and the file in the page cache
        for phase in ("off", "first", "again"):
            for name, call in commands:
                out.setdefault(name, {})[phase] = cpu(call)
            os.environ.pop("ATTNCLI_NO_CACHE", None)
    return out


def dequant(model: Path) -> dict:
    """Seconds to dequantize every tensor, against reading the float32 results back."""
    from attncli.models.sources.formats import open_source

    source = open_source(model)
    names = list(source.shapes())
    start = time.perf_counter()
    tensors = [source.tensor(name) for name in names]
    dequantized = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "weights.f32"
        with open(path, "wb") as file:
            for t in tensors:
                file.write(t.float().contiguous().numpy().tobytes())
        size = path.stat().st_size
        import torch

        start = time.perf_counter()
        with open(path, "rb") as file:
            for t in tensors:
                back = torch.empty(t.shape, dtype=torch.float32)
                file.readinto(back.numpy().data.cast("B"))
        read = time.perf_counter() - start
    return {"tensors": len(names), "file_mb": round(model.stat().st_size / 2**20, 1),
            "float32_mb": round(size / 2**20, 1), "dequantize_s": round(dequantized, 3),
            "read_back_s": round(read, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("looks", "passes", "dequant", "both"), default="both")
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--synthetic", type=int, default=0, metavar="LAYERS",
                        help="also time the looks on a random Llama GGUF of this many layers")
    args = parser.parse_args()
    result: dict = {"model": str(args.model), "threads": os.environ.get("OMP_NUM_THREADS")}
    if args.part in ("looks", "both"):
        result.update(looks(args.model))
    if args.part in ("passes", "both"):
        result["passes_cpu"] = passes_cpu(args.model, (20, 21))
    if args.synthetic:
        with tempfile.TemporaryDirectory() as folder:
            path = synthetic(Path(folder), args.synthetic)
            last = args.synthetic - 1
            deep = [(f"run --layer {k}", ["run", "--layer", str(k)]) for k in (last - 1, last)]
            result["synthetic"] = {"file_mb": round(path.stat().st_size / 2**20, 1)}
            if args.part in ("looks", "both"):
                result["synthetic"].update(looks(path, [*deep, ("heads", ["heads"])]))
            if args.part in ("passes", "both"):
                result["synthetic"]["passes_cpu"] = passes_cpu(path, (last - 1, last))
    if args.part in ("dequant", "both"):
        result["dequant"] = dequant(args.model)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
