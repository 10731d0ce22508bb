"""`attncli.ablate` and `attncli.patch`: causal checks on heads, as results that show
themselves in a notebook or a terminal like the others (the CLI's tables, and to_dict(), its
--json)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from attncli.api.args import checked, record_options, typed
from attncli.api.notebook import Shown
from attncli.records.causal import AblateOptions, PatchOptions

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from attncli.records.causal import Ablation, Patching


class _Causal(Shown):
    record: Any

    def to_dict(self) -> dict[str, Any]:
        """Equal to the command's --json."""
        from attncli.api.results import _plain

        return _plain(self.record.to_dict())

    def page(self) -> str:
        """The terminal view as HTML, for a notebook."""
        import io

        from rich.console import Console

        console = Console(record=True, width=100, force_terminal=True, color_system="truecolor",
                          file=io.StringIO())
        console.print(self.renderable(console))
        return console.export_html(inline_styles=True)


class AblationResult(_Causal):
    """One `ablate`: losses (before, after per token), top (next tokens before and after at
    .at), kl, answer, and with heads="all" ranking (every head by effect, with its scores)."""

    def __init__(self, record: Ablation) -> None:
        self.record = record

    def __getattr__(self, name: str) -> Any:
        if name in ("losses", "top", "kl", "answer", "ranking", "at", "how", "heads", "tokens"):
            return getattr(self.record, name)
        raise AttributeError(name)

    def renderable(self, console: Console) -> RenderableType:
        from attncli.render.reports.causal import render_ablation

        return render_ablation(console, self.record)

    def summary(self) -> str:
        which = "every head" if not self.record.heads else ", ".join(
            f"{layer}.{head}" for layer, head in self.record.heads)
        return f"<Ablation {which}, {self.record.how}, {len(self.record.ids)} tokens>"


class PatchResult(_Causal):
    """One `patch`: grid and raw ([layer][head]), positions, baseline, top(k), attribution."""

    def __init__(self, record: Patching) -> None:
        self.record = record

    def __getattr__(self, name: str) -> Any:
        if name in ("grid", "raw", "positions", "baseline", "attribution", "top", "metric"):
            return getattr(self.record, name)
        raise AttributeError(name)

    def renderable(self, console: Console) -> RenderableType:
        from attncli.render.reports.causal import render_patching

        return render_patching(console, self.record)

    def summary(self) -> str:
        best = self.record.top(1)
        lead = f", top {best[0]['layer']}.{best[0]['head']} {best[0]['effect']:+.3f}" \
            if best else ""
        return f"<Patching {self.record.metric}, {self.record.direction}{lead}>"


@checked
def ablate(text: str | None = None, *, model: str | os.PathLike[str],
           heads: str = AblateOptions.heads, how: str = AblateOptions.how,
           at: int | None = AblateOptions.at, answer: str | None = AblateOptions.answer,
           top: int = AblateOptions.top, seed: int = AblateOptions.seed,
           repeat: int | None = AblateOptions.repeat) -> AblationResult:
    """Run text with heads' outputs replaced (how: zero | mean | resample) and return what
    changed, as `attncli ablate` does."""
    from attncli.core.request import Request
    from attncli.models.causal.ablate import run_ablate

    given = {"heads": heads, "how": how, "at": at, "answer": answer, "top": top, "seed": seed,
             "repeat": repeat}
    options = AblateOptions(**record_options("ablate", AblateOptions, given))
    text = typed("ablate", "text", text, str | None)
    path: str = typed("ablate", "model", model, str)
    return AblationResult(run_ablate(Request(text=text or "", model=path), options))


@checked
def patch(clean: str, corrupt: str, *, model: str | os.PathLike[str],
          tokens: tuple[str, str] | None = PatchOptions.tokens,
          answer: str | None = PatchOptions.answer, metric: str | None = PatchOptions.metric,
          denoise: bool = PatchOptions.denoise, per_position: bool = PatchOptions.per_position,
          at: int | None = PatchOptions.at, attribution: bool = PatchOptions.attribution,
          exact: bool = PatchOptions.exact) -> PatchResult:
    """Patch every layer × head's output between clean and corrupt, as `attncli patch` does."""
    from attncli.core.request import Request
    from attncli.models.causal.patch import run_patch

    given = {"metric": metric, "tokens": tokens, "answer": answer, "denoise": denoise,
             "per_position": per_position, "at": at, "attribution": attribution,
             "exact": exact}
    options = PatchOptions(**record_options("patch", PatchOptions, given))
    clean, corrupt = (typed("patch", name, value, str)
                      for name, value in (("clean", clean), ("corrupt", corrupt)))
    path: str = typed("patch", "model", model, str)
    return PatchResult(run_patch(Request(text=clean, model=path), corrupt, options))
