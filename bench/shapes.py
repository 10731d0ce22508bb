"""Synthetic Llama-shaped GGUF files of any size, written tensor by tensor (never the whole
model in memory): random quantized blocks whose fp16 scales are small and finite, so that
every weight dequantizes to a modest finite number. No quantizer is needed: the raw blocks are
written directly. Used by bench/scale.py and by the memory tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

Q = gguf.GGMLQuantizationType
# Byte offsets of each block's fp16 scales: Q8_0 d|qs; Q4_K d|dmin|scales|qs; Q6_K ...|d.
SCALES = {Q.Q8_0: (0,), Q.Q4_K: (0, 2), Q.Q6_K: (208,)}
# What a quant's value times its scale spreads to, so that weights are about 1/sqrt(cols):
# a Q8_0 quant ~74 around 0, a Q4_K one (6-bit scale times 4-bit quant) ~300, a Q6_K one
# (8-bit scale times 6-bit quant) ~1,100.
SPREAD = {Q.Q8_0: 74, Q.Q4_K: 300, Q.Q6_K: 1100}
# llama.cpp's Q4_K_M: Q6_K for the output, and for attn_v and ffn_down in half the layers
# (the first and last eighths, and every third between: its use_more_bits).
MORE_BITS = ("attn_v", "ffn_down", "output")
CHUNK_ROWS = 1024  # rows of blocks made and written at once


@dataclass(frozen=True)
class LlamaShape:
    """A Llama-family model's sizes (HF names)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int = 128_256

    def matrices(self, layers: int | None = None) -> Iterator[tuple[str, tuple[int, int]]]:
        """Each matrix's GGUF name and (rows, cols), the embedding and output included."""
        d, hd = self.hidden, self.hidden // self.heads
        yield "token_embd.weight", (self.vocab, d)
        for i in range(self.layers if layers is None else layers):
            yield f"blk.{i}.attn_q.weight", (self.heads * hd, d)
            yield f"blk.{i}.attn_k.weight", (self.kv_heads * hd, d)
            yield f"blk.{i}.attn_v.weight", (self.kv_heads * hd, d)
            yield f"blk.{i}.attn_output.weight", (d, self.heads * hd)
            yield f"blk.{i}.ffn_gate.weight", (self.ffn, d)
            yield f"blk.{i}.ffn_up.weight", (self.ffn, d)
            yield f"blk.{i}.ffn_down.weight", (d, self.ffn)
        yield "output.weight", (self.vocab, d)

    def norms(self, layers: int | None = None) -> Iterator[str]:
        """Each RMSNorm's GGUF name (F32, all ones)."""
        for i in range(self.layers if layers is None else layers):
            yield f"blk.{i}.attn_norm.weight"
            yield f"blk.{i}.ffn_norm.weight"
        yield "output_norm.weight"


LLAMA_1B = LlamaShape("1b", 16, 2048, 32, 8, 8192)
LLAMA_3B = LlamaShape("3b", 28, 3072, 24, 8, 8192)
LLAMA_8B = LlamaShape("8b", 32, 4096, 32, 8, 14336)
LLAMA_70B = LlamaShape("70b", 80, 8192, 64, 8, 28672)


def _blocks(rows: int, cols: int, qtype: Q, rng: np.random.Generator,
            scale: float) -> np.ndarray:
    """(rows, row_bytes) random qtype blocks whose fp16 scales are about scale."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)  # (r, n, size)
    for at in SCALES[qtype]:
        half = rng.uniform(0.5, 1.0, blocks.shape[:2]).astype(np.float16) * np.float16(scale)
        blocks[:, :, at:at + 2] = half[..., None].view(np.uint8)  # (r, n, 2)
    return blocks.reshape(rows, -1)


def _tokens(vocab: int) -> tuple[list[str], list[int]]:
    """A byte-level vocabulary of vocab tokens: three specials, the 256 byte characters, then
    filler tokens no text produces."""
    alphabet = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                *range(ord("®"), ord("ÿ") + 1)]
    chars = [chr(b) for b in alphabet] + [chr(256 + k) for k in range(256 - len(alphabet))]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *chars, "Ġt", "he"]
    tokens += [f"<|filler_{i}|>" for i in range(vocab - len(tokens))]
    return tokens, [3, 3, 3, *[1] * (len(tokens) - 3)]


def _more_bits(name: str, layers: int) -> bool:
    """Whether llama.cpp's Q4_K_M stores this tensor as Q6_K."""
    if name == "output.weight":
        return True
    parts = name.split(".")
    if len(parts) < 3 or parts[2] not in MORE_BITS:
        return False
    i = int(parts[1])
    return i < layers // 8 or i >= 7 * layers // 8 or (i - layers // 8) % 3 == 2


def write_llama_shape(path: Path, shape: LlamaShape, qtype: Q, layers: int | None = None,
                      seed: int = 0, mixed: bool = False) -> Path:
    """A GGUF of shape's sizes with layers blocks (None: all of them), its matrices random
    qtype blocks (mixed: Q6_K where llama.cpp's Q4_K_M puts it), written tensor by tensor;
    returns path."""
    layers = shape.layers if layers is None else layers
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_context_length(131_072)
    writer.add_embedding_length(shape.hidden)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(500_000.0)
    writer.add_rope_dimension_count(shape.hidden // shape.heads)
    tokens, types = _tokens(shape.vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(["Ġ t", "h e"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    matrices = list(shape.matrices(layers))
    norms = list(shape.norms(layers))
    kinds = {name: Q.Q6_K if mixed and _more_bits(name, layers) else qtype
             for name, _ in matrices}
    for name, (rows, cols) in matrices:
        block, size = gguf.GGML_QUANT_SIZES[kinds[name]]
        writer.add_tensor_info(name, (rows, cols // block * size), np.dtype(np.uint8),
                               rows * (cols // block * size), raw_dtype=kinds[name])
    for name in norms:
        writer.add_tensor_info(name, (shape.hidden,), np.dtype(np.float32), 4 * shape.hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    assert writer.fout is not None
    out = writer.fout[0]
    for name, (rows, cols) in matrices:
        # Weights of about 1/sqrt(cols), so that each product keeps the stream's size.
        kind = kinds[name]
        block, size = gguf.GGML_QUANT_SIZES[kind]
        scale = 1 / (SPREAD[kind] * np.sqrt(cols))
        writer.write_padding(out, out.tell())
        for start in range(0, rows, CHUNK_ROWS):
            _blocks(min(CHUNK_ROWS, rows - start), cols, kind, rng, scale).tofile(out)
        writer.write_padding(out, rows * (cols // block * size))
        writer.tensors[0].pop(name)
    for _ in norms:
        writer.write_tensor_data(np.ones(shape.hidden, dtype=np.float32))
    writer.close()
    return path
