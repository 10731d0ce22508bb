"""Where a scan's corpus is, where its output goes, and how the work is spread: the plan, with
its options (cli/scoring.py offers them). Plain data: --help reads it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from attncli.errors import AttnCliError
from attncli.opt import opt

MAX_WORKERS = 1024


@dataclass(frozen=True)
class ScanPlan:
    """Where the corpus is, where the output goes, and how the work is spread."""

    corpus: Path
    out: Path
    field: str = opt("text", help="The text's field (.jsonl) or column (.parquet).")
    workers: int = 1  # the CLI's --workers: by default the usable cores (cli/scoring.py)
    # a Ray address, `local`, or None for the local pool
    ray: str | None = opt(None, "--ray", envvar="RAY_ADDRESS", help="Run on the Ray cluster at "
                          "ADDRESS (`local`: a throwaway one on this machine, whose servers listen "
                          "on every interface as Ray's do); needs pip install 'attncli[cluster]'.",
                          show_default=False, metavar="ADDRESS")
    part_size: int = opt(64, min=1, help="Documents per Parquet part: a killed scan loses at most "
                         "one part.")
    threshold: float = opt(0.4, min=0.0, max=1.0, help="A head passes on a document when its score "
                           "is at least this; the summary gives each head's share of documents "
                           "passed, and labels a head when more than half pass.")
    # Ray's own log lines shown (else only attncli's)
    ray_logs: bool = opt(False, "--ray-logs", help="Show Ray's own log lines and notices, and its "
                         "workers' output (by default only attncli's lines are shown).")

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= MAX_WORKERS:
            raise AttnCliError(f"--workers must be from 1 to {MAX_WORKERS} (got {self.workers})")
        if self.part_size < 1:
            raise AttnCliError(f"--part-size must be 1 or more (got {self.part_size})")
        if not (math.isfinite(self.threshold) and 0.0 <= self.threshold <= 1.0):
            raise AttnCliError(f"--threshold must be from 0 to 1 (got {self.threshold:g}): a "
                               "score is the share of a head's attention on its pattern")
