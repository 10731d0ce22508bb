"""`attncli scan` (#40) on the real SmolLM2 GGUF: documents per second with 1 and 2 workers, the
per-document cost against `heads --json` in a warm process, and (--ray-nodes) a Ray cluster of
two raylets simulated on this machine against the local pool.

    .venv/bin/python bench/scan.py                    # workers and per-document parts
    .venv/bin/python bench/scan.py --docs 48          # a bigger corpus
    .venv/bin/python bench/scan.py --ray-nodes        # also two local raylets (needs ray)
    .venv/bin/python bench/scan.py --small            # small documents on the toy model only

workers: `attncli scan` as a user runs it (a fresh process, a fresh --out), wall time of the whole
command, and the documents per second of the scan alone (the workers' model loads left out, by
subtracting a one-document scan's wall time). Target: 2 workers ≥ 1.7× one on a 2-core machine.

per_document: inside one warm process, worker.Scorer.score on each document against
models.run.run_heads + to_dict + the JSON write (`heads --json` without the process start), the
hidden-state cache off for both (a scan never fills it). Target: ≤ 1.2×.

small (#43, --small runs it alone): the toy GPT-2 on 2,000 two-word documents and on a 1 MB
corpus of 20,000 lines, `attncli scan` as a user runs it (2 workers): CPU seconds of the command
and its workers (getrusage of the children), and wall time. Beside them, in one warm process,
the worker's CPU a document for batches of 64 run together layer by layer against the same
documents one pass each (PACK_TOKENS 1), and their ratio: the per-document overhead batching
takes away. Target: together ≤ 0.4× alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "scan.json"
MODEL = Path("~/.cache/attncli/models/SmolLM2-135M-Instruct.Q4_1.gguf").expanduser()
SENTENCES = ["The quick brown fox jumps over the lazy dog while the cat watches it.",
             "Alice went to the market, and Alice bought bread before she went home.",
             "A head that copies the token after an earlier copy is an induction head.",
             "Rain fell on the old town all night, and the river rose over its banks."]


def corpus(folder: Path, docs: int) -> Path:
    """docs documents of about 60-90 tokens, one a line."""
    path = folder / "corpus.txt"
    lines = [" ".join(SENTENCES[(k + j) % 4] for j in range(3 + k % 2)) + f" ({k})"
             for k in range(docs)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def scan_wall(corpus_path: Path, out: Path, *extra: str) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attncli", "scan", str(corpus_path), "--model",
                    str(MODEL), "--out", str(out), "--json", *extra], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def workers(folder: Path, docs: int) -> dict[str, float]:
    """Documents per second with 1 and 2 workers (see the module)."""
    big, one = corpus(folder, docs), folder / "one.txt"
    one.write_text(SENTENCES[0] + "\n", encoding="utf-8")
    out: dict[str, float] = {}
    for n in (1, 2):
        start_up = scan_wall(one, folder / f"one-{n}", "--workers", str(n))
        wall = scan_wall(big, folder / f"big-{n}", "--workers", str(n))
        out[f"wall_s_{n}"] = wall
        out[f"docs_per_s_{n}"] = (docs - 1) / max(wall - start_up, 1e-9)
    out["speedup_2_over_1"] = out["docs_per_s_2"] / out["docs_per_s_1"]
    return out


def per_document(repeats: int = 5) -> dict[str, float]:
    """Median seconds per document: Scorer.score against run_heads + JSON (see the module)."""
    import torch

    from attncli.core.request import Request
    from attncli.models.heads import HeadsOptions
    from attncli.models.run import run_heads
    from attncli.render.jsonout import json_pieces
    from attncli.scan.worker import ScanSettings, Scorer

    os.environ["ATTNCLI_NO_CACHE"] = "1"
    torch.set_num_threads(1)
    scorer = Scorer(ScanSettings(model=str(MODEL)))
    texts = [" ".join(SENTENCES[(k + j) % 4] for j in range(3)) for k in range(4)]
    scan_s, heads_s = [], []
    for _ in range(repeats):
        for text in texts:
            start = time.perf_counter()
            scorer.score("doc", text)
            scan_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            doc = run_heads(Request(text=text, model=str(MODEL)), HeadsOptions()).to_dict()
            for _piece in json_pieces(doc):
                pass
            heads_s.append(time.perf_counter() - start)
    scan, heads = statistics.median(scan_s), statistics.median(heads_s)
    return {"scan_s": scan, "heads_json_s": heads, "ratio": scan / heads}


TOY = ROOT / "samples" / "toy-gpt2"
WORDS = ("the cat sat on a mat while dog ran far away bird sings loud in morning light river "
         "flows over stones quietly").split()


def small_corpora(folder: Path) -> dict[str, Path]:
    """2,000 two-word documents, and 20,000 lines of 6-12 words (about 1 MB), seeded."""
    import random

    pick = random.Random(43).choice
    two = folder / "two-words.txt"
    two.write_text("\n".join(f"{pick(WORDS)} {pick(WORDS)}" for _ in range(2000)) + "\n",
                   encoding="utf-8")
    lines = folder / "lines.txt"
    draw = random.Random(44)
    lines.write_text("\n".join(" ".join(draw.choice(WORDS) for _ in range(draw.randint(6, 12)))
                               for _ in range(20_000)) + "\n", encoding="utf-8")
    return {"two_words_2000": two, "lines_20000": lines}


def scan_cpu(corpus_path: Path, out: Path) -> dict[str, float]:
    """CPU seconds (user + system, the command and every worker it waited for) and wall time
    of `attncli scan` on the toy GPT-2 with 2 workers."""
    import resource

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attncli", "scan", str(corpus_path), "--model",
                    str(TOY), "--out", str(out), "--workers", "2", "--json"], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, "wall_s": wall}


def per_document_batched(texts: list[str], repeats: int = 3) -> dict[str, float]:
    """The worker's CPU milliseconds a document: batches of 64 together, then one pass each."""
    import torch

    from attncli.scan import worker
    from attncli.scan.worker import ScanSettings, Scorer

    torch.set_num_threads(1)
    scorer = Scorer(ScanSettings(model=str(TOY)))
    batches = [[(f"d{k + j}", text, None, False) for j, text in enumerate(texts[k:k + 64])]
               for k in range(0, len(texts), 64)]
    scorer.score_batch(batches[0])  # warm

    def cpu_ms() -> float:
        best = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            for batch in batches:
                scorer.score_batch(batch)
            best = min(best, (time.process_time() - start) / len(texts) * 1000)
        return best

    together = cpu_ms()
    packed, worker.PACK_TOKENS = worker.PACK_TOKENS, 1  # every document a pass of its own
    try:
        alone = cpu_ms()
    finally:
        worker.PACK_TOKENS = packed
    return {"together_ms": together, "alone_ms": alone, "ratio": together / alone}


