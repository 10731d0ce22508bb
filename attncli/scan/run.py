"""A whole scan: the corpus read, the documents not yet written handed to the workers in
batches, their results written in parts by this process (the driver), then the summary."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from itertools import chain
from typing import Any

from attncli.activity import doing
from attncli.errors import AttnCliError, escaped
from attncli.scan.corpus import Document, corpus_kind, count_documents, documents, stored_name
from attncli.scan.plan import ScanPlan
from attncli.scan.pool import Batch, check_workers, run_local
from attncli.scan.stopping import Stopper
from attncli.scan.store import ScanStore, check_out, write_summary
from attncli.scan.summary import summarise
from attncli.scan.worker import ScanSettings
from attncli.version import __version__

BYTES_PER_TOKEN = 64  # a document is read up to max_tokens × this many bytes
BATCH_DOCS = 64  # documents handed to a worker at a time (at most --part-size of them) ...
BATCH_CHARS = 16_384  # ... or fewer, once their text passes this: a worker packs short ones


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
    check_out(plan.out)
    stream = documents(plan.corpus, plan.field, max_bytes, skip=plan.out)
    first = next(stream, None)  # an empty folder or a Parquet without the column fails here
    if first is None:
        raise AttnCliError(f"corpus {plan.corpus} holds no documents")
    if plan.ray is not None:
        from attncli.scan.cluster import check_ray

        check_ray(plan.ray)
    model = open_checked(Request(text="", model=settings.model))  # refused before --out is made
    if settings.effect:  # an encoder has no next-token loss to ablate: one line, before --out
        from attncli.models.causal.passes import editable

        editable(model)
    info, spec, grouped = model.info(), model.spec, model.traits.kv_heads
    del model
    doing("counting the corpus's documents")
    total = count_documents(plan.corpus, kind, skip=plan.out)
    if plan.ray in (None, "local"):  # the workers are processes on this machine
        check_workers(plan.workers, total)
    leave = _join(plan)
    try:
        identity = {"corpus": str(plan.corpus.resolve()), "corpus_kind": kind,
                    "field": plan.field, **asdict(settings)}
        if not settings.effect:  # a scan without effects is named as before --effect was
            del identity["effect"]
        store = ScanStore(plan.out, identity, spec.n_layer, spec.num_heads, settings.effect)
        _note_set_aside(store)
        done = store.done()
        todo = (d for d in chain([first], stream) if d.id not in done)
        batches = _batches(todo, min(BATCH_DOCS, plan.part_size))
        doing(f"starting {plan.workers} worker(s): each loads the model")
        written = Stopper(store, plan.part_size).drain(_results(settings, plan, batches),
                                                       len(done), total, progress)
    finally:
        if leave is not None:
            leave()
    doing("summarising the scan")
    summary = summarise(plan.out, plan.threshold, spec.n_layer, spec.num_heads, settings.effect)
    if grouped:  # the key/value head each query head reads, as `heads` gives it
        for row in summary["heads"]:
            row["kv_head"] = spec.kv_group(row["head"])
    config = {"model": settings.model, "allow_special": settings.allow_special, "num_tokens": 0,
              "sort": "layer", "layers": [0, spec.n_layer], "threshold": plan.threshold,
              "version": __version__}
    summary = {"kind": "scan", "config": config, "model": info.to_dict(), "tokens": [], **summary}
    summary["scan"] |= {"corpus": stored_name(str(plan.corpus)), "out": stored_name(str(plan.out)),
                        "this_run": written, "max_tokens": settings.max_tokens,
                        "too_long": settings.too_long, "workers": plan.workers,
                        "ray": plan.ray}
    write_summary(plan.out, summary)
    return summary


def _join(plan: ScanPlan) -> Callable[[], None] | None:
    """The Ray cluster joined (or started) when the plan names one, and how to leave it."""
    if plan.ray is None:
        return None
    from attncli.scan.cluster import join_ray

    return join_ray(plan.ray, plan.workers, plan.ray_logs)


def _results(settings: ScanSettings, plan: ScanPlan,
             batches: Iterable[Batch]) -> Iterator[list[dict[str, Any]]]:
    """Each batch's results, from the local pool or the Ray cluster joined."""
    if plan.ray is None:
        return run_local(settings, batches, plan.workers)
    from attncli.scan.cluster import run_ray

    return run_ray(settings, batches, plan.workers)


def _note_set_aside(store: ScanStore) -> None:
    """One line on stderr naming the damaged parts a resumed scan set aside."""
    if not store.set_aside:
        return
    listed = "; ".join(store.set_aside[:3]) + ("; ..." if len(store.set_aside) > 3 else "")
    line = (f"attncli: note: {len(store.set_aside)} damaged part(s) set aside in "
            f"{store.out / 'set-aside'} ({listed}); their documents are scanned again")
    print(escaped(line), file=sys.stderr, flush=True)


def _batches(todo: Iterable[Document], most: int) -> Iterator[Batch]:
    """todo in batches of at most most documents, fewer once their text passes BATCH_CHARS."""
    batch: Batch = []
    chars = 0
    for d in todo:
        batch.append((d.id, d.text, d.problem, d.cut_bytes))
        chars += len(d.text or "")
        if len(batch) >= most or chars >= BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch
