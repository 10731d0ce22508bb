"""Tiled attention against the naive softmax(QKᵀ/√d_k) computed with full (heads, N, N) tensors."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from attncli.core import sizes as budget
from attncli.core.attention import MultiHeadAttention
from attncli.core.request import Request
from attncli.core.sizes import choose_impl
from attncli.errors import AttnCliError
from attncli.long import fused, tiled
from attncli.long.tiled import tiled_attention
from attncli.long.topk import TOPK_GROUP
from attncli.long.window import weights_window
from tests.tolerance import assert_near


@pytest.fixture(autouse=True, params=["fused", "torch"])
def score_passes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs twice: with the score passes in C (long/fused.py), and with torch
    operations alone, as a build without a C compiler runs them."""
    monkeypatch.setattr(fused, "ENABLED", request.param == "fused")
    return str(request.param)


@dataclass
class Reference:
    scores: Tensor  # (heads, N, N) scaled, -inf where masked
    weights: Tensor  # (heads, N, N)
    context: Tensor  # (heads, N, head_dim)
    lse: Tensor  # (heads, N)
    entropy: Tensor  # (heads, N)


def naive_reference(queries: Tensor, keys: Tensor, values: Tensor, causal: bool) -> Reference:
    """The textbook computation with full (heads, N, N) tensors, in the inputs' float32."""
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])  # (heads, N, N)
    if causal:
        n = queries.shape[1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
    weights = torch.softmax(scores, dim=-1)  # (heads, N, N)
    return Reference(
        scores=scores,
        weights=weights,
        context=weights @ values,
        lse=torch.logsumexp(scores, dim=-1),
        entropy=-torch.special.xlogy(weights, weights).sum(-1),  # 0·ln 0 = 0 for masked keys
    )


def random_qkv(heads: int, n: int, head_dim: int, seed: int,
               spread: float = 1.0) -> tuple[Tensor, Tensor, Tensor]:
    """Seeded standard-normal inputs; spread widens queries and keys, and so the scores."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(heads, n, head_dim, generator=gen) for _ in range(3))
    return q * spread, k * spread, v


def expected_topk(ref: Reference, k: int) -> tuple[Tensor, Tensor]:
    """Naive top-k with the tiled path's convention: index -1, weight 0 past a short row's end."""
    # Rank by score, not weight: a weight that underflows to 0 is still an allowed key.
    top_score, top_index = ref.scores.topk(k, dim=-1)  # (heads, N, k)
    top_index = top_index.masked_fill(top_score == -torch.inf, -1)  # (heads, N, k)
    return top_index, ref.weights.gather(-1, top_index.clamp(min=0)) * (top_index >= 0)


def assert_agrees(queries: Tensor, keys: Tensor, values: Tensor, causal: bool, top_k: int = 5,
                  **blocks: int) -> None:
    out = tiled_attention(queries, keys, values, causal, top_k=top_k, **blocks)
    ref = naive_reference(queries, keys, values, causal)
    assert_near(out.context, ref.context)
    assert_near(out.lse, ref.lse, atol=1e-4, rtol=0)
    assert_near(out.entropy, ref.entropy, atol=1e-4, rtol=0)
    key_pos = torch.arange(queries.shape[1], dtype=torch.float64)  # (N,)
    want_mean_key = ref.weights.double() @ key_pos  # (heads, N) Σ_j w_ij·j
    assert_near(out.mean_key.double(), want_mean_key * max(queries.shape[1], 1))
    k = min(top_k, queries.shape[1])
    want_index, want_weight = expected_topk(ref, k)
    assert out.topk_index.dtype == torch.long
    assert out.topk_index.shape == out.topk_weight.shape == (*queries.shape[:2], k)
    assert torch.equal(out.topk_index, want_index)
    # rtol: a weight is e^(s - lse), so it carries the float32 rounding of a large score s.
    assert_near(out.topk_weight, want_weight, atol=1e-6, rtol=1e-4)


# (heads, N, head_dim, block_q, block_k): blocks that divide N, that do not, wider than N, N = 1.
SHAPES = [
    (1, 1, 4, 128, 512),
    (1, 1, 8, 1, 1),
    (2, 7, 8, 3, 2),
    (3, 64, 16, 16, 16),
    (4, 100, 16, 32, 24),
    (2, 130, 32, 64, 100),
    (12, 257, 64, 128, 512),
    (1, 300, 8, 7, 64),
    (2, 97, 16, 97, 13),
    (2, 300, 8, 100, 64),  # the causal diagonal tile is cut at a row that is no group boundary
    (1, 1000, 16, 128, 512),  # the defaults, with a partial last tile
]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("heads", "n", "head_dim", "block_q", "block_k"), SHAPES)
def test_agrees_with_naive(heads: int, n: int, head_dim: int, block_q: int, block_k: int,
                           causal: bool) -> None:
    q, k, v = random_qkv(heads, n, head_dim, seed=n * 31 + heads)
    assert_agrees(q, k, v, causal, block_q=block_q, block_k=block_k)


@pytest.mark.parametrize("seed", range(8))
def test_agrees_on_random_shapes(seed: int) -> None:
    gen = torch.Generator().manual_seed(1000 + seed)
    heads, n, block_q, block_k, top_k = (
        int(torch.randint(lo, hi, (1,), generator=gen)) for lo, hi in
        [(1, 5), (1, 200), (1, 70), (1, 90), (0, 12)]
    )
    head_dim = (4, 8, 16, 32)[seed % 4]
    q, k, v = random_qkv(heads, n, head_dim, seed=seed)
    assert_agrees(q, k, v, causal=seed % 2 == 0, top_k=top_k, block_q=block_q, block_k=block_k)


def rms(x: Tensor) -> float:
    return float(x.double().pow(2).mean().sqrt())


@pytest.mark.parametrize("causal", [True, False])
def test_large_scores_stay_exact(causal: bool) -> None:
    # Scores of ±100 and more: most e^(s-m) fall below the exp floor; rows are nearly one-hot.
    # Here two float32 computations differ by their own rounding of the scores (~1e-5 in the
    # context), so both are held to the exact float64 result: over several inputs the tiled pass
    # must be as close to it as PyTorch's own float32 softmax path.
    errors: dict[str, list[Tensor]] = {"tiled": [], "torch": []}
    for seed in range(7, 15):
        q, k, v = random_qkv(2, 150, 16, seed=seed, spread=6.0)
        out = tiled_attention(q, k, v, causal, top_k=5, block_q=32, block_k=40)
        exact = naive_reference(q.double(), k.double(), v.double(), causal)
        ref = naive_reference(q, k, v, causal)
        for name, got in (("tiled", out), ("torch", ref)):
            errors[name].append(torch.cat([(got.context.double() - exact.context).flatten(),
                                           (got.lse.double() - exact.lse).flatten(),
                                           (got.entropy.double() - exact.entropy).flatten()]))
        want_index, _ = expected_topk(exact, 5)
        assert torch.equal(out.topk_index, want_index)
    tiled_error, torch_error = (rms(torch.cat(errors[name])) for name in ("tiled", "torch"))
    assert tiled_error <= 1.25 * torch_error, (tiled_error, torch_error)


def rising_scores(n: int, step: float, jump_at: int | None = None) -> tuple[Tensor, ...]:
    """One head whose score s_ij = c_j (exact in float32) rises by step per key, with one key
    jump_at far above all others: later key tiles outgrow the running maximum."""
    q = torch.zeros(1, n, 16)
    q[..., 0] = 4.0  # / √16 = 1
    k = torch.zeros(1, n, 16)
    k[0, :, 0] = torch.arange(n) * step
    if jump_at is not None:
        k[0, jump_at, 0] = 200.0  # 2^(200·log2 e) overflows float32 against any earlier m
    v = torch.randn(1, n, 16, generator=torch.Generator().manual_seed(5))
    return q, k, v


@pytest.mark.parametrize("top_k", [0, 3])
# Per 40-key tile the scores rise by 20, 2 or (at key 90) 200: the first and last pass 2^8 · 40.
@pytest.mark.parametrize(("step", "jump_at", "refolds"), [(0.5, None, True), (0.05, None, False),
                                                          (0.01, 90, True)])
@pytest.mark.parametrize("causal", [True, False])
def test_scores_that_outgrow_the_running_maximum(top_k: int, step: float, jump_at: int | None,
                                                 refolds: bool, causal: bool, score_passes: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The running maximum is lazy: a tile rising more than 2^8 above it rescales the row, and
    # without top-k a tile whose weights come out too large is folded again, measured. The
    # fused passes measure every tile's maxima as they go, so they never fold one twice.
    folds: list[bool] = []
    fold = tiled._fold_key_tile

    def counted(*args: object, **kwargs: object) -> bool:
        folds.append(fold(*args, **kwargs))  # type: ignore[arg-type]
        return folds[-1]

    monkeypatch.setattr(tiled, "_fold_key_tile", counted)
    q, k, v = rising_scores(150, step, jump_at)
    assert_agrees(q, k, v, causal, top_k=top_k, block_q=32, block_k=40)
    if score_passes == "fused":
        assert folds == []  # the torch operations' fold never ran
    else:  # with top-k the group maxima measure every tile in advance: none is folded twice
        assert (False in folds) == (refolds and top_k == 0)


@pytest.mark.parametrize("causal", [True, False])
def test_equal_scores_list_the_earlier_keys_first(causal: bool, score_passes: str) -> None:
    # Every key the same: each row's top-k is its first k keys. The torch operations leave the
    # order of equal keys (and of equal groups) to torch.topk, which does not keep it.
    if score_passes == "torch":
        pytest.skip("ties are ordered by the fused passes only")
    n = 150
    # One non-zero term per score, so that every way of summing the product gives the same float.
    q = torch.zeros(2, n, 8)
    q[..., 0] = torch.randn(2, n, generator=torch.Generator().manual_seed(1))
    k = torch.ones(2, n, 8)
    v = torch.randn(2, n, 8, generator=torch.Generator().manual_seed(2))
    out = tiled_attention(q, k, v, causal, top_k=5, block_q=16, block_k=24)
    rows = torch.arange(n)[:, None] if causal else torch.full((n, 1), n - 1)
    want = torch.arange(5)[None, :].expand(n, 5)  # (N, 5)
    want = want.masked_fill(want > rows, -1)  # a short causal row: -1 past its keys
    assert torch.equal(out.topk_index, want.expand(2, n, 5))


@pytest.mark.parametrize("top_k", [0, 1, 3 * TOPK_GROUP + 1, 80])
def test_top_k_sizes(top_k: int) -> None:
    q, k, v = random_qkv(2, 70, 8, seed=top_k)
    assert_agrees(q, k, v, causal=True, top_k=top_k, block_q=16, block_k=24)


@pytest.mark.parametrize("causal", [True, False])
def test_values_may_be_wider_or_narrower_than_keys(causal: bool) -> None:
    q, k, _ = random_qkv(3, 90, 8, seed=5)
    for d_v in (1, 9, 20):
        v = torch.randn(3, 90, d_v, generator=torch.Generator().manual_seed(d_v))
        out = tiled_attention(q, k, v, causal, block_q=16, block_k=24)
        ref = naive_reference(q, k, v, causal)
        assert out.context.shape == (3, 90, d_v)
        assert_near(out.context, ref.context)


@pytest.mark.parametrize("causal", [True, False])
def test_progress_counts_every_score_cell_once(causal: bool) -> None:
    q, k, v = random_qkv(2, 300, 8, seed=3)
    calls: list[tuple[int, int]] = []
    tiled_attention(q, k, v, causal, block_q=32, block_k=64,
                    progress=lambda done, total: calls.append((done, total)))
    tiles = [range(q0, min(q0 + 32, 300)) for q0 in range(0, 300, 32)]
    total = sum(len(t) * (t.stop if causal else 300) for t in tiles)
    assert len(calls) == len(tiles)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)  # never goes back
    assert calls[-1] == (total, total) and {t for _, t in calls} == {total}


def test_no_tokens_gives_empty_outputs() -> None:
    q, k, v = (torch.zeros(2, 0, 4) for _ in range(3))
    out = tiled_attention(q, k, v, causal=True)
    assert out.context.shape == (2, 0, 4)
    assert out.lse.shape == out.entropy.shape == (2, 0)
    assert out.topk_index.shape == out.topk_weight.shape == (2, 0, 0)


def test_short_causal_rows_pad_with_minus_one() -> None:
    q, k, v = random_qkv(1, 6, 4, seed=3)
    out = tiled_attention(q, k, v, causal=True, top_k=5, block_q=4, block_k=2)
    assert out.topk_index[0, 0].tolist() == [0, -1, -1, -1, -1]
    assert out.topk_weight[0, 0].tolist() == [pytest.approx(1.0), 0.0, 0.0, 0.0, 0.0]
    assert sorted(out.topk_index[0, 2, :3].tolist()) == [0, 1, 2]
    assert out.topk_index[0, 2, 3:].tolist() == [-1, -1]


def test_split_heads_views_match_multihead_attend() -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_in=24, d_out=24, num_heads=3)
    x = torch.randn(90, 24)  # (T, d_in)
    queries, keys, values = (mha.split_heads(t) for t in mha.project(x))  # (heads, T, head_dim)
    with torch.no_grad():
        naive = mha.attend(queries, keys, values, causal=True, dropout=None)
    out = tiled_attention(queries, keys, values, causal=True, block_q=16, block_k=32)
    context = out.context.transpose(0, 1).reshape(90, 24)  # (T, d_out), heads side by side
    assert_near(context, naive.context)
    # Plain tensors, not inference tensors: out_proj accepts them outside any grad guard.
    assert_near(mha.out_proj(context), mha.out_proj(naive.context))
    top_weight, top_index = naive.weights.topk(5, dim=-1)  # (heads, T, 5)
    assert torch.equal(out.topk_index, top_index.masked_fill(top_weight == 0, -1))


def test_worker_threads_leave_the_thread_count_alone() -> None:
    q, k, v = random_qkv(2, 200, 8, seed=9)
    before = torch.get_num_threads()
    threaded = tiled_attention(q, k, v, causal=True, block_q=16, block_k=32)
    seen = []
    later = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    later.start()
    later.join()
    assert torch.get_num_threads() == before
    assert seen == [before]
    torch.set_num_threads(1)  # the sequential path
    try:
        sequential = tiled_attention(q, k, v, causal=True, block_q=16, block_k=32)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(threaded.context, sequential.context)
    assert torch.equal(threaded.topk_index, sequential.topk_index)


def test_worker_errors_reach_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    import attncli.long.threads as threads

    q, k, v = random_qkv(2, 200, 8, seed=9)
    attended = []
    lock = threading.Lock()
    stops: list[threading.Event] = []

    class Stop(threading.Event):
        def __init__(self) -> None:
            super().__init__()
            stops.append(self)

    def fail_on_third(job: object, rows: slice, buffers: object) -> None:
        with lock:
            attended.append(rows)
            count = len(attended)
        if count == 3:
            raise RuntimeError(f"tile {rows.start} failed")
        if count > 3:  # a later tile ends only once the error has stopped the pool: no race
            stops[0].wait(600)

    monkeypatch.setattr(threads.threading, "Event", Stop)
    monkeypatch.setattr(tiled, "_attend_query_tile", fail_on_third)
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="tile .* failed"):
        tiled_attention(q, k, v, causal=True, block_q=10, block_k=32)
    assert torch.get_num_threads() == before
    assert len(attended) < 20  # the other workers stopped instead of finishing all 20 tiles


WINDOWS = [
    (range(0, 40), range(0, 40)),
    (range(10, 50), range(0, 64)),  # crosses the diagonal
    (range(0, 8), range(30, 64)),  # wholly above it
    (range(63, 64), range(0, 64)),
    (range(5, 60, 7), range(62, 2, -3)),
    (range(3, 3), range(0, 10)),
]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("rows", "cols"), WINDOWS)
def test_window_equals_naive_slice(rows: range, cols: range, causal: bool) -> None:
    q, k, v = random_qkv(3, 64, 16, seed=11)
    out = tiled_attention(q, k, v, causal, block_q=16, block_k=16)
    window = weights_window(q, k, out.lse, rows, cols, causal)
    want = naive_reference(q, k, v, causal).weights[:, list(rows)][:, :, list(cols)]
    assert window.shape == (3, len(rows), len(cols))
    assert_near(window, want)
    if causal:
        above = torch.tensor([[c > r for c in cols] for r in rows], dtype=torch.bool)
        assert bool((window[:, above] == 0).all())


def test_full_window_rows_sum_to_one() -> None:
    q, k, v = random_qkv(2, 50, 8, seed=5)
    out = tiled_attention(q, k, v, causal=True, block_q=8, block_k=8)
    window = weights_window(q, k, out.lse, range(50), range(50), causal=True)
    assert_near(window.sum(-1), torch.ones(2, 50))


@pytest.mark.parametrize(("rows", "cols"), [(range(0, 11), range(3)), (range(2), range(-1, 3))])
def test_window_out_of_range_is_refused(rows: range, cols: range) -> None:
    q, k, v = random_qkv(1, 10, 4, seed=0)
    out = tiled_attention(q, k, v, causal=False)
    with pytest.raises(AttnCliError, match=r"must lie within 0\.\.9 .*N=10"):
        weights_window(q, k, out.lse, rows, cols, causal=False)


def test_dropout_is_refused() -> None:
    q, k, v = random_qkv(1, 4, 4, seed=0)
    message = "dropout is not supported on the tiled path (got dropout=0.1); use --impl naive"
    with pytest.raises(AttnCliError) as info:
        tiled_attention(q, k, v, causal=True, dropout=0.1)
    assert str(info.value) == message


@pytest.mark.parametrize(("shapes", "options", "match"), [
    (((2, 5, 4), (2, 6, 4), (2, 6, 4)), {}, r"\(2, 5, 4\), \(2, 6, 4\), \(2, 6, 4\)"),
    (((5, 4), (5, 4), (5, 4)), {}, r"\(5, 4\)"),
    (((2, 5, 4), (2, 5, 4), (2, 6, 4)), {}, r"values be \(heads, N, d_v\) .*\(2, 6, 4\)"),
    (((1, 5, 4),) * 3, {"top_k": -1}, "top_k=-1"),
    (((1, 5, 4),) * 3, {"block_q": 0}, "block_q=0"),
    (((1, 5, 4),) * 3, {"block_k": 0}, "block_k=0"),
])
def test_bad_inputs_are_refused(shapes: tuple, options: dict, match: str) -> None:
    q, k, v = (torch.zeros(shape) for shape in shapes)
    with pytest.raises(AttnCliError, match=match):
        tiled_attention(q, k, v, causal=True, **options)


def naive_bytes(heads: int, n: int) -> int:
    # scores, scaled, masked, softmax, weights in float32; weights and masked as Python lists of
    # floats (a 24-byte float object and an 8-byte list slot each)
    return (5 * 4 + 2 * 32) * heads * n * n


@pytest.mark.parametrize(("heads", "n", "want"), [
    (12, 1, "naive"), (12, 516, "naive"), (12, 517, "tiled"),
    (1, 1787, "naive"), (1, 1788, "tiled"),
])
def test_auto_switches_at_the_default_budget(heads: int, n: int, want: str) -> None:
    assert naive_bytes(12, 516) <= 256 * 2**20 < naive_bytes(12, 517)
    assert naive_bytes(1, 1787) <= 256 * 2**20 < naive_bytes(1, 1788)
    assert choose_impl("auto", num_tokens=n, num_heads=heads) == want
    assert budget.naive_bytes(n, heads) == naive_bytes(heads, n)


def test_auto_switches_at_a_given_budget() -> None:
    budget = naive_bytes(3, 200)
    assert choose_impl("auto", 200, 3, budget_bytes=budget) == "naive"
    assert choose_impl("auto", 200, 3, budget_bytes=budget - 1) == "tiled"


@pytest.mark.parametrize("impl", ["naive", "tiled"])
def test_explicit_impl_is_kept(impl: str) -> None:
    assert choose_impl(impl, num_tokens=10**6, num_heads=12) == impl
    assert choose_impl(impl, num_tokens=1, num_heads=1) == impl


def test_unknown_impl_is_refused() -> None:
    message = r"unknown impl 'flash' \(choose from naive, tiled, auto\)"
    with pytest.raises(AttnCliError, match=message):
        Request(text="x", impl="flash")


SAME = (1.0, 1.0)  # keys as drawn
GROWING = (0.05, 4.0)  # keys scaled from 0.05 to 4 along the text: later tiles outgrow the lazy m


@pytest.mark.parametrize(("causal", "n", "grid", "top_k", "scale"),
                         [(True, 300, 43, 2, SAME), (False, 300, 5, 2, SAME),
                          (True, 1000, 25, 2, SAME), (True, 5, 2, 2, SAME),
                          (False, 129, 1, 2, SAME),
                          # with top-k, m is rescaled from the group maxima; without, too large
                          # a tile is folded again
                          (True, 1000, 25, 2, GROWING), (True, 1000, 25, 0, GROWING),
                          (False, 300, 5, 0, GROWING)])
def test_pooled_blocks_in_the_pass_equal_pooling_the_rebuilt_weights(
        causal: bool, n: int, grid: int, top_k: int, scale: tuple[float, float]) -> None:
    from attncli.long.pooling import block_edges, block_size, pooled_maps

    size = block_size(block_edges(n, grid))
    gen = torch.Generator().manual_seed(n + grid)
    q, k, v = (torch.randn(3, n, 16, generator=gen) for _ in range(3))
    k = k * torch.linspace(*scale, n)[None, :, None]  # (3, n, 16)
    out = tiled_attention(q, k, v, causal=causal, top_k=top_k, block_q=64, block_k=96,
                          pool_size=size)
    assert out.pooled is not None

    def weights_of(h: int, rows: range, cols: range) -> torch.Tensor:
        return weights_window(q[h:h + 1], k[h:h + 1], out.lse[h:h + 1], rows, cols, causal)[0]

    maps = pooled_maps(weights_of, [0, 1, 2], n, causal, "max", grid)
    for h, pmap in enumerate(maps):
        got = out.pooled[h].exp()
        want = torch.tensor([[0.0 if v is None else v for v in row] for row in pmap.values],
                            dtype=torch.float64)
        assert_near(got.double(), want)


def test_flushing_denormals_stays_in_the_workers() -> None:
    # The pass flushes float32 denormals to 0 in its threads; the caller's thread keeps them.
    q, k, v = random_qkv(2, 300, 8, seed=3, spread=6.0)
    before = torch.get_num_threads()
    for threads in (1, 2):  # 1: this thread does the work itself
        torch.set_num_threads(threads)
        try:
            tiled_attention(q, k, v, causal=True, block_q=16, block_k=32)
        finally:
            torch.set_num_threads(before)
        tiny = torch.tensor([1e-38]) / 10  # 1e-39, a denormal
        assert tiny.item() > 0


def test_scores_down_among_the_masked_are_refused() -> None:
    q, k, v = random_qkv(1, 40, 4, seed=1)
    q = torch.full_like(q, 1e15)
    k = -torch.ones_like(k) * 1e15  # every score about -2e30
    with pytest.raises(AttnCliError, match="too large"):
        tiled_attention(q, k, v, causal=True, block_q=16, block_k=16)
