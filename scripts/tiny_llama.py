"""Write a tiny random Llama-family model and tokenizer.json into a folder, for trying attncli.

Needs the test extra (transformers): pip install -e '.[test]'. Nothing is downloaded.

    python scripts/tiny_llama.py /tmp/tiny-qwen3 --family qwen3
    attncli run "The cat sat on the mat" --model /tmp/tiny-qwen3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.llama_fixtures import FAMILIES, save_family  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--family", choices=sorted(FAMILIES), default="llama")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tokenizer = "sp" if args.family == "mistral" else "byte"
    save_family(args.folder, args.family, seed=args.seed, tokenizer=tokenizer)
    print(f"wrote a tiny random {args.family} to {args.folder}")


if __name__ == "__main__":
    main()
