"""The options of a generation the CLI reads itself, in two groups: what the model is asked
and how its answer is streamed (Answering: the conversation, the given answer, the receipt's
files, read and checked here) and which of its attention a view shows (Attended: the fields of
records/asking.py's GenerateView, as the command line gives them). How the next token is chosen
is Sampling's own (records/asking.py), taken by the commands as it is. Answering.request builds
the one GenerationRequest from them all; they declare, and never run the model."""

from __future__ import annotations

import codecs
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from attncli.activity import hush
from attncli.cli.groups import Group
from attncli.cli.streams import signal_at
from attncli.core.display import View, parse_window
from attncli.errors import AttnCliError, escaped
from attncli.opt import of, opt
from attncli.records.asking import VIEWS, GenerateView, GenerationRequest, Sampling, check_choices

if TYPE_CHECKING:
    from attncli.cli.options import Source
    from attncli.core.result import TokenInfo
    from attncli.records.generation import GenerationResult


@dataclass(frozen=True)
class Answering(Group):
    """How the model is prompted and chooses its answer."""

    panel = "Generation"
    system: str | None = of(GenerationRequest, "system")
    raw: bool = of(GenerationRequest, "raw")
    numerics: str = of(GenerationRequest, "numerics")
    show_template: bool = opt(False, "--show-template", help="Print what the model is given, "
                              "and stop.")
    stream: bool | None = opt(None, "--stream/--no-stream", help="Write the answer to stderr "
                              "token by token as it comes [default: when stderr is a terminal].",
                              show_default=False)
    messages: str | None = opt(None, "--messages", help="A conversation instead of TEXT: "
                               'OpenAI/Ollama chat JSON ([{"role": "user", "content": ...}], or '
                               'an object with "messages"; - reads stdin), rendered by the '
                               "model's chat template.", show_default=False, metavar="FILE|-")
    answer_text: str | None = opt(None, "--answer", help="Explain this answer instead of writing "
                                  "one: teacher-forced in one pass, each token's probability, "
                                  "rank and the model's own choice.", show_default=False)
    answer_file: str | None = opt(None, "--answer-file", help="--answer read from a file (- "
                                  "reads stdin).", show_default=False, metavar="FILE|-")
    explain_last: bool = opt(False, "--explain-last", help="With --messages: explain the last "
                             "(assistant) turn, as --answer.")
    logprobs: str | None = opt(None, "--logprobs", help="A runtime's per-token log-probabilities "
                               "for the answer (Ollama's, llama.cpp server's or OpenAI-style JSON; "
                               "- reads stdin), compared with attncli's: a receipt that the model "
                               "shown is the one that ran. Its text is the answer unless given.",
                               show_default=False, metavar="FILE|-")

    def request(self, model: str, source: Source, sampling: Sampling, attended: Attended,
                head: int | None, allow_special: bool = False,
                json: bool = False) -> GenerationRequest:
        """The one request: the conversation (or TEXT, read after it), the given answer and the
        runtime's log-probs read and checked, with the sampling and the view asked for."""
        from attncli.core.inputs import utf8_text
        from attncli.models.generate.conversation import read_messages, split_last

        given = [name for name, value in (("--answer", self.answer_text),
                                          ("--answer-file", self.answer_file),
                                          ("--explain-last", self.explain_last)) if value]
        if len(given) > 1:
            raise AttnCliError(f"{' and '.join(given)} each give the answer: use one")
        self._check_inputs(source)
        if self.explain_last and self.messages is None:
            raise AttnCliError("--explain-last explains the last turn of --messages: give them")
        messages = None if self.messages is None else read_messages(self.messages)
        answer = None if self.answer_text is None else utf8_text(self.answer_text, "--answer")
        system = None if self.system is None else utf8_text(self.system, "--system")
        if self.answer_file is not None:
            answer = _read_answer(self.answer_file)
        if messages is not None and self.explain_last:
            messages, answer = split_last(messages)
        elif messages is not None and messages[-1]["role"] == "assistant" and answer is None:
            raise AttnCliError("--messages ends with the assistant's turn: --explain-last "
                               "explains it, or end the conversation with a user turn")
        reported = None
        if self.logprobs is not None:
            from attncli.models.generate.receipt import read_logprobs

            reported = read_logprobs(self.logprobs)
        prompt = "" if messages is not None else source.read(settle=False)[0] or ""
        return GenerationRequest(model, prompt, messages, answer, reported, system,
                                 self.raw, allow_special, sampling, self.numerics, json=json,
                                 **attended.asking(head))

    def _check_inputs(self, source: Source) -> None:
        """One prompt (TEXT, --file or --messages) and one reader of standard input ('-'), before
        any is read: a second reader would find it empty."""
        named = (("TEXT", source.text), ("--file", source.file), ("--messages", self.messages),
                 ("--answer-file", self.answer_file), ("--logprobs", self.logprobs))
        prompts = [name for name, value in named[:3] if value is not None]
        if len(prompts) > 1 and self.messages is not None:
            raise AttnCliError(f"give {prompts[0]} or --messages, not both")
        readers = [name for name, value in named if value == "-"]
        if len(readers) > 1:
            raise AttnCliError(f"{' and '.join(readers)} each read standard input: give all but "
                               "one a file")
        if readers and not prompts:
            raise AttnCliError(f"give TEXT, --file or --messages: {readers[0]} takes standard "
                               "input")

    @contextmanager
    def streaming(self) -> Iterator[Callable[[TokenInfo], None] | None]:
        """Inside: what takes each answer token as it comes (stderr's writer with --stream, by
        default when stderr is a terminal; else None); the streamed line is ended after."""
        wanted = self.stream if self.stream is not None else _is_terminal(sys.stderr)
        written: list[str] = []
        # The tokens' bytes read as UTF-8 as they come: a character cut across tokens is written
        # once whole (each piece's label alone is its bytes written out, \xf0\x9f).
        reader = codecs.getincrementaldecoder("utf-8")("backslashreplace")

        def write(text: str) -> None:
            _write(escaped(text, lines=True))  # control characters written out, as `tokens` does

        def write_token(token: TokenInfo) -> None:
            signal_at("token")
            hush()  # the status line goes: the answer is written where it was
            text = (token.text if token.bytes_hex is None
                    else reader.decode(bytes.fromhex(token.bytes_hex)))
            written.append(text)
            write(text)

        try:
            yield write_token if wanted else None
        finally:
            if written:
                write(reader.decode(b"", final=True))  # a character the answer stopped inside
                _write("\n")


