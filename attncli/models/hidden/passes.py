"""Passes that reuse the hidden-state cache, whatever the family: `run`, `heads`, `browse`,
`--predict` and `kvcache --model` look at one model and one text through a CachedPass, which
starts each pass from the deepest residual stream an earlier look kept and keeps the ones it
computes."""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attncli.activity import counted
from attncli.core.attention import Attention
from attncli.core.request import Request
from attncli.errors import AttnCliError
from attncli.models.family import (
    FusedResumable,
    Known,
    LayerAttention,
    LayerTrace,
    Model,
    Resumable,
)
from attncli.models.hidden.store import HiddenCache, cache_cap, cache_folder
from attncli.models.sources.identity import FileChanged
from attncli.version import __version__

FORMAT = 1  # the key's own version: bump it when what a stream means changes
# Streams read from the cache and computed by passes in this process: how tests see a look
# served from the cache without timing it.
STATS: Counter[str] = Counter()
BESIDE = ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json")


def model_identity(model: str) -> list[list[Any]]:
    """--model's files as (path, size, mtime_ns, ctime_ns, inode, device): every regular file of
    a folder, or the file and the JSON files beside it. Any rewrite, copy or touch changes it."""
    from attncli.models.stores.locate import is_dir, resolve_path

    path = resolve_path(model)
    if is_dir(path):
        files = sorted(p for p in path.iterdir() if not p.name.startswith("."))
    else:
        files = [path, *(path.parent / name for name in BESIDE)]
    out = []
    for file in files:
        try:
            info = os.stat(file)
        except OSError:
            continue
        if file.is_file():
            out.append([str(Path(file).resolve()), info.st_size, info.st_mtime_ns,
                        info.st_ctime_ns, info.st_ino, info.st_dev])
    return out


def ids_digest(ids: list[int]) -> str:
    """The token ids' sha256 (as little-endian int64): the text as the model reads it."""
    return hashlib.sha256(torch.tensor(ids, dtype=torch.int64).numpy().astype("<i8")
                          .tobytes()).hexdigest()


def hidden_key(req: Request, model: Model, ids: list[int]) -> dict[str, Any]:
    """Everything a stream's numbers depend on: the model's files, what configures it, the
    token ids, attncli's and torch's versions, and torch's thread count (sums split by thread
    may round differently)."""
    spec = model.spec
    return {"format": FORMAT, "attncli": __version__, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "byteorder": sys.byteorder,
            "files": model_identity(req.model or ""), "architecture": spec.architecture,
            "heads": req.heads, "device": req.device.value, "n_layer": spec.n_layer,
            "d_model": spec.d_model, "tokens": len(ids), "ids": ids_digest(ids)}


