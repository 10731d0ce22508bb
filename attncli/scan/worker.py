"""The work of one scan worker, the same in a local process and in a Ray actor: the model
loaded once, then each document's heads scored as `attncli heads` scores them.

The hidden-state cache is left out: each document is seen once, so its residual streams would
only push out the entries a user's `heads` / `run --layer` looks come back to.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from attncli.errors import AttnCliError

HEAD_COLUMNS = ("entropy", "prev", "first", "self", "distance",
                "previous_token", "duplicate_token", "induction")
LAYER_COLUMNS = ("first_share", "first_norm", "median_norm", "norm_ratio")  # the layer's sink
COLUMNS = ("document", "layer", "head", *HEAD_COLUMNS, *LAYER_COLUMNS)


class TooLong(str, Enum):
    """What a scan does with a document over max_tokens."""

    cut = "cut"  # score its first max_tokens tokens, counted as cut
    skip = "skip"  # leave it out, counted as skipped


@dataclass(frozen=True)
class ScanSettings:
    """What every worker needs to score a document the same way."""

    model: str
    encoding: str = "gpt2"
    allow_special: bool = False
    max_tokens: int = 512
    too_long: str = "cut"  # cut: keep the first max_tokens tokens; skip: leave the document out


def scored_document(doc_id: str, status: str, tokens: int, reason: str | None = None,
                    rows: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """One document's outcome: scored, cut (scored on its first tokens) or skipped (why)."""
    return {"document": doc_id, "status": status, "reason": reason, "tokens": tokens,
            "rows": rows or {name: [] for name in COLUMNS}}


class Scorer:
    """A worker's model, loaded once, scoring document after document."""

    def __init__(self, settings: ScanSettings) -> None:
        import torch

        from attncli.core.request import Request
        from attncli.models.run import open_checked

        torch.set_num_threads(1)  # one worker per core: more threads would fight over them
        self.settings = settings
        self.model = open_checked(Request(text="", model=settings.model))

    def score(self, doc_id: str, text: str, cut_bytes: bool = False) -> dict[str, Any]:
        """doc_id's rows, one per layer × head; a document that cannot be scored, skipped."""
        from attncli.core.request import Request
        from attncli.models.heads import heads_pass, scored_rows
        from attncli.models.scores import SCORES

        settings = self.settings
        if cut_bytes and settings.too_long == "skip":
            return scored_document(doc_id, "skipped", 0, "over the byte limit")
        try:
            req = Request(text=text, model=settings.model, encoding=settings.encoding,
                          allow_special=settings.allow_special)
            ids = self.model.tokens(req).ids
        except AttnCliError as err:
            return scored_document(doc_id, "skipped", 0, str(err))
        status = "cut" if cut_bytes else "scored"
        if len(ids) > settings.max_tokens:
            if settings.too_long == "skip":
                return scored_document(doc_id, "skipped", len(ids),
                                       f"over --max-tokens {settings.max_tokens}")
            ids, status = ids[:settings.max_tokens], "cut"
        if len(ids) < 2:
            return scored_document(doc_id, "skipped", len(ids), "fewer than 2 tokens")
        try:
            self.model.check_tokens(ids)
            n_layer = self.model.spec.n_layer
            done = heads_pass(self.model, ids, 0, n_layer, req.measure, None)
        except AttnCliError as err:
            return scored_document(doc_id, "skipped", len(ids), str(err))
        rows = scored_rows(done, 1.0, SCORES)  # labels are the summary's
        sinks = {s["layer"]: s for s in done.sinks}
        columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        for row in rows:
            columns["document"].append(doc_id)
            for name in ("layer", "head", *HEAD_COLUMNS):
                columns[name].append(row[name])
            for name in LAYER_COLUMNS:
                columns[name].append(sinks[row["layer"]][name])
        return scored_document(doc_id, status, len(ids), rows=columns)

    def score_batch(self, batch: list[tuple[str, str | None, str | None, bool]]
                    ) -> list[dict[str, Any]]:
        """Each (id, text, problem, cut_bytes) of batch scored, or skipped for its problem."""
        return [scored_document(doc_id, "skipped", 0, problem) if text is None
                else self.score(doc_id, text, cut_bytes)
                for doc_id, text, problem, cut_bytes in batch]


_SCORER: Scorer | None = None  # a pool process's own


def start_process(settings: ScanSettings) -> None:
    """A pool process's initializer: its model, loaded once."""
    global _SCORER
    _SCORER = Scorer(settings)


def score_in_process(batch: list[tuple[str, str | None, str | None, bool]]
                     ) -> list[dict[str, Any]]:
    """A pool process's task: batch scored by the process's model."""
    assert _SCORER is not None, "start_process runs first"
    return _SCORER.score_batch(batch)