def _read_answer(path: str) -> str:
    """--answer-file's text, its one final line ending (\\n or \\r\\n) left out, as --file's."""
    from attncli.core.inputs import _decode, _read_path, is_stdin

    name = "standard input" if is_stdin(path) else f"--answer-file {path!r}"
    text = _decode(_read_path(path, "--answer-file"), name)
    return text.removesuffix("\n").removesuffix("\r") if text.endswith("\n") else text


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):  # a closed stream
        return False


def _write(text: str) -> None:
    """Write to stderr now; a stderr that fails is let go (the answer still reaches stdout)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


@dataclass(frozen=True)
class Attended(Group):
    """Which of the answer's attention is shown, and how layers and heads combine."""

    panel = "Attention view"
    at: str | None = of(GenerateView, "at")  # an index or a token's text, resolved by view
    kind: str = of(GenerateView, "kind")
    layers: str | None = of(GenerateView, "layers")  # A:B, parsed by span
    combine: str = of(GenerateView, "combine")
    exclude_sinks: bool = of(GenerateView, "exclude_sinks")
    occlude: str = of(GenerateView, "occlude")

    def __post_init__(self) -> None:
        check_choices(self.combine, self.kind, self.occlude)  # as the view record checks them

    def asking(self, head: int | None) -> dict[str, Any]:
        """The request's view fields, --layers parsed once, before any work."""
        return {"view": self.kind, "occlude": self.occlude, "exclude_sinks": self.exclude_sinks,
                "combine": self.combine, "head": head, "at": self.at,
                "layers": None if self.layers is None else parse_window(self.layers, "--layers")}

    def view(self, result: GenerationResult, head: int | None, kind: str) -> GenerateView:
        """A saved generation's view in kind, as the request that made it would show it."""
        from attncli.records.shown import shown_view

        return shown_view(result, GenerationRequest(result.model.path, **self.asking(head)), kind)


@dataclass(frozen=True)
class Redrawn(Group):
    """show's --view: the view a saved generation is drawn in. Its values and --draw's are apart,
    so table, heatmap and auto stay the old spelling of --draw, as on the other commands."""

    panel = "Attention view"
    kind: str | None = of(GenerateView, "kind", lambda _: None, show_default=False,
                          metavar="raw|value|occlusion", help="A saved generation's view: raw, "
                          "value or occlusion (the last two when it was made with them) "
                          "[default: the one it was made with]. table, heatmap or auto: --draw's "
                          "old spelling.")

    def split(self, draw: View) -> tuple[View, str | None]:
        """--draw (or its old spelling, with a note on stderr) and the generation's view."""
        if self.kind is None or self.kind in VIEWS:
            return draw, self.kind
        if self.kind not in {v.value for v in View}:
            raise AttnCliError(f"--view must be one of {', '.join(VIEWS)} (a saved generation's "
                               f"view) or, as --draw, {', '.join(v.value for v in View)} (got "
                               f"{self.kind!r})")
        if draw != View.auto:
            raise AttnCliError("--view is the old spelling of --draw: give one")
        sys.stderr.write("attncli: --view is now --draw (the old spelling goes in the next "
                         "release)\n")
        return View(self.kind), None
