"""A generation as browse shows it: one row per layer held, its heads' matrices over the prompt
and the answer, where the query of answer step s (the token before answer token s) holds that
step's own weights and every other query is left empty (NaN: no step computed it). Answer tokens
are numbered from 0, as `generate`'s `#` column, its --at and its page number them."""

from __future__ import annotations

import numpy as np

from attncli.browse.patterns import ExactRow, RowData
from attncli.browse.source import WEIGHTS, RowInfo, Source
from attncli.errors import AttnCliError
from attncli.records.generation import GenerationResult
from attncli.records.given import ReceiptRow, nats
from attncli.saved.generate import generation_from_dict
from attncli.saved.kinds import read_saved


def generation_matrices(result: GenerationResult) -> np.ndarray:
    """(layers held, heads held, T, T) float32 over prompt + answer: row P - 1 + s is step s's
    weights over its P + s keys, NaN elsewhere."""
    p, n = len(result.prompt), len(result.answer)
    if not result.weights:
        raise AttnCliError("browse needs the answer's weights: this generation holds none")
    layers, heads = np.asarray(result.weights[0]).shape[:2]
    out = np.full((layers, heads, p + n, p + n), np.nan, dtype=np.float32)
    for s, held in enumerate(result.weights):
        out[:, :, p - 1 + s, :p + s] = held  # (layers, heads, P + s)
    return out


def generation_source(result: GenerationResult) -> Source:
    """What browse shows of a generation: each layer held as a row of heads."""
    matrices = generation_matrices(result)
    first = (result.layers_kept or (0, result.model.layers))[0]
    heads = matrices.shape[1]
    rows = [RowInfo(f"layer {first + k}", f"L{first + k}", heads) for k in range(len(matrices))]
    p, n = len(result.prompt), len(result.answer)
    what = "a given answer, teacher-forced," if result.given_answer else "answer"
    marks = _marks(result)
    title = (f"{result.model.path} · {what} of {n} tokens, chosen at queries {p - 1}–{p + n - 2} "
             f"(earlier queries: not computed) · made with the {result.view} view"
             + ("" if result.auto_looks is None else " (the default, --view auto)")
             + "".join(f" · {why}" for why in marks))

    def compute(row: int, what: str) -> RowData:
        if what != WEIGHTS:
            raise AttnCliError(f"a generation holds its steps' weights only, not {what}")
        return ExactRow(matrices[row], [{} for _ in range(heads)])

    return Source(title, result.labels(), rows, compute, answer=p - 1 if n else None,
                  notes=marks + _receipt_rows(result))


def _marks(result: GenerationResult) -> list[str]:
    """A conversation's turns (each role and its tokens) and the receipt's verdict."""
    out = []
    turns = [t for t in result.turns if t.end > t.start]
    if turns:
        out.append("turns: " + ", ".join(f"[{t.role}] {t.start}–{t.end - 1}" for t in turns))
    receipt = result.receipt
    if receipt is not None:
        largest = receipt.largest
        out.append(f"receipt: largest difference {nats(largest.difference)} nat at "
                   f"{largest.text!r}, {len(receipt.flagged)} flagged (over "
                   f"{receipt.flag_above} nat), {len(receipt.choices_differ)} where the "
                   "likeliest tokens differ")
    return out


def _receipt_rows(result: GenerationResult, most: int = 5) -> list[str]:
    """The receipt's rows worth a look, as `generate` prints them under its view: the largest
    difference, the flagged tokens and those where the likeliest tokens differ (the first
    most of each, then how many more)."""
    receipt = result.receipt
    if receipt is None:
        return []
    rows = receipt.rows
    largest = max(range(len(rows)), key=lambda k: abs(rows[k].difference))
    out = [f"  largest: {_row(rows[largest])}"]
    for name, picked in (("flagged", receipt.flagged),
                         ("likeliest differ", receipt.choices_differ)):
        out += [f"  {name}: {_row(rows[k])}" for k in picked[:most]]
        if len(picked) > most:
            out.append(f"  {name}: {len(picked) - most} more (--json holds every row)")
    return out


def _row(row: ReceiptRow) -> str:
    """One receipt row: the text, both log-probabilities, their difference, both choices."""
    choices = (f", attncli chose {row.attncli_choice!r}, the runtime {row.runtime_choice!r}"
               if row.attncli_choice is not None and row.runtime_choice is not None else "")
    return (f"{row.text!r} attncli {nats(row.attncli, sign=False)}, runtime "
            f"{nats(row.runtime, sign=False)} ({nats(row.difference)} nat){choices}")


def saved_generation(path: str) -> Source:
    """browse --generation: a saved `attncli generate --json` file."""
    data = read_saved(path)
    if not isinstance(data, dict):
        raise AttnCliError("--generation takes `attncli generate --json` output")
    return generation_source(generation_from_dict(data))
