"""`attncli kvcache --model … --keep` (StreamingLLM): the masked pass against transformers, both
as one forward under a 4-D mask built here from the policy's definition and as a token-by-token
decode whose cache physically drops the evicted keys; perplexity and top-1 from a formula; the
CLI's refusals, JSON and Chinese text; the real SmolLM2 when present."""

from __future__ import annotations

import json
import math
from pathlib import Path
from string import Formatter
from typing import Any

import pytest
import torch
from torch import Tensor

from attncli.lessons.streaming import evicted_logits
from attncli.models.family import open_model
from attncli.records.streaming import Policy
from attncli.render.lessons.streaming_text import STRINGS as STREAMING_STRINGS
from tests.conftest import ROOT
from tests.gguf_fixtures import smollm2
from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import save_family
from tests.tolerance import assert_near

TEXT = ("The cat sat on the mat because it was tired. Your journey starts with one step. "
        "Attention is all you need; rotary position embeddings turn queries and keys.")
POLICIES = [(0, 4), (2, 4), (1, 7), (3, 1)]  # (sinks, window)
NUM_IDS = 24  # random ids for the GPT-2 checkpoint (its 40 positions hold them)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """name → (folder, the transformers model that wrote it, eager): a Llama with GQA, a GPT-2."""
    root = tmp_path_factory.mktemp("streaming")
    llama = save_family(root / "llama", "llama", seed=71)
    gpt2 = save_hf_gpt2(root / "gpt2", seed=72, lm_head=True, vocab_size=96, n_positions=40,
                        n_embd=32, n_layer=3, n_head=4)
    return {"llama": (root / "llama", llama), "gpt2": (root / "gpt2", gpt2)}


def _kept(t: int, sinks: int, window: int) -> list[int]:
    """The policy's definition: the keys {0..S-1} ∪ {t-W+1..t} that query t's cache holds."""
    return [j for j in range(t + 1) if j < sinks or j >= t - window + 1]


def _additive_mask(num_tokens: int, sinks: int, window: int) -> Tensor:
    """(1, 1, T, T): 0 where query t sees key j, the float minimum elsewhere."""
    mask = torch.full((num_tokens, num_tokens), torch.finfo(torch.float32).min)  # (T, T)
    for t in range(num_tokens):
        mask[t, _kept(t, sinks, window)] = 0.0
    return mask[None, None]  # (1, 1, T, T)


@torch.no_grad()
def _masked_forward(model: Any, ids: list[int], sinks: int, window: int) -> Tensor:
    """transformers' logits (T, vocab) of one forward under the evicted cache's 4-D mask."""
    mask = _additive_mask(len(ids), sinks, window)  # (1, 1, T, T)
    out = model(torch.tensor([ids]), attention_mask=mask, position_ids=torch.arange(len(ids))[None])
    return out.logits[0]  # (T, vocab)


