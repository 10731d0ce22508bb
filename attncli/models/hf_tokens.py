"""Tokenisation with a checkpoint's own tokenizer.json (HF tokenizers): labels and exact bytes.

Each token is turned back into the bytes it stands for (models/vocab_bytes.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from attncli.activity import step
from attncli.core.cutting.boundaries import Cuts
from attncli.core.inputs import utf8_text
from attncli.core.pieces import TokenPiece
from attncli.core.tokens import CHUNK_CHARS, FIRST_CHARS
from attncli.errors import AttnCliError
from attncli.models.stores.paths import is_dir
from attncli.models.vocab_bytes import Labeller, Triple, spec_of

if TYPE_CHECKING:
    from attncli.models.sources.base import WeightSource


@dataclass(frozen=True)
class HFTokens:
    """One tokenisation: pieces, and what the tokenizer's post-processor added."""

    pieces: list[TokenPiece]
    before: list[str]  # special tokens the post-processor put before the text, e.g. ["<s>"]
    after: list[str]  # and after it (an EOS, for a few tokenizers)
    name: str  # how the tokenizer is named in the JSON: "tokenizer.json"


@cache
def load_tokenizer(directory: Path) -> Any:
    """A folder's tokenizer.json as an HF tokenizer (nothing is downloaded)."""
    from attncli.models.sources.safetensors import SafetensorsSource

    return source_tokenizer(SafetensorsSource(directory))


def source_tokenizer(source: WeightSource) -> Any:
    """The source's tokenizer.json (its limits checked) as an HF tokenizer; nothing downloads.
    Made once a source: a GGUF file's is built from its vocabulary, which takes a while, and
    `scan` tokenises document after document."""
    try:
        return _BY_SOURCE[source]
    except (KeyError, TypeError):  # not made yet, or a source that cannot be a key
        pass
    with step("reading the tokenizer"):
        text = source.tokenizer_json()
    if text is None:
        raise AttnCliError(f"{source.path} has no tokenizer.json: attncli tokenises with the "
                           f"model's own tokenizer (fetch it with the checkpoint)")
    shown = source.path / source.label if is_dir(source.path) else source.path
    with step("reading the tokenizer"):
        tokenizer = _parsed(text, f"cannot read {shown}")
    with suppress(TypeError):
        _BY_SOURCE[source] = tokenizer
    return tokenizer


_BY_SOURCE: WeakKeyDictionary[Any, Any] = WeakKeyDictionary()  # each open source's tokenizer


@cache
def labeller(tokenizer: Any) -> Labeller:
    """The tokenizer's Labeller, made once (it reads the whole tokenizer.json back)."""
    return Labeller(tokenizer)


@cache
def _parsed(text: str, what: str) -> Any:
    """The tokenizer, with the padding and truncation its file may set switched off: an
    inspector shows the text's own tokens (no [PAD] rows), and a text longer than the model's
    positions is refused, or taken by the tiled path, as for every model, never cut short."""
    from tokenizers import Tokenizer

    tokenizer = _calling(Tokenizer.from_str, what, text)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _loaded(tokenizer: Path | Any) -> Any:  # a tokenizer, or a folder's
    return load_tokenizer(tokenizer) if isinstance(tokenizer, Path) else tokenizer


@contextmanager
def _rust_quiet() -> Iterator[None]:
    """fd 2 to /dev/null: a Rust panic's own lines go there before pyo3 raises it."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield  # no stderr to quiet
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)  # fd 2 stays on /dev/null once null is closed
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _calling(call: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> Any:
    """call(*args), with what tokenizers raises (a bare Exception, or a Rust panic, which is
    not an Exception) turned into one line starting with what."""
    try:
        with _rust_quiet():
            return call(*args, **kwargs)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise AttnCliError(f"{what}: {reason}") from None


def _added(tokenizer: Any) -> tuple[int, int]:
    """How many tokens the post-processor puts before and after a text (BOS, EOS), learnt from
    a probe whose own tokens cannot be mistaken for them."""
    probe = "x"
    ids = _encode(tokenizer, probe, False, True).ids
    text_ids = _encode(tokenizer, probe, False, False).ids
    n = len(text_ids)
    start = next((k for k in range(len(ids) - n + 1) if ids[k:k + n] == text_ids), 0)
    return start, len(ids) - start - n


def hf_tokenize(directory: Path | Any, text: str, allow_special: bool = False,
                name: str = "tokenizer.json", add_special_tokens: bool = True) -> HFTokens:
    """Tokenise text as the model's tokenizer does, BOS and all, into labelled pieces.

    Special-token spellings in the text are plain text unless allow_special, as for GPT-2.
    Without add_special_tokens the post-processor adds nothing (a chat template's text, which
    writes its own BOS, as apply_chat_template encodes it).
    """
    tokenizer = _loaded(directory)
    encoding = _encode(tokenizer, text, allow_special, add_special_tokens)
    before, after = _added(tokenizer) if add_special_tokens else (0, 0)
    pieces = labeller(tokenizer).pieces(_triples(encoding), 0)
    return HFTokens(pieces=pieces, before=encoding.tokens[:before],
                    after=encoding.tokens[len(encoding.tokens) - after:], name=name)


def _encode(tokenizer: Any, text: str, allow_special: bool, add_special_tokens: bool) -> Any:
    utf8_text(text, "the text")  # the tokenizer's own refusal names no character
    if len(text) > CHECKED_CHARS:
        _check_memory(len(text.encode("utf-8")))
    tokenizer.encode_special_tokens = not allow_special
    try:
        return _calling(tokenizer.encode, "the tokenizer failed on this text", text,
                        add_special_tokens=add_special_tokens)
    finally:
        tokenizer.encode_special_tokens = False


CHECKED_CHARS = 2**20  # a text this short is encoded without weighing it
ENCODE_BYTES = 200  # the tokenizers' memory per text byte, measured 150-195 (prose, CJK, marks)


def _check_memory(size: int) -> None:
    """Refuse a text whose encoding would not fit: the tokenizers' Rust aborts the process when
    an allocation fails, where Python would raise MemoryError."""
    from attncli.machine import check_fits

    check_fits(size * ENCODE_BYTES, f"the tokenizer would hold about {ENCODE_BYTES} bytes for "
               f"each of the text's {size:,}", "give a shorter text")


def _triples(encoding: Any) -> list[Triple]:
    return list(zip(encoding.ids, encoding.tokens, encoding.special_tokens_mask, strict=True))


# The pre-tokenisers of Llama-family tokenizers where a space after a non-space always starts a
# pre-token (as in tiktoken's patterns): GPT-2's (ByteLevel's own), Llama 3's and Qwen2's.
SPLIT_PATTERNS = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
NORMAL_FORMS = ("NFC", "NFKC", "NFD", "NFKD")  # a space never joins the character before it


def streams(tokenizer: Any, allow_special: bool) -> bool:
    """Whether a text may be encoded in parts cut before a space that follows a non-space, with
    the whole text's tokens: what tokenizer.json says of each stage allows it."""
    spec = spec_of(tokenizer)
    steps = [spec.get("normalizer")]
    while steps and isinstance(steps[-1], dict) and steps[-1].get("type") == "Sequence":
        steps = [*steps[:-1], *steps[-1]["normalizers"]]
    if any(step is not None and step.get("type") not in NORMAL_FORMS for step in steps):
        return False
    pre = spec.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [_pre_tokenizer(part) for part in parts]
    if None in kinds or "splits" not in kinds:  # unknown, or the whole text one word
        return False
    model = spec.get("model") or {}
    if model.get("dropout") or spec.get("truncation") or spec.get("padding"):
        return False
    # An added token that may be split out of the text must hold no space and take none.
    return all(not (added.get("lstrip") or added.get("rstrip") or added.get("single_word")
                    or any(ch.isspace() for ch in added["content"]))
               for added in spec.get("added_tokens", [])
               if allow_special or not added.get("special"))


