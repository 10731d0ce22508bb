"""llama.cpp itself, for bench/runtime.py: PyPI's llama-cpp-cffi 0.4.42 wheel (its prebuilt CPU
build, `_llama_cpp_cpu`, loaded directly), installed into a cache folder at bench time, never
into the project's environment; and the child process that times it.

Debian 12's libstdc++ lacks `__cxa_call_terminate` (GCC 14's), which the wheel's build calls:
a tiny shim that supplies it is compiled here with cc into the same cache folder and preloaded
into the child. Nothing built is committed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

VERSION = "0.4.42"
CACHE = Path(os.environ.get("ATTNCLI_BENCH_CACHE",
                            Path.home() / ".cache" / "attncli" / "bench"))
FOLDER = CACHE / f"llama-cpp-cffi-{VERSION}"
SHIM_C = """
/* GCC 14's libstdc++ symbol, missing from Debian 12's: what a noexcept violation calls. */
extern void *__cxa_begin_catch(void *);
extern void _ZSt9terminatev(void) __attribute__((noreturn));
void __cxa_call_terminate(void *exception) {
    if (exception) __cxa_begin_catch(exception);
    _ZSt9terminatev();
}
"""

# The child: load the model, decode `prompt` token ids in one batch, then `decode` tokens one at
# a time (greedy), printing one JSON line of timings and the peak RSS.
CHILD = r"""
import importlib.util, json, resource, sys, time
import numpy as np
folder, model_path, threads, decode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ids = [int(i) for i in sys.argv[5].split(",")]
sys.path.insert(0, folder)
found = next((folder + "/llama/" + f for f in __import__("os").listdir(folder + "/llama")
              if f.startswith("_llama_cpp_cpu.")), None)
spec = importlib.util.spec_from_file_location("_llama_cpp_cpu", found)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
lib, ffi = module.lib, module.ffi
start = time.perf_counter()
lib.llama_backend_init()
mp = lib.llama_model_default_params()
mp.n_gpu_layers = 0
model = lib.llama_model_load_from_file(model_path.encode(), mp)
assert model != ffi.NULL, "llama.cpp could not load the model"
cp = lib.llama_context_default_params()
cp.n_ctx = len(ids) + decode + 16
cp.n_batch = max(len(ids), 32)
cp.n_ubatch = 512
cp.n_threads = cp.n_threads_batch = threads
ctx = lib.llama_init_from_model(model, cp)
assert ctx != ffi.NULL, "llama.cpp could not make a context"
vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
loaded = time.perf_counter()
tokens = ffi.new("llama_token[]", ids)
assert lib.llama_decode(ctx, lib.llama_batch_get_one(tokens, len(ids))) == 0
prompted = time.perf_counter()
steps, cpu, chosen = [], [], []
one = ffi.new("llama_token[1]")
for _ in range(decode):
    logits = np.frombuffer(ffi.buffer(lib.llama_get_logits_ith(ctx, -1), vocab * 4), np.float32)
    one[0] = int(logits.argmax())
    chosen.append(one[0])
    t0, c0 = time.perf_counter(), time.process_time()
    assert lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1)) == 0
    steps.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
print(json.dumps({"load_s": loaded - start, "prompt_s": prompted - loaded, "steps_s": steps,
                  "steps_cpu_s": cpu,
                  "ids": chosen,
                  "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


# Greedy answers: for each prompt (token ids, ';'-separated), a fresh context, the prompt in one
# batch, then `decode` tokens, each the argmax of the last logits; one JSON list of [ids,
# log-probabilities of each chosen id] pairs.
GREEDY_CHILD = r"""
import importlib.util, json, os, sys
import numpy as np
folder, model_path, threads, decode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
prompts = [[int(i) for i in p.split(",")] for p in sys.argv[5].split(";")]
found = next(folder + "/llama/" + f for f in os.listdir(folder + "/llama")
             if f.startswith("_llama_cpp_cpu."))
sys.path.insert(0, folder)
spec = importlib.util.spec_from_file_location("_llama_cpp_cpu", found)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
lib, ffi = module.lib, module.ffi
lib.llama_backend_init()
mp = lib.llama_model_default_params()
mp.n_gpu_layers = 0
model = lib.llama_model_load_from_file(model_path.encode(), mp)
vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(model))
answers = []
for ids in prompts:
    cp = lib.llama_context_default_params()
    cp.n_ctx, cp.n_batch = len(ids) + decode + 16, max(len(ids), 32)
    cp.n_threads = cp.n_threads_batch = threads
    ctx = lib.llama_init_from_model(model, cp)
    tokens = ffi.new("llama_token[]", ids)
    assert lib.llama_decode(ctx, lib.llama_batch_get_one(tokens, len(ids))) == 0
    one, chosen, logprobs = ffi.new("llama_token[1]"), [], []
    for _ in range(decode):
        logits = np.frombuffer(ffi.buffer(lib.llama_get_logits_ith(ctx, -1), vocab * 4),
                               np.float32).astype(np.float64)
        one[0] = int(logits.argmax())
        chosen.append(one[0])
        top = logits.max()
        logprobs.append(-float(np.log(np.exp(logits - top).sum())))  # the argmax's
        assert lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1)) == 0
    lib.llama_free(ctx)
    answers.append([chosen, logprobs])
print(json.dumps(answers))
"""


def greedy(model: Path, threads: int, prompts: list[list[int]],
           new: int) -> list[tuple[list[int], list[float]]]:
    """llama.cpp's greedy answers (new ids each, with each id's log-probability) to each
    prompt's token ids, in one child."""
    folder, preload = install(), shim()
    if folder is None or preload is None:
        raise RuntimeError("llama.cpp is not available")
    env = {**os.environ, "LD_PRELOAD": str(preload), "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-c", GREEDY_CHILD, str(folder), str(model),
                           str(threads), str(new),
                           ";".join(",".join(map(str, ids)) for ids in prompts)],
                          env=env, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    return [(ids, logprobs) for ids, logprobs in answers]


def install() -> Path | None:
    """The wheel's folder (installed once into the cache), or None where pip cannot get it."""
    if not (FOLDER / "llama").is_dir():
        got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                              "--target", str(FOLDER), f"llama-cpp-cffi=={VERSION}", "cffi"],
                             capture_output=True, text=True, check=False)
        if got.returncode != 0:
            print(f"llama-cpp-cffi {VERSION} could not be installed: {got.stderr[-300:]}",
                  file=sys.stderr)
            return None
    return FOLDER


def shim() -> Path | None:
    """The preloaded __cxa_call_terminate shim, compiled once into the cache (None: no cc)."""
    built = CACHE / "cxa_shim.so"
    if not built.exists():
        source = CACHE / "cxa_shim.c"
        CACHE.mkdir(parents=True, exist_ok=True)
        source.write_text(SHIM_C)
        made = subprocess.run(["cc", "-shared", "-fPIC", "-O2", str(source), "-o", str(built),
                               "-lstdc++"], capture_output=True, text=True, check=False)
        if made.returncode != 0:
            print(f"the shim did not compile: {made.stderr[-300:]}", file=sys.stderr)
            return None
    return built


def command(model: Path, threads: int, ids: list[int], decode: int) -> tuple[list[str],
                                                                          dict[str, str]]:
    """The child's command line and environment (None-free: call install() and shim() first)."""
    folder, preload = install(), shim()
    assert folder is not None and preload is not None
    env = {**os.environ, "LD_PRELOAD": str(preload), "OMP_NUM_THREADS": str(threads)}
    return ([sys.executable, "-c", CHILD, str(folder), str(model), str(threads), str(decode),
             ",".join(map(str, ids))], env)
