"""`attncli models`: what the Hugging Face cache, Ollama's store and LM Studio's folder hold that
--model can read, each from its headers; the expected values come from safetensors' and gguf's own
readers."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import gguf
import pytest
from safetensors import safe_open

from tests.conftest import ROOT, rendered
from tests.gguf_fixtures import write_model
from tests.llama_fixtures import save_family
from tests.models.stores.test_stores_ollama import _pull


def _stored_as(file: Path) -> str:
    """The dtype most 2-D tensors have, read with safetensors' own reader."""
    with safe_open(str(file), framework="pt") as handle:
        kinds = Counter(str(handle.get_slice(k).get_dtype()) for k in handle.keys()
                        if len(handle.get_slice(k).get_shape()) == 2)
    return kinds.most_common(1)[0][0]


def _gguf_row(file: Path) -> dict[str, object]:
    """What gguf's own reader says a file holds."""
    reader = gguf.GGUFReader(file)
    arch = str(reader.fields["general.architecture"].contents())
    kinds = Counter(t.tensor_type.name for t in reader.tensors if len(t.shape) == 2)
    heads = reader.fields[f"{arch}.attention.head_count"].contents()
    kv = reader.fields.get(f"{arch}.attention.head_count_kv")  # gpt2 has none: every head
    return {"architecture": arch, "layers": reader.fields[f"{arch}.block_count"].contents(),
            "heads": heads, "kv_heads": heads if kv is None else kv.contents(),
            "quantization": kinds.most_common(1)[0][0], "size_bytes": file.stat().st_size}


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub cache with a Llama (GQA), a GPT-2, a pickle-only repo and a dataset."""
    root = tmp_path / "hub"
    llama = root / "models--Org--tiny-llama" / "snapshots" / "abc"
    save_family(llama, "llama", seed=1)
    (root / "models--Org--tiny-llama" / "refs").mkdir()
    (root / "models--Org--tiny-llama" / "refs" / "main").write_text("abc")
    shutil.copytree(ROOT / "samples" / "toy-gpt2", root / "models--gpt2" / "snapshots" / "d")
    pickle = root / "models--Org--old" / "snapshots" / "e"
    pickle.mkdir(parents=True)
    (pickle / "config.json").write_text('{"model_type": "gpt2"}')
    (pickle / "pytorch_model.bin").write_bytes(b"PK")
    (root / "datasets--Org--data").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "no-ollama"))  # the user's stay unread
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "no-lmstudio"))
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "no-attncli"))
    return root


def test_models_json_lists_what_attncli_can_read(cli, cache: Path) -> None:
    llama = cache / "models--Org--tiny-llama" / "snapshots" / "abc"
    gpt2 = cache / "models--gpt2" / "snapshots" / "d"
    tmp = cache.parent
    assert cli("models", "--json").json() == {
        "kind": "models", "cache": str(cache),
        "stores": {"huggingface": str(cache), "ollama": str(tmp / "no-ollama"),
                   "lmstudio": [str(tmp / "no-lmstudio")], "attncli": str(tmp / "no-attncli")},
        "models": [
            {"name": "Org/tiny-llama", "source": "huggingface", "format": "safetensors",
             "model": "Org/tiny-llama", "path": str(llama),
             "quantization": _stored_as(llama / "model.safetensors"), "architecture": "llama",
             "layers": 3, "heads": 4, "kv_heads": 2,
             "size_bytes": (llama / "model.safetensors").stat().st_size},
            {"name": "gpt2", "source": "huggingface", "format": "safetensors", "model": "gpt2",
             "path": str(gpt2), "quantization": _stored_as(gpt2 / "model.safetensors"),
             "architecture": "gpt2", "layers": 3, "heads": 4, "kv_heads": 4,
             "size_bytes": (gpt2 / "model.safetensors").stat().st_size},
        ], "unreadable": [
            {"name": "Org/old", "source": "huggingface", "format": None, "model": "Org/old",
             "path": str(cache / "models--Org--old" / "snapshots" / "e"),
             "reason": "no model.safetensors (nor a shard index)"},
        ]}


def test_models_table(cli, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    got = cli("models")
    assert got.code == 0
    rows = [line.split() for line in got.out.splitlines()]
    llama = _stored_as(cache / "models--Org--tiny-llama" / "snapshots" / "abc" /
                       "model.safetensors")
    gpt2 = _stored_as(cache / "models--gpt2" / "snapshots" / "d" / "model.safetensors")
    assert ["Org/tiny-llama", "HF", "cache", "safetensors", llama, "llama", "3", "×", "4",
            "(2", "kv)", "0.2", "MB"] in rows
    assert ["gpt2", "HF", "cache", "safetensors", gpt2, "gpt2", "3", "×", "4", "6.8",
            "MB"] in rows
    assert "1 model attncli cannot read:" in got.out
    assert "  Org/old (HF cache): no model.safetensors (nor a shard index)" in \
        got.out.splitlines()
    assert f"Looked in: Hugging Face cache {cache}" in got.out.replace("\n", " ")


@pytest.fixture()
def stores(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Beside the hub cache: an Ollama store with a GGUF model and a lying manifest, an LM Studio
    folder with a qwen2 GGUF and a truncated one, and a "-GGUF" repo in the hub cache."""
    q8, f16 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F16
    ollama = tmp_path / "ollama"
    write_model(tmp_path / "llama.gguf", "llama", q8)
    blob = _pull(ollama, "tiny", "q8", data=(tmp_path / "llama.gguf").read_bytes())
    (ollama / "manifests" / "registry.ollama.ai" / "library" / "gone").mkdir(parents=True)
    (ollama / "manifests" / "registry.ollama.ai" / "library" / "gone" / "latest").write_text(
        '{"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": '
        '"sha256:' + "0" * 64 + '"}]}')
    lmstudio = tmp_path / "lmstudio"
    qwen = lmstudio / "pub" / "tiny-qwen" / "tiny-qwen-F16.gguf"
    qwen.parent.mkdir(parents=True)
    write_model(qwen, "qwen2", f16)
    (qwen.parent / "cut.gguf").write_bytes(qwen.read_bytes()[:500])
    repo = cache / "models--Org--tiny-GGUF" / "snapshots" / "f"
    repo.mkdir(parents=True)
    hub_file = repo / "tiny-Q8_0.gguf"
    write_model(hub_file, "gpt2", q8)
    (repo / "mmproj-tiny.gguf").write_bytes(b"GGUF")  # a vision projector: not a model
    monkeypatch.setenv("OLLAMA_MODELS", str(ollama))
    monkeypatch.setenv("LMSTUDIO_MODELS", str(lmstudio))
    return {"blob": blob, "qwen": qwen, "hub": hub_file}


