"""The one interface every weight source offers, whatever its file format."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from torch import Tensor


class WeightSource(Protocol):
    """A checkpoint's config, tensors and tokenizer, whatever the file format."""

    path: Path  # what the user's --model resolved to: a folder or a file
    label: str  # how JSON/tables name where the tokenizer came from, e.g. "tokenizer.json"
    # The vocabulary is part of the weights file itself (GGUF's tokenizer.ggml.*): a family that
    # otherwise assumes one fixed vocabulary (GPT-2's tiktoken) tokenises with the file's.
    vocabulary_inside: bool
    # What config() was read from, as a refusal of one of its values names it: "config.json",
    # or a GGUF file's metadata read as config.json's keys.
    config_name: str

    def config(self) -> dict[str, Any]:
        """config.json's content (Hugging Face keys); {} when the checkpoint has none."""
        ...

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor, by its HF name, no data read."""
        ...

    def dtype_name(self, name: str) -> str:
        """"F32", "F16", "BF16", "Q4_1", ... as stored."""
        ...

    def tensor(self, name: str) -> Tensor:
        """One tensor as float32 in the HF layout, read lazily on demand."""
        ...

    def rows(self, name: str, indices: Sequence[int]) -> Tensor:
        """Only the given rows of a 2-D tensor (an embedding lookup), as float32."""
        ...

    def tokenizer_json(self) -> str | None:
        """tokenizer.json text (HF tokenizers format), or None when the checkpoint has none."""
        ...

    def unchanged(self) -> None:
        """One line (AttnCliError) where a file read since the source opened it was renamed over
        or rewritten; every tensor()/rows() checks it after reading."""
        ...


@contextmanager
def config_named(source: WeightSource) -> Iterator[None]:
    """Inside: a refusal of one of source's config values names what the config was read from
    (the checks name config.json, which a GGUF file does not have: its metadata is read as
    config.json's keys)."""
    try:
        yield
    except AttnCliError as err:
        if source.config_name == "config.json" or "config.json" not in str(err):
            raise
        named = AttnCliError(str(err).replace("config.json", source.config_name, 1))
        named.exit_code = err.exit_code
        raise named from None
