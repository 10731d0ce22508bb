"""What a generation records beside its steps, as typed records: how the prompt was given (the
chat template or none), each message's place among its tokens, the spans occlusion masked, and
a runtime's receipt. Each has the one to_dict() --json writes; plain data, no numpy, no torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Template:
    """Whether the prompt went through the checkpoint's chat template, and where it came from."""

    used: bool
    origin: str  # "GGUF tokenizer.chat_template", ...; "" without one

    def to_dict(self) -> dict[str, Any]:
        """config.template."""
        return {"used": self.used, "origin": self.origin}


@dataclass(frozen=True)
class Turn:
    """One message's place among the prompt's tokens: tokens [start, end) hold its content."""

    role: str
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one turn."""
        return {"role": self.role, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Occluded:
    """What the occlusion view masked together: by token, word or turn, each span's tokens."""

    by: str
    spans: list[list[int]]

    def to_dict(self) -> dict[str, Any]:
        """occlusion_spans."""
        return {"by": self.by, "spans": self.spans}


def nats(value: float, places: int = 4, sign: bool = True) -> str:
    """A log-probability or a difference of two, to places decimals; past a million nats (a
    runtime's -1e308 is a finite number) in powers of ten, not hundreds of digits."""
    form = "+" if sign else ""
    return f"{value:{form}.{places}f}" if abs(value) < 1e6 else f"{value:{form}.3e}"


@dataclass(frozen=True)
class ReceiptRow:
    """One token (or span of text, where the tokenizations differ): the log-probabilities of
    attncli and the runtime, and each one's likeliest token where both are known."""

    text: str
    attncli: float
    runtime: float
    difference: float  # attncli - runtime
    attncli_choice: str | None = None
    runtime_choice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """One of receipt.rows (the choices only where both are known)."""
        out: dict[str, Any] = {"text": self.text, "attncli": self.attncli,
                               "runtime": self.runtime, "difference": self.difference}
        if self.attncli_choice is not None and self.runtime_choice is not None:
            out |= {"attncli_choice": self.attncli_choice, "runtime_choice": self.runtime_choice}
        return out


@dataclass(frozen=True)
class Largest:
    """The row that differs most."""

    text: str
    difference: float


@dataclass(frozen=True)
class Receipt:
    """A runtime's log-probabilities against attncli's: that the model shown is the one that
    ran (models/generate/receipt.py compares them)."""

    compared: str  # tokens: token by token; text: over spans where the tokenizations differ
    rows: list[ReceiptRow]
    flag_above: float  # nats: a row past it is flagged
    largest: Largest
    flagged: list[int]  # rows past flag_above
    choices_differ: list[int]  # rows where the likeliest tokens differ

    def to_dict(self) -> dict[str, Any]:
        """receipt."""
        return {"compared": self.compared, "rows": [r.to_dict() for r in self.rows],
                "flag_above": self.flag_above,
                "largest": {"text": self.largest.text, "difference": self.largest.difference},
                "flagged": self.flagged, "choices_differ": self.choices_differ}


@dataclass(frozen=True)
class Reported:
    """One token as the runtime reported it."""

    text: str
    data: bytes  # the token's bytes (Ollama's "bytes", else its text in UTF-8)
    logprob: float
    choice: str | None  # its likeliest token there, where it reported its top candidates
