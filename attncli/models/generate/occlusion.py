"""Occlusion: what removing a span of the prompt does to the answer. The span's tokens are
masked as padding tokens are: no query but their own may look at their keys, in every layer and
head. The drop in each answer token's log-probability (teacher-forced) is how much the answer
needed that span: a token, a word (its tokens together) or a conversation's turn.

The masked passes run several spans at once, as one batch, each span's variant only from the
first position it hides: the rows before it are the clean pass's, in every layer, so they are
taken from it (a family without that pass runs one whole pass per span). A batch's rows go
through each matrix as one product, torch's on the dequantized matrix (dense_rows), and only
the rows that chose the answer are unembedded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from attncli.activity import counted, doing
from attncli.core.result import TokenInfo
from attncli.models.family import Model
from attncli.models.sources.gguf.qmatmul import dense_rows
from attncli.records.given import Turn

BATCH_ROWS = 8192  # a batch's rows (Σ over its spans of T - the span's first position), at most
ROW_BYTES = 256 * 2**20  # and its rows × d_model × 64 bytes (the MLP's float32 temporaries)
LOGIT_ROWS = 128  # answer rows unembedded at once: (rows, vocab) float32 logits


@runtime_checkable
class Maskable(Protocol):
    """A model that runs several masked variants of a text, each from the first position it
    changes."""

    # Variant b with the keys of hidden[b] hidden; prefix[layer] (T, d_model) the clean stream
    # entering each layer. The last block's streams at positions rows: (B, len(rows), d_model).
    def masked_from(self, token_ids: list[int], prefix: list[Tensor], hidden: list[list[int]],
                    rows: list[int]) -> Tensor: ...
    # logits of final streams with the unembedding read once and kept (Editable's).
    def held_logits(self, hidden: Tensor) -> Tensor: ...


def masked(num_tokens: int, hidden: list[int]) -> torch.Tensor:
    """(T, T) True where a query may look: every key but those hidden (each still sees
    itself, so its own row is not empty; what it computes reaches no other token)."""
    visible = torch.ones(num_tokens, num_tokens, dtype=torch.bool)  # (T, T)
    visible[:, hidden] = False
    visible[hidden, hidden] = True
    return visible


def _chosen(logits: Callable[[Tensor], Tensor], hidden: Tensor,
            answer_ids: list[int]) -> Tensor:
    """Each answer token's log-probability (..., A) float64 from the streams (..., A, d_model)
    of the tokens before it, unembedded LOGIT_ROWS rows at a time."""
    flat = hidden.reshape(-1, hidden.shape[-1])  # (N · A, d_model)
    chosen = torch.tensor(answer_ids).repeat(flat.shape[0] // len(answer_ids))  # (N · A,)
    out = []
    for begin in range(0, flat.shape[0], LOGIT_ROWS):
        rows = slice(begin, begin + LOGIT_ROWS)
        scores = logits(flat[rows]).float()  # (k, vocab)
        # log p = logit - max - log Σ exp(logit - max): each exp in float32, their sum in float64
        # (within 1e-8 of log_softmax in float64, without a float64 copy of the logits).
        top = scores.max(dim=-1, keepdim=True).values  # (k, 1)
        total = torch.exp(scores - top).sum(dim=-1, dtype=torch.float64)  # (k,)
        picked = scores.gather(1, chosen[rows, None])[:, 0].double()  # (k,)
        out.append(picked - top[:, 0].double() - total.log())  # (k,)
    return torch.cat(out).reshape(hidden.shape[:-1])  # (..., A)


@torch.no_grad()
def answer_logprobs(model: Model, prompt_ids: list[int], answer_ids: list[int],
                    visible: torch.Tensor | None = None) -> torch.Tensor:
    """Each answer token's log-probability (A,) float64, teacher-forced; visible (T, T), True
    where a query may look, narrows the causal mask."""
    p, a = len(prompt_ids), len(answer_ids)
    hidden = None
    for trace in model.trace(prompt_ids + answer_ids, model.spec.n_layer - 1, visible):
        hidden = trace.output
    assert hidden is not None, "a decoder has at least one layer"
    return _chosen(model.logits, hidden[p - 1:p + a - 1], answer_ids)


@torch.no_grad()
def occlusion(model: Model, prompt_ids: list[int], answer_ids: list[int],
              spans: list[list[int]]) -> list[list[float]]:
    """(A, P) the drop in answer token s's log-prob when the span holding prompt token j is
    masked, for each of spans (prompt indices masked together); 0 for tokens in no span (the
    sinks: masking the first token breaks the model, not the reason)."""
    p, a = len(prompt_ids), len(answer_ids)
    ids = prompt_ids + answer_ids
    doing(f"occlusion: {len(spans):,} masked passes over {p + a:,} tokens")
    unembed = model.held_logits if isinstance(model, Maskable) else model.logits
    drops = torch.zeros(a, p, dtype=torch.float64)  # (A, P)
    # Every product the same way, clean and masked (torch's on the dequantized matrix, faster on
    # a batch's many rows): a span that changes nothing then drops by nothing, not by rounding.
    with dense_rows(1):
        prefix, final = [], None
        for trace in model.trace(ids, model.spec.n_layer - 1):
            prefix.append(trace.residual)  # (T, d_model) the clean stream entering the layer
            final = trace.output
        assert final is not None, "a decoder has at least one layer"
        base = _chosen(unembed, final[p - 1:p + a - 1], answer_ids)  # (A,)
        done = 0
        for batch, logprobs in _masked_runs(model, ids, p, answer_ids, spans, prefix):
            for span, row in zip(batch, logprobs, strict=True):
                drops[:, span] = (base - row)[:, None]  # (A, len(span))
            done += len(batch)
            counted("masked passes", done, len(spans))
    return drops.tolist()


def _masked_runs(model: Model, ids: list[int], p: int, answer_ids: list[int],
                 spans: list[list[int]],
                 prefix: list[Tensor]) -> Iterator[tuple[list[list[int]], Tensor]]:
    """Each batch of spans and their answer log-probabilities (B, A): spans taken in order of
    their first token, as many to a batch as its rows allow."""
    n, a = len(ids), len(answer_ids)
    if not isinstance(model, Maskable):
        for span in spans:
            yield [span], answer_logprobs(model, ids[:p], answer_ids, masked(n, span))[None]
        return
    rows = list(range(p - 1, p - 1 + a))  # the queries that chose the answer
    most = max(1, min(BATCH_ROWS, ROW_BYTES // (64 * model.spec.d_model)))
    batch: list[list[int]] = []
    for span in sorted((s for s in spans if s), key=min):
        if batch and sum(n - min(s) for s in batch) + n - min(span) > most:
            yield batch, _masked_batch(model, ids, batch, rows, answer_ids, prefix)
            batch = []
        batch.append(span)
    if batch:
        yield batch, _masked_batch(model, ids, batch, rows, answer_ids, prefix)


def _masked_batch(model: Maskable, ids: list[int], batch: list[list[int]], rows: list[int],
                  answer_ids: list[int], prefix: list[Tensor]) -> Tensor:
    """The answer log-probabilities (B, A) with each of batch's spans masked."""
    final = model.masked_from(ids, prefix, batch, rows)  # (B, A, d_model)
    return _chosen(model.held_logits, final, answer_ids)  # (B, A)


