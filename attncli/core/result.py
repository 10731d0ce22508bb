"""The plain result of one run and its JSON contract (to_dict); no tensors here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attncli.core.tokens import TokenPiece

Matrix = list[list[float]]
Stack = list[list[list[float | None]]]

# Every stage a variant may have, in the order the computation runs.
STAGES = ("inputs", "queries", "keys", "values", "queries_norm", "keys_norm", "queries_rope",
          "keys_rope", "scores", "scaled", "masked", "softmax", "dropped", "weights",
          "heads_context", "context")  # *_norm, *_rope: the Llama family only


@dataclass(frozen=True)
class TokenInfo:
    """One token as shown: index, id (None for --inputs), readable text and exact bytes."""

    index: int
    id: int | None
    text: str
    bytes_hex: str | None = None

    @classmethod
    def of(cls, piece: TokenPiece) -> TokenInfo:
        """The record of one tokenised piece of text, with its exact bytes."""
        data = piece.data
        return cls(piece.index, piece.id, piece.label, None if data is None else data.hex())

    def to_dict(self) -> dict[str, Any]:
        """JSON form; "bytes" is absent for --inputs vectors, which have none."""
        out: dict[str, Any] = {"index": self.index, "id": self.id, "text": self.text}
        if self.bytes_hex is not None:
            out["bytes"] = self.bytes_hex
        return out


@dataclass(frozen=True)
class Result:
    """Everything one run computed, as plain Python data."""

    variant: str
    config: dict[str, Any]
    tokens: list[TokenInfo]
    weights: Stack  # [heads][T][T]
    context: Matrix  # [T][d_out]
    stages: dict[str, Any] = field(default_factory=dict)  # name → nested lists, None if absent
    model: dict[str, Any] | None = None  # with --model: path, layers, heads, d_model, layer
    present: tuple[str, ...] | None = None  # every stage the run has, kept in stages or not

    @property
    def num_heads(self) -> int:
        """How many heads the weights hold (1 for single-head variants)."""
        return len(self.weights)

    @property
    def labels(self) -> list[str]:
        """The token labels, in order."""
        return [t.text for t in self.tokens]

    def available_stages(self) -> list[str]:
        """The stages this run has, in computation order."""
        if self.present is not None:
            return list(self.present)
        return [name for name in STAGES if self.stages.get(name) is not None]

    def to_dict(self, stages: list[str] | None = None, query: int | None = None,
                window: dict[str, list[int]] | None = None) -> dict[str, Any]:
        """The JSON contract; with stages, also a "stages" object holding those named.

        query adds "query": {"index", "token", "weights" ([heads][T])}; window adds the
        --rows/--cols ranges shown ("window": {"rows": [a, b], "cols": [c, d]}), while every
        matrix stays whole.
        """
        out: dict[str, Any] = {
            "variant": self.variant,
            "config": self.config,
            "tokens": [t.to_dict() for t in self.tokens],
            "weights": self.weights,
            "context": self.context,
        }
        if self.model is not None:
            out["model"] = self.model
        if stages:
            out["stages"] = {name: self.stages.get(name) for name in stages}
        if query is not None:
            out["query"] = {"index": query, "token": self.tokens[query].text,
                            "weights": [head[query] for head in self.weights]}
        if window is not None:
            out["window"] = window
        return out


@dataclass(frozen=True)
class HeadsResult:
    """Every head of every layer of a model, summarised: `attncli heads`."""

    config: dict[str, Any]
    model: dict[str, Any]
    tokens: list[TokenInfo]
    measures: list[dict[str, Any]]  # one per head: layer, head, entropy, prev, first, self, ...
    thumbnails: list[list[Matrix]]  # [layers][heads][p][p] weights max-pooled to p ≤ T

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli heads`: the measures of every head, in table order."""
        return {"config": self.config, "model": self.model,
                "tokens": [t.to_dict() for t in self.tokens], "heads": self.measures}


@dataclass(frozen=True)
class PooledMap:
    """One head's weights pooled into blocks of tokens, for the terminal (not in the JSON)."""

    head: int
    edges: list[int]  # block b covers tokens edges[b] .. edges[b+1]-1, on both axes
    values: list[list[float | None]]  # [query block][key block] max or mean; None: all masked
    counts: list[list[int]]  # unmasked cells per block, so a renderer can pool further


@dataclass(frozen=True)
class LongResult:
    """A tiled run as plain data: context and per-row stats for every token, weights for a window.

    No N × N matrix is kept unless --full asked for one (then the window is the whole matrix).
    """

    variant: str
    config: dict[str, Any]
    tokens: list[TokenInfo]
    context: Matrix  # [N][d_out]
    stats: dict[str, Any]  # lse, entropy: [heads][N]; top_k: {index, weight}: [heads][N][k]
    summary: list[dict[str, Any]]  # per head: head, mean_entropy, first, prev, self, ...
    window: dict[str, list[int]]  # {"rows": [a, b], "cols": [c, d]}, half-open
    weights: Stack  # [heads][b-a][d-c], None where masked
    query: dict[str, Any] | None = None  # with --query: index, token, weights [heads][N]
    maps: list[PooledMap] = field(default_factory=list)  # the heads shown, for the terminal

    @property
    def num_heads(self) -> int:
        """How many heads the run has (1 for single-head variants)."""
        return len(self.summary)

    @property
    def labels(self) -> list[str]:
        """The token labels, in order."""
        return [t.text for t in self.tokens]

    def available_stages(self) -> list[str]:
        """The stages a tiled run has as plain data."""
        return ["weights", "context"]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of a long run: no N × N matrix unless the window is all of it."""
        out: dict[str, Any] = {
            "variant": self.variant,
            "config": self.config,
            "tokens": [t.to_dict() for t in self.tokens],
            "context": self.context,
            "stats": self.stats,
            "summary": self.summary,
            "window": self.window,
            "weights": self.weights,
        }
        if self.query is not None:
            out["query"] = self.query
        return out
