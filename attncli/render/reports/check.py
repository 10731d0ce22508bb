"""The report of `attncli check`, drawn from its JSON (check's own record is above render/)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from attncli.i18n import text
from attncli.i18n.check import mistake_text, phrase


def _number(value: float | None) -> str:
    return "NaN/inf" if value is None else f"{value:.2e}" if value else "0"


def _row(values: list[float | None]) -> str:
    return "[" + ", ".join("NaN" if v is None else f"{v:.4f}" for v in values) + "]"


def render_check(report: dict[str, Any], lang: str = "en") -> RenderableType:
    """The first line says the reader's code ran; then how the weights were copied, each case's
    largest difference, and the verdict with its diagnosis, in lang (en or zh)."""
    parts: list[RenderableType] = [Text(text(lang, "verdict.notice", target=report["target"]),
                                        "dim")]
    copied = report["copied"]
    if copied["how"] == "names":
        how = text(lang, "verdict.by_names", names=", ".join(copied["map"]))
    else:
        how = text(lang, "verdict.by_shapes", pairs=", ".join(
            f"{yours} ← {book}" for yours, book in copied["map"].items()))
    said = [text(lang, "verdict.copied", book=report["book_class"], how=how)]
    if copied["guessed_order"]:
        said.append(text(lang, "verdict.guessed"))
    if copied["ignored"]:
        said.append(text(lang, "verdict.ignored", names=", ".join(copied["ignored"])))
    parts.append(Text(" ".join(said)))
    if report.get("your_settings"):
        parts.append(Text(text(lang, "verdict.settings",
                               changes="; ".join(report["your_settings"]))))
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column(text(lang, "verdict.case"))
    table.add_column(text(lang, "verdict.diff"), justify="right")
    table.add_column("")
    for case in report["cases"]:
        verdict = Text("PASS", "green") if case["pass"] else Text("FAIL", "bold red")
        shown = phrase(lang, case["error"], line=True) if case["error"] else \
            _number(case["max_diff"])
        table.add_row(phrase(lang, case["name"]), shown, verdict)
    parts.append(table)
    tol = report["tolerance"]
    if report["verdict"] == "pass":
        parts.append(Text.assemble(("PASS", "bold green"), text(
            lang, "verdict.pass", cls=report["class"], book=report["book_class"],
            n=len(report["cases"]), diff=_number(report["max_diff"]), atol=f"{tol['atol']:g}",
            rtol=f"{tol['rtol']:g}")))
        return Group(*parts)
    parts += _failed(report, lang)
    return Group(*parts)


def _failed(report: dict[str, Any], lang: str) -> list[RenderableType]:
    failed = [c for c in report["cases"] if not c["pass"]]
    worst = max(failed, key=lambda c: float("inf") if c["max_diff"] is None else c["max_diff"])
    size = phrase(lang, worst["error"], line=True) if worst["error"] else \
        text(lang, "verdict.largest", diff=_number(worst["max_diff"]))
    parts: list[RenderableType] = [Text.assemble(("FAIL", "bold red"), text(
        lang, "verdict.fail", failed=len(failed), n=len(report["cases"]),
        case=phrase(lang, worst["name"]), size=size))]
    diagnosis = report["diagnosis"]
    for mistake in diagnosis["mistakes"]:
        those = "verdict.explains_two" if " + " in mistake["id"] else "verdict.explains_one"
        said = mistake_text(lang, mistake["id"], mistake["text"])
        parts.append(Text.assemble((text(lang, "verdict.diagnosis"), "bold"),
                                   (mistake["id"], "bold yellow"),
                                   f": {said}." if lang == "en" else f"：{said}。",
                                   " " + text(lang, those) if mistake.get("explains_output", True)
                                   else ""))
    if not diagnosis["mistakes"]:
        parts.append(Text(text(lang, "verdict.none"), "bold"))
    first = diagnosis["first_difference"]
    if first is not None:
        where = (text(lang, "verdict.batch", batch=first["batch"])
                 if first["batch"] is not None else "") + \
            text(lang, "verdict.token", token=first["token"]) + \
            (f" ({first['label']!r})" if first["label"] else "")
        parts.append(Text(text(lang, "verdict.first", case=phrase(lang, first["case"]),
                               where=where) +
                          f"\n  {text(lang, 'verdict.yours')} {_row(first['yours'])}"
                          f"\n  {text(lang, 'verdict.book')} {_row(first['book'])}"))
    return parts
