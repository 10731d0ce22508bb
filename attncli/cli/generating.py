"""The options of a generation, declared once in two groups: how the model answers (Answering)
and which of its attention a view shows (Attended). `generate` takes them, and so can any
command that lets a model answer. Their defaults are those of the records they build
(models/generate: Sampling, GenerateView), which tests/cli/test_cli_generate.py checks."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from attncli.activity import hush
from attncli.cli.groups import Group
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.core.result import TokenInfo
    from attncli.models.generate.run import Asked, Keep
    from attncli.models.generate.sampling import Sampling
    from attncli.records.generation import GenerateView, GenerationResult

MaxNewOpt = Annotated[int, typer.Option(help="The most answer tokens written.")]
SampleOpt = Annotated[bool, typer.Option("--sample", help="Sample the next token (else greedy).")]
TempOpt = Annotated[float, typer.Option(help="With --sample: logits divided by this first.")]
TopPOpt = Annotated[float, typer.Option(help="With --sample: keep the likeliest tokens whose "
                                        "mass reaches this.")]
GenTopKOpt = Annotated[int, typer.Option("--top-k", help="With --sample: keep this many "
                                         "likeliest tokens (0: all).")]
GenSeedOpt = Annotated[int | None, typer.Option(
    "--seed", help="With --sample: the seed that reproduces the draw [default: a fresh one, "
    "recorded in --json].", show_default=False)]
SystemOpt = Annotated[str | None, typer.Option(help="A system message for the chat template.",
                                               show_default=False)]
RawOpt = Annotated[bool, typer.Option("--raw", help="Send the prompt without the chat template.")]
ShowTemplateOpt = Annotated[bool, typer.Option("--show-template",
                                               help="Print what the model is given, and stop.")]
MessagesOpt = Annotated[str | None, typer.Option(
    "--messages", help="A conversation instead of TEXT: OpenAI/Ollama chat JSON "
    '([{"role": "user", "content": ...}], or an object with "messages"; - reads stdin), '
    "rendered by the model's chat template.", show_default=False, metavar="FILE|-")]
AnswerOpt = Annotated[str | None, typer.Option(
    "--answer", help="Explain this answer instead of writing one: teacher-forced in one pass, "
    "each token's probability, rank and the model's own choice.", show_default=False)]
AnswerFileOpt = Annotated[str | None, typer.Option(
    "--answer-file", help="--answer read from a file (- reads stdin).", show_default=False,
    metavar="FILE|-")]
LogprobsOpt = Annotated[str | None, typer.Option(
    "--logprobs", help="A runtime's per-token log-probabilities for the answer (Ollama's, "
    "llama.cpp server's or OpenAI-style JSON; - reads stdin), compared with attncli's: a "
    "receipt that the model shown is the one that ran. Its text is the answer unless given.",
    show_default=False, metavar="FILE|-")]
ExplainLastOpt = Annotated[bool, typer.Option(
    "--explain-last", help="With --messages: explain the last (assistant) turn, as --answer.")]
StreamOpt = Annotated[bool | None, typer.Option(
    "--stream/--no-stream", help="Write the answer to stderr token by token as it comes "
    "[default: when stderr is a terminal].", show_default=False)]
AtOpt = Annotated[str | None, typer.Option(
    "--at", help="The answer token whose attention is drawn over the text: its index (0-based) "
    "or its text (the first such token; its leading space optional).", show_default=False,
    metavar="I|TEXT")]
LayersOpt = Annotated[str | None, typer.Option(
    "--layers", help="Layers A:B combined (half-open) [default: all].", show_default=False,
    metavar="A:B")]
ViewKindOpt = Annotated[str, typer.Option(
    "--view", help="What ranks the prompt tokens: raw (attention weights), value (α·‖W_O v‖ "
    "per head, Kobayashi 2020) or occlusion (the answer token's log-prob drop with the token "
    "masked: one pass per prompt word, or as --occlude says).", metavar="raw|value|occlusion")]
OccludeOpt = Annotated[str, typer.Option(
    "--occlude", help="With --view occlusion: what is masked together, each token, each word "
    "(its tokens together) or each turn of --messages.", metavar="token|word|turn")]
CombineOpt = Annotated[str, typer.Option(help="How layers and heads combine: mean or max.")]
SinksOpt = Annotated[bool, typer.Option(
    "--exclude-sinks/--keep-sinks", help="Leave out the first token and the template's own "
    "tokens, and renormalise (--json keeps raw weights).")]


@dataclass(frozen=True)
class Answering(Group):
    """How the model is prompted and chooses its answer."""

    panel = "Generation"
    max_new_tokens: MaxNewOpt = 48
    sample: SampleOpt = False
    temperature: TempOpt = 1.0
    top_p: TopPOpt = 1.0
    top_k: GenTopKOpt = 0
    seed: GenSeedOpt = None
    system: SystemOpt = None
    raw: RawOpt = False
    show_template: ShowTemplateOpt = False
    stream: StreamOpt = None
    messages: MessagesOpt = None
    answer_text: AnswerOpt = None
    answer_file: AnswerFileOpt = None
    explain_last: ExplainLastOpt = False
    logprobs: LogprobsOpt = None

    def asked(self, view: str = "raw", exclude_sinks: bool = False,
              occlude: str = "word") -> Asked:
        """The conversation and the given answer, read and checked, and what view (and the
        sinks found by what they are, with exclude_sinks) needs computed."""
        from attncli.models.generate.conversation import read_messages, split_last
        from attncli.models.generate.run import Asked

        given = [name for name, value in (("--answer", self.answer_text),
                                          ("--answer-file", self.answer_file),
                                          ("--explain-last", self.explain_last)) if value]
        if len(given) > 1:
            raise AttnCliError(f"{' and '.join(given)} each give the answer: use one")
        if self.explain_last and self.messages is None:
            raise AttnCliError("--explain-last explains the last turn of --messages: give them")
        messages = None if self.messages is None else read_messages(self.messages)
        answer = self.answer_text
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
        # The value norms serve the value view and the sinks found by what they are.
        return Asked(messages, answer, view == "value" or exclude_sinks, view == "occlusion",
                     reported, view, occlude)

    def sampling(self) -> Sampling:
        """The sampling record (checked there)."""
        from attncli.models.generate.sampling import Sampling

        return Sampling(max_new_tokens=self.max_new_tokens, sample=self.sample,
                        temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                        seed=self.seed)

    def answer(self, model: str, prompt: str, allow_special: bool, keep: Keep | None = None,
               on_token: Callable[[TokenInfo], None] | None = None,
               asked: Asked | None = None) -> GenerationResult:
        """model's answer to prompt, prompted and sampled as this group asks (keep: the weights
        kept, by default all; on_token: takes each answer token as it comes; asked: the
        conversation, given answer and views, by default this group's own)."""
        from attncli.models.generate.run import ALL, generate_model

        return generate_model(model, prompt, self.sampling(), system=self.system, raw=self.raw,
                              keep=ALL if keep is None else keep, on_token=on_token,
                              allow_special=allow_special,
                              asked=self.asked() if asked is None else asked)

    @contextmanager
    def streaming(self) -> Iterator[Callable[[TokenInfo], None] | None]:
        """Inside: what takes each answer token as it comes (stderr's writer with --stream, by
        default when stderr is a terminal; else None); the streamed line is ended after."""
        wanted = self.stream if self.stream is not None else _is_terminal(sys.stderr)
        written: list[str] = []

        def write_token(token: TokenInfo) -> None:
            hush()  # the status line goes: the answer is written where it was
            written.append(token.text)
            _write("\n".join(visible(line) for line in token.text.split("\n")))

        from attncli.core.tokens import visible

        try:
            yield write_token if wanted else None
        finally:
            if written:
                _write("\n")


