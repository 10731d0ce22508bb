"""A chat template rendered by attncli's bounded sandbox (every value weighed, the work and the
memory bounded) against transformers' own rendering (render_jinja_template, the plain sandbox
apply_chat_template uses), on SmolLM2's template and the Llama 3, Qwen2 and Phi-3 style ones.

    .venv/bin/python bench/template.py                  # median of 30 rounds
    .venv/bin/python bench/template.py --repeats 100

Both sides keep a compiled template (transformers in its lru_cache, attncli in its own), so the
repeated render is compared as a user's generation meets it; attncli's first render (its cache
cleared: a compile each time) is timed too, against transformers' with its cache cleared. The
ratios are attncli / transformers in the same run. Results go to bench/results/template.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from generate import median_seconds  # noqa: E402  (bench/ is the script's folder, first on sys.path)

RESULTS = ROOT / "bench" / "results" / "template.json"
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is the capital of France? " * 10}]
SPECIAL = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}


def _templates() -> dict[str, str]:
    from attncli.models.generate.chat import chat_setup
    from attncli.models.sources.gguf import open_gguf
    from tests.gguf_fixtures import smollm2
    from tests.models.generate.test_generate_template import LLAMA3, PHI3, QWEN2

    return {"smollm2": str(chat_setup(open_gguf(smollm2())).template), "llama3": LLAMA3,
            "qwen2": QWEN2, "phi3": PHI3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    from transformers.utils import chat_template_utils as hf

    from attncli.models.generate import template as ours

    def attncli_side(text: str, fresh: bool) -> Callable[[], object]:
        def run() -> object:
            if fresh:
                ours._compiled.cache_clear()
            return ours.render_template(text, MESSAGES, SPECIAL)
        return run

    def transformers_side(text: str, fresh: bool) -> Callable[[], object]:
        def run() -> object:
            if fresh:
                hf._compile_jinja_template.cache_clear()
            return hf.render_jinja_template([MESSAGES], chat_template=text,
                                            add_generation_prompt=True, **SPECIAL)[0][0]
        return run

    rows = {}
    for name, text in _templates().items():
        assert attncli_side(text, False)() == transformers_side(text, False)(), name
        row = {}
        for kind, fresh in (("repeated", False), ("first", True)):
            ours_s = median_seconds(attncli_side(text, fresh), args.repeats)
            theirs_s = median_seconds(transformers_side(text, fresh), args.repeats)
            row[kind] = {"attncli_ms": ours_s * 1e3, "transformers_ms": theirs_s * 1e3,
                         "ratio": ours_s / theirs_s}
        rows[name] = row
        print(f"{name:8} repeated: attncli {row['repeated']['attncli_ms']:.3f} ms, "
              f"transformers {row['repeated']['transformers_ms']:.3f} ms, "
              f"{row['repeated']['ratio']:.2f}x;  first: {row['first']['ratio']:.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"repeats": args.repeats, "templates": rows}, indent=2))


if __name__ == "__main__":
    main()
