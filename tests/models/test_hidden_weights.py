"""Attention weights kept beside the hidden-state cache's streams: `heads` (scores, rollout,
sinks) after any look at the same text runs no block at all, and equals a fresh pass exactly;
weights too big for a quarter of the cache are not kept; a damaged weights entry is recomputed."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from attncli.models.hidden import passes
from attncli.models.llama import model as llama_model
from tests.conftest import ROOT
from tests.gguf_fixtures import write_model

TOY = str(ROOT / "samples" / "toy-gpt2")
TEXT = "the cat sat on the mat and the cat sat"


@pytest.fixture(scope="module")
def llama_gguf(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("llama") / "tiny.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    return str(path)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Layers whose attention the llama family computes from now on."""
    calls: list[int] = []
    real = llama_model.grouped_attention
    monkeypatch.setattr(llama_model, "grouped_attention",
                        lambda w, s, layer, *a, **k: calls.append(layer) or real(w, s, layer, *a,
                                                                                   **k))
    return calls


def _json(cli, *args: str) -> dict:  # noqa: ANN001
    done = cli(*args, "--json")
    assert done.code == 0, done.err
    return done.json()


HEADS = [("heads",), ("heads", "--measure", "rollout"), ("heads", "--layers", "1:2"),
         ("heads", "--measure", "rollout", "--layers", "1:2"), ("heads", "--sort", "prev")]


@pytest.mark.parametrize("args", HEADS, ids=" ".join)
@pytest.mark.parametrize("before", ["run", "heads"])
def test_heads_after_a_look_runs_no_block_and_equals_a_fresh_pass(
        cli, llama_gguf: str, args: tuple[str, ...], before: str,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = _json(cli, *args, TEXT, "--model", llama_gguf)
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    first = ("run", "--layer", "-1") if before == "run" else ("heads",)
    _json(cli, *first, TEXT, "--model", llama_gguf)
    calls = _counting(monkeypatch)
    passes.STATS.clear()
    again = _json(cli, *args, TEXT, "--model", llama_gguf)
    assert again == fresh
    assert calls == [] and passes.STATS["weights read"] > 0
    assert passes.STATS["computed"] == passes.STATS["weights computed"] == 0


def test_the_toy_gpt2_heads_after_run_equal_a_fresh_pass(
        cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = _json(cli, "heads", TEXT, "--model", TOY)
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    _json(cli, "run", "--layer", "-1", TEXT, "--model", TOY)
    passes.STATS.clear()
    assert _json(cli, "heads", TEXT, "--model", TOY) == fresh
    assert passes.STATS["weights read"] > 0 and passes.STATS["computed"] == 0


def test_norm_needs_the_values_and_runs_the_blocks_again(
        cli, llama_gguf: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = _json(cli, "heads", "--measure", "norm", TEXT, "--model", llama_gguf)
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    _json(cli, "heads", TEXT, "--model", llama_gguf)
    calls = _counting(monkeypatch)
    assert _json(cli, "heads", "--measure", "norm", TEXT, "--model", llama_gguf) == fresh
    assert calls == [0, 1]  # every block's attention (its values), no MLP: streams were kept


def test_a_damaged_weights_entry_is_recomputed(cli, llama_gguf: str,  # noqa: ANN001
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = _json(cli, "heads", TEXT, "--model", llama_gguf)
    folder = Path(passes.cache_folder() or "")
    for entry in folder.glob("*.hidden"):
        data = bytearray(entry.read_bytes())
        data[-1] ^= 0xFF  # the payload's last byte: its checksum no longer holds
        entry.write_bytes(bytes(data))
    calls = _counting(monkeypatch)
    passes.STATS.clear()
    assert _json(cli, "heads", TEXT, "--model", llama_gguf) == fresh
    assert calls == [0, 1] and passes.STATS["weights read"] == 0


def test_weights_past_a_quarter_of_the_cap_are_not_kept(
        cli, llama_gguf: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    from attncli.core.request import Request
    from attncli.models.run import open_checked

    req = Request(text=TEXT, model=llama_gguf)
    model = open_checked(req)
    spec, n = model.spec, len(model.tokens(req).ids)
    streams = (spec.n_layer + 1) * (n * spec.d_model * 4 + 4096)
    weights = spec.n_layer * (spec.num_heads * n * n * 4 + 4096)
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE_MAX", str(max(streams, 4 * weights - 4)))
    passes.STATS.clear()
    _json(cli, "heads", TEXT, "--model", llama_gguf)
    assert passes.STATS["computed"] > 0 and passes.STATS["weights computed"] == 0
    monkeypatch.setenv("ATTNCLI_HIDDEN_CACHE_MAX", str(max(streams + weights, 4 * weights)))
    _json(cli, "heads", TEXT, "--model", llama_gguf)
    assert passes.STATS["weights computed"] == spec.n_layer


@pytest.fixture(scope="module", params=["gemma3", "gptneox", "phi3"])
def family_gguf(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A family with what llama does not have: Gemma 3's sliding windows (6 tokens, shorter
    than TEXT), NeoX's regrouped qkv and partial rotary, Phi-3's window and fused projections."""
    from tests.gguf_fixtures import write_family
    from tests.models.gguf.test_gguf_families import FAMILIES, _model

    arch = request.param
    path = tmp_path_factory.mktemp(arch) / f"{arch}.gguf"
    write_family(path, arch, _model(arch), FAMILIES[arch][2])
    return str(path)


@pytest.mark.slow
def test_every_look_after_a_look_at_a_family_equals_a_fresh_one(
        cli, family_gguf: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    looks = [("run", "--layer", "1"), ("heads",), ("heads", "--measure", "rollout"),
             ("heads", "--layers", "1:2"), ("run", "--layer", "-1"), ("kvcache", "--layer", "0")]
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    fresh = [_json(cli, *look, TEXT, "--model", family_gguf) for look in looks]
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    passes.STATS.clear()
    for order in (looks, looks[::-1]):
        for look in order:
            assert _json(cli, *look, TEXT, "--model", family_gguf) == fresh[looks.index(look)]
    assert passes.STATS["weights read"] > 0
