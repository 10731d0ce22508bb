"""The receipt measured against llama.cpp itself: llama.cpp's own greedy answers on SmolLM2, with
the log-probability it gave each chosen token, explained by attncli as a user would
(`generate PROMPT --raw --allow-special --logprobs FILE`: the file's text is the answer,
teacher-forced in one pass, each token's log-probability compared with the file's).

For each of bench/agreement.py's prompts (the file's tokenizer, no chat template), llama.cpp
writes --new tokens greedily (bench/llamacpp.py's CPU build of llama-cpp-cffi, its logits as
its CPU backend computes them: 8-bit activations, a float16 KV cache); the answer goes into an
Ollama-style log-probabilities file (each token's text, bytes and log-probability), which
attncli reads through --logprobs' own reader and compares in generate's own code. Reported: the
distribution of |attncli − llama.cpp| over every compared token (median, 90th and 99th
percentiles, largest), how many were flagged (over 1 nat), how many answers attncli's tokenizer
cut as llama.cpp did, and how many tokens' likeliest choice differs. docs/why.md states the
figures; tests/tools/test_bench_receipt.py checks them.

    python bench/receipt.py [--model FILE] [--prompts 20] [--new 32] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import llamacpp
from agreement import PROMPTS, SMOLLM2, prompt_ids
from options import thread_count

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def logprobs_file(folder: Path, name: str, pieces: list[bytes], logprobs: list[float]) -> Path:
    """An Ollama-style response holding each token's text, bytes and log-probability, and as its
    likeliest candidate the token itself (llama.cpp chose greedily)."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"model": "llama.cpp", "logprobs": [
        {"token": p.decode("utf-8", "replace"), "bytes": list(p), "logprob": lp,
         "top_logprobs": [{"token": p.decode("utf-8", "replace"), "logprob": lp}]}
        for p, lp in zip(pieces, logprobs, strict=True)]}))
    return path


def receipts(model: Path, count: int, new: int, threads: int) -> list[dict]:
    """Each prompt's receipt: llama.cpp's greedy answer explained by attncli with its file."""
    import torch

    from attncli.models.family import Tokens, open_model
    from attncli.models.generate.receipt import read_logprobs
    from attncli.models.generate.run import generate_model
    from attncli.models.predict import token_texts
    from attncli.records.asking import GenerationRequest

    torch.set_num_threads(threads)
    prompts = prompt_ids(model, count)
    answers = llamacpp.greedy(model, threads, prompts, new)
    source = open_model(str(model)).vocabulary()
    texts = token_texts(str(model), Tokens([], [], None, None), source)
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for k, (text, (ids, logprobs)) in enumerate(zip(PROMPTS, answers, strict=False)):
            pieces = [bytes.fromhex(str(texts(i)["bytes"])) for i in ids]
            path = logprobs_file(Path(folder), str(k), pieces, logprobs)
            result = generate_model(GenerationRequest(
                str(model), text, reported=read_logprobs(path), raw=True, allow_special=True,
                view="raw", exclude_sinks=False))
            assert result.receipt is not None, "--logprobs makes a receipt"
            out.append(result.receipt.to_dict())  # the JSON receipt --json writes
    return out


def summary(found: list[dict]) -> dict:
    """The distribution of |difference| over every compared token or span, and the counts."""
    gaps = sorted(abs(r["difference"]) for receipt in found for r in receipt["rows"])

    def at(q: float) -> float:
        return gaps[min(len(gaps) - 1, int(q * len(gaps)))]

    return {"answers": len(found), "compared": len(gaps),
            "by_tokens": sum(r["compared"] == "tokens" for r in found),
            "median": statistics.median(gaps), "p90": at(0.9), "p99": at(0.99),
            "largest": gaps[-1], "mean": statistics.fmean(gaps),
            "flagged": sum(len(r["flagged"]) for r in found),
            "choices_differ": sum(len(r["choices_differ"]) for r in found)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=SMOLLM2)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--new", type=int, default=32)
    parser.add_argument("--threads", type=thread_count, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if llamacpp.install() is None or llamacpp.shim() is None:
        sys.exit("llama.cpp could not be loaded (llama-cpp-cffi not installed, or no cc)")
    found = receipts(args.model, args.prompts, args.new, args.threads)
    report = {"model": args.model.name, "prompts": args.prompts, "new": args.new,
              **summary(found)}
    if args.json:
        print(json.dumps({**report, "receipts": found}, indent=2))
        return
    print(json.dumps(report))


if __name__ == "__main__":
    main()
