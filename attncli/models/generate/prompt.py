"""A prompt as the model is given it: the chat template's text (or the raw prompt) in tokens,
the ids that stop the answer, and the sink tokens a view may leave out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attncli.core.request import Request
from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.models.family import Model, open_family
from attncli.models.generate.chat import ChatSetup, chat_setup, messages_of, turn_end_text
from attncli.models.generate.conversation import check_tools, content_spans
from attncli.models.generate.engine import positions
from attncli.models.generate.template import render_template
from attncli.models.hf_tokens import hf_tokenize, source_tokenizer
from attncli.models.sources.base import WeightSource
from attncli.records.given import Template, Turn


@dataclass(frozen=True)
class Prompt:
    """The tokens the model reads first, and what the answer stops at."""

    tokens: list[TokenInfo]
    ids: list[int]
    given: str  # the text tokenised: the template's output, or the prompt itself
    template: Template  # the chat template it went through, or none
    stop_ids: frozenset[int]
    sinks: list[int]  # the first token and every token of the template's own text
    turns: tuple[Turn, ...] = ()  # each message's content tokens, where they can be found

    def to_dict(self) -> dict[str, Any]:
        """`generate --show-template --json`: the text given, its tokens and the template's
        origin."""
        return {"kind": "template", "given": self.given,
                "template": self.template.to_dict(),
                "prompt": [t.to_dict() for t in self.tokens]}


def build_prompt(model: Model, model_path: str, prompt: str, system: str | None, raw: bool,
                 allow_special: bool = False,
                 messages: list[dict[str, Any]] | None = None) -> Prompt:
    """The prompt (or the conversation messages) through the checkpoint's chat template (unless
    raw, or it has none) and its tokenizer, as transformers' apply_chat_template(...,
    add_generation_prompt=True) encodes it: the template's text with its special tokens read
    as such, no BOS added on top."""
    source = model.vocabulary()
    # A checkpoint tokenised by tiktoken (GPT-2) has no template; its config still names EOS.
    setup = chat_setup(source if source is not None else open_family(model_path)[0])
    if messages is not None and (raw or setup.template is None or source is None):
        why = "--raw sends text without it" if raw else "this model has none"
        raise AttnCliError(f"--messages is rendered by the model's chat template, and {why}")
    if system is not None and not raw and (setup.template is None or source is None):
        raise AttnCliError("--system goes into the model's chat template, and this model has "
                           "none: put it in the text")
    if raw or setup.template is None or source is None:
        check_text_fits(prompt, model, source)
        tokens = model.tokens(Request(text=prompt, model=model_path,
                                      allow_special=allow_special))
        return Prompt(tokens.tokens, tokens.ids, prompt, Template(False, ""),
                      setup.stop_ids | _eos_of(model, source, setup), [0])
    chat = messages_of(prompt, system) if messages is None else messages
    check_tools(chat, setup.template)
    given = render_template(setup.template, chat, setup.special)
    check_text_fits(given, model, source)
    pieces = hf_tokenize(source_tokenizer(source), given, allow_special=True,
                         name=source.label, add_special_tokens=False).pieces
    infos = [TokenInfo.of(p) for p in pieces]
    ids = [p.id for p in pieces if p.id is not None]
    sinks, turns = _sinks_and_turns(infos, given, chat)
    return Prompt(infos, ids, given, Template(True, setup.origin),
                  setup.stop_ids | _eos_of(model, source, setup) | _turn_end(source, setup),
                  sinks, turns)


NORMALISED = 4  # a normalizer (NFC, NFKC, lowercase) writes a text in no fewer than 1/4 its bytes


def check_text_fits(text: str, model: Model, source: WeightSource | None,
                    what: str = "prompt") -> None:
    """Refuse, before tokenizing it, a text too long for the model's positions whatever its
    tokenizer does with it: no token stands for more bytes than the vocabulary's longest, and
    a normalizer, where the tokenizer has one, shrinks a text at most NORMALISED times."""
    limit = positions(model)
    size = len(text.encode("utf-8", "surrogatepass"))
    if limit is None or size <= limit:  # a token stands for a byte at least: no need to look
        return
    longest, shrink = _longest_token(source)
    if size > limit * longest * shrink:
        raise AttnCliError(f"the {what} is {size:,} bytes, more than the model's {limit:,} "
                           f"positions can hold (its longest token stands for {longest} bytes):"
                           f" give a shorter {what}")


def _longest_token(source: WeightSource | None) -> tuple[int, int]:
    """The bytes the vocabulary's longest token stands for, and how many times its
    normalizer may shrink a text (1 without one)."""
    if source is None:
        from attncli.core.tokens import longest_gpt2_token

        return longest_gpt2_token(), 1
    from attncli.models.vocab_bytes import Labeller, spec_of, token_bytes

    tokenizer = source_tokenizer(source)
    byte_level = Labeller(tokenizer).byte_level
    added = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    longest = max((len(token_bytes(t, byte_level, t in added))
                   for t in tokenizer.get_vocab(with_added_tokens=True)), default=1)
    return longest, 1 if spec_of(tokenizer).get("normalizer") is None else NORMALISED


def _eos_of(model: Model, source: WeightSource | None, setup: ChatSetup) -> frozenset[int]:
    """eos_token (tokenizer_config.json's) as an id, where the vocabulary has it."""
    eos = setup.special.get("eos_token")
    if source is None or eos is None:
        return frozenset()
    found = source_tokenizer(source).token_to_id(eos)
    return frozenset() if found is None else frozenset({int(found)})


def _turn_end(source: WeightSource, setup: ChatSetup) -> frozenset[int]:
    """The token the template writes right after an assistant message, when it is an added
    (control) token: <|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>."""
    tail = turn_end_text(setup)
    if not tail:
        return frozenset()
    tokenizer = source_tokenizer(source)
    ids = tokenizer.encode(tail, add_special_tokens=False).ids
    added = set(tokenizer.get_added_tokens_decoder())
    return frozenset({ids[0]}) if ids and ids[0] in added else frozenset()


def _sinks_and_turns(tokens: list[TokenInfo], given: str,
                     chat: list[dict[str, Any]]) -> tuple[list[int], tuple[Turn, ...]]:
    """The sinks: the first token, and every token lying wholly outside the messages' own text
    (the template's fixed text), found by the tokens' bytes; and each message's tokens. Where
    the bytes do not spell the text (a tokenizer or template that rewrites it): the first
    token only, and no turns."""
    spans = content_spans(given, [str(m["content"]) for m in chat])
    if spans is None:
        return [0], ()
    sinks, offset = [0], 0
    starts: list[int | None] = [None] * len(spans)
    ends = [0] * len(spans)
    for token in tokens:
        width = len(bytes.fromhex(token.bytes_hex)) if token.bytes_hex is not None else 0
        end = offset + width
        inside = [k for k, (s, e) in enumerate(spans) if s < end and offset < e]
        if token.index > 0 and not inside:
            sinks.append(token.index)
        for k in inside:
            starts[k] = token.index if starts[k] is None else starts[k]
            ends[k] = token.index + 1
        offset = end
    if offset != len(given.encode("utf-8")):
        return [0], ()
    turns, previous = [], 0
    for k, (message, start) in enumerate(zip(chat, starts, strict=True)):
        first, previous = (previous, previous) if start is None else (start, ends[k])
        turns.append(Turn(str(message["role"]), first, previous))  # an empty one: no tokens
    return sinks, tuple(turns)


def answer_ids(model: Model, model_path: str, text: str, allow_special: bool) -> list[int]:
    """A given answer's ids, as the model writes them after the prompt: its own tokens, no BOS
    (the checkpoint's tokenizer, or tiktoken's GPT-2)."""
    if not text:
        raise AttnCliError("the answer is empty: give its text with --answer or --answer-file")
    source = model.vocabulary()
    check_text_fits(text, model, source, "answer")  # before its tokenizer holds it all
    if source is None:
        return model.tokens(Request(text=text, model=model_path, allow_special=allow_special)).ids
    pieces = hf_tokenize(source_tokenizer(source), text, allow_special=allow_special,
                         name=source.label, add_special_tokens=False).pieces
    return [p.id for p in pieces if p.id is not None]
