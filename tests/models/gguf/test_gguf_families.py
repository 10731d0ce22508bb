"""GGUF files of the issue-24 decoder families, written from tiny random transformers models the
way llama.cpp's converter writes them, read back as the Hugging Face checkpoint they came from:
config.json keys that transformers reads as the same config, every tensor in HF layout, and the
rebuilt tokenizer's ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.sources.gguf import describe_gguf, open_gguf
from tests.gguf_fixtures import write_family
from tests.tolerance import assert_near, near

VOCAB = {"llama": 280, "gpt2": 267}  # sentencepiece_tokens() / byte_tokens() sizes
SMALL = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
         "max_position_embeddings": 128, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
# GGUF arch -> (transformers config class, model class, tokenizer kind, config fields)
FAMILIES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", "llama", {
        "num_hidden_layers": 4, "num_key_value_heads": 2, "head_dim": 16,
        "query_pre_attn_scalar": 16, "sliding_window": 6, "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", "llama", {
        "num_hidden_layers": 7, "num_key_value_heads": 2, "head_dim": 16,
        "query_pre_attn_scalar": 16, "sliding_window": 6,
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", "llama", {
        "num_hidden_layers": 2, "num_key_value_heads": 2, "sliding_window": 6,
        "original_max_position_embeddings": 128,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                            "partial_rotary_factor": 0.75}}),
    "gptneox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", "gpt2", {
        "num_hidden_layers": 2, "use_parallel_residual": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                            "partial_rotary_factor": 0.25}}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", "gpt2", {
        "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", "gpt2", {
        "num_hidden_layers": 4, "num_key_value_heads": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 2e6}}),
}
# config keys outside the maths: ids, dtypes, bookkeeping, init and training settings
NOT_COMPARED = {"architectures", "transformers_version", "dtype", "torch_dtype", "bos_token_id",
                "eos_token_id", "pad_token_id", "initializer_range", "use_cache", "model_type",
                "output_attentions", "output_hidden_states", "return_dict", "tie_word_embeddings",
                "attention_dropout", "hidden_dropout", "classifier_dropout", "resid_pdrop",
                "embd_pdrop", "_name_or_path", "chunk_size_feed_forward", "is_encoder_decoder",
                "id2label", "label2id", "problem_type", "tokenizer_class", "vocab_size"}


def _model(arch: str) -> Any:
    import transformers

    config_cls, model_cls, kind, fields = FAMILIES[arch]
    config = getattr(transformers, config_cls)(vocab_size=VOCAB[kind], **SMALL, **fields)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for param in model.parameters():  # random norms too: Gemma's stored w + 1 is then tested
            param.normal_(0.0, 0.5)
    return model


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    arch = request.param
    model = _model(arch)
    path = tmp_path_factory.mktemp("fam") / f"{arch}.gguf"
    state = write_family(path, arch, model, FAMILIES[arch][2])
    return arch, model, path, state


# transformers 5 loads Pythia's checkpoint name embed_out.weight as lm_head.weight
# (conversion_mapping.py); the GGUF source gives the checkpoint's name
CHECKPOINT_NAMES = {"gptneox": {"lm_head.weight": "embed_out.weight"}}


def _checkpoint(arch: str, state: dict[str, Any]) -> dict[str, Any]:
    renames = CHECKPOINT_NAMES.get(arch, {})
    return {renames.get(k, k): v for k, v in state.items()}


def _close(ours: object, theirs: object) -> bool:
    """Equal, with floats compared at the float32 precision GGUF metadata stores them in."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return ours.keys() == theirs.keys() and all(_close(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list | tuple) and isinstance(theirs, list | tuple):
        return len(ours) == len(theirs) and all(map(_close, ours, theirs))
    if isinstance(ours, float) or isinstance(theirs, float):
        return ours is not None and theirs is not None and \
            near(float(ours), float(theirs), atol=0, rtol=1e-6)  # type: ignore[arg-type]
    return ours == theirs