def _read_answer(path: str) -> str:
    """--answer-file's text, its one final newline left out."""
    from attncli.core.inputs import _decode, _read_path, is_stdin

    name = "standard input" if is_stdin(path) else f"--answer-file {path!r}"
    return _decode(_read_path(path, "--answer-file"), name).removesuffix("\n")


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
    at: AtOpt = None
    kind: ViewKindOpt = "raw"
    layers: LayersOpt = None
    combine: CombineOpt = "mean"
    exclude_sinks: SinksOpt = True
    occlude: OccludeOpt = "word"

    def check(self) -> tuple[int, int] | None:
        """--layers and --combine checked before any work; --layers as (a, b) or None."""
        from attncli.records.generation import COMBINES, OCCLUDE, VIEWS

        if self.occlude not in OCCLUDE:
            raise AttnCliError(f"--occlude must be one of {', '.join(OCCLUDE)} (got "
                               f"{self.occlude!r})")
        if self.combine not in COMBINES:
            raise AttnCliError(f"--combine must be one of {', '.join(COMBINES)} (got "
                               f"{self.combine!r})")
        if self.kind not in VIEWS:
            raise AttnCliError(f"--view must be one of {', '.join(VIEWS)} (got {self.kind!r})")
        return self.span()

    def span(self) -> tuple[int, int] | None:
        """--layers as (a, b), or None for every layer."""
        if self.layers is None:
            return None
        a, sep, b = self.layers.partition(":")
        if not sep or not all(n.strip().isascii() and n.strip().isdigit() for n in (a, b)):
            raise AttnCliError(f"--layers takes A:B, two whole numbers (got {self.layers!r})")
        if int(a) >= int(b):
            raise AttnCliError(f"--layers {self.layers} holds no layer: A:B is half-open, A below "
                               "B (0:1 is layer 0)")
        return int(a), int(b)

    def view(self, result: GenerationResult, head: int | None,
             kind: str | None = None) -> GenerateView:
        """The view of result (kind: --view's unless given): --at resolved against its answer,
        and checked."""
        from attncli.records.generation import GenerateView, answer_index, check_view

        view = GenerateView(at=answer_index(result, self.at), layers=self.span(), head=head,
                            combine=self.combine, exclude_sinks=self.exclude_sinks,
                            kind=self.kind if kind is None else kind)
        check_view(result, view)
        return view
