"""The probe `heads --probe` runs instead of a text: seeded random tokens, repeated twice.

On a random sequence a head can only find the next token by looking back at what followed
its earlier copy, so the second half shows induction heads plainly (TransformerLens's
detect_head is run on such sequences). The tokens are drawn from the model's ordinary
vocabulary (no special or added tokens) with torch.Generator seeded by --probe-seed, and the
model's BOS is put first when its tokenizer has one, as TransformerLens's to_tokens does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import torch

from attncli.core.pieces import TokenPiece
from attncli.core.request import Request
from attncli.core.result import TokenInfo
from attncli.core.sizes import SEED_MAX, SEED_MIN
from attncli.core.tokens import get_encoding, labels_for
from attncli.errors import AttnCliError
from attncli.models.family import Model, Tokens
from attncli.models.hf_tokens import source_tokenizer
from attncli.models.vocab_bytes import token_bytes
from attncli.records.heads import Probe as ProbeDoc

PROBE_KINDS = ("induction", "previous", "duplicate")
SCORE_OF = {"induction": "induction", "previous": "previous_token",
            "duplicate": "duplicate_token"}
MAX_PROBE = 4096  # --probe-length: at most this many tokens, repeated (8,193 with a BOS)


@dataclass(frozen=True)
class Probe:
    """What `heads --probe` ran on, as the JSON "probe" object records it."""

    kind: str  # induction, previous or duplicate
    length: int  # random tokens before they repeat
    seed: int
    bos: bool  # the model's BOS token put first
    ids: list[int]  # every token id, BOS included

    def to_dict(self) -> ProbeDoc:
        """The JSON "probe" object."""
        return {"kind": self.kind, "length": self.length, "seed": self.seed, "bos": self.bos,
                "ids": self.ids}


def check_probe(kind: str, length: int, seed: int = 0) -> None:
    """A probe kind attncli knows, a length within 1..MAX_PROBE and a seed torch takes."""
    if kind not in PROBE_KINDS:
        raise AttnCliError(f"unknown probe {kind!r} (choose from {', '.join(PROBE_KINDS)})")
    if not 1 <= length <= MAX_PROBE:
        raise AttnCliError(f"--probe-length must be 1 to {MAX_PROBE:,} (got {length:,}): the "
                           "probe is that many random tokens, repeated twice")
    if not SEED_MIN <= seed <= SEED_MAX:
        raise AttnCliError(f"--probe-seed {seed} is out of range (use {SEED_MIN}..{SEED_MAX})")


class _Vocabulary:
    """The model's tokenizer as a probe needs it: its ordinary ids, its BOS, token bytes."""

    def __init__(self, model: Model, sample: Tokens) -> None:
        self.tiktoken = None if sample.encoding is None else get_encoding(sample.encoding)
        if self.tiktoken is not None:
            specials = {self.tiktoken.encode_single_token(s)
                        for s in self.tiktoken.special_tokens_set}
            self.ordinary = [i for i in range(self.tiktoken.n_vocab) if i not in specials]
            # GPT-2's <|endoftext|> is its BOS as well
            self.bos: int | None = self.tiktoken.eot_token
            return
        self.hf = source_tokenizer(_source_of(model))
        added = self.hf.get_added_tokens_decoder()
        self.ordinary = [i for i in range(self.hf.get_vocab_size(with_added_tokens=True))
                         if i not in added]
        spec = json.loads(self.hf.to_str())
        self.byte_level = "ByteLevel" in json.dumps(spec.get("decoder"))
        self.specials = {k for k, t in added.items() if t.special}
        before = (sample.tokenizer or {}).get("bos")
        bos: int | None = self.hf.token_to_id(before) if isinstance(before, str) else None
        if bos is None:  # no BOS added to a text: the one the model's config names, if any
            named = _source_of(model).config().get("bos_token_id")
            bos = named if isinstance(named, int) and named in added else None
        self.bos = bos

    def data(self, token_id: int) -> bytes:
        """The exact bytes token_id stands for."""
        if self.tiktoken is not None:
            return self.tiktoken.decode_single_token_bytes(token_id)
        token = self.hf.id_to_token(token_id) or ""
        return token_bytes(token, self.byte_level, token_id in self.specials)


def _source_of(model: Model) -> Any:
    """Where a model that tokenises with its own vocabulary keeps it (its weight source)."""
    source = model.vocabulary()
    if source is None:
        raise AttnCliError("--probe: this checkpoint's tokenizer could not be found")
    return source


def _longest(model: Model, bos: bool) -> int:
    """The longest probe the model's positions take: (positions - BOS) // 2, at least 0."""
    low, high = 0, MAX_PROBE  # the largest n with 2·n (+ BOS) tokens accepted
    while low < high:
        mid = (low + high + 1) // 2
        try:
            model.check_tokens([0] * (2 * mid + int(bos)))
            low = mid
        except AttnCliError:
            high = mid - 1
    return low


def probe_tokens(model: Model, req: Request, kind: str, length: int, seed: int,
                 option: str = "--probe-length") -> tuple[Tokens, Probe]:
    """length ordinary tokens drawn with seed, then the same again, after the BOS if any;
    option: the command's option that gave length (ablate's is --repeat), for messages."""
    check_probe(kind, length, seed)
    sample = model.tokens(Request(text="x", model=req.model, heads=req.heads))
    vocab = _Vocabulary(model, sample)
    if not vocab.ordinary:
        raise AttnCliError("--probe: this tokenizer has no ordinary tokens to draw")
    gen = torch.Generator().manual_seed(seed)
    picks = torch.randint(len(vocab.ordinary), (length,), generator=gen).tolist()  # (length,)
    drawn = [vocab.ordinary[k] for k in picks]
    start = [] if vocab.bos is None else [vocab.bos]
    try:
        model.check_tokens(start)  # a BOS past a small model's embedding rows is left out
    except AttnCliError:
        start = []
    ids, bos = start + drawn + drawn, bool(start)
    try:
        model.check_tokens(ids)
    except AttnCliError as error:  # the text it names is the probe's: its length is the fix
        fix = f"use a {option} of at most {_longest(model, bos):,}"
        raise AttnCliError(f"{option} {length:,}: {error}".replace(
            "shorten the text", fix)) from None
    data = [vocab.data(i) for i in ids]
    pieces = [TokenPiece(k, i, label, chunk)
              for k, (i, label, chunk) in enumerate(zip(ids, labels_for(data), data, strict=True))]
    tokens = Tokens([TokenInfo.of(p) for p in pieces], ids, sample.encoding, sample.tokenizer)
    return tokens, Probe(kind, length, seed, bos, ids)
