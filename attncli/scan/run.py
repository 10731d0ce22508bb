"""A whole scan: the corpus read, the documents not yet written handed to the workers in
batches, their results written in parts by this process (the driver), then the summary."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from itertools import chain, islice
from pathlib import Path
from types import FrameType
from typing import Any

from attncli.activity import doing
from attncli.errors import AttnCliError
from attncli.scan.corpus import Document, corpus_kind, count_documents, documents
from attncli.scan.pool import Batch, check_ray, run_local, run_ray
from attncli.scan.store import ScanStore, write_atomic
from attncli.scan.summary import summarise
from attncli.scan.worker import ScanSettings
from attncli.version import __version__

BYTES_PER_TOKEN = 64  # a document is read up to max_tokens × this many bytes
BATCH = 4  # documents handed to a worker at a time


@dataclass(frozen=True)
class ScanPlan:
    """Where the corpus is, where the output goes, and how the work is spread."""

    corpus: Path
    out: Path
    field: str = "text"
    workers: int = 1
    ray: str | None = None  # a Ray address, `local`, or None for the local pool
    part_size: int = 64  # documents per Parquet part: a killed scan loses at most these
    threshold: float = 0.4


def check_scan(model: str | None) -> str:
    """The model a scan runs, refused in one line before any work without --model or pyarrow
    (the output is Parquet)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise AttnCliError("scan writes Parquet and needs pyarrow: pip install "
                           "'attncli[scan]'") from None
    if model is None:
        raise AttnCliError("attncli scan needs --model PATH|NAME")
    return model


def run_scan(settings: ScanSettings, plan: ScanPlan,
             progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Scan plan.corpus into plan.out (resuming what it holds) and return the summary."""
    from attncli.core.request import Request
    from attncli.models.run import open_checked

    max_bytes = settings.max_tokens * BYTES_PER_TOKEN
    kind = corpus_kind(plan.corpus)
    stream = documents(plan.corpus, plan.field, max_bytes, skip=plan.out)
    first = next(stream, None)  # an empty folder or a Parquet without the column fails here
    if first is None:
        raise AttnCliError(f"corpus {plan.corpus} holds no documents")
    if plan.ray is not None:
        check_ray(plan.ray)
    model = open_checked(Request(text="", model=settings.model))  # refused before --out is made
    info, spec, grouped = model.info(), model.spec, model.traits.kv_heads
    del model
    identity = {"corpus": str(plan.corpus.resolve()), "kind": kind, "field": plan.field,
                **asdict(settings)}
    store = ScanStore(plan.out, identity)
    done = store.done()
    doing("counting the corpus's documents")
    total = count_documents(plan.corpus, kind, skip=plan.out)
    todo = (d for d in chain([first], stream) if d.id not in done)
    batches = _batches(todo)
    doing(f"starting {plan.workers} worker(s): each loads the model")
    if plan.ray is not None:
        results = run_ray(settings, batches, plan.workers, plan.ray)
    else:
        results = run_local(settings, batches, plan.workers)
    written = _drain(results, store, plan.part_size, len(done), total, progress)
    doing("summarising the scan")
    summary = summarise(plan.out, plan.threshold, spec.n_layer, spec.num_heads)
    if grouped:  # the key/value head each query head reads, as `heads` gives it
        for row in summary["heads"]:
            row["kv_head"] = spec.kv_group(row["head"])
    config = {"model": settings.model, "allow_special": settings.allow_special, "num_tokens": 0,
              "sort": "layer", "layers": [0, spec.n_layer], "threshold": plan.threshold,
              "version": __version__}
    summary = {"config": config, "model": info.to_dict(), "tokens": [], **summary}
    summary["scan"] |= {"corpus": str(plan.corpus), "out": str(plan.out),
                        "this_run": written, "max_tokens": settings.max_tokens,
                        "too_long": settings.too_long, "workers": plan.workers,
                        "ray": plan.ray}
    write_atomic(plan.out / "summary.json", lambda path: path.write_text(
        json.dumps(summary, allow_nan=False) + "\n", encoding="utf-8"))
    return summary


def _batches(todo: Iterable[Document]) -> Iterator[Batch]:
    it = iter(todo)
    while batch := [(d.id, d.text, d.problem, d.cut_bytes) for d in islice(it, BATCH)]:
        yield batch


def _drain(results: Iterator[list[dict[str, Any]]], store: ScanStore, part_size: int,
           before: int, total: int, progress: Callable[[str, int, int], None] | None) -> int:
    """Results into parts of part_size documents. SIGTERM or SIGINT only sets a flag: the
    results that have come back are written as a part and the scan stops, so a signal never
    lands between a part's rename and forgetting it. The number of documents written."""
    buffer: list[dict[str, Any]] = []
    written, stopped = 0, []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.append(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for scored in results:
            buffer += scored
            if progress is not None:
                progress("documents", before + written + len(buffer), total)
            if len(buffer) >= part_size or stopped:
                store.write(buffer)
                written, buffer = written + len(buffer), []
            if stopped:
                raise AttnCliError(f"scan stopped by {stopped[0]}: {before + written} documents "
                                   f"are in {store.out}; the same command resumes")
        store.write(buffer)
        return written + len(buffer)
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
