"""The report of `attncli check`, drawn from its JSON (check's own record is above render/)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


def _number(value: float | None) -> str:
    return "NaN/inf" if value is None else f"{value:.2e}" if value else "0"


def _row(values: list[float | None]) -> str:
    return "[" + ", ".join("NaN" if v is None else f"{v:.4f}" for v in values) + "]"


def render_check(report: dict[str, Any]) -> RenderableType:
    """The first line says the reader's code ran; then how the weights were copied, each case's
    largest difference, and the verdict with its diagnosis."""
    parts: list[RenderableType] = [Text(report["notice"], "dim")]
    copied = report["copied"]
    if copied["how"] == "names":
        how = f"by the book's names ({', '.join(copied['map'])})"
    else:
        how = "by shape: " + ", ".join(f"{yours} ← {book}"
                                       for yours, book in copied["map"].items())
    notes = ""
    if copied["guessed_order"]:
        notes += (" Your names do not say which is the query, the key and the value: they were "
                  "told apart by declaration order, or by the order that passes.")
    if copied["ignored"]:
        notes += (" Yours that the book has no counterpart for, left as they were: "
                  f"{', '.join(copied['ignored'])}.")
    parts.append(Text.assemble("Checked as the book's ", (report["book_class"], "bold"),
                               f"; the book's weights copied into yours {how}.{notes}"))
    if report.get("your_settings"):
        parts.append(Text(f"Your code changed torch's globals ({'; '.join(report['your_settings'])}"
                          "): your class ran with them, the book's reference with torch's "
                          "defaults (float32, torch's own functions)."))
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("case")
    table.add_column("max |yours − book's|", justify="right")
    table.add_column("")
    for case in report["cases"]:
        verdict = Text("PASS", "green") if case["pass"] else Text("FAIL", "bold red")
        shown = case["error"] if case["error"] else _number(case["max_diff"])
        table.add_row(case["name"], shown, verdict)
    parts.append(table)
    tol = report["tolerance"]
    if report["verdict"] == "pass":
        parts.append(Text.assemble(("PASS", "bold green"), f": your {report['class']} "
                                   f"equals the book's {report['book_class']} on all "
                                   f"{len(report['cases'])} cases "
                                   f"(largest difference {_number(report['max_diff'])}; "
                                   f"tolerance {tol['atol']:g} + {tol['rtol']:g}·|book's|)."))
        return Group(*parts)
    failed = [c for c in report["cases"] if not c["pass"]]
    worst = max(failed, key=lambda c: float("inf") if c["max_diff"] is None else c["max_diff"])
    size = worst["error"] or f"largest difference {_number(worst['max_diff'])}"
    parts.append(Text.assemble(("FAIL", "bold red"), f": {len(failed)} of "
                               f"{len(report['cases'])} cases differ ({worst['name']}: {size})."))
    diagnosis = report["diagnosis"]
    for mistake in diagnosis["mistakes"]:
        those = "those mistakes" if " + " in mistake["id"] else "that mistake"
        parts.append(Text.assemble(("Diagnosis: ", "bold"), (mistake["id"], "bold yellow"),
                                   f": {mistake['text']}. With {those} the book's class "
                                   "gives your output in every case."))
    if not diagnosis["mistakes"]:
        parts.append(Text("None of the known mistakes matches your output.", "bold"))
    first = diagnosis["first_difference"]
    if first is not None:
        where = (f"batch {first['batch']}, " if first["batch"] is not None else "") + \
            f"token {first['token']}" + (f" ({first['label']!r})" if first["label"] else "")
        parts.append(Text(f"The first row that differs: {first['case']}, {where}\n"
                          f"  yours:  {_row(first['yours'])}\n"
                          f"  book's: {_row(first['book'])}"))
    return Group(*parts)
