"""Cut points of a text for tiktoken's pre-tokenisers (r50k/gpt2, p50k, cl100k, o200k).

tiktoken splits a text into pre-tokens with a regular expression, then encodes each pre-token
alone with byte-pair merges. A cut gives the whole text's tokens when both halves pre-tokenise
into the whole text's pre-tokens (the patterns never look behind, and look ahead at most one
character past a run of one class) and no merge would have crossed it. Three kinds qualify:

- **a space after a non-space character**: no pre-token holds a non-space character followed
  by a space (a space only starts one, or lies in a run of whitespace);
- **a punctuation mark or symbol after a letter** (not an apostrophe, which o200k joins to the
  letters before it as in "'s", and not a combining mark, which o200k counts among letters): a
  run of letters ends there in every pattern, and a run of marks starts;
- **inside a long run of letters that have no case** (CJK ideographs, kana, Hangul: Unicode's
  Lo and Lm), at least `margin` characters from either end of the run, where the run is
  followed by no letter or mark, and where no vocabulary entry holds the two bytes on either
  side of the cut. Such a run is one pre-token in every pattern and stays one in each half;
  byte-pair encoding merges the lowest-ranked adjacent pair first, and a merge across the cut
  would make a token holding those two bytes, so none ever happens and each half merges as it
  would in the whole. The margin keeps each half longer than any vocabulary entry, so neither
  half is taken whole from the vocabulary.

Characters are classed with Python's Unicode tables, at least as old as tiktoken's: a letter
or a punctuation mark to Python is one to tiktoken; a character Python does not know is never
taken for either. A text with none of these (a run of Latin letters, digits or whitespace with
no space to cut at) stays whole: its pre-token is encoded in one go, as tiktoken would.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import regex

# A space after a non-space (the cut is before the space), or a non-word character other than an
# apostrophe after a letter (checked further: punctuation or symbol after a letter).
_SIMPLE = re.compile(r"(?<=\S) |(?<=[^\W\d_])(?=[^\w\s'])")
_SPACE = re.compile(r"(?<=\S) ")
# Runs of caseless letters, found fast with the regex module's tables (tiktoken's own
# dependency), which may be newer than Python's: what they find is checked with Python's.
_RUN = regex.compile(r"[\p{Lo}\p{Lm}]+")
CASELESS = ("Lo", "Lm")  # letters with no case: o200k's upper and lower classes both hold them


@dataclass(frozen=True)
class Vocabulary:
    """What the third kind of cut needs to know of a vocabulary."""

    pairs: frozenset[bytes]  # every two adjacent bytes inside some entry
    margin: int  # characters on either side of a cut: more bytes than the longest entry holds

    @classmethod
    def of(cls, entries: Iterable[bytes]) -> Vocabulary:
        """The pairs and the margin of these entries (a caseless letter takes 2 bytes or more)."""
        pairs: set[bytes] = set()
        longest = 1
        for entry in entries:
            pairs.update(entry[k:k + 2] for k in range(len(entry) - 1))
            longest = max(longest, len(entry))
        return cls(frozenset(pairs), longest // 2 + 1)


def _caseless(ch: str) -> bool:
    return unicodedata.category(ch) in CASELESS


def _ends_a_run(ch: str) -> bool:
    """Whether ch after a run of caseless letters ends it in every pattern: no letter, no mark,
    and a character Python's tables know."""
    return unicodedata.category(ch)[0] not in "LM" and unicodedata.category(ch) != "Cn"


class Cuts:
    """The safe cut points of one text, found left to right (each search starts where the last
    ended, so a long text is scanned once)."""

    def __init__(self, text: str, vocabulary: Callable[[], Vocabulary] | None) -> None:
        # vocabulary is read only when a run must be cut; None: cut before spaces only (the one
        # kind that also holds for the pre-tokenisers of HF tokenizers that attncli streams).
        self.text, self.vocabulary = text, vocabulary
        self._pattern = _SIMPLE if vocabulary is not None else _SPACE
        self._simple = -1  # the next simple cut found, or len(text) when there is none
        self._run: tuple[int, int] | None = None  # the caseless run last scanned: [start, end)

    def simple(self, pos: int) -> int:
        """The first cut at or after pos of the first two kinds (of the first, with no
        vocabulary), or len(text) when there is none."""
        if self._simple >= pos:
            return self._simple
        text, at = self.text, pos
        while (match := self._pattern.search(text, at)) is not None:
            cut = match.start()
            if text[cut] == " " or (text[cut - 1].isalpha()
                                    and unicodedata.category(text[cut])[0] in "PS"):
                self._simple = cut
                return cut
            at = cut + 1
        self._simple = len(text)
        return self._simple

    def in_runs(self, pos: int, stop: int) -> int:
        """The first cut of the third kind in [pos, stop), or -1."""
        if self.vocabulary is None:
            return -1
        text, vocabulary = self.text, self.vocabulary()
        margin, pairs = vocabulary.margin, vocabulary.pairs
        b = max(pos, margin)
        while b < stop:
            run = _RUN.search(text, b - margin, stop + margin)  # found in C, then checked here
            if run is None:
                return -1
            end = self._end_of_run(run.start())
            b = max(b, run.start() + margin)
            if end < len(text) and not _ends_a_run(text[end]):
                b = end + margin  # no cut in this run
                continue
            while b <= min(end - margin, stop - 1):
                if text[b - 1].encode()[-1:] + text[b].encode()[:1] not in pairs:
                    odd = next((k for k in range(b - margin, b + margin)
                                if not _caseless(text[k])), None)
                    if odd is None:
                        return b
                    b = odd + margin + 1  # a letter only newer tables know: cut further on
                else:
                    b += 1
            b = max(b, end + margin)
        return -1

    def _end_of_run(self, start: int) -> int:
        """Where the run of caseless letters holding text[start] ends (the last one scanned is
        kept: a long run is scanned once)."""
        if self._run is not None and self._run[0] <= start < self._run[1]:
            return self._run[1]
        end = _RUN.match(self.text, start)
        self._run = (start, end.end() if end is not None else start)
        return self._run[1]

    def parts(self, first: int, size: int) -> Iterator[str]:
        """The text in parts of about first, then size, characters, cut where it is safe."""
        text, start, target = self.text, 0, first
        while len(text) - start > target:
            at = start + target
            cut = self.simple(at)
            if cut - at > size:  # far away, or none: look inside runs of caseless letters
                inside = self.in_runs(at, min(cut, at + size))
                cut = inside if inside >= 0 else cut
            if cut >= len(text):
                break
            yield text[start:cut]
            start, target = cut, size
        if start < len(text):
            yield text[start:]