def test_config_reads_as_the_same_transformers_config(written: tuple) -> None:
    import transformers

    arch, model, path, _ = written
    ours = open_gguf(path).config()
    assert ours["model_type"] == model.config.model_type
    assert ours["architectures"] == [FAMILIES[arch][1]]
    fields = {k: v for k, v in ours.items() if k not in ("model_type", "architectures")}
    rebuilt = getattr(transformers, FAMILIES[arch][0])(**fields).to_dict()
    original = model.config.to_dict()
    keys = set(original) - NOT_COMPARED
    differ = {k: (rebuilt.get(k), original[k]) for k in keys if not _close(rebuilt.get(k),
                                                                            original[k])}
    assert differ == {}
    assert ours["vocab_size"] == model.config.vocab_size
    assert ours["tie_word_embeddings"] is not _has_output(path)


def _has_output(path: Path) -> bool:
    """Whether the converter wrote an output.weight (an untied lm_head)."""
    return any(t.name == "output.weight" for t in gguf.GGUFReader(str(path)).tensors)


def test_every_tensor_is_the_hf_tensor(written: tuple) -> None:
    """Exact for F32, except Gemma's norms: (w + 1) - 1 in float32 is w within 2^-24·|w + 1|;
    this fails if the -1, the NeoX regrouping or SmolLM3's un-permute is removed."""
    arch, model, path, state = written
    source = open_gguf(path)
    tied = "lm_head.weight" in state and not _has_output(path)
    state = _checkpoint(arch, {k: v for k, v in state.items()
                               if not (k == "lm_head.weight" and tied)})
    expected = set(state)
    assert set(source.shapes()) == expected
    for name in expected:
        ours, ref = source.tensor(name), torch.from_numpy(state[name])
        assert tuple(ours.shape) == source.shapes()[name] == tuple(ref.shape), name
        if arch.startswith("gemma") and name.endswith("norm.weight"):
            # Stored as w - 1 in float32: one rounding of a number near |w| + 1.
            assert_near(ours, ref, atol=2.0**-24 * 1.001, rtol=2.0**-24 * 1.001, msg=name)
        else:
            assert torch.equal(ours, ref), name


def test_attention_weights_match_transformers_eager(written: tuple) -> None:
    """The rebuilt weights in the very transformers model give its attention back."""
    import transformers

    arch, model, path, _ = written
    source = open_gguf(path)
    fields = {k: v for k, v in source.config().items() if k not in ("model_type",
                                                                     "architectures")}
    fields.setdefault("pad_token_id", None)  # the tiny files name no padding token
    config = getattr(transformers, FAMILIES[arch][0])(**fields)
    config._attn_implementation = "eager"
    rebuilt = getattr(transformers, FAMILIES[arch][1])(config).eval()
    back = {v: k for k, v in CHECKPOINT_NAMES.get(arch, {}).items()}
    missing, unexpected = rebuilt.load_state_dict(
        {back.get(n, n): source.tensor(n) for n in source.shapes()}, strict=False)
    assert unexpected == [] and set(missing) <= {"lm_head.weight"}
    if config.tie_word_embeddings:
        rebuilt.tie_weights()
    ids = torch.arange(3, 3 + 12).unsqueeze(0)  # (1, T) > the sliding windows of 6
    with torch.no_grad():
        ref = model(ids, output_attentions=True).attentions
        got = rebuilt(ids, output_attentions=True).attentions
    assert len(got) == len(ref) == model.config.num_hidden_layers
    for layer, (a, b) in enumerate(zip(got, ref, strict=True)):  # (1, heads, T, T) each
        assert_near(a, b, msg=(arch, layer))


# No text starts with a space: there HF tokenizers' Metaspace adds no ▁ where sentencepiece and
# llama.cpp add one (the same for the llama architecture; test_gguf_tokenizer checks that case
# against transformers' own GGUF tokenizer).
TEXTS = ["hello world the", "the world", "hello  world   ", "héllo wörld 12", "a\nb", ""]


def test_tokenizer_ids_match_the_vocabularys_reference(written: tuple) -> None:
    from tokenizers import Tokenizer

    arch, _, path, _ = written
    text = open_gguf(path).tokenizer_json()
    assert text is not None
    ours = Tokenizer.from_str(text)
    reference = _reference_tokenizer(path, FAMILIES[arch][2], arch.startswith("gemma"))
    for sample in TEXTS:
        assert ours.encode(sample).ids == reference(sample), (arch, sample)


