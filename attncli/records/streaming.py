"""The records of StreamingLLM's lesson (`attncli kvcache --model … --keep`) that
render/lessons/streaming.py reads: plain data and their JSON contract (to_dict), no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KEY_POSITIONS = "text"  # what the JSON says of the cached keys' positions
KEY_POSITIONS_NOTE = ("keys keep their positions in the text; the cache is not re-rotated to "
                      "positions within it, as StreamingLLM does")


@dataclass(frozen=True)
class Policy:
    """What a cache keeps: everything (full), or the first `sinks` keys and the latest `window`."""

    name: str  # "full", "window", "sinks+window"
    sinks: int | None = None
    window: int | None = None

    @property
    def label(self) -> str:
        """The policy as --keep spells it, or "full"."""
        if self.window is None:
            return "full"
        return f"sinks:{self.sinks},window:{self.window}" if self.sinks else f"window:{self.window}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one policy."""
        return {"name": self.name, "sinks": self.sinks, "window": self.window}


@dataclass(frozen=True)
class Score:
    """One policy over one range of positions."""

    mean_nll: float  # mean −log p(token t+1 | tokens ≤ t)
    perplexity: float | None  # exp(mean_nll); None past float64's range
    agreement: float | None  # share of top-1 predictions equal to the full cache's (None: full)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one score."""
        out: dict[str, Any] = {"perplexity": self.perplexity, "mean_nll": self.mean_nll}
        if self.agreement is not None:
            out["agreement"] = self.agreement
        return out


@dataclass(frozen=True)
class RangeScores:
    """Every policy's score over positions start..stop-1 (each predicting the next token)."""

    start: int
    stop: int
    window_full: bool  # every position here has a full window: older keys are being evicted
    scores: dict[str, Score]  # policy name → its score

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one range."""
        return {"start": self.start, "stop": self.stop, "positions": self.stop - self.start,
                "window_full": self.window_full,
                **{name: score.to_dict() for name, score in self.scores.items()}}


@dataclass(frozen=True)
class StreamingResult:
    """`attncli kvcache --model … --keep`: each policy's perplexity and agreement per range."""

    config: dict[str, Any]  # model, tokens, layers
    policies: list[Policy]
    ranges: list[RangeScores]
    after_window: RangeScores  # every position from the window's filling on

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli kvcache --keep`."""
        window = self.policies[1]
        return {"kind": "streaming", **self.config,
                "keep": {"sinks": self.policies[-1].sinks or 0, "window": window.window},
                "key_positions": KEY_POSITIONS, "key_positions_note": KEY_POSITIONS_NOTE,
                "policies": [p.to_dict() for p in self.policies],
                "ranges": [r.to_dict() for r in self.ranges],
                "after_window": self.after_window.to_dict()}
