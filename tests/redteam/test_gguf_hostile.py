"""Hostile GGUF files: one AttnCliError line each, sizes checked before anything is allocated.

Each file is opened in a child process under RLIMIT_AS (1 GiB), so a count that were trusted
would end in a MemoryError or a kill, not in the line this test expects.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import gguf
import pytest

from attncli.errors import AttnCliError
from attncli.models.sources.gguf import describe_gguf, open_gguf
from tests.gguf_fixtures import write_model

Q = gguf.GGMLQuantizationType
T = gguf.GGUFValueType
CHILD = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
from attncli.errors import AttnCliError
from attncli.models.sources.gguf import open_gguf
try:
    source = open_gguf(Path(sys.argv[1]))
    source.tokenizer_json()
    for name in source.shapes():
        source.tensor(name)
except AttnCliError as err:
    print(err)
    sys.exit(2)
"""


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, kind: T, payload: bytes) -> bytes:
    return _string(key) + struct.pack("<I", kind) + payload


def _tensor(name: str, dims: list[int], raw_type: int, offset: int) -> bytes:
    return (_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
            + struct.pack("<IQ", raw_type, offset))


def _file(kvs: list[bytes], tensors: list[bytes], data: bytes = b"", kv_count: int | None = None,
          tensor_count: int | None = None) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors) if tensor_count is None else tensor_count,
                                 len(kvs) if kv_count is None else kv_count)
    body = head + b"".join(kvs) + b"".join(tensors)
    return body + b"\0" * (-len(body) % 32) + data


ARCH = _kv("general.architecture", T.STRING, _string("llama"))
HOSTILE = {
    "not-gguf": (b"PK\x03\x04" + b"\0" * 60, "is not a GGUF file (it starts with b'PK"),
    "tiny": (b"GGUF", "fewer than a GGUF header"),
    "version": (b"GGUF" + struct.pack("<IQQ", 7, 0, 0), "GGUF version 7"),
    "kv-count": (_file([ARCH], [], kv_count=2**62), "4,611,686,018,427,387,904 metadata keys"),
    "array": (_file([ARCH, _kv("big", T.ARRAY, struct.pack("<IQ", T.UINT32, 2**61))], []),
              "big (2,305,843,009,213,693,952 values) needs"),
    "strings": (_file([ARCH, _kv("tokenizer.ggml.tokens", T.ARRAY,
                                 struct.pack("<IQ", T.STRING, 2**40))], []),
                "(1,099,511,627,776 strings) needs"),
    "string": (_file([_kv("general.architecture", T.STRING, struct.pack("<Q", 2**50))], []),
               "general.architecture needs 1,125,899,906,842,624 bytes"),
    "value-type": (_file([_kv("x", 77, b"")], []), "x has an unknown value type 77"),
    "quant-type": (_file([ARCH], [_tensor("token_embd.weight", [32, 2], 99, 0)], b"\0" * 256),
                   "tensor 'token_embd.weight' has type id 99"),
    "offset": (_file([ARCH], [_tensor("token_embd.weight", [32, 2], Q.F32, 2**40)], b"\0" * 256),
               "past the end of the file"),
    "shape": (_file([ARCH], [_tensor("token_embd.weight", [2**31, 2**31], Q.F32, 0)]),
              "more elements than the file could hold"),
    "rank": (_file([ARCH], [_tensor("x", [1] * 9, Q.F32, 0)]), "has 9 dimensions"),
    "blocks": (_file([ARCH], [_tensor("x", [33, 2], Q.Q8_0, 0)], b"\0" * 256),
               "must be whole Q8_0 blocks of 32"),
    "tensor-count": (_file([ARCH], [], tensor_count=2**60), "1,152,921,504,606,846,976 tensors"),
}


