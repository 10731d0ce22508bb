"""The GGUF weight source against transformers' own GGUF loader reading the same tiny files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.sources.gguf import describe_gguf, open_gguf
from attncli.models.sources.gguf import source as gguf_source
from attncli.models.sources.gguf.names import unpermute
from tests.gguf_fixtures import HEADS, KV_HEADS, LAYERS, D, write_k_llama, write_model
from tests.tolerance import assert_near

Q = gguf.GGMLQuantizationType
ARCHS = ["llama", "qwen2", "qwen3", "gpt2"]
CONFIG_CLASSES = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "qwen3": "Qwen3Config",
                  "gpt2": "GPT2Config"}


def transformers_tensors(path: Path, arch: str, config: dict) -> dict[str, torch.Tensor]:
    """load_gguf_checkpoint's dequantized tensors, by the contract's HF names."""
    import transformers
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
    cls = getattr(transformers, CONFIG_CLASSES[arch])
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cls(**fields))
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    return {k.removeprefix("transformer."): v for k, v in tensors.items()}


@pytest.fixture(scope="module", params=[(a, q) for a in ARCHS for q in (Q.F32, Q.F16, Q.Q8_0)],
                ids=lambda p: f"{p[0]}-{p[1].name}")
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    arch, qtype = request.param
    path = tmp_path_factory.mktemp("gguf") / f"{arch}-{qtype.name}.gguf"
    weights = write_model(path, arch, qtype)
    return arch, qtype, path, weights


def test_every_tensor_matches_transformers(written: tuple) -> None:
    arch, _, path, _ = written
    source = open_gguf(path)
    reference = transformers_tensors(path, arch, source.config())
    ours = {name: source.tensor(name) for name in source.shapes()}
    assert set(ours) == set(reference)
    for name, tensor in ours.items():
        assert tensor.dtype == torch.float32
        assert tuple(tensor.shape) == source.shapes()[name] == tuple(reference[name].shape), name
        assert_near(tensor, reference[name].float())


def test_config_matches_transformers(written: tuple) -> None:
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    arch, _, path, _ = written
    ours = open_gguf(path).config()
    theirs = load_gguf_checkpoint(str(path))["config"]
    shared = set(ours) & set(theirs) - {"architectures"}
    assert {"model_type", "vocab_size", "tie_word_embeddings"} <= shared
    assert {k: ours[k] for k in shared} == {k: theirs[k] for k in shared}
    assert ours["architectures"] == [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                      "qwen3": "Qwen3ForCausalLM",
                                      "gpt2": "GPT2LMHeadModel"}[arch]]


def test_f32_weights_are_the_hf_weights_they_were_written_from(written: tuple) -> None:
    """The un-permute (llama) and the transposes (gpt2) give back the HF layout exactly: this
    fails if either is removed."""
    arch, qtype, path, weights = written
    if qtype != Q.F32:
        pytest.skip("exact only where nothing was quantized")
    source = open_gguf(path)
    for name, w in weights.items():
        assert torch.equal(source.tensor(name), torch.from_numpy(w)), name


def test_unpermute_inverts_llama_cpp_permute() -> None:
    w = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)  # (heads*head_dim, d)
    permuted = w.reshape(2, 2, 2, 3).swapaxes(1, 2).reshape(8, 3)  # 2 heads, as llama.cpp does
    assert not np.array_equal(permuted, w)
    assert np.array_equal(unpermute(permuted, 2), w)


def test_qwen_rows_are_not_permuted(tmp_path: Path) -> None:
    weights = write_model(tmp_path / "q.gguf", "qwen2", Q.F32)
    name = "model.layers.0.self_attn.k_proj.weight"
    assert torch.equal(open_gguf(tmp_path / "q.gguf").tensor(name), torch.from_numpy(weights[name]))


@pytest.mark.parametrize("qtype", [Q.F32, Q.Q8_0, Q.Q4_0])
def test_rows_dequantize_only_the_rows_asked(tmp_path: Path, qtype: Q,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    write_model(tmp_path / "m.gguf", "llama", qtype)
    source = open_gguf(tmp_path / "m.gguf")
    whole = source.tensor("model.embed_tokens.weight")
    seen: list[tuple[int, ...]] = []
    real = gguf_source.dequantize

    def spy(blocks: np.ndarray, kind: Q, **options: Any) -> np.ndarray:
        seen.append(blocks.shape)
        return real(blocks, kind, **options)

    monkeypatch.setattr(gguf_source, "dequantize", spy)
    rows = source.rows("model.embed_tokens.weight", [5, 0, 5, 260])
    assert torch.equal(rows, whole[[5, 0, 5, 260]])
    assert [s[0] for s in seen] == [4]
    with pytest.raises(AttnCliError, match="outside"):
        source.rows("model.embed_tokens.weight", [10**6])


def test_only_the_tensors_asked_for_are_read(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    write_model(tmp_path / "m.gguf", "llama", Q.Q8_0)
    source = open_gguf(tmp_path / "m.gguf")
    calls: list[int] = []
    real = gguf_source.dequantize

    def spy(blocks: np.ndarray, kind: Q, **options: Any) -> np.ndarray:
        calls.append(1)
        return real(blocks, kind, **options)

    monkeypatch.setattr(gguf_source, "dequantize", spy)
    source.config(), source.shapes(), source.tokenizer_json()
    assert calls == []
    source.tensor("model.layers.1.self_attn.q_proj.weight")
    assert calls == [1]


def test_dtype_names_and_tied_embeddings(tmp_path: Path) -> None:
    write_model(tmp_path / "m.gguf", "gpt2", Q.Q8_0)
    source = open_gguf(tmp_path / "m.gguf")
    assert source.dtype_name("h.0.attn.c_attn.weight") == "Q8_0"
    assert source.dtype_name("h.0.ln_1.weight") == "F32"
    assert source.config()["tie_word_embeddings"] is True
    assert "lm_head.weight" not in source.shapes()
    with pytest.raises(AttnCliError, match="has no tensor for lm_head.weight"):
        source.tensor("lm_head.weight")


def test_describe_reads_the_header_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_model(tmp_path / "m.gguf", "llama", Q.Q8_0)
    monkeypatch.setattr(gguf_source, "dequantize", lambda *_: pytest.fail("tensor data read"))
    info = describe_gguf(tmp_path / "m.gguf")
    assert info == {"path": str(tmp_path / "m.gguf"), "format": "gguf", "architecture": "llama",
                    "layers": LAYERS, "heads": HEADS, "kv_heads": KV_HEADS,
                    "quantization": "Q8_0", "size": (tmp_path / "m.gguf").stat().st_size,
                    "readable": True, "reason": None}


def test_describe_says_why_a_file_cannot_be_read(tmp_path: Path) -> None:
    write_model(tmp_path / "m.gguf", "llama", Q.F32, pre="tekken")
    info = describe_gguf(tmp_path / "m.gguf")
    assert info["readable"] is False and "'tekken'" in info["reason"]
    (tmp_path / "x.gguf").write_bytes(b"not a gguf file at all, no")
    info = describe_gguf(tmp_path / "x.gguf")
    assert info["readable"] is False and "is not a GGUF file" in info["reason"]


def test_reading_leaves_no_mapping_of_the_file(tmp_path: Path) -> None:
    """Tensors are read with pread into buffers of their own: once read, nothing of the file is
    mapped into the process (a mapping kept every page read resident, the whole file in the
    end), and rows() reads only the rows asked for, equal to the whole tensor's rows."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", Q.Q8_0)
    source = open_gguf(path)
    whole = source.tensor("model.embed_tokens.weight")
    # exact: rows are read from the same blocks as the whole tensor
    assert_near(source.rows("model.embed_tokens.weight", [5, 1, 5]), whole[[5, 1, 5]], atol=0,
                rtol=0)
    for name in source.shapes():
        source.tensor(name)
    maps = Path("/proc/self/maps")
    if maps.exists():
        assert str(path) not in maps.read_text()