def _reference_tokenizer(path: Path, kind: str, gemma: bool) -> Any:
    """gpt2: a byte-level BPE over the file's vocabulary and merges with GPT-2's regex.
    llama: the vocabulary as a SentencePiece BPE (HF's Llama/Gemma tokenizer.json shape:
    spaces to ▁, a ▁ prefixed except for Gemma, byte fallback, BOS first), merged greedily by
    score as sentencepiece does."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    fields = gguf.GGUFReader(str(path)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    vocab = {t: i for i, t in enumerate(tokens)}
    if kind == "gpt2":
        merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"].contents()]
        bpe = Tokenizer(models.BPE(vocab, merges))
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        return lambda s: bpe.encode(s).ids
    scores = dict(zip(tokens, fields["tokenizer.ggml.scores"].contents(), strict=True))

    def encode(s: str) -> list[int]:
        if not s:
            return [1]
        pieces = list(("" if gemma else "▁") + s.replace(" ", "▁"))
        while True:  # merge the best-scoring adjacent pair, leftmost first
            pairs = enumerate(zip(pieces, pieces[1:], strict=False))
            best = max(((scores[a + b], -i) for i, (a, b) in pairs if a + b in vocab),
                       default=None)
            if best is None:
                break
            i = -best[1]
            pieces[i:i + 2] = [pieces[i] + pieces[i + 1]]
        ids = []
        for piece in pieces:
            ids += [vocab[piece]] if piece in vocab else \
                [vocab[f"<0x{b:02X}>"] for b in piece.encode()]
        return [1, *ids]

    return encode


def test_an_olmo3_file_is_refused_by_name(tmp_path: Path) -> None:
    model = _model("olmo2")
    path = tmp_path / "olmo3.gguf"
    write_family(path, "olmo2", model, "gpt2")
    reader_fields = dict(gguf.GGUFReader(str(path)).fields)
    assert "olmo2.attention.sliding_window" not in reader_fields
    with_window = tmp_path / "with_window.gguf"
    _rewrite_with(path, with_window, "olmo2", {"attention.sliding_window": 4096})
    with pytest.raises(AttnCliError, match="OLMo 3"):
        open_gguf(with_window)


def _rewrite_with(src: Path, dst: Path, arch: str, extra: dict[str, int]) -> None:
    """A copy of a tiny file with extra `{arch}.*` integer keys."""
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = field.contents()
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, kind, sub_type=sub)
    for key, value in extra.items():
        writer.add_uint32(f"{arch}.{key}", value)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.asarray(tensor.data).reshape(
            [int(d) for d in reversed(tensor.shape)]), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize(("arch", "reason"), [("bert", "WPM"), ("mamba", "no tensor mapping")])
def test_an_unmapped_architecture_is_refused_by_name(tmp_path: Path, arch: str,
                                                     reason: str) -> None:
    path = tmp_path / f"{arch}.gguf"
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(AttnCliError, match=rf"'{arch}' model \(.*{reason}.*gemma2, gemma3, "
                                           r"gpt2, gptneox, llama, olmo2, phi3"):
        open_gguf(path)
    described = describe_gguf(path)
    assert described["readable"] is False and reason in described["reason"]


def _family_or_skip(model_type: str) -> None:
    from attncli.models.family import REGISTRY

    if model_type not in REGISTRY:
        pytest.skip(f"attncli has no {model_type} family registered yet")


def test_open_model_matches_transformers_eager(written: tuple) -> None:
    from attncli.models.family import open_model

    arch, model, path, _ = written
    _family_or_skip(model.config.model_type)
    ids = [1, *range(3, 14)]  # 12 tokens: past the sliding windows of 6
    every = open_model(str(path)).all_layers(ids)  # (layers, heads, T, T)
    with torch.no_grad():
        ref = model(torch.tensor([ids]), output_attentions=True).attentions  # (1, heads, T, T)
    assert every.shape[0] == len(ref)
    for layer, want in enumerate(ref):
        assert_near(every[layer], want[0],
                    msg=lambda m, a=arch, i=layer: f"{a} layer {i}: {m}")


def test_run_on_the_file_matches_transformers(cli: Any, written: tuple) -> None:
    arch, model, path, _ = written
    _family_or_skip(model.config.model_type)
    result = cli("run", "hello world the world", "--model", str(path), "--layer", "-1",
                 "--json")
    assert result.code == 0, result.err
    doc = result.json()
    ids = [t["id"] for t in doc["tokens"]]
    with torch.no_grad():
        ref = model(torch.tensor([ids]), output_attentions=True).attentions[-1][0]
    assert_near(torch.tensor(doc["weights"]), ref)