def _pre_tokenizer(part: dict[str, Any]) -> str | None:
    """"splits": it splits before a space that follows a non-space; "keeps": it keeps the
    splits it is given (ByteLevel without its regex); None: neither is known."""
    kind = part.get("type")
    if kind == "ByteLevel":
        return "splits" if part.get("use_regex", True) else "keeps"
    if kind == "Metaspace" and part.get("split", True) and part.get("replacement") == "▁":
        return "splits"
    if kind == "Split" and part.get("pattern", {}).get("Regex") in SPLIT_PATTERNS \
            and part.get("behavior") == "Isolated" and not part.get("invert"):
        return "splits"
    return None


Chunks = Iterator[list[TokenPiece]]


def hf_token_chunks(directory: Path | Any, text: str, allow_special: bool = False,
                    first: int = FIRST_CHARS,
                    size: int = CHUNK_CHARS) -> tuple[list[str], list[str], Chunks]:
    """The tokens hf_tokenize gives, in lists made as the text is encoded part by part (where
    streams allows; else in one list), with the tokens the post-processor adds."""
    tokenizer = _loaded(directory)
    parts = Cuts(text, None).parts(first, size)
    head, second = next(parts, ""), next(parts, None)
    if second is None or not streams(tokenizer, allow_special):
        tokens = hf_tokenize(directory, text, allow_special)
        return tokens.before, tokens.after, iter([tokens.pieces])
    encoding = _triples(_encode(tokenizer, head, allow_special, True))
    count_before, count_after = _added(tokenizer)
    before, after = encoding[:count_before], encoding[len(encoding) - count_after:]
    plain = encoding[count_before:len(encoding) - count_after]
    labels = labeller(tokenizer)

    def chunks() -> Chunks:
        index, current = 0, before + plain
        for part in chain([second], parts):
            yield (done := labels.pieces(current, index))
            index += len(done)
            current = _triples(_encode(tokenizer, part, allow_special, False))
        yield labels.pieces(current + after, index)

    return [t for _, t, _ in before], [t for _, t, _ in after], chunks()


def model_tokens(model: str, text: str, allow_special: bool
                 ) -> tuple[dict[str, Any], Chunks, str, tuple[int, int]]:
    """`tokens --model`: the JSON document (its token list made as it is written), the lists
    of pieces, the tokenizer's name for titles, and bounds on the last index and largest id."""
    from attncli.core.result import TokenInfo
    from attncli.models.family import open_family

    source, family = open_family(model)
    if not family.traits.tokenizer_file and not source.vocabulary_inside:
        raise AttnCliError(f"tokens --model reads a tokenizer.json or a GGUF file's vocabulary;"
                           f" {model} has neither (GPT-2 checkpoints use --encoding gpt2)")
    tokenizer = source_tokenizer(source)
    before, after, chunks = hf_token_chunks(tokenizer, text, allow_special)
    name = source.label
    doc = {"kind": "tokens", "model": model,
           "tokenizer": {"file": name, "bos": before[0] if before else None,
                         "added_before": before, "added_after": after},
           "tokens": (TokenInfo.of(p).to_dict() for chunk in chunks for p in chunk)}
    # Each token holds a byte of the text or more, but a ▁ put before the text holds none.
    last = len(text.encode("utf-8", "surrogatepass")) + len(before) + len(after)
    bounds = last, tokenizer.get_vocab_size(with_added_tokens=True) - 1
    shown = f"{source.path.name}/{name}" if is_dir(source.path) else source.path.name
    return doc, chunks, shown, bounds
