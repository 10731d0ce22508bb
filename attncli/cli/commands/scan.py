"""`attncli scan`."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Checkpoint, Encoding, Output
from attncli.cli.scoring import Scanning
from attncli.cli.settings import needed_model
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.scan.stopping import ScanStopped


@command(needs_model=True)
def scan(
    corpus: Annotated[str, typer.Argument(
        help="A folder (each regular file one document; FIFOs, sockets and devices are skipped "
        "unopened), a .txt (one document a line), a .jsonl (the text in --field) or a .parquet "
        "(the --field column).", metavar="CORPUS", show_default=False)],
    checkpoint: Annotated[Checkpoint, Fields("model")],
    encoding: Encoding,
    output: Output,
    out: Annotated[Path, typer.Option(
        help="The Parquet dataset: heads/ (a row per document × layer × head), documents/, "
        "scan.json and summary.json. An existing scan there resumes.", metavar="DIR")],
    scanning: Scanning,
) -> None:
    """Score every layer × head over a corpus, as `heads` does one text: a resumable Parquet
    dataset and a summary (per score the corpus mean of each head, the share of documents on
    which it passes --threshold, the top heads, each layer's sink).

    A document that cannot be read or scored (not UTF-8, a JSONL line without --field, not JSON,
    or longer than the byte limit of --max-tokens, fewer than 2 tokens, over --max-tokens with
    --too-long skip, a FIFO or device in a folder) is skipped and counted in the summary; a
    corpus that cannot be read (missing, empty, a Parquet without --field) is refused. The same
    command on the same corpus resumes where a killed scan stopped.

    Examples:

      attncli scan notes/ --model samples/toy-gpt2 --out atlas/

      attncli scan docs.jsonl --field body --model ~/models/SmolLM2 --out atlas/ --workers 2

      attncli scan shard.parquet --model gpt2 --out atlas/ --ray local --json > summary.json

      attncli show atlas/summary.json --save atlas.html
    """
    from attncli.scan.run import check_scan, run_scan
    from attncli.scan.stopping import ScanStopped

    output.check()
    model = check_scan(needed_model(checkpoint.model, "scan"))
    from attncli.cli.progress import progress_bar
    from attncli.cli.streams import after_imports
    from attncli.render.reports.scan import render_scan
    from attncli.saved.heads import heads_from_dict

    after_imports()
    try:
        with progress_bar(rate=True) as bar:
            summary = run_scan(scanning.settings(model, encoding),
                               scanning.plan(Path(corpus), out), bar)
    except ScanStopped as stop:  # Ctrl-C, SIGTERM, SIGHUP: their own line and exit code
        raise stopped(stop) from None
    result = heads_from_dict(summary)
    output.deliver(summary, lambda console: render_scan(console, result, summary["scan"]),
                   {"scan": True})


def stopped(stop: ScanStopped) -> AttnCliError:
    """The error a signal's stop ends the scan with: the signal's own line and exit code."""
    from attncli.cli.streams import INTERRUPTS

    line, code = INTERRUPTS.get(signal.Signals(stop.signum), INTERRUPTS[signal.SIGINT])
    error = AttnCliError(f"{line}: {stop}")
    error.exit_code = code
    return error
