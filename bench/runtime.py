"""attncli beside llama.cpp itself, on the same GGUF files, threads and token ids.

llama.cpp is PyPI's llama-cpp-cffi 0.4.42 CPU build (bench/llamacpp.py installs it into a cache
folder). For each file, alternated attncli / llama.cpp, --repeats times, medians:
  prompt   the prompt's tokens through every layer (attncli: the decoder's prefill, as generate
           fills its caches; llama.cpp: one llama_decode of the batch), tokens/s;
  decode   --new tokens after a 50-token prompt, greedy, one step at a time (attncli: generate's
           step, every layer's attention kept; llama.cpp: llama_decode of one token), tokens/s,
           of wall time and of the process's CPU time (decode_cpu);
  look     a fresh process: `attncli run --layer -1` and `attncli heads` on the prompt, against
           llama.cpp's whole process (start, load, the prompt);
  rss      each child's peak resident memory;
  floor    the file's bytes per token at this machine's copy bandwidth (numpy copying 1 GB):
           the decode bound both runtimes share.
Files: SmolLM2 (real), and the Llama 3.2 1B, 3B and 3.1 8B shapes (bench/shapes.py, Q4_K_M-style:
Q4_K with Q6_K for output, attn_v and ffn_down; and Q8_0), written once into a cache folder.
Writes bench/results/runtime.json.

    python bench/runtime.py --sizes smollm2,1b --threads 2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import llamacpp
from options import thread_count
from shapes import LLAMA_1B, LLAMA_3B, LLAMA_8B, Q, write_llama_shape

ROOT = Path(__file__).resolve().parents[1]

SMOLLM2 = Path.home() / ".cache" / "attncli" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SHAPES = {"1b": LLAMA_1B, "3b": LLAMA_3B, "8b": LLAMA_8B}
TEXT = ("The people who ask what a model looked at when it answered compare the tool with the "
        "runtime they already use, and they read the attention of every step of the answer. ")

ATTNCLI_CHILD = r"""
import json, resource, sys, time
import torch
path, threads, decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ids = [int(i) for i in sys.argv[4].split(",")]
torch.set_num_threads(threads)
start = time.perf_counter()
from attncli.models.family import open_model
from attncli.models.generate.engine import generation_bytes, holds
from contextlib import ExitStack
from attncli.models.sources.gguf.qmatmul import llama_cpp_numerics
numerics = ExitStack()  # the whole child computes in the numerics asked for
numerics.enter_context(llama_cpp_numerics(sys.argv[5] == "llama.cpp"))
model = open_model(path)
held = holds(model, generation_bytes(model, len(ids), decode))
decoder = model.decoder(0, len(ids) + decode + 1, held=held)
loaded = time.perf_counter()
with torch.no_grad():
    decoder.prefill(ids)
    prompted = time.perf_counter()
    steps, cpu, chosen, token = [], [], [], ids[-1]
    for s in range(decode):
        t0, c0 = time.perf_counter(), time.process_time()
        weights, logits = decoder.step_layers(token, len(ids) + s)  # every layer's attention
        token = int(logits.argmax())
        steps.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        chosen.append(token)