@torch.no_grad()
def _evicted_decode(model: Any, ids: list[int], sinks: int, window: int) -> Tensor:
    """transformers' logits (T, vocab), one token at a time, the cache's evicted entries dropped
    after every step; each key keeps the position its token had in the text."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    held: list[int] = []  # the text positions of the cached entries, in cache order
    rows = []
    for t, token in enumerate(ids):
        mask = torch.zeros(1, 1, 1, len(held) + 1)  # (1, 1, 1, cached + 1): every entry visible
        out = model(torch.tensor([[token]]), attention_mask=mask, position_ids=torch.tensor([[t]]),
                    cache=cache, use_cache=True)
        rows.append(out.logits[0, -1])  # (vocab,)
        held.append(t)
        keep = [k for k, p in enumerate(held) if p in set(_kept(t + 1, sinks, window))]
        index = torch.tensor(keep)
        for layer in cache.layers:
            layer.keys = layer.keys.index_select(2, index)  # (1, kv_heads, kept, head_dim)
            layer.values = layer.values.index_select(2, index)  # (1, kv_heads, kept, head_dim)
        held = [held[k] for k in keep]
        assert len(held) <= sinks + window  # the cache really is bounded
    return torch.stack(rows)  # (T, vocab)


def _attncli_logits(folder: Path, ids: list[int], sinks: int, window: int) -> Tensor:
    policy = Policy("sinks+window" if sinks else "window", sinks, window)
    return evicted_logits(open_model(str(folder)), ids, policy)  # (T, vocab)


def _text_ids(folder: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids


def _case_ids(name: str, folder: Path) -> list[int]:
    if name == "llama":
        return _text_ids(folder, TEXT)
    gen = torch.Generator().manual_seed(5)
    return torch.randint(0, 96, (NUM_IDS,), generator=gen).tolist()


@pytest.mark.parametrize("name", ["llama", "gpt2"])
@pytest.mark.parametrize(("sinks", "window"), POLICIES)
def test_the_masked_pass_is_transformers_under_the_policys_4d_mask(
        checkpoints: dict[str, tuple[Path, Any]], name: str, sinks: int, window: int) -> None:
    folder, model = checkpoints[name]
    ids = _case_ids(name, folder)
    expected = _masked_forward(model, ids, sinks, window)  # (T, vocab)
    with torch.no_grad():
        full = model(torch.tensor([ids])).logits[0]  # (T, vocab)
    assert float((expected - full).abs().max()) > 1e-2  # the eviction changes the logits
    got = _attncli_logits(folder, ids, sinks, window)
    assert got.shape == expected.shape
    assert_near(got, expected)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
@pytest.mark.parametrize(("sinks", "window"), [(0, 4), (2, 3)])
def test_the_masked_pass_is_a_decode_whose_cache_drops_the_evicted_keys(
        checkpoints: dict[str, tuple[Path, Any]], name: str, sinks: int, window: int) -> None:
    folder, model = checkpoints[name]
    ids = _case_ids(name, folder)[:14]  # a few steps past the window
    expected = _evicted_decode(model, ids, sinks, window)  # (T, vocab)
    got = _attncli_logits(folder, ids, sinks, window)
    assert_near(got, expected)


def _ranges_by_formula(logits: list[Tensor], ids: list[int], spans: list[tuple[int, int]]
                       ) -> list[list[tuple[float, float | None]]]:
    """Per span, per policy: (perplexity, top-1 agreement with logits[0]) from the logits."""
    targets = torch.tensor(ids[1:])  # (T-1,)
    out = []
    for start, stop in spans:
        row = []
        for k, policy_logits in enumerate(logits):
            logp = torch.log_softmax(policy_logits[:-1].double(), dim=-1)  # (T-1, vocab)
            nll = -logp[torch.arange(len(targets)), targets]  # (T-1,)
            top = policy_logits[:-1].argmax(-1)  # (T-1,)
            full_top = logits[0][:-1].argmax(-1)  # (T-1,)
            agreement = None if k == 0 else float(
                (top[start:stop] == full_top[start:stop]).double().mean())
            row.append((math.exp(float(nll[start:stop].mean())), agreement))
        out.append(row)
    return out


def test_perplexity_and_top_1_are_the_formulas_on_transformers_logits(
        checkpoints: dict[str, tuple[Path, Any]], cli: Any) -> None:
    folder, model = checkpoints["llama"]
    run = cli("kvcache", TEXT, "--model", str(folder), "--keep", "sinks:2,window:5", "--json")
    assert run.code == 0, run.err
    data = run.json()
    ids = _text_ids(folder, TEXT)
    assert data["tokens"] == len(ids)
    with torch.no_grad():
        full = model(torch.tensor([ids])).logits[0]  # (T, vocab)
    logits = [full, _masked_forward(model, ids, 0, 5),
              _masked_forward(model, ids, 2, 5)]
    spans = [(r["start"], r["stop"]) for r in data["ranges"]]
    assert spans[0] == (0, 5) and spans[-1][1] == len(ids) - 1  # every prediction, in order
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    after = data["after_window"]
    expected = _ranges_by_formula(logits, ids, [*spans, (after["start"], after["stop"])])
    for scores, want in zip([*data["ranges"], after], expected, strict=True):
        for name, (perplexity, agreement) in zip(["full", "window", "sinks+window"], want,
                                                 strict=True):
            assert_near(scores[name]["perplexity"], perplexity)
            assert_near(scores[name].get("agreement"), agreement, equal_nan=True)  # None: none


def test_the_json_has_its_shape(checkpoints: dict[str, tuple[Path, Any]], cli: Any) -> None:
    folder = checkpoints["llama"][0]
    run = cli("kvcache", TEXT, "--model", str(folder), "--keep", "window:6", "--json")
    assert run.code == 0, run.err
    data = run.json()
    assert set(data) == {"kind", "model", "tokens", "layers", "keep", "key_positions",
                         "key_positions_note", "policies", "ranges", "after_window"}
    assert data["keep"] == {"sinks": 0, "window": 6} and data["layers"] == 3
    assert data["key_positions"] == "text"
    assert data["policies"] == [{"name": "full", "sinks": None, "window": None},
                                {"name": "window", "sinks": 0, "window": 6}]
    for scores in [*data["ranges"], data["after_window"]]:
        assert set(scores) == {"start", "stop", "positions", "window_full", "full", "window"}
        assert scores["positions"] == scores["stop"] - scores["start"] > 0
        assert scores["window_full"] == (scores["start"] >= 6)
        assert set(scores["full"]) == {"perplexity", "mean_nll"}
        assert 0.0 <= scores["window"]["agreement"] <= 1.0
        assert math.isfinite(scores["window"]["perplexity"])
    first = data["ranges"][0]
    assert first["window"]["agreement"] == 1.0  # nothing is evicted while the window fills
    assert_near(first["window"]["mean_nll"], first["full"]["mean_nll"])


def test_the_table_and_its_chinese(checkpoints: dict[str, tuple[Path, Any]], cli: Any) -> None:
    folder = checkpoints["llama"][0]
    english = cli("kvcache", TEXT, "--model", str(folder), "--keep", "sinks:2,window:5")
    chinese = cli("kvcache", TEXT, "--model", str(folder), "--keep", "sinks:2,window:5",
                  "--lang", "zh")
    assert english.code == chinese.code == 0, english.err + chinese.err
    assert "StreamingLLM" in english.out and "sinks:2,window:5" in english.out
    assert "(all after)" in english.out and "perplexity" in english.out
    assert "淘汰 KV 缓存" in chinese.out and "困惑度" in chinese.out
    assert "perplexity" not in chinese.out
    assert max(len(line) for line in english.out.splitlines()) <= 100


@pytest.mark.parametrize("key", sorted(STREAMING_STRINGS))
def test_each_string_has_both_languages_with_the_same_placeholders(key: str) -> None:
    english, chinese = STREAMING_STRINGS[key]
    fields = [{name for _, name, _, _ in Formatter().parse(s) if name} for s in (english, chinese)]
    assert english and chinese and fields[0] == fields[1]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in chinese)  # written in Chinese


def test_the_table_fits_80_columns_uncut(checkpoints: dict[str, tuple[Path, Any]], cli: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    run = cli("kvcache", TEXT, "--model", str(checkpoints["llama"][0]), "--keep",
              "sinks:4,window:64")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert max(len(line) for line in lines) <= 80
    rule = next(k for k, line in enumerate(lines) if set(line.strip()) == {"─"})
    table = lines[rule - 3:rule + 7]  # three header lines, the rule, six rows
    assert table[0].split() == ["sinks:4,", "sinks:4,"]  # the headers wrapped after the comma
    assert not any("…" in line for line in table)  # no header or cell was cut to fit


@pytest.mark.parametrize(("keep", "message"), [
    ("window:0", "window:0 keeps no key"),
    ("sinks:x,window:4", "sinks:x is not a whole number"),
    ("window:4,window:5", "names window twice"),
    ("window:-3", "window:-3 is not a whole number"),
    ("window:99999999999999999999", "is longer than any text"),
    ("sinks:4", "has no window"),
    ("window", "is not sinks:S or window:W"),
    ("width:4", "is not sinks:S or window:W"),
    ("", "is not sinks:S or window:W"),
    ("window:87", "evicts nothing from this 88-token text"),  # TEXT is 88 tokens here
    ("sinks:30,window:57", "evicts nothing from this 88-token text"),
])
def test_bad_keeps_are_one_line(checkpoints: dict[str, tuple[Path, Any]], cli: Any,
                                keep: str, message: str) -> None:
    folder = checkpoints["llama"][0]
    cli("kvcache", TEXT, "--model", str(folder), "--keep", keep).assert_usage_error(message)


def test_keep_needs_a_model_and_draws_no_page(checkpoints: dict[str, tuple[Path, Any]],
                                              cli: Any, tmp_path: Path) -> None:
    folder = checkpoints["llama"][0]
    cli("kvcache", TEXT, "--keep", "window:4").assert_usage_error("--keep needs --model")
    page = tmp_path / "page.html"
    cli("kvcache", TEXT, "--model", str(folder), "--keep", "window:4",
        "--save", str(page)).assert_usage_error("--keep draws no page")
    assert not page.exists()
    cli("kvcache", TEXT, "--model", str(folder), "--keep", "window:4",
        "--layer", "1").assert_usage_error("--layer does not apply")
    cli("kvcache", TEXT, "--model", str(folder), "--keep", "window:4",
        "--head", "1").assert_usage_error("--keep measures every layer and head together")


@pytest.mark.slow
def test_a_text_too_long_is_refused_before_the_pass(tmp_path: Path, cli: Any) -> None:
    folder = tmp_path / "long-llama"
    save_family(folder, "llama", seed=73, max_position_embeddings=1 << 20)
    long_text = tmp_path / "long.txt"
    long_text.write_text("The cat sat on the mat because it was tired. " * 6000, encoding="utf-8")
    run = cli("kvcache", "--file", str(long_text), "--model", str(folder), "--keep", "window:64")
    run.assert_usage_error("kvcache --keep on ")
    assert "use a shorter text" in run.err


@pytest.mark.slow
def test_smollm2_runs_the_lesson_on_the_sample(cli: Any) -> None:
    model = smollm2()
    run = cli("kvcache", "--file", str(ROOT / "samples" / "streaming.txt"), "--model", str(model),
              "--keep", "sinks:4,window:32", "--json")
    assert run.code == 0, run.err
    data = run.json()
    assert data["layers"] == 30 and 200 <= data["tokens"] <= 600
    assert [p["name"] for p in data["policies"]] == ["full", "window", "sinks+window"]
    assert data["after_window"]["start"] == 32
    assert data["after_window"]["stop"] == data["tokens"] - 1
    for scores in [*data["ranges"], data["after_window"]]:
        for name in ("full", "window", "sinks+window"):
            assert math.isfinite(scores[name]["perplexity"]) and scores[name]["perplexity"] >= 1
        for name in ("window", "sinks+window"):
            assert 0.0 <= scores[name]["agreement"] <= 1.0
    json.dumps(data, allow_nan=False)