def test_a_file_cut_short_after_its_header_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", Q.Q8_0)
    source = open_gguf(path)
    last = max(source.header.tensors.values(), key=lambda info: info.start)
    with open(path, "r+b") as stream:
        stream.truncate(last.start + 10)
    name = next(hf for hf, gg in source._names.items() if gg == last.name)
    with pytest.raises(AttnCliError, match="shrank to .* bytes since its header was read"):
        source.tensor(name)


def _quantizing(monkeypatch: pytest.MonkeyPatch, qtype: Q) -> None:
    """Make GGUFWriter store every float32 matrix, and every bias, as qtype (the families'
    writer stores F32 only): biases only where qtype quantizes a single row (F16, BF16)."""
    add = gguf.GGUFWriter.add_tensor

    def quantized(self: gguf.GGUFWriter, name: str, data: np.ndarray, *args: Any,
                  raw_dtype: Q | None = None, **kwargs: Any) -> None:
        row = data.ndim == 1 and name.endswith(".bias") and qtype in (Q.F16, Q.BF16)
        if data.dtype == np.float32 and (data.ndim == 2 or row):
            data, raw_dtype = gguf.quants.quantize(data, qtype), qtype
        add(self, name, data, *args, raw_dtype=raw_dtype, **kwargs)

    monkeypatch.setattr(gguf.GGUFWriter, "add_tensor", quantized)


