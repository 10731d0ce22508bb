"""attncli.check: a reader's own chapter-3 class (or "FILE.py:Class") against the book's."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from attncli.api.args import checked
from attncli.api.notebook import Shown, text_of
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from attncli.checker.verdict import Report


class CheckResult(Shown):
    """The verdict: passed, to_dict() (as `check --json`), and the report as text or HTML."""

    def __init__(self, report: Report, lang: str = "en") -> None:
        self.report = report
        self.lang = lang

    @property
    def passed(self) -> bool:
        """Whether every case equals the book's."""
        return self.report.passed

    def __bool__(self) -> bool:
        return self.passed

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `attncli check --json`."""
        return self.report.to_dict()

    def renderable(self, console: Console) -> RenderableType:
        from attncli.render.reports.check import render_check

        return render_check(self.report.to_dict(), self.lang)

    def page(self) -> str:
        return f"<pre>{html.escape(text_of(self.renderable, colour=False, width=100))}</pre>"

    def summary(self) -> str:
        return f"<attncli.CheckResult {self.report.target}: " \
            f"{'PASS' if self.passed else 'FAIL'}>"


@checked
def check(cls: type | str, kind: str | None = None, lang: str = "en") -> CheckResult:
    """Check a class (or "FILE.py:Class", imported) against the book's computation: the book's
    weights copied in, the book's and random inputs, batch 1 and 2, dropout off, on and in eval
    mode. The result says PASS, or FAIL with the known mistake that explains the difference;
    its report is in lang (en or zh)."""
    from attncli.checker.kinds import kind_named
    from attncli.checker.load import class_name, guarded, load_target, said
    from attncli.checker.verdict import check_class

    forced = kind_named(kind)
    if lang not in ("en", "zh"):
        raise AttnCliError(f"unknown lang {lang!r} (choose from en, zh)")
    with guarded(descriptors=False):  # os._exit in their code is an error, not the end
        if isinstance(cls, str):
            found, target = load_target(cls)
        else:
            found, target = cls, class_name(cls, qualified=True) if isinstance(cls, type) \
                else said(cls, as_repr=True)
        return CheckResult(check_class(found, target, forced), lang)
