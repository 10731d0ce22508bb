"""#24's target: every new family's `heads` on a 50-token text no slower, per parameter, than
the Llama family's.

    .venv/bin/python bench/families.py                 # every family, 5 repeats (a few minutes)
    .venv/bin/python bench/families.py --repeats 3 --families llama,phi3

Each family gets a random checkpoint of one size, built with transformers into a temporary
folder (hidden 512, 8 layers, 8 heads, 4 kv heads where the family has grouped-query attention,
intermediate 1536, vocabulary 8,192, float32; decoders tie their embeddings, so that no family
carries an LM head that `heads` never reads) with a tokenizer.json trained as the tests' are.
Its parameters are the numel of the tensors saved. The text is cut, word by word, to 50 of that
family's tokens.

The whole command a user types, `attncli heads --model DIR --file TEXT --json > /dev/null`, is a
fresh process each repeat, after one warm-up run; its median is divided by the parameters (µs
per million) and compared with Llama's. In-process, the checkpoint's opening (reading and mapping
the tensors) and the forward pass (heads_pass) are timed apart, medians of as many repeats, for
the reasons behind a ratio, on --threads torch threads (default 1: on a shared machine a pass
contending for cores varies more than the families differ). The machine may be shared:
families run interleaved, one repeat of each per round, so that a load change falls on all of
them alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from options import thread_count

ROOT = Path(__file__).resolve().parents[1]
# Before transformers is imported anywhere: no network, no progress bars on stderr.
os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1", TQDM_DISABLE="1")
RESULTS = ROOT / "bench" / "results" / "families.json"
NUM_TOKENS = 50
NOISE = 1.10  # a ratio to Llama above this is reported as slower
SIZE = {"vocab_size": 8192, "hidden_size": 512, "intermediate_size": 1536,
        "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4}
TINY = {"vocab_size": 384, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
WORDS = ("When Mary and John went to the store, John gave a drink to Mary. The little robot "
         "walked into the old library, opened a dusty book and read its first page aloud while "
         "the rain kept falling on the roof of the quiet house by the river. Attention is all "
         "you need; rotary position embeddings turn queries and keys, and grouped-query "
         "attention shares one key and value head among several query heads.").split()


def _gemma3_layers(n: int) -> list[str]:
    """Gemma 3's pattern: 5 sliding-window layers, then 1 global one."""
    return ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(n)]