def _neox(path: Path) -> None:
    from tests.gguf_fixtures import write_family
    from tests.models.gguf.test_gguf_families import FAMILIES, _model

    write_family(path, "gptneox", _model("gptneox"), FAMILIES["gptneox"][2])


def _llama_with_biases(path: Path, qtype: Q) -> None:
    rng = np.random.default_rng(3)
    kv = D // HEADS * KV_HEADS
    write_model(path, "llama", qtype, extra={  # stored F32 unless _quantizing says otherwise
        f"blk.{i}.attn_{x}.bias": rng.standard_normal(n).astype(np.float32)
        for i in range(LAYERS) for x, n in (("q", D), ("k", kv), ("v", kv))})


REORDERED = {  # each layout that reorders rows: Q/K's rotary halves, NeoX's qkv, with biases
    "llama-Q4_1": lambda p: write_model(p, "llama", Q.Q4_1),
    "llama-Q5_0-biases": lambda p: _llama_with_biases(p, Q.Q5_0),
    "llama-Q4_K": lambda p: write_k_llama(p, Q.Q4_K),
    "llama-Q6_K": lambda p: write_k_llama(p, Q.Q6_K),
    "neox-F32": _neox,
}
QUANTIZED: dict[str, tuple[Any, Q]] = {"llama-F16-biases": (_llama_with_biases, Q.F16),
                                       "neox-Q8_0": (_neox, Q.Q8_0), "neox-BF16": (_neox, Q.BF16)}


@pytest.mark.parametrize("name", [*REORDERED, *QUANTIZED])
@pytest.mark.parametrize("small", [False, True], ids=["fresh", "recycled"])
def test_rows_reordered_as_bytes_equal_gguf_dequantized_then_reordered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, small: bool) -> None:
    """Every tensor bit for bit as gguf.quants.dequantize gives it, then un-permuted or
    regrouped in float32 (the order before Q/K and qkv rows were reordered as quantized bytes),
    through fresh arrays and through recycled buffers."""
    from gguf.quants import dequantize as gguf_dequantize

    from attncli.models.sources.gguf import buffers
    from attncli.models.sources.gguf.names import interleave_heads

    path = tmp_path / "m.gguf"
    if name in QUANTIZED:
        write, qtype = QUANTIZED[name]
        with monkeypatch.context() as patch:
            _quantizing(patch, qtype)
            if write is _llama_with_biases:
                _llama_with_biases(path, qtype)
            else:
                _neox(path)
    else:
        REORDERED[name](path)
    monkeypatch.setattr(buffers, "SMALL", 0 if small else 1 << 62)
    source = open_gguf(path)
    config = source.config()
    heads = {"q": config["num_attention_heads"], "qkv_heads": config["num_attention_heads"],
             "k": config.get("num_key_value_heads")}
    stored = {t.name: t for t in gguf.GGUFReader(path).tensors}
    undone = set()
    for hf, gg in source._names.items():
        info = stored[gg]
        shape = tuple(int(n) for n in reversed(info.shape.tolist()))  # (rows, cols) as stored
        want = gguf_dequantize(np.asarray(info.data), info.tensor_type).reshape(shape)
        undo = source._undo(hf)
        if undo == "qkv_heads":
            want = interleave_heads(want, int(heads[undo]))
        elif undo in ("q", "k"):
            want = unpermute(want, int(heads[undo]))
        elif undo:
            continue  # transposed and norm shifts: not reordered as bytes
        undone |= {(undo, info.tensor_type.name, len(shape))} if undo else set()
        got = source.tensor(hf).numpy()
        assert got.shape == want.shape, hf
        assert np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32)), hf
    assert {u for u, _, _ in undone} == ({"qkv_heads"} if "neox" in name else {"q", "k"})
    if "biases" in name or "neox" in name:
        assert any(dims == 1 for _, _, dims in undone)  # a bias (one row) reordered too
