"""The work of one scan worker, the same in a local process and in a Ray actor: the model
loaded once, then each document's heads scored as `attncli heads` scores them.

The hidden-state cache is left out: each document is seen once, so its residual streams would
only push out the entries a user's `heads` / `run --layer` looks come back to.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from attncli.core.request import Request
from attncli.errors import AttnCliError
from attncli.opt import of, opt
from attncli.records.heads import HeadsOptions

if TYPE_CHECKING:
    from attncli.models.heads import HeadsPass

HEAD_COLUMNS = ("entropy", "prev", "first", "self", "distance",
                "previous_token", "duplicate_token", "induction")
LAYER_COLUMNS = ("first_share", "first_norm", "median_norm", "norm_ratio")  # the layer's sink
COLUMNS = ("document", "layer", "head", *HEAD_COLUMNS, *LAYER_COLUMNS)
EFFECT = "effect"  # scan --effect: each head's mean-ablation loss rise, as heads --effect
MAX_TOKENS = 1 << 20  # --max-tokens at most: 64 MiB read of a document
PACK_TOKENS = 512  # documents run together up to this many tokens (their weights kept at once)


class TooLong(str, Enum):
    """What a scan does with a document over max_tokens."""

    cut = "cut"  # score its first max_tokens tokens, counted as cut
    skip = "skip"  # leave it out, counted as skipped


@dataclass(frozen=True)
class ScanSettings:
    """What every worker needs to score a document the same way."""

    model: str
    encoding: str = Request.encoding
    allow_special: bool = Request.allow_special
    max_tokens: int = opt(512, min=2, max=MAX_TOKENS, help="Tokens kept per document; at most 64 "
                          "bytes a token are read, so a longer document is judged by its first "
                          "bytes.")
    # cut: keep the first max_tokens tokens; skip: leave the document out
    too_long: str = opt("cut", help="A document over --max-tokens: cut (scored on its first "
                        "tokens, counted as cut) or skip (counted as skipped).")
    # each head mean-ablated alone on each document: the effect column
    effect: bool = of(HeadsOptions, "effect")

    def __post_init__(self) -> None:
        if not 2 <= self.max_tokens <= MAX_TOKENS:
            raise AttnCliError(f"--max-tokens must be from 2 to {MAX_TOKENS:,} (got "
                               f"{self.max_tokens:,})")


def columns(effect: bool) -> tuple[str, ...]:
    """The heads table's columns: the effect column last where the scan computes it."""
    return (*COLUMNS, EFFECT) if effect else COLUMNS


