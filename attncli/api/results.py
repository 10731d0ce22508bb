"""The results the Python API returns: the CLI's result records with tensors, to_dict() and
their own display in a notebook (the interactive page) or a terminal (the CLI's tables)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from attncli.api.notebook import Shown, page_frame
from attncli.core.display import Display

if TYPE_CHECKING:
    import torch
    from rich.console import Console, RenderableType

    from attncli.core.result import Result as Record
    from attncli.records.heads import HeadsResult as HeadsRecord


def _plain(doc: dict[str, Any]) -> dict[str, Any]:
    """The JSON the CLI prints, as Python data: written by the one JSON writer, read back."""
    import orjson

    from attncli.render.jsonout import json_pieces

    return orjson.loads(b"".join(json_pieces(doc)))


def _tensor(data: Any, masked: float = float("nan")) -> torch.Tensor:
    """Nested lists (None where masked) or a numpy array as a float32 tensor."""
    import numpy as np
    import torch

    array = np.array(data, dtype=np.float32)  # a copy, None (masked) as NaN
    array[np.isnan(array)] = masked
    return torch.from_numpy(array)


class Result(Shown):
    """One run: `attncli.run`, `attncli.explain` or `attncli.view`.

    weights: (heads, T, T) float32 tensor (the tiled path: the window's weights, NaN where
    masked); context: (T, d_out); stages: every stage kept, by name (masked cells -inf);
    tokens: the token texts; to_dict(): the CLI's --json, equal to it.
    """

    def __init__(self, record: Record, display: Display, mode: str = "run",
                 extra: dict[str, Any] | None = None) -> None:
        self.record = record  # the result contract the CLI renders
        self.display = display
        self.mode = mode  # run, explain, or weights (attncli.view: weights given by the user)
        self.extra = extra or {}

    @property
    def tokens(self) -> list[str]:
        """The tokens' texts, in order."""
        return self.record.labels

    @property
    def token_ids(self) -> list[int | None]:
        """The tokens' ids (None for vectors given as inputs)."""
        return [t.id for t in self.record.tokens]

    @cached_property
    def weights(self) -> torch.Tensor:
        """The attention weights (heads, T, T); rows sum to 1."""
        return _tensor(self.record.weights)

    @cached_property
    def context(self) -> torch.Tensor:
        """The context vectors (T, d_out)."""
        return _tensor(self.record.context)

    @cached_property
    def stages(self) -> dict[str, torch.Tensor]:
        """Every stage the run kept, by name (explain keeps them all); masked cells are -inf."""
        return {name: _tensor(data, -float("inf") if name == "masked" else float("nan"))
                for name, data in self.record.stages.items()}

    def _doc(self) -> dict[str, Any]:
        if self.mode == "weights":  # as `attncli show weights.json --json` writes them
            from attncli.saved.shown import saved_doc

            return saved_doc("weights", [self.record], {})
        return self.record.to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: equal to the CLI's --json for the same run."""
        return _plain(self._doc())

    def renderable(self, console: Console) -> RenderableType:
        from attncli.render.explain import render_explain
        from attncli.render.run import render_run
        from attncli.render.saved import render_saved

        if self.mode == "explain":
            return render_explain(console, self.record, self.display)
        if self.mode == "weights":
            return render_saved(console, self.record, self.display)
        return render_run(console, self.record, self.display)

    def page(self) -> str:
        return page_frame(self._doc(), self.extra, f"attncli · {self.record.variant}")

    def summary(self) -> str:
        c = self.record.config
        what = c.model if c.model is not None else self.record.variant
        return (f"<attncli.Result {what}: {c.num_tokens} tokens, {c.heads} head"
                f"{'s' if c.heads != 1 else ''}, {c.impl}>")


class HeadsResult(Shown):
    """`attncli.heads`: every layer × head of a model, its measures and scores.

    heads: one dict per head (layer, head, measures, scores, labels); to_dict(): the CLI's
    `heads --json`; thumbnails and the page show in a notebook.
    """

    def __init__(self, record: HeadsRecord, precision: int = 3, scale: str = "shared",
                 extra: dict[str, Any] | None = None) -> None:
        self.record = record
        self.precision, self.scale = precision, scale
        self.extra = extra or {}

    @property
    def heads(self) -> list[dict[str, Any]]:
        """Every head in table order: layer, head, measures and scores."""
        return self.to_dict()["heads"]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: equal to `attncli heads --json` for the same run."""
        return _plain(self.record.to_dict())

    def renderable(self, console: Console) -> RenderableType:
        from attncli.render.heads import render_heads

        return render_heads(console, self.record, self.precision, self.scale)

    def page(self) -> str:
        return page_frame(self.record.to_dict(), self.extra, "attncli · heads")

    def summary(self) -> str:
        m = self.record.model
        return f"<attncli.HeadsResult {m.path}: {m.layers} layers × {m.heads} heads>"