def test_every_store_is_listed_from_the_headers(cli, stores: dict[str, Path]) -> None:
    doc = cli("models", "--json").json()
    rows = {row["name"]: row for row in doc["models"]}
    for name, source, model, file in (
            ("tiny:q8", "ollama", "ollama:tiny:q8", stores["blob"]),
            ("pub/tiny-qwen/tiny-qwen-F16.gguf", "lmstudio", "pub/tiny-qwen/tiny-qwen-F16.gguf",
             stores["qwen"]),
            ("Org/tiny-GGUF/tiny-Q8_0.gguf", "huggingface", str(stores["hub"]), stores["hub"])):
        assert rows[name] == {"name": name, "source": source, "format": "gguf", "model": model,
                              "path": str(file), **_gguf_row(file)}
    assert not any("mmproj" in row["name"] for row in doc["models"] + doc["unreadable"])
    why = {row["name"]: row["reason"] for row in doc["unreadable"]}
    assert "truncated" in why["pub/tiny-qwen/cut.gguf"]
    assert "gone:latest" in why and "\n" not in why["gone:latest"]
    assert doc["stores"]["ollama"] == str(stores["blob"].parent.parent)


def test_each_listed_model_name_runs(cli, stores: dict[str, Path]) -> None:
    for row in cli("models", "--json").json()["models"]:
        got = cli("run", "the 12", "--model", row["model"], "--json")
        assert got.code == 0, (row["model"], got.err)
        shown = got.json()["model"]
        assert (shown["layers"], shown["heads"]) == (row["layers"], row["heads"])
        assert shown.get("architecture", "gpt2") == row["architecture"]