def scored_document(doc_id: str, status: str, tokens: int, reason: str | None = None,
                    rows: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """One document's outcome: scored, cut (scored on its first tokens) or skipped (why)."""
    return {"document": doc_id, "status": status, "reason": reason, "tokens": tokens,
            "rows": rows or {name: [] for name in columns(True)}}


class Scorer:
    """A worker's model, loaded once, scoring batch after batch of documents: short ones run
    together layer by layer (where the family can), each as its own pass would score it."""

    def __init__(self, settings: ScanSettings) -> None:
        import torch

        from attncli.core.request import Request
        from attncli.models.run import open_checked

        torch.set_num_threads(1)  # one worker per core: more threads would fight over them
        self.settings = settings
        self.model = open_checked(Request(text="", model=settings.model))

    def score(self, doc_id: str, text: str, cut_bytes: bool = False) -> dict[str, Any]:
        """doc_id's rows, one per layer × head; a document that cannot be scored, skipped."""
        return self.score_batch([(doc_id, text, None, cut_bytes)])[0]

    def score_batch(self, batch: list[tuple[str, str | None, str | None, bool]]
                    ) -> list[dict[str, Any]]:
        """Each (id, text, problem, cut_bytes) of batch scored, or skipped for its problem."""
        out: list[dict[str, Any]] = []
        ready: list[Ready] = []  # the documents with tokens to run, and where their result goes
        for doc_id, text, problem, cut_bytes in batch:
            tokens = (scored_document(doc_id, "skipped", 0, problem) if text is None
                      else self._tokens(doc_id, text, cut_bytes))
            if isinstance(tokens, Ready):
                ready.append(replace(tokens, index=len(out)))
            out.append(tokens if isinstance(tokens, dict) else {})
        for pack in packs(ready, PACK_TOKENS):
            for doc, result in zip(pack, self._passes(pack), strict=True):
                out[doc.index] = result
        return out

    def _tokens(self, doc_id: str, text: str, cut_bytes: bool) -> Ready | dict[str, Any]:
        """doc_id's tokens, cut at max_tokens, checked; or the document, skipped."""
        import attncli.machine as machine
        from attncli.core.request import Request
        from attncli.machine import size_text
        from attncli.models.heads import heads_bytes

        settings, spec = self.settings, self.model.spec
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
        except AttnCliError as err:  # past the model's context: the fix is a scan's option
            limit = self.model.spec.positions
            fix = "shorten the text" if limit is None else f"give --max-tokens {limit} or less"
            return scored_document(doc_id, "skipped", len(ids),
                                   str(err).replace("shorten the text", fix))
        need = heads_bytes(spec.n_layer, spec.num_heads, len(ids))
        if not machine.fits(need):  # its pass keeps every layer's N × N weights
            return scored_document(  # as `heads` checks it; the reason the same for each such
                doc_id, "skipped", len(ids), f"heads keeps {spec.n_layer} layers' "
                f"{spec.num_heads} heads of {len(ids):,} × {len(ids):,} weights "
                f"({size_text(need)}), more than half the memory available; give a smaller "
                "--max-tokens")
        return Ready(doc_id, ids, status)

    def _passes(self, pack: list[Ready]) -> list[dict[str, Any]]:
        """Each document of pack scored: their passes run together where the family can (each
        layer read once), else (or when that run is refused) one pass each."""
        from attncli.core.request import Measure
        from attncli.models.family import ManyTexts
        from attncli.models.heads import heads_pass, texts_passes

        n_layer = self.model.spec.n_layer
        if len(pack) > 1 and isinstance(self.model, ManyTexts):
            try:
                done = texts_passes(self.model, [doc.ids for doc in pack], n_layer)
                return [self._scored(doc, one) for doc, one in zip(pack, done, strict=True)]
            except AttnCliError:
                pass  # one of them is refused: each on its own says which
        out = []
        for doc in pack:
            try:
                one = heads_pass(self.model, doc.ids, 0, n_layer, Measure.weights, None)
            except AttnCliError as err:
                out.append(scored_document(doc.id, "skipped", len(doc.ids), str(err)))
                continue
            out.append(self._scored(doc, one))
        return out

    def _scored(self, doc: Ready, done: HeadsPass) -> dict[str, Any]:
        """doc's rows from its pass, with each head's effect where the scan asks for it."""
        if not self.settings.effect:
            return _rows(doc, done)
        from attncli.models.heads import head_effects

        n_layer = self.model.spec.n_layer
        return _rows(doc, done, head_effects(self.model, doc.ids,
                                             self.model.trace(doc.ids, n_layer - 1)))


@dataclass(frozen=True)
class Ready:
    """A document whose tokens are ready to run, and its place in its batch."""

    id: str
    ids: list[int]
    status: str  # scored, or cut
    index: int = 0


def packs(ready: list[Ready], budget: int) -> Iterator[list[Ready]]:
    """ready in runs of consecutive documents of at most budget tokens together (a longer
    document alone)."""
    pack: list[Ready] = []
    for doc in ready:
        if pack and sum(len(d.ids) for d in pack) + len(doc.ids) > budget:
            yield pack
            pack = []
        pack.append(doc)
    if pack:
        yield pack


def _rows(doc: Ready, done: HeadsPass,
          effects: dict[tuple[int, int], float] | None = None) -> dict[str, Any]:
    """doc's rows from its pass: a row per layer × head, its measures, scores and layer sink
    (and its effect, given effects)."""
    from attncli.models.heads import scored_rows
    from attncli.models.scores import SCORES

    rows = scored_rows(done, 1.0, SCORES)  # labels are the summary's
    sinks: dict[int, Mapping[str, object]] = {s["layer"]: s for s in done.sinks}
    table: dict[str, list[Any]] = {name: [] for name in columns(effects is not None)}
    for row in rows:
        table["document"].append(doc.id)
        parts: Mapping[str, object] = row  # read by the columns' names
        for name in ("layer", "head", *HEAD_COLUMNS):
            table[name].append(parts[name])
        for name in LAYER_COLUMNS:
            table[name].append(sinks[row["layer"]][name])
        if effects is not None:
            table[EFFECT].append(effects[(row["layer"], row["head"])])
    return scored_document(doc.id, doc.status, len(doc.ids), rows=table)


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
