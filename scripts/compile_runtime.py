"""Write the bytecode of what attncli and its test stack import, by importing it once: every
module of attncli (so torch, numpy, typer, rich, textual, ...), and the references the tests
load (transformers' models, TransformerLens, hypothesis, pytest, ...).

make's install runs it in place of uv's --compile-bytecode, which compiled all ~20,000 modules
of the venv, most of which no process imports (about 60 s of CPU). What is imported beyond these
is compiled by the first process that imports it (make test and make check let Python write
bytecode); under PYTHONDONTWRITEBYTECODE, attncli's processes still find theirs compiled.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import attncli

# What the test modules import at collection (each of make test's workers collects them all, at
# once: what is not compiled by then, each of them compiles).
TEST_STACK = ("pytest", "xdist", "hypothesis", "transformers", "transformer_lens", "IPython",
              "jupyter_client", "pyarrow.parquet", "selenium.webdriver")
MODELS = ("GPT2LMHeadModel", "LlamaForCausalLM", "BertModel", "AutoModelForCausalLM")


def main() -> int:
    if sys.dont_write_bytecode:
        print("compile_runtime.py: PYTHONDONTWRITEBYTECODE is set: nothing written",
              file=sys.stderr)
        return 0
    failed = []
    for info in pkgutil.walk_packages(attncli.__path__, "attncli."):
        if info.name.endswith("__main__"):  # it would run the CLI
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional package missing: its modules are skipped
            failed.append(info.name)
    for name in TEST_STACK:
        try:
            importlib.import_module(name)
        except ImportError:
            failed.append(name)
    if "transformers" in sys.modules:
        transformers = sys.modules["transformers"]
        for name in MODELS:
            getattr(transformers, name, None)  # its modelling module, imported on first use
    print(f"compile_runtime.py: {len(sys.modules)} modules imported"
          + (f"; not: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    sys.stdout.flush()
    os._exit(0)  # no interpreter shutdown: the imports are all that was wanted


if __name__ == "__main__":
    sys.exit(main())