def small(folder: Path) -> dict[str, object]:
    """The small-document measures (see the module)."""
    corpora = small_corpora(folder)
    out: dict[str, object] = {name: scan_cpu(path, folder / f"out-{name}")
                              for name, path in corpora.items()}
    texts = corpora["two_words_2000"].read_text(encoding="utf-8").splitlines()[:640]
    out["per_document"] = per_document_batched(texts)
    return out


def ray_nodes(folder: Path, docs: int) -> dict[str, float | bool]:
    """Two raylets of one CPU each on this machine (ray.cluster_utils, loopback only) against
    the local pool of 2: documents per second and whether the Parquet rows are identical."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ray.cluster_utils import Cluster

    big = corpus(folder, docs)
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    try:
        ray_wall = scan_wall(big, folder / "ray", "--workers", "2", "--ray", cluster.address)
    finally:
        cluster.shutdown()
    local_wall = scan_wall(big, folder / "local", "--workers", "2")

    def rows(out: Path) -> list[dict[str, object]]:
        table = pa.concat_tables([pq.read_table(p) for p in sorted((out / "heads").glob("*"))])
        return sorted(table.to_pylist(), key=lambda r: (r["document"], r["layer"], r["head"]))

    return {"ray_wall_s": ray_wall, "local_wall_s": local_wall,
            "ray_over_local_throughput": local_wall / ray_wall,
            "identical": rows(folder / "ray") == rows(folder / "local")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--ray-nodes", action="store_true")
    parser.add_argument("--small", action="store_true", help="the small documents alone")
    args = parser.parse_args()
    results: dict[str, object] = {"docs": args.docs}
    with tempfile.TemporaryDirectory() as tmp:
        results["small"] = small(Path(tmp))
        print(json.dumps({"small": results["small"]}), flush=True)
    if args.small:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        return
    if not MODEL.is_file():
        sys.exit(f"SmolLM2 GGUF not found at {MODEL}: make model fetches it")
    with tempfile.TemporaryDirectory() as tmp:
        results["workers"] = workers(Path(tmp), args.docs)
        print(json.dumps({"workers": results["workers"]}), flush=True)
        results["per_document"] = per_document()
        print(json.dumps({"per_document": results["per_document"]}), flush=True)
        try:
            import ray  # noqa: F401
        except ImportError:
            print("ray_nodes: skipped, Ray is not installed (pip install 'attncli[cluster]')")
            args.ray_nodes = False
        if args.ray_nodes:
            results["ray_nodes"] = ray_nodes(Path(tmp), args.docs)
            print(json.dumps({"ray_nodes": results["ray_nodes"]}), flush=True)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