def _run_child(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_header_is_one_line(tmp_path: Path, case: str) -> None:
    data, message = HOSTILE[case]
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(data)
    proc = _run_child(path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.count("\n") == 1 and message in proc.stdout, proc.stdout
    assert str(path) in proc.stdout and proc.stderr == ""
    info = describe_gguf(path)
    assert info["readable"] is False and message in info["reason"]


@pytest.mark.parametrize("keep", [0.999, 0.5, 0.01])
def test_truncated_file_is_one_line(tmp_path: Path, keep: float) -> None:
    write_model(tmp_path / "m.gguf", "llama", Q.Q8_0)
    data = (tmp_path / "m.gguf").read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:int(len(data) * keep)])
    proc = _run_child(path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.count("\n") == 1 and "past the end of the file" in proc.stdout


def test_a_type_without_a_dequantizer_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "q81.gguf"
    block = gguf.GGML_QUANT_SIZES[Q.Q8_1][1]
    shape = [_kv(f"llama.{key}", T.UINT32, struct.pack("<I", value)) for key, value in
             (("block_count", 1), ("embedding_length", 32), ("attention.head_count", 1))]
    tensors = [_tensor("output_norm.weight", [32], Q.Q8_1, 0),  # one block, padded to 64
               _tensor("token_embd.weight", [32, 2], Q.F32, 64),  # the width and layer the
               _tensor("blk.0.attn_norm.weight", [32], Q.F32, 320)]  # counts claim
    path.write_bytes(_file([ARCH, *shape], tensors, b"\0" * (448 + block)))
    with pytest.raises(AttnCliError, match="stored as Q8_1, which the gguf package cannot"):
        open_gguf(path).tensor("model.norm.weight")
    assert "Q8_1" in describe_gguf(path)["reason"]


def test_an_unsupported_architecture_is_refused_listing_the_supported(tmp_path: Path) -> None:
    path = tmp_path / "mamba.gguf"
    path.write_bytes(_file([_kv("general.architecture", T.STRING, _string("mamba"))], []))
    with pytest.raises(AttnCliError, match=r"'mamba' model \(.*\); attncli reads GGUF "
                                           "architectures gemma2, gemma3, gpt2, gptneox, llama, "
                                           "olmo2, phi3, qwen2, qwen3, smollm3$"):
        open_gguf(path)


@pytest.mark.parametrize("fused", ["1", "0"])
def test_an_infinite_scale_is_one_line_with_or_without_the_c_code(tmp_path: Path,
                                                                  fused: str) -> None:
    """The C code, or the gguf package's numpy code, gives inf·q and NaN alike; the run refuses
    them in attncli's one line, with no numpy RuntimeWarning printed before it."""
    import os

    path = tmp_path / "m.gguf"
    write_model(path, "gpt2", Q.Q8_0)  # GPT-2's weights are checked finite as they are read
    reader = gguf.GGUFReader(str(path))
    start = next(int(t.data_offset) for t in reader.tensors if t.name == "blk.0.attn_qkv.weight")
    del reader
    with open(path, "r+b") as file:  # the first block: scale +inf, its first q 0 (inf·0: NaN)
        file.seek(start)
        file.write(struct.pack("<Hb", 0x7C00, 0))
    env = {**os.environ, "ATTNCLI_FUSED": fused, "ATTNCLI_NO_CACHE": "1"}
    proc = subprocess.run([sys.executable, "-m", "attncli", "run", "the cat", "--model",
                           str(path), "--layer", "0"], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("attncli: error: tensor h.0.attn.c_attn.weight of the checkpoint holds "
                           "NaN or infinite values\n"), proc.stderr


def test_the_header_checks_load_no_torch(tmp_path: Path) -> None:
    """Opening a GGUF file (its header, counts and offsets checked) imports no torch: the children
    above each start in a third of a second, and `attncli models` describes a GGUF without it."""
    path = tmp_path / "cut.gguf"
    path.write_bytes(HOSTILE["offset"][0])
    code = CHILD.replace("except AttnCliError as err:", "except AttnCliError as err:\n"
                         "    assert 'torch' not in sys.modules, 'torch was imported'")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert (proc.returncode, proc.stderr) == (2, ""), proc.stderr
