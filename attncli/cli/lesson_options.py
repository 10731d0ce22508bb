"""The lessons' options, declared once: what a lesson shows of its result (Shown) and the
chapter-3 settings they take. permute, kvcache, flash and cost take them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from attncli.cli.groups import Group, Without
from attncli.cli.options import Chapter3, LangOpt, Look

LessonPrecisionOpt = Annotated[int, typer.Option(min=0, max=8, help="Decimals shown.")]
ShownHeadOpt = Annotated[int, typer.Option(
    "--head", min=0, help="The head whose weights are shown (multihead, or --model).")]
# The lessons' chapter-3 settings: no --context-length, no --dropout (they decode or compare).
Settings = Annotated[Chapter3, Without("context_length", "dropout")]


@dataclass(frozen=True)
class Shown(Group):
    """What a lesson shows of its result."""

    panel = "Display"
    head: ShownHeadOpt = 0
    precision: LessonPrecisionOpt = 3
    lang: LangOpt = None

    def language(self) -> str:
        """--lang, or the environment's language."""
        return Look(lang=self.lang).language()