print(json.dumps({"load_s": loaded - start, "prompt_s": prompted - loaded, "steps_s": steps,
                  "steps_cpu_s": cpu,
                  "ids": chosen, "held": held,
                  "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def files(sizes: list[str], cache: Path,
          styles: tuple[str, ...] = ("Q4_K_M", "Q8_0")) -> list[tuple[str, Path]]:
    """(label, path) of each file benchmarked, the synthetic ones written once."""
    out = []
    for size in sizes:
        if size == "smollm2":
            if SMOLLM2.exists():
                out.append(("SmolLM2-135M Q4_1", SMOLLM2))
            continue
        for style, qtype in (("Q4_K_M", Q.Q4_K), ("Q8_0", Q.Q8_0)):
            if style not in styles:
                continue
            path = cache / f"llama-{size}-{style}.gguf"
            if not path.exists():
                print(f"writing {path}", file=sys.stderr)
                write_llama_shape(path.with_suffix(".part"), SHAPES[size], qtype,
                                  mixed=style == "Q4_K_M").rename(path)
            out.append((f"{size} shapes {style}", path))
    return out


def _tokenizer(path: Path):  # noqa: ANN202
    """The file's own tokenizer (HF tokenizers), as attncli tokenises with it."""
    from attncli.models.hf_tokens import source_tokenizer
    from attncli.models.sources.gguf import open_gguf

    return source_tokenizer(open_gguf(path))


def token_ids(path: Path, count: int) -> list[int]:
    """count token ids of TEXT (repeated) as attncli tokenises it for this file."""
    ids = _tokenizer(path).encode(TEXT * (count // 10 + 1)).ids
    assert len(ids) >= count
    return list(ids[:count])


def child(command: list[str], env: dict[str, str]) -> tuple[dict, float]:
    """Run one timed child: its JSON line and its wall time."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False,
                          timeout=3600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1]), wall


def process(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """A whole process's wall time and peak RSS (its own getrusage, through wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command[:3]} failed")
    return wall, usage.ru_maxrss * 1024


COPY_CHILD = """
import time, numpy as np
src = np.ones(2**28, dtype=np.float32)
dst = np.empty_like(src)
best = float("inf")
for _ in range(3):
    start = time.perf_counter()
    np.copyto(dst, src)
    best = min(best, time.perf_counter() - start)
print(2 * src.nbytes / best)
"""


def copy_bandwidth() -> float:
    """Bytes per second numpy copies 1 GB at (read and written, the best of 3), measured in a
    child: its 2 GB would otherwise be every later child's peak RSS (fork inherits it)."""
    done = subprocess.run([sys.executable, "-c", COPY_CHILD], capture_output=True, text=True,
                          check=True)
    return float(done.stdout)


def bench_file(label: str, path: Path, threads: int, repeats: int, new: int,
               prompts: list[int], looks: bool, bandwidth: float,
               numerics: str = "float32") -> dict:
    """One file's row: medians of attncli (computing in numerics: float32, or llama.cpp's
    8-bit activations and float16 caches) and llama.cpp alternated."""
    # OMP_WAIT_POLICY: what the attncli command sets before torch loads (cli.quiet_threads),
    # so the child that times the decoder directly runs as `attncli generate` would.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "ATTNCLI_NO_CACHE": "1",
           "NO_COLOR": "1", "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    attncli = [sys.executable, "-c", ATTNCLI_CHILD, str(path), str(threads)]
    tail = [numerics]
    row: dict = {"file": label, "bytes": path.stat().st_size, "threads": threads,
                 "numerics": numerics}
    for count in prompts:
        ids = token_ids(path, count)
        ours, theirs = [], []
        for _ in range(repeats):
            ours.append(child([*attncli, "0", ",".join(map(str, ids)), *tail], env)[0])
            theirs.append(child(*llamacpp.command(path, threads, ids, 0))[0])
        row[f"prompt_{count}"] = _pair(ours, theirs, lambda r, n=count: n / r["prompt_s"])
        row[f"rss_prompt_{count}"] = _pair(ours, theirs, lambda r: r["rss_bytes"])
    ids = token_ids(path, 50)
    ours, theirs = [], []
    for _ in range(repeats):
        ours.append(child([*attncli, str(new), ",".join(map(str, ids)), *tail], env)[0])
        theirs.append(child(*llamacpp.command(path, threads, ids, new))[0])
    row["decode"] = _pair(ours, theirs, lambda r: 1 / statistics.median(r["steps_s"]))
    # Tokens per second of the process's CPU time (every thread's): what other guests and
    # other work on the machine move far less than the wall clock.
    row["decode_cpu"] = _pair(ours, theirs, lambda r: 1 / statistics.median(r["steps_cpu_s"]))
    row["rss_decode"] = _pair(ours, theirs, lambda r: r["rss_bytes"])
    row["held"] = ours[0]["held"]
    row["same_ids"] = sum(a == b for a, b in zip(ours[0]["ids"], theirs[0]["ids"], strict=True))
    row["floor_tokens_per_s"] = bandwidth / path.stat().st_size
    if looks:
        text = _text_of(path, ids)
        cli = [sys.executable, "-m", "attncli"]
        for name, args in (("run", ["run", "--layer", "-1"]), ("heads", ["heads"])):
            ours_t, theirs_t = [], []
            for _ in range(repeats):
                ours_t.append(process([*cli, *args, text, "--model", str(path), "--json"], env))
                theirs_t.append(process(*llamacpp.command(path, threads, ids, 0)))
            row[f"look_{name}"] = {
                "attncli_s": statistics.median(t for t, _ in ours_t),
                "llama_cpp_s": statistics.median(t for t, _ in theirs_t),
                "attncli_rss": statistics.median(r for _, r in ours_t),
                "llama_cpp_rss": statistics.median(r for _, r in theirs_t)}
    return row


def _text_of(path: Path, ids: list[int]) -> str:
    """The text whose tokens are ids (TEXT's first tokens, decoded back)."""
    return str(_tokenizer(path).decode(ids))


def _pair(ours: list[dict], theirs: list[dict], value: object) -> dict:
    """Medians of value(result) for each side, and attncli's over llama.cpp's."""
    a = statistics.median(value(r) for r in ours)  # type: ignore[operator]
    b = statistics.median(value(r) for r in theirs)  # type: ignore[operator]
    return {"attncli": a, "llama_cpp": b, "ratio": a / b}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="smollm2,1b,3b,8b")
    parser.add_argument("--threads", type=thread_count, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--prompts", default="50,2000", help="prompt lengths timed")
    parser.add_argument("--long-sizes", default="smollm2,1b,3b",
                        help="the sizes whose prompts past 256 tokens are timed (2,000 tokens "
                             "on the 8B take most of an hour here)")
    parser.add_argument("--no-looks", action="store_true")
    parser.add_argument("--styles", default="Q4_K_M,Q8_0", help="the synthetic files' types")
    parser.add_argument("--cache", type=Path, default=llamacpp.CACHE / "shapes")
    parser.add_argument("--numerics", default="float32", choices=("float32", "llama.cpp"),
                        help="attncli's: float32 activations, or llama.cpp's (8-bit "
                             "activations, float16 caches; llama_cpp_numerics)")
    args = parser.parse_args()
    if llamacpp.install() is None or llamacpp.shim() is None:
        print("llama.cpp is not available: nothing to compare with", file=sys.stderr)
        return
    args.cache.mkdir(parents=True, exist_ok=True)
    bandwidth = copy_bandwidth()
    rows = []
    long = args.long_sizes.split(",")
    for size in args.sizes.split(","):
        prompts = [int(p) for p in args.prompts.split(",") if p and (int(p) <= 256
                                                                    or size in long)]
        for label, path in files([size], args.cache, tuple(args.styles.split(","))):
            print(f"{label}: {path}", file=sys.stderr)
            rows.append(bench_file(label, path, args.threads, args.repeats, args.new, prompts,
                                   not args.no_looks, bandwidth, args.numerics))
        print(json.dumps(rows[-1]), file=sys.stderr)
    out = ROOT / "bench" / "results" / "runtime.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"copy_bandwidth": bandwidth, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