def settings(name: str, size: dict[str, int]) -> dict[str, Any]:
    """The transformers config of family name at size, its special features switched on."""
    head_dim = size["hidden_size"] // size["num_attention_heads"]
    layers = size["num_hidden_layers"]
    rotary = head_dim // 2  # phi3: longrope on half of each head, one factor per frequency pair
    special: dict[str, dict[str, Any]] = {
        "llama": {},
        # Soft-capping at Gemma 2's own caps; the window shorter than the text.
        "gemma2": {"head_dim": head_dim, "query_pre_attn_scalar": head_dim,
                   "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
                   "sliding_window": 32},
        "gemma3_text": {"head_dim": head_dim, "query_pre_attn_scalar": head_dim,
                        "sliding_window": 32, "layer_types": _gemma3_layers(layers),
                        "rope_parameters": {
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "default",
                                               "rope_theta": 1000000.0}}},
        "phi3": {"rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0,
                                     "partial_rotary_factor": 0.5,
                                     "short_factor": [1.0] * (rotary // 2),
                                     "long_factor": [2.0] * (rotary // 2)},
                 "original_max_position_embeddings": 1024},
        "gpt_neox": {"rotary_pct": 0.25, "use_parallel_residual": True},
        "olmo2": {},
        "smollm3": {"no_rope_layers": [0 if i % 4 == 3 else 1 for i in range(layers)]},
        "bert": {"type_vocab_size": 2, "pad_token_id": 0, "max_position_embeddings": 512},
        "roberta": {"type_vocab_size": 1, "pad_token_id": 1, "bos_token_id": 0,
                    "eos_token_id": 2, "max_position_embeddings": 514},
    }
    base = dict(size)
    if name in ENCODERS or name == "gpt_neox":  # no grouped-query attention
        base.pop("num_key_value_heads")
    if name not in ENCODERS:
        base.update(max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=1,
                    eos_token_id=2, pad_token_id=0)
    return {**base, **special[name]}


ENCODERS = ("bert", "roberta")
FAMILIES = ("llama", "gemma2", "gemma3_text", "phi3", "gpt_neox", "olmo2", "smollm3",
            *ENCODERS)


def build(directory: Path, name: str, size: dict[str, int], seed: int = 0) -> int:
    """Save a random float32 checkpoint of family name at size with its tokenizer.json into
    directory; return its parameters (the numel of the saved tensors)."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    sys.path.insert(0, str(ROOT))
    from tests.encoder_fixtures import roberta_tokenizer, wordpiece_tokenizer
    from tests.llama_fixtures import byte_level_tokenizer, sentencepiece_tokenizer

    cfg = AutoConfig.for_model(name, **settings(name, size))
    torch.manual_seed(seed)
    auto = AutoModelForMaskedLM if name in ENCODERS else AutoModelForCausalLM
    auto.from_config(cfg, attn_implementation="eager").save_pretrained(
        directory, safe_serialization=True)
    tokenizer = {"bert": wordpiece_tokenizer, "roberta": roberta_tokenizer,
                 "gemma2": sentencepiece_tokenizer, "gemma3_text": sentencepiece_tokenizer,
                 "phi3": sentencepiece_tokenizer}.get(name, byte_level_tokenizer)()
    tokenizer.save(str(directory / "tokenizer.json"))
    total = 0
    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), "pt") as tensors:
            total += sum(math.prod(tensors.get_slice(k).get_shape()) for k in tensors.keys())  # noqa: SIM118
    return total


def text_of(directory: Path, num_tokens: int = NUM_TOKENS) -> str:
    """A run of WORDS (repeated as needed) of num_tokens tokens, specials included, by
    directory's tokenizer.json: whole words, then characters of the next word, starting at the
    first word that lands exactly (so every family reads the same number of tokens)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))

    def count(text: str) -> int:
        return len(tokenizer.encode(text).ids)

    words = WORDS * (2 + num_tokens // 4)
    fallback = ""
    for first in range(len(WORDS)):
        k = first + 1
        while count(" ".join(words[first:k + 1])) <= num_tokens:
            k += 1
        text = " ".join(words[first:k])
        fallback = fallback or text
        rest = " " + " ".join(words[k:k + 3])
        exact = [text + rest[:j] for j in range(len(rest) + 1)
                 if count(text + rest[:j]) == num_tokens and not rest[j - 1:j].isspace()]
        if exact:
            return exact[-1]
    return fallback


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def in_process(directory: Path, text: str) -> dict[str, Any]:
    """One opening and one heads pass in this process: seconds each, and the token count."""
    sys.path.insert(0, str(ROOT))
    from attncli.core.request import Request
    from attncli.models.heads import heads_pass
    from attncli.models.run import open_checked

    req = Request(text=text, model=str(directory))
    start = time.perf_counter()
    model = open_checked(req)
    opened = time.perf_counter() - start
    ids = model.tokens(req).ids
    passed = _timed(lambda: heads_pass(model, ids, 0, model.spec.n_layer, req.measure))
    return {"open_s": opened, "pass_s": passed, "num_tokens": len(ids)}


def command(directory: Path, text_file: Path) -> list[str]:
    """The command a user types (its output goes to /dev/null)."""
    cli = str(Path(sys.executable).parent / "attncli")
    return [cli, "heads", "--model", str(directory), "--file", str(text_file), "--json"]


def run_command(argv: list[str]) -> float:
    """Wall seconds of one fresh process; its failure raises with its last stderr line."""
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    if done.returncode:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {lines[-1]}")
    return wall


def measure(folder: Path, names: tuple[str, ...], size: dict[str, int], repeats: int,
            whole: bool = True) -> list[dict[str, Any]]:
    """Build each family at size under folder, then time it (interleaved rounds); one row each.
    whole=False leaves out the command's fresh processes (in-process times only)."""
    cases = {}
    for name in names:
        directory = folder / name
        directory.mkdir()
        params = build(directory, name, size)
        text = text_of(directory)
        text_file = directory.with_suffix(".txt")
        text_file.write_text(text, encoding="utf-8")
        cases[name] = {"dir": directory, "file": text_file, "params": params, "text": text,
                       "open_s": [], "pass_s": [], "command_s": []}
    for case in cases.values():  # warm-up: the page cache, byte-compiled modules, lazy imports
        case["num_tokens"] = in_process(case["dir"], case["text"])["num_tokens"]
        if whole:
            run_command(command(case["dir"], case["file"]))
    for _ in range(repeats):
        for case in cases.values():
            got = in_process(case["dir"], case["text"])
            case["open_s"].append(got["open_s"])
            case["pass_s"].append(got["pass_s"])
            if whole:
                case["command_s"].append(run_command(command(case["dir"], case["file"])))
    return rows_of(cases)


def rows_of(cases: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians, µs per million parameters, and each ratio to the first family's (Llama's)."""
    rows = []
    for name, case in cases.items():
        row: dict[str, Any] = {"family": name, "params": case["params"],
                               "num_tokens": case["num_tokens"]}
        for key in ("command_s", "open_s", "pass_s"):
            if case[key]:
                median = statistics.median(case[key])
                row[key] = case[key]
                row[f"median_{key}"] = median
                row[f"{key[:-2]}_us_per_mparam"] = median * 1e6 / (case["params"] / 1e6)
        rows.append(row)
    first = rows[0]
    for row in rows:
        for key in ("command_us_per_mparam", "open_us_per_mparam", "pass_us_per_mparam"):
            if key in row:
                row[f"{key[:-len('_us_per_mparam')]}_ratio"] = row[key] / first[key]
        ratio = row.get("command_ratio", row.get("pass_ratio"))
        row["ok"] = ratio is not None and ratio <= NOISE
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width text table, one line per family."""
    lines = [f"{'family':<12} {'params':>7} {'T':>3} {'command s':>9} {'µs/M':>6} {'ratio':>5} "
             f"{'open s':>7} {'µs/M':>6} {'ratio':>5} {'pass s':>7} {'µs/M':>6} {'ratio':>5}  "
             f"target"]
    for r in rows:
        cells = [f"{r['family']:<12} {r['params'] / 1e6:6.2f}M {r['num_tokens']:>3}"]
        for key in ("command", "open", "pass"):
            width = 9 if key == "command" else 7
            if f"median_{key}_s" in r:
                cells.append(f"{r[f'median_{key}_s']:{width}.3f} "
                             f"{r[f'{key}_us_per_mparam']:6.0f} {r[f'{key}_ratio']:5.2f}")
            else:
                cells.append(f"{'-':>{width}} {'-':>6} {'-':>5}")
        verdict = "Llama" if r is rows[0] else ("ok" if r["ok"] else "SLOWER")
        lines.append(" ".join(cells) + f"  {verdict}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"of {', '.join(FAMILIES)} (llama first, the reference)")
    parser.add_argument("--threads", type=thread_count, default=1,
                        help="torch threads of the in-process timings (the command keeps its own)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    names = tuple(n for n in args.families.split(",") if n)
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names or names[0] != "llama":
        parser.error(f"--families: llama first, then any of {', '.join(FAMILIES[1:])} "
                     f"(got {args.families})")
    import torch

    torch.set_num_threads(args.threads)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "attncli")], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(Path(tmp), names, SIZE, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"size": SIZE, "repeats": args.repeats,
                                    "threads": args.threads, "load_avg": os.getloadavg(),
                                    "noise": NOISE,
                                    "rows": rows}, indent=2) + "\n")
    print(f"heads --json on a {NUM_TOKENS}-token text, median of {args.repeats} (µs/M: "
          f"µs per million parameters; ratio: to Llama's µs/M, target ≤ {NOISE})")
    print(table(rows))


if __name__ == "__main__":
    main()
