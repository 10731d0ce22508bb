"""Tiny Llama-family checkpoints and tokenizers for the tests, built locally: nothing downloads."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported anywhere
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

import torch  # noqa: E402
from torch import Tensor  # noqa: E402

CORPUS = [
    "Your journey starts with one step.",
    "The cat sat on the mat because it was tired.",
    "猫吃鱼，狗吃肉。我们一起学习注意力机制。",
    "Attention is all you need; rotary position embeddings turn queries and keys.",
    "Grouped-query attention shares one key and value head among several query heads.",
    "東京は日本の首都です。 Emoji: 🙂 and naïve café.",
] * 4
VOCAB = 320  # the tokenizers are trained to at most this many entries; the models hold 384
MODEL_VOCAB = 384

BASE = {"vocab_size": MODEL_VOCAB, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 128, "initializer_range": 0.3, "bos_token_id": 1,
        "eos_token_id": 2, "pad_token_id": 0}
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"model_type": "llama"},
    "qwen2": {"model_type": "qwen2", "num_key_value_heads": 1},
    "qwen3": {"model_type": "qwen3", "head_dim": 12},
    "mistral": {"model_type": "mistral", "sliding_window": 5},
}


def byte_level_tokenizer() -> Any:
    """A byte-level BPE (as Llama 3 and Qwen use) that puts <|begin|> before every text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<pad>", "<|begin|>",
                                                                    "<|end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin|> $A", special_tokens=[("<|begin|>", 1)])
    return tok


def sentencepiece_tokenizer() -> Any:
    """A SentencePiece-style BPE (as Llama 2 and Mistral use): ▁ for spaces, <0xNN> fallback."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    # limit_alphabet alone breaks ties between equally frequent characters in hash order, which
    # changes from process to process: name the 30 kept (ties by character), so that every build
    # gives the same ids and the README's example can be repeated.
    counts = Counter(ch for text in CORPUS for word, _ in tok.pre_tokenizer.pre_tokenize_str(text)
                     for ch in word)
    alphabet = sorted(counts, key=lambda ch: (-counts[ch], ch))[:30]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 256, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=30, initial_alphabet=alphabet)
    tok.train_from_iterator(CORPUS, trainer)
    # The 256 byte tokens are ordinary vocabulary entries right after the specials, as in Llama 2.
    spec = json.loads(tok.to_str())
    learned = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    entries = [*learned[:3], *((f"<0x{b:02X}>", 0) for b in range(256)), *learned[3:]]
    spec["model"]["vocab"] = {name: i for i, (name, _) in enumerate(entries)}
    for added in spec["added_tokens"]:
        added["id"] = spec["model"]["vocab"][added["content"]]
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                       special_tokens=[("<s>", 1)])
    return tok


def save_family(directory: Path, family: str, seed: int, dtype: torch.dtype = torch.float32,
                shard: str | None = None, tokenizer: str = "byte", **config: Any) -> Any:
    """Save a random transformers model of family (with its tokenizer.json); return it, eager."""
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = {**BASE, **FAMILIES[family], **config}
    model_type = settings.pop("model_type")
    cfg = AutoConfig.for_model(model_type, **settings)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():  # norms start at 1: random ones make a wrong norm show
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                param.copy_(torch.randn_like(param) * 0.5 + (1.0 if "norm" in name else 0.0))
            if "down_proj" in name:  # a small MLP output keeps the residual stream near 1
                param.mul_(0.1)
    model = model.to(dtype)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(directory, safe_serialization=True, **kwargs)
    tok = byte_level_tokenizer() if tokenizer == "byte" else sentencepiece_tokenizer()
    tok.save(str(directory / "tokenizer.json"))
    # The reference is transformers reading those files back in float32 (buffers such as RoPE's
    # inv_freq are rebuilt, not rounded to the saved dtype).
    return AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                attn_implementation="eager").eval()


def hf_reference(model: Any, token_ids: list[int]) -> dict[str, list[Tensor]]:
    """transformers' attention weights, hidden states, and each layer's attention input."""
    captured: dict[str, list[Tensor]] = {"attn_input": [], "attn_out": []}
    hooks = []
    for block in model.model.layers:
        hooks += [
            block.input_layernorm.register_forward_hook(
                lambda _m, _i, y: captured["attn_input"].append(y[0])),
            block.self_attn.register_forward_hook(
                lambda _m, _i, y: captured["attn_out"].append(y[0][0])),
        ]
    try:
        with torch.no_grad():
            out = model(torch.tensor([token_ids]), output_attentions=True,
                        output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    captured["attentions"] = [a[0] for a in out.attentions]  # each (heads, T, T)
    captured["hidden_states"] = [h[0] for h in out.hidden_states]  # each (T, d)
    return captured
