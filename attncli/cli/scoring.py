"""Scoring every head: the text `heads` scores (its options are records/heads.py's HeadsOptions,
taken as they are) and how `scan` reads and spreads a corpus (Scanning, which builds scan/'s
ScanSettings and ScanPlan). Their options stay under the commands' own heading, "Options"."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attncli.core.request import Request
from attncli.errors import AttnCliError
from attncli.opt import of, opt
from attncli.records.heads import HeadsOptions
from attncli.scan.plan import MAX_WORKERS, ScanPlan
from attncli.scan.worker import ScanSettings, TooLong

if TYPE_CHECKING:
    from attncli.cli.options import Encoding, Source


def scored_text(options: HeadsOptions, source: Source) -> str | None:
    """The text `heads` scores: the probe's (empty: it makes its own tokens) or the input,
    refused in one line when both are given."""
    if options.probe is not None and (source.text is not None or source.file is not None):
        raise AttnCliError(f"--probe {options.probe} runs on its own random tokens: give no TEXT "
                           "or --file with it")
    return "" if options.probe is not None else source.read(settle=False)[0]


@dataclass(frozen=True)
class Width:
    """Request's heads, as `heads` offers it: a bare .safetensors file's heads per layer."""

    heads: int | None = of(Request, "heads", help="Heads per layer, for a bare .safetensors file "
                           "of a non-standard width.", panel=None)


@dataclass(frozen=True)
class Scanning:
    """How `scan` reads its corpus, spreads the work and judges a head."""

    field: str = of(ScanPlan, "field")
    max_tokens: int = of(ScanSettings, "max_tokens")
    too_long: TooLong = of(ScanSettings, "too_long", TooLong)
    workers: int | None = opt(None, min=1, max=MAX_WORKERS, help="Worker processes (or Ray "
                              "actors), each holding the model [default: the usable cores, as "
                              "many as half the memory available holds].",
                              show_default=False)
    ray: str | None = of(ScanPlan, "ray")
    ray_logs: bool = of(ScanPlan, "ray_logs")
    part_size: int = of(ScanPlan, "part_size")
    threshold: float = of(ScanPlan, "threshold")
    effect: bool = of(ScanSettings, "effect")

    def settings(self, model: str, encoding: Encoding) -> ScanSettings:
        """What every worker needs to score a document the same way."""
        return ScanSettings(model=model, encoding=encoding.encoding,
                            allow_special=encoding.allow_special, max_tokens=self.max_tokens,
                            too_long=self.too_long.value, effect=self.effect)

    def plan(self, corpus: Path, out: Path) -> ScanPlan:
        """Where the corpus is, where the output goes, and how the work is spread (--workers:
        by default the usable cores, as many as half the memory available holds; an empty
        RAY_ADDRESS is no cluster)."""
        from attncli.scan.pool import default_workers

        return ScanPlan(corpus, out, self.field, self.workers or default_workers(),
                        self.ray or None,
                        self.part_size, self.threshold, self.ray_logs)
