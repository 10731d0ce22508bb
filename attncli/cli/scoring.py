"""The options of scoring every head, declared once in two groups: what `heads` computes beyond
the request (Scoring, which builds models/heads.py's HeadsOptions) and how `scan` reads and
spreads a corpus (Scanning, which builds scan/'s ScanSettings and ScanPlan). Their options stay
under the commands' own heading, "Options"."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from attncli.cli.groups import DEFAULT_PANEL, Group
from attncli.core.display import Window, parse_window
from attncli.errors import AttnCliError
from attncli.scan.worker import MAX_TOKENS, ScanSettings, TooLong

if TYPE_CHECKING:
    from attncli.cli.options import Encoding, Source
    from attncli.models.heads import HeadsOptions
    from attncli.scan.run import ScanPlan


class ProbeKind(str, Enum):
    """What `heads --probe` looks for on its repeated random tokens."""

    induction = "induction"
    previous = "previous"
    duplicate = "duplicate"


SortOpt = Annotated[str, typer.Option(
    help="Order of the table: layer, head, entropy, prev, first, self, distance, "
    "previous_token, duplicate_token or induction (measures and scores sort largest "
    "first).")]
LayersOpt = Annotated[str | None, typer.Option(
    help="Only these layers: a:b, half-open and 0-based like --rows (10:20, 25:, -4:); the "
    "forward pass stops at the last.", show_default=False, metavar="A:B")]
ProbeOpt = Annotated[ProbeKind | None, typer.Option(
    help="Run on a built-in probe instead of a text: --probe-length seeded random tokens "
    "(no special ones), repeated twice, after the model's BOS when its tokenizer has one; "
    "heads scoring --threshold or more on the probed score are labelled.",
    show_default=False)]
ProbeLengthOpt = Annotated[int, typer.Option(
    min=1, max=4096, help="Random tokens before the probe repeats them.")]
ProbeSeedOpt = Annotated[int, typer.Option(help="Seed of the probe's tokens.")]
LabelOpt = Annotated[float, typer.Option(
    min=0.0, max=1.0, help="Label a head whose score is at least this: the probed score "
    "with --probe, else every score.")]

EffectOpt = Annotated[bool, typer.Option(
    "--effect", help="Add each head's effect: the rise of the text's mean loss with its output "
    "replaced by its mean over the positions (one ablation per head, as `ablate --heads all`).")]


@dataclass(frozen=True)
class Scoring(Group):
    """What `heads` computes beyond the request: its layers, its probe, its labels, its order."""

    panel = DEFAULT_PANEL
    sort: SortOpt = "layer"
    layers: LayersOpt = None
    probe: ProbeOpt = None
    probe_length: ProbeLengthOpt = 50
    probe_seed: ProbeSeedOpt = 0
    threshold: LabelOpt = 0.4
    effect: EffectOpt = False

    def read(self, source: Source) -> tuple[str | None, Window | None]:
        """The text scored (the probe's: empty, it makes its own tokens) and --layers, parsed,
        each checked before any work."""
        if self.probe is not None and (source.text is not None or source.file is not None):
            raise AttnCliError(f"--probe {self.probe.value} runs on its own random tokens: give "
                               "no TEXT or --file with it")
        window = None if self.layers is None else parse_window(self.layers, "--layers")
        return "" if self.probe is not None else source.read(settle=False)[0], window

    def options(self, layers: Window | None) -> HeadsOptions:
        """The HeadsOptions record, with --layers as read parsed it."""
        from attncli.models.heads import HeadsOptions

        return HeadsOptions(sort=self.sort, layers=layers,
                            probe=None if self.probe is None else self.probe.value,
                            probe_length=self.probe_length, probe_seed=self.probe_seed,
                            threshold=self.threshold, effect=self.effect)


FieldOpt = Annotated[str, typer.Option(help="The text's field (.jsonl) or column (.parquet).")]
MaxTokensOpt = Annotated[int, typer.Option(
    min=2, max=MAX_TOKENS, help="Tokens kept per document; at most 64 bytes a token are "
    "read, so a longer document is judged by its first bytes.")]
TooLongOpt = Annotated[TooLong, typer.Option(
    help="A document over --max-tokens: cut (scored on its first tokens, counted as cut) or "
    "skip (counted as skipped).")]
WorkersOpt = Annotated[int | None, typer.Option(
    min=1, max=1024, help="Worker processes (or Ray actors), each holding the model [default: the "
    "usable cores].", show_default=False)]
RayOpt = Annotated[str | None, typer.Option(
    "--ray", envvar="RAY_ADDRESS", help="Run on the Ray cluster at ADDRESS (`local`: a "
    "throwaway one on this machine, whose servers listen on every interface as Ray's do); "
    "needs pip install 'attncli[cluster]'.",
    show_default=False, metavar="ADDRESS")]
RayLogsOpt = Annotated[bool, typer.Option(
    "--ray-logs", help="Show Ray's own log lines and notices, and its workers' output (by "
    "default only attncli's lines are shown).")]
PartSizeOpt = Annotated[int, typer.Option(
    min=1, help="Documents per Parquet part: a killed scan loses at most one part.")]
PassOpt = Annotated[float, typer.Option(
    min=0.0, max=1.0, help="A head passes on a document when its score is at least this; "
    "the summary gives each head's share of documents passed, and labels a head when more "
    "than half pass.")]


@dataclass(frozen=True)
class Scanning(Group):
    """How `scan` reads its corpus, spreads the work and judges a head."""

    panel = DEFAULT_PANEL
    field: FieldOpt = "text"
    max_tokens: MaxTokensOpt = 512
    too_long: TooLongOpt = TooLong.cut
    workers: WorkersOpt = None
    ray: RayOpt = None
    ray_logs: RayLogsOpt = False
    part_size: PartSizeOpt = 64
    threshold: PassOpt = 0.4
    effect: EffectOpt = False

    def settings(self, model: str, encoding: Encoding) -> ScanSettings:
        """What every worker needs to score a document the same way."""
        return ScanSettings(model=model, encoding=encoding.encoding,
                            allow_special=encoding.allow_special, max_tokens=self.max_tokens,
                            too_long=self.too_long.value, effect=self.effect)

    def plan(self, corpus: Path, out: Path) -> ScanPlan:
        """Where the corpus is, where the output goes, and how the work is spread (--workers:
        by default the usable cores; an empty RAY_ADDRESS is no cluster)."""
        from attncli.scan.pool import usable_cores
        from attncli.scan.run import ScanPlan

        return ScanPlan(corpus, out, self.field, self.workers or min(usable_cores(), 1024),
                        self.ray or None,
                        self.part_size, self.threshold, self.ray_logs)