class CachedPass:
    """One model and one text's passes, served from the cache where an earlier look kept the
    streams, and keeping the streams computed (cache None: plain passes). Where every layer's
    attention weights fit beside them (weights not None), each block's weights are kept too,
    so that a later `heads`, rollout or sinks look runs no block at all."""

    def __init__(self, model: Model, ids: list[int], cache: HiddenCache | None,
                 fused: bool = False, weights: HiddenCache | None = None) -> None:
        resumable = isinstance(model, FusedResumable if fused else Resumable)
        self.model, self.ids = model, ids
        self.cache = cache if resumable else None
        self.weights = weights if self.cache is not None and not fused else None
        self.read: set[int] = set()  # layers whose stream came from the cache
        self.missing: set[int] = set()  # layers whose stream the cache does not hold whole
        self.stored: set[int] = set()
        self.weights_stored: set[int] = set()

    def _load(self, layer: int) -> Tensor | None:
        if self.cache is None or layer in self.missing:
            return None
        stream = self.cache.load(layer)  # not held here: a long pass keeps one at a time
        (self.missing if stream is None else self.read).add(layer)
        if stream is not None:
            STATS["read"] += 1
        return stream

    def _keep(self, layer: int, stream: Tensor) -> None:
        if self.cache is None or layer in self.stored or layer in self.read:
            return
        self.model.unchanged()  # nothing is kept of a file that changed while it was read
        self.stored.add(layer)
        STATS["computed"] += 1
        self.cache.store(layer, stream)

    def _keep_weights(self, layer: int, weights: Tensor) -> None:
        if self.weights is None or layer in self.weights_stored:
            return
        if list(weights.shape) != self.weights.shape:  # a family's weights of another shape
            self.weights = None
            return
        self.model.unchanged()
        self.weights_stored.add(layer)
        STATS["weights computed"] += 1
        self.weights.store(layer, weights)  # (heads, T, T)

    @contextmanager
    def _unkept_if_changed(self) -> Iterator[None]:
        """Where a model file changes during the pass, what the pass kept is removed too."""
        try:
            yield
        except FileChanged:
            for cache in (self.cache, self.weights):
                if cache is not None:
                    cache.forget()
            raise

    def _known(self, first: int, stream: Tensor) -> Known:
        return Known(first, stream, self._load)

    def _deepest(self, layer: int) -> Known | None:
        """The deepest stream kept at or before layer, as where a pass starts."""
        for start in range(layer, -1, -1):
            stream = self._load(start)
            if stream is not None:
                return self._known(start, stream)
        return None

    def attention(self, layer: int) -> LayerAttention:
        """Layer's attention with every stage, from the deepest stream kept at or before it;
        the blocks run before it keep their weights where the cache keeps weights."""
        layer = self.model.spec.layer_index(layer)
        if self.cache is None or not isinstance(self.model, Resumable):
            return self.model.attention(self.ids, layer)
        with self._unkept_if_changed():
            return self._attention(layer)

    def _attention(self, layer: int) -> LayerAttention:
        assert isinstance(self.model, Resumable)
        known = self._deepest(layer)
        first = 0 if known is None else known.first
        if self.weights is not None and first < layer:  # blocks first..layer-1 run whole
            for block in self._traced(layer - 1, known):
                known = self._known(block.layer + 1, block.output)
            first = layer
        shown, streams = self.model.attention_from(self.ids, layer, known)
        for offset, stream in enumerate(streams):
            self._keep(first + offset, stream)
        self._keep_weights(layer, shown.output.weights)
        return shown

    def layer_input(self, layer: int) -> tuple[Tensor, Attention]:
        """The tiled path's input of layer (T, d_model) and its module, from the deepest stream
        the fused path kept (a pass made with fused=True: its sums differ from the naive's)."""
        if self.cache is None or not isinstance(self.model, FusedResumable):
            return self.model.layer_input(self.ids, layer)
        with self._unkept_if_changed():
            return self.model.fused_input_from(self.ids, layer, self._deepest(layer), self._keep)

    def kept(self, layer: int) -> tuple[Tensor, Tensor] | None:
        """Block layer's attention weights (heads, T, T) and the stream entering it (T, d_model),
        when an earlier look kept both: what heads, rollout and sinks read of a block."""
        if self.weights is None:
            return None
        weights = self.weights.load(layer)
        stream = None if weights is None else self._load(layer)
        if weights is None or stream is None:
            return None
        STATS["weights read"] += 1
        return weights, stream

    def trace(self, last_layer: int, first: int = 0) -> Iterator[LayerTrace]:
        """Blocks first..last_layer whole; a block whose output was kept runs its attention only.
        A pass starts from the stream kept entering first, else from the deepest before it."""
        if self.cache is None or not isinstance(self.model, Resumable):
            for block in self.model.trace(self.ids, last_layer):
                if block.layer >= first:
                    yield block
            return
        for block in self._traced(last_layer, self._deepest(first)):
            if block.layer >= first:
                yield block

    def _traced(self, last_layer: int, known: Known | None) -> Iterator[LayerTrace]:
        assert isinstance(self.model, Resumable)
        with self._unkept_if_changed():
            for block in self.model.trace_from(self.ids, last_layer, known):
                counted("layers", block.layer + 1, last_layer + 1)
                self._keep(block.layer, block.residual)
                self._keep(block.layer + 1, block.output)
                self._keep_weights(block.layer, block.weights)
                yield block


def cached_pass(req: Request, model: Model, ids: list[int], fused: bool = False) -> CachedPass:
    """The request's passes on model over ids (fused: the tiled path's layer inputs), through
    the cache unless it is off, the family cannot start from a stream, or every layer's stream
    would not fit in the cache's size. Every layer's attention weights are kept beside the
    streams where they take at most a quarter of the cache's size."""
    folder = cache_folder()
    spec = model.spec
    # Bytes every layer's stream takes, each file's header (the key, ~1 KB) counted as 4 KiB.
    whole = (spec.n_layer + 1) * (len(ids) * spec.d_model * 4 + 4096)
    weights_whole = spec.n_layer * (spec.num_heads * len(ids) ** 2 * 4 + 4096)
    cap = cache_cap() if folder is not None else 0
    if folder is None or not ids or whole > cap:
        return CachedPass(model, ids, None)
    try:
        key = {**hidden_key(req, model, ids), "pass": "fused" if fused else "naive"}
    except (OSError, AttnCliError):  # the checkpoint moved since it was read: no key, no cache
        return CachedPass(model, ids, None)
    model.unchanged()  # the files the key names are the ones read
    keep_weights = not fused and weights_whole <= cap // 4 and whole + weights_whole <= cap
    cache = HiddenCache(folder, cap, key, len(ids), spec.d_model,
                        reserve=whole + (weights_whole if keep_weights else 0))
    weights = (HiddenCache(folder, cap, {**key, "kept": "attention weights"}, len(ids), len(ids),
                           reserve=0, lead=spec.num_heads) if keep_weights else None)
    return CachedPass(model, ids, cache, fused, weights)