def test_a_narrow_terminal_gets_one_model_per_two_lines(cli, stores: dict[str, Path],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    got = cli("models")
    assert got.code == 0
    lines = got.out.splitlines()
    assert all(len(line) <= 50 for line in lines)
    at = lines.index("tiny:q8")
    assert lines[at + 1].split(" · ")[0].strip() == "Ollama"
    assert "Q8_0" in lines[at + 1]


def test_a_listed_name_runs(cli, cache: Path) -> None:
    doc = cli("run", "hello", "--model", "Org/tiny-llama", "--json").json()
    assert doc["model"]["architecture"] == "llama"


def test_an_empty_cache_says_how_to_fetch_one(cli, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("HF_HUB_CACHE", "OLLAMA_MODELS", "LMSTUDIO_MODELS", "ATTNCLI_MODEL_CACHE"):
        monkeypatch.setenv(variable, str(tmp_path / "none"))
    assert "hf download" in cli("models").out
    doc = cli("models", "--json").json()
    assert (doc["cache"], doc["models"], doc["unreadable"]) == (str(tmp_path / "none"), [], [])


def test_a_c1_control_in_a_folder_name_is_escaped_in_the_json(cli, cache: Path) -> None:
    # the CSI U+009B, which orjson wrote raw: a terminal could act on a cache folder's name
    (cache / "models--Org--tiny-llama").rename(cache / "models--Org--na\u009bme")
    got = cli("models", "--json")
    assert got.code == 0
    assert "\u009b" not in got.out and "na\\u009bme" in got.out
    assert got.json()["models"][0]["name"] == "Org/na\u009bme"
    assert "\u009b" not in cli("models").out


def test_many_manifests_naming_a_few_blobs_parse_each_header_once(
        cli, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 manifests took 184 s when each parsed its blob's header again: the calls are
    counted here (bench/models.py times a store of 3,000)."""
    from attncli.models.sources.gguf import describe

    files = [tmp_path / "llama.gguf", tmp_path / "gpt2.gguf"]
    write_model(files[0], "llama", gguf.GGMLQuantizationType.Q8_0)
    write_model(files[1], "gpt2", gguf.GGMLQuantizationType.F16)
    ollama = tmp_path / "many"
    blobs = [_pull(ollama, f"m{k:02d}", data=files[k % 2].read_bytes()) for k in range(40)]
    lmstudio = tmp_path / "lms"
    (lmstudio / "pub" / "m").mkdir(parents=True)
    shutil.copyfile(files[0], lmstudio / "pub" / "m" / "a.gguf")
    (lmstudio / "pub" / "m" / "b.gguf").symlink_to("a.gguf")  # one file, two names
    monkeypatch.setenv("OLLAMA_MODELS", str(ollama))
    monkeypatch.setenv("LMSTUDIO_MODELS", str(lmstudio))
    parsed: Counter[str] = Counter()
    read_header = describe.read_header

    def counting(path: Path) -> object:
        parsed[str(Path(path).resolve())] += 1
        return read_header(path)

    monkeypatch.setattr(describe, "read_header", counting)
    doc = cli("models", "--json").json()
    assert parsed == {str(blobs[0].resolve()): 1, str(blobs[1].resolve()): 1,
                      str((lmstudio / "pub" / "m" / "a.gguf").resolve()): 1}
    rows = {row["name"]: row for row in doc["models"]}
    for k, blob in enumerate(blobs):
        assert rows[f"m{k:02d}:latest"] == {
            "name": f"m{k:02d}:latest", "source": "ollama", "format": "gguf",
            "model": f"ollama:m{k:02d}:latest", "path": str(blob), **_gguf_row(blob)}
    for name in ("a.gguf", "b.gguf"):
        assert {k: rows[f"pub/m/{name}"][k] for k in ("architecture", "size_bytes")} == {
            "architecture": "llama", "size_bytes": files[0].stat().st_size}


def test_every_width_shows_each_size_whole(cli, stores: dict[str, Path]) -> None:
    """At no width is a cell cut: the table needs a divider and a space either side of each
    column after the name (at 80 columns its size column lost "MB"), else two lines a model
    (from 64 columns, where each model's second line fits)."""
    from attncli.render.models import render_models, size_text

    doc = cli("models", "--json").json()
    sizes = [size_text(row["size_bytes"]) for row in doc["models"]]
    for width in range(64, 131):
        lines = rendered(lambda console: render_models(doc), width).splitlines()
        assert all(len(line) <= width for line in lines), width
        shown = [next((line for line in lines if line.rstrip().endswith(size)), None)
                 for size in sizes]
        assert None not in shown, (width, sizes, lines)


def test_an_lmstudio_file_with_an_odd_name_is_shown_escaped_and_runs_by_its_model(
        cli, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """LM Studio's names were escaped before the listing saw them: "model" was the escaped
    text, which no --model finds, and an undecodable byte was shown as \\udcff, not \\xff."""
    lmstudio = tmp_path / "lmstudio"
    folder = Path(os.fsdecode(bytes(lmstudio / "pub") + b"\x1b[31m/mod\xffel"))
    folder.mkdir(parents=True)
    write_model(folder / "tiny.gguf", "llama", gguf.GGMLQuantizationType.Q8_0)
    monkeypatch.setenv("LMSTUDIO_MODELS", str(lmstudio))
    table = cli("models").out
    assert "pub\\x1b[31m/mod\\xffel/tiny.gguf" in table.replace("\n", "")
    assert not any(ord(ch) < 32 for ch in table.replace("\n", "")), repr(table)
    row = next(r for r in cli("models", "--json").json()["models"] if r["source"] == "lmstudio")
    assert row["name"] == row["model"] == "pub\x1b[31m/mod\\xffel/tiny.gguf"  # strict UTF-8
    name = os.fsdecode(b"pub\x1b[31m/mod\xffel/tiny.gguf")  # what a shell passes as --model
    assert cli("run", "the 12", "--model", name, "--json").json()["model"]["layers"] == \
        row["layers"]


def test_a_gguf_whose_metadata_the_family_refuses_is_listed_unreadable(
        cli, stores: dict[str, Path]) -> None:  # noqa: ANN001
    """A GGUF whose header parses but whose config --model refuses (a negative RMSNorm epsilon)
    was listed as readable, then refused when run (rt7): models checks it as --model does."""
    from tests.gguf_rewrite import T, rewrite

    lying = stores["qwen"].with_name("eps.gguf")
    rewrite(stores["qwen"], lying, {"qwen2.attention.layer_norm_rms_epsilon": (T.FLOAT32, -1.0)})
    doc = cli("models", "--json").json()
    why = {row["name"]: row["reason"] for row in doc["unreadable"]}
    ran = cli("run", "the 12", "--model", str(lying))
    assert why["pub/tiny-qwen/eps.gguf"] == ran.err.strip().removeprefix("attncli: error: ")
    assert "qwen2.attention.layer_norm_rms_epsilon" in why["pub/tiny-qwen/eps.gguf"]
    assert "pub/tiny-qwen/tiny-qwen-F16.gguf" in {row["name"] for row in doc["models"]}