def looks(spans: list[list[int]], num_tokens: int) -> float:
    """What occlusion's masked passes over spans cost, in passes over all num_tokens tokens:
    each span's variant runs from its first position, (T - first) / T of one look."""
    return sum(num_tokens - min(span) for span in spans if span) / max(num_tokens, 1)


def spans_of(kind: str, tokens: list[TokenInfo], skip: list[int],
             turns: list[Turn]) -> list[list[int]]:
    """The prompt's spans occlusion masks together, none holding a token of skip: each token
    (token), each word's tokens (word: a word starts at a space, punctuation or a CJK
    character, and a token that starts inside a character stays with it), or each turn's
    tokens (turn: a conversation's messages; a prompt without turns is one)."""
    left_out, p = set(skip), len(tokens)
    if kind == "token":
        return [[j] for j in range(p) if j not in left_out]
    if kind == "turn":
        found = [[j for j in range(t.start, t.end) if j not in left_out] for t in turns]
        return [span for span in found if span] or (
            [[j for j in range(p) if j not in left_out]] if p > len(left_out) else [])
    words: list[list[int]] = []
    previous: bytes | None = None
    for j, token in enumerate(tokens):
        data = _bytes(token)
        if j in left_out:
            previous = None
            continue
        if previous is None or _starts_word(previous, data):
            words.append([])
        words[-1].append(j)
        previous = data
    return words


def _bytes(token: TokenInfo) -> bytes:
    return bytes.fromhex(token.bytes_hex) if token.bytes_hex is not None \
        else token.text.encode("utf-8")


def _starts_word(before: bytes, data: bytes) -> bool:
    """Whether a token of these bytes, after one of before's, starts a word."""
    if not data or 0x80 <= data[0] < 0xC0:  # inside a character the last token began
        return False
    first = data.decode("utf-8", "replace")[0]
    last = before.decode("utf-8", "replace")[-1:] or " "
    return not (_wordy(first) and _wordy(last)) or _cjk(first) or _cjk(last)


def _wordy(char: str) -> bool:
    return char.isalnum() or char == "_"  # an identifier's parts are one word


def _cjk(char: str) -> bool:
    """A character of the scripts written without spaces (CJK, kana, Hangul syllables)."""
    return "\u2e80" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af" or \
        "\uf900" <= char <= "\ufaff"
