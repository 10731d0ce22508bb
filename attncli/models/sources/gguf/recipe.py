"""What the GGUF reader needs from a family, as one record, and the book of them it consults.

The reader knows the format (header, tensors, dequantization, the name-map mechanics, reading
and checking metadata); each family's folder knows its architectures, in a `gguf.py` declaring
one GgufRecipe per GGUF architecture. The reader never imports a family: the family registry
(attncli/models/__init__.py) hands RECIPES where each recipe lives, when attncli.models is
first imported, and a recipe's module is imported the first time a file of its architecture
is read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.models.sources.gguf.header import GgufHeader
    from attncli.models.sources.gguf.names import Layout


@dataclass(frozen=True)
class GgufRecipe:
    """How one GGUF architecture reads back as the Hugging Face checkpoint it was written from."""

    model_type: str  # config.json's model_type, which picks the family that runs it
    hf_class: str  # config.json's architectures[0]
    keys: Mapping[str, str]  # `{arch}.` metadata key suffix -> config.json key
    layout: Layout  # HF tensor names -> GGUF names, and what reading undoes (the stored fixes)
    # Sets what config.json holds and the metadata does not (or refuses the file in one line).
    fill: Callable[[dict[str, Any], GgufHeader], None]


class Recipes(Mapping[str, GgufRecipe]):
    """GGUF general.architecture -> its recipe, imported from where the family registry says."""

    def __init__(self) -> None:
        self._where: Mapping[str, tuple[str, str]] = {}
        self._refused: Mapping[str, str] = {}

    def hand(self, where: Mapping[str, tuple[str, str]], refused: Mapping[str, str]) -> None:
        """Take the registry's architectures -> (module, attribute) of each recipe, and the
        architectures attncli knows and does not read, with why (both read live, not copied)."""
        self._where, self._refused = where, refused

    def __getitem__(self, architecture: str) -> GgufRecipe:
        module, attribute = self._where[architecture]
        recipe: GgufRecipe = getattr(importlib.import_module(module), attribute)
        return recipe

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def of(self, architecture: str, path: object) -> GgufRecipe:
        """The recipe of a supported architecture, or one line listing the supported ones."""
        if architecture not in self._where:
            why = self._refused.get(architecture,
                                    "an architecture attncli has no tensor mapping for")
            raise AttnCliError(f"{path} holds a {architecture!r} model ({why}); attncli reads "
                               f"GGUF architectures {', '.join(sorted(self._where))}")
        return self[architecture]


RECIPES = Recipes()  # filled by attncli/models/__init__.py, before any GGUF file is read
