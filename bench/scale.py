"""Scale (#37): attncli on Llama-shaped GGUFs of 1B to 70B, against the float32 matmul floor.

    .venv/bin/python bench/scale.py --sizes 1b                  # a quick run
    .venv/bin/python bench/scale.py --sizes 1b,3b,8b,70b --qtypes q8_0,q4_k --tokens 50,2000

The files (bench/shapes.py: random Q8_0 / Q4_K blocks, small finite scales) are written once
into ~/.cache/attncli/bench (beside $ATTNCLI_MODEL_CACHE when it is set), never the repository;
the 70B shape has 2 of its 80 layers, and its numbers are extrapolated per layer. Each command
(`run --layer -1`, `heads`, `kvcache`) is a fresh process: wall seconds and peak RSS from
os.wait4's rusage of that child (e2e.measure). The floor is the same forward's float32 matmuls
(q, k, v, scores, weights·V, o, gate, up, down) with random weights already in memory, layer by
layer, timed in a fresh process of its own just before each command (the machine is shared: its
load drifts) and never in this one: a child's peak RSS counts what its parent held when it was
forked, so this process imports no torch and holds no weights. ratio = attncli's seconds / the
floor's. The table is written as markdown to bench/results/scale.md.

    .venv/bin/python bench/scale.py --sizes 8b --qtypes q4_k,q8_0 --tokens 50 --repeats 3
    .venv/bin/python bench/scale.py --sizes 8b --qtypes q4_k --tokens 50 --repeat
    .venv/bin/python bench/scale.py --sizes 8b --qtypes q4_k --tokens 50 --threads 1,2

--repeat: the looks after a first one, with the hidden-state cache on (an empty folder of its
own): `run --layer -1` first, then `run --layer -2`, `heads` and `heads --measure rollout` on the
same text, each a fresh process; ratio = its seconds / the first look's (#37's target: ≤ 0.2).
--threads: `run --layer -1` and the floor with OMP_NUM_THREADS=k for each k (attncli's matmuls
and its dequantizer both take their thread count from it): seconds, the speed-up over one
thread, and the ratio to the floor at the same k. Both write to bench/results/scale-*.md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from e2e import measure  # this folder is on the path of a script run from it
from options import thread_counts
from shapes import LLAMA_1B, LLAMA_3B, LLAMA_8B, LLAMA_70B, LlamaShape, Q, write_llama_shape

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "scale.md"
SHAPES = {s.name: s for s in (LLAMA_1B, LLAMA_3B, LLAMA_8B, LLAMA_70B)}
QTYPES = {"q8_0": Q.Q8_0, "q4_k": Q.Q4_K}
PARTIAL_LAYERS = {"70b": 2}  # a 70B file of 2 layers: per-layer numbers, extrapolated
COMMANDS = {"run": ["run", "--layer", "-1"], "heads": ["heads"], "kvcache": ["kvcache"]}


def cache_dir() -> Path:
    """~/.cache/attncli/bench, or bench/ beside $ATTNCLI_MODEL_CACHE."""
    models = os.environ.get("ATTNCLI_MODEL_CACHE")
    base = Path(models).parent if models else Path.home() / ".cache" / "attncli"
    return base / "bench"


def model_file(shape: LlamaShape, qtype: Q) -> Path:
    """The shape's file, written once (with room to spare on the disk, or a clear stop)."""
    layers = PARTIAL_LAYERS.get(shape.name)
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"llama-{shape.name}{f'-{layers}L' if layers else ''}.{qtype.name}.gguf"
    if not path.exists():
        free = shutil.disk_usage(folder).free
        block, size = __import__("gguf").GGML_QUANT_SIZES[qtype]
        need = sum(r * c // block * size for _, (r, c) in shape.matrices(layers))
        if need * 1.2 > free:
            sys.exit(f"{path.name} needs {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free")
        started = time.perf_counter()
        part = path.with_suffix(".part")
        write_llama_shape(part, shape, qtype, layers)
        part.rename(path)
        print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    return path


def text_file(tokens: int) -> Path:
    """A text of about `tokens` tokens (the synthetic byte-level vocabulary: one a character)."""
    path = cache_dir() / f"text-{tokens}.txt"
    rng = random.Random(tokens)
    path.write_text("".join(rng.choice("abcdefghij klmnop") for _ in range(tokens)))
    return path


def floor_seconds(size: str, tokens: int, layers: int, threads: int | None = None) -> float:
    """matmul_floor in a fresh process (see the module's docstring for why), on threads."""
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    done = subprocess.run([sys.executable, __file__, "--floor", f"{size},{tokens},{layers}"],
                          capture_output=True, text=True, check=True, env=env)
    return float(done.stdout.split()[-1])


def matmul_floor(shape: LlamaShape, tokens: int, layers: int) -> float:
    """Seconds for layers blocks' float32 matmuls on tokens rows, one layer's random weights in
    memory (reused for each layer, as attncli holds one layer at a time)."""
    import torch

    torch.set_grad_enabled(False)
    d, hd, g = shape.hidden, shape.hidden // shape.heads, torch.Generator().manual_seed(0)
    w = {name: torch.randn(rows, cols, generator=g) / cols ** 0.5
         for name, (rows, cols) in [("q", (shape.heads * hd, d)), ("k", (shape.kv_heads * hd, d)),
                                    ("v", (shape.kv_heads * hd, d)), ("o", (d, shape.heads * hd)),
                                    ("gate", (shape.ffn, d)), ("up", (shape.ffn, d)),
                                    ("down", (d, shape.ffn))]}
    x = torch.randn(tokens, d, generator=g)  # (T, d)
    return min(_timed_layers(torch, w, x, shape, tokens, n) * layers / n
               for n in (1, layers))  # one warm-up layer first; the faster rate counts


def _timed_layers(torch: Any, w: dict[str, Any], x: Any, shape: LlamaShape, tokens: int,
                  layers: int) -> float:
    """Seconds for layers blocks of the floor's matmuls on x (T, d)."""
    hd = shape.hidden // shape.heads
    started = time.perf_counter()
    for _ in range(layers):
        q = (x @ w["q"].T).view(tokens, shape.heads, hd).transpose(0, 1)  # (h, T, hd)
        k = (x @ w["k"].T).view(tokens, shape.kv_heads, hd).transpose(0, 1)  # (kv, T, hd)
        v = (x @ w["v"].T).view(tokens, shape.kv_heads, hd).transpose(0, 1)  # (kv, T, hd)
        share = shape.heads // shape.kv_heads
        k, v = k.repeat_interleave(share, 0), v.repeat_interleave(share, 0)  # (h, T, hd)
        weights = torch.softmax(q @ k.transpose(-2, -1) / hd ** 0.5, dim=-1)  # (h, T, T)
        x = x + (weights @ v).transpose(0, 1).reshape(tokens, -1) @ w["o"].T  # (T, d)
        x = x + (torch.nn.functional.silu(x @ w["gate"].T) * (x @ w["up"].T)) @ w["down"].T
        x = x / x.norm(dim=-1, keepdim=True) * shape.hidden ** 0.5  # (T, d) kept at size
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1b", help="comma-separated: 1b,3b,8b,70b")
    parser.add_argument("--qtypes", default="q8_0,q4_k", help="comma-separated: q8_0,q4_k")
    parser.add_argument("--tokens", default="50,2000", help="comma-separated token counts")
    parser.add_argument("--commands", default="run,heads,kvcache")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--repeats", type=int, default=1,
                        help="each row's floor and command alternated this many times: medians")
    parser.add_argument("--repeat", action="store_true", help="the looks after a first one")
    parser.add_argument("--threads", type=thread_counts,
                        help="comma-separated thread counts: 1 to N scaling")
    parser.add_argument("--floor", help=argparse.SUPPRESS)  # size,tokens,layers: time it here
    args = parser.parse_args()
    if args.floor:
        size, tokens, layers = args.floor.split(",")
        print(matmul_floor(SHAPES[size], int(tokens), int(layers)))
        return
    cli = str(Path(sys.executable).parent / "attncli")
    if args.repeat or args.threads:
        table = repeats(cli, args) if args.repeat else thread_scaling(cli, args)
        out = args.out.with_name(f"scale-{'repeat' if args.repeat else 'threads'}.md")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(table) + "\n")
        print(f"wrote {out}")
        return
    # Every command a first look: with the hidden-state cache on, `heads` after `run` on the
    # same text would read the streams run kept (bench/hidden_cache.py measures that).
    os.environ["ATTNCLI_NO_CACHE"] = "1"
    lines = ["| shape | qtype | file GB | command | tokens | seconds | peak RSS MB | floor s "
             "| ratio | note |", "|---|---|---|---|---|---|---|---|---|---|"]
    for size in args.sizes.split(","):
        shape = SHAPES[size]
        layers = PARTIAL_LAYERS.get(size, shape.layers)
        for qname in args.qtypes.split(","):
            path = model_file(shape, QTYPES[qname])
            gb = path.stat().st_size / 1e9
            for tokens in (int(t) for t in args.tokens.split(",")):
                text = text_file(tokens)
                for command in args.commands.split(","):
                    argv = [cli, *COMMANDS[command], "--model", str(path), "--file", str(text)]
                    floor, result = _median_pair(args.repeats, (size, tokens, layers), argv)
                    note = result["error"] or ""
                    if size in PARTIAL_LAYERS:
                        note += (f" {layers} of {shape.layers} layers: ×{shape.layers / layers:.0f}"
                                 f" ≈ {result['seconds'] * shape.layers / layers:.0f} s")
                    ratio = result["seconds"] / floor if result["exit"] == 0 else float("nan")
                    line = (f"| {size} | {qname} | {gb:.2f} | {command} | {tokens} | "
                            f"{result['seconds']:.1f} | {result['peak_mb']:.0f} | {floor:.2f} | "
                            f"{ratio:.1f} | {note.strip()} |")
                    print(line, flush=True)
                    lines.append(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


def _median_pair(repeats: int, floor: tuple[str, int, int],
                 argv: list[str]) -> tuple[float, dict]:
    """The floor's median seconds and the command's median run (its seconds and peak RSS: the
    run of median seconds), over repeats alternating pairs: the shared machine's load drifts."""
    pairs = [(floor_seconds(*floor), measure(argv)) for _ in range(max(1, repeats))]
    floors = sorted(seconds for seconds, _ in pairs)
    runs = sorted((run for _, run in pairs), key=lambda run: run["seconds"])
    return floors[len(floors) // 2], runs[len(runs) // 2]


def _cases(args: argparse.Namespace) -> Iterator[tuple[str, str, Path, Path]]:
    for size in args.sizes.split(","):
        for qname in args.qtypes.split(","):
            path = model_file(SHAPES[size], QTYPES[qname])
            for tokens in args.tokens.split(","):
                yield size, qname, path, text_file(int(tokens))


REPEATS = {"run --layer -2": ["run", "--layer", "-2"], "heads": ["heads"],
           "heads --measure rollout": ["heads", "--measure", "rollout"]}


def repeats(cli: str, args: argparse.Namespace) -> list[str]:
    """The first look, then each repeat, in an empty cache folder of their own."""
    lines = ["| shape | qtype | tokens | look | seconds | peak RSS MB | / first |",
             "|---|---|---|---|---|---|---|"]
    for size, qname, path, text in _cases(args):
        with tempfile.TemporaryDirectory(prefix="attncli-bench-cache-") as folder:
            os.environ.pop("ATTNCLI_NO_CACHE", None)
            os.environ["ATTNCLI_HIDDEN_CACHE"] = folder
            first = None
            for look, command in [("run --layer -1 (first)", COMMANDS["run"]),
                                  *REPEATS.items()]:
                result = measure([cli, *command, "--model", str(path), "--file", str(text)])
                first = first or result["seconds"]
                line = (f"| {size} | {qname} | {len(text.read_text())} | {look} | "
                        f"{result['seconds']:.2f} | {result['peak_mb']:.0f} | "
                        f"{result['seconds'] / first:.2f} | {result['error'] or ''}".rstrip())
                print(line, flush=True)
                lines.append(line)
    return lines


def thread_scaling(cli: str, args: argparse.Namespace) -> list[str]:
    """run --layer -1 and the floor on 1..N threads."""
    os.environ["ATTNCLI_NO_CACHE"] = "1"
    lines = ["| shape | qtype | tokens | threads | seconds | speed-up | floor s | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for size, qname, path, text in _cases(args):
        layers = PARTIAL_LAYERS.get(size, SHAPES[size].layers)
        one = None
        for threads in args.threads:
            floor = floor_seconds(size, len(text.read_text()), layers, threads)
            os.environ["OMP_NUM_THREADS"] = str(threads)
            result = measure([cli, *COMMANDS["run"], "--model", str(path), "--file", str(text)])
            del os.environ["OMP_NUM_THREADS"]
            one = one or result["seconds"]
            line = (f"| {size} | {qname} | {len(text.read_text())} | {threads} | "
                    f"{result['seconds']:.1f} | {one / result['seconds']:.2f}× | {floor:.2f} | "
                    f"{result['seconds'] / floor:.1f} |")
            print(line, flush=True)
            lines.append(line)
    return lines


if __name__ == "__main__":
    main()
