"""The C score passes (long/_fused.c) against float64 and plain-Python references.

The tiled pass's own tests (test_tiled.py) run every case with and without them; these hold each
pass to its contract: exp2's accuracy and edge values, the mask, maxima, block maxima and top-k
of fold_scores (ties included), and exp_stats's sums.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch

from attncli.long import fused
from tests.tolerance import assert_near

MASKED = -1e30


def test_the_extension_is_built() -> None:
    # make installs the package with a C compiler at hand; a build without one would silently
    # run the torch operations alone.
    assert fused._native is not None


def test_exp2_is_as_accurate_as_torchs() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.linspace(-126, 127.99, 400_001),
                   (torch.randn(50_000, generator=gen) * 30).clamp(-126, 127.99)]).float()
    exact = torch.exp2(x.double())
    mine = (fused.exp2(x).double() - exact).abs() / exact
    theirs = (torch.exp2(x).double() - exact).abs() / exact
    # float32 holds 2^x to 6e-8 relative at best; torch's (Sleef) exp2 reaches 7e-8.
    assert mine.max().item() < 1.5e-7
    assert mine.pow(2).mean().sqrt().item() <= 1.1 * theirs.pow(2).mean().sqrt().item()


def test_exp2_edges() -> None:
    x = torch.tensor([MASKED, -150.0, -126.5, 0.0, 1.0, -1.0, 10.5, 127.5, 128.0, 1e30,
                      float("inf"), float("-inf"), float("nan")])
    y = fused.exp2(x).tolist()
    assert y[:3] == [0.0, 0.0, 0.0]  # below -126: 0, as denormals are flushed in the workers
    assert y[3:6] == [1.0, 2.0, 0.5]
    assert y[6] == pytest.approx(2**10.5, rel=1e-7)
    assert y[7] == pytest.approx(2**127.5, rel=1e-7)  # n = 128 after rounding stays finite
    assert y[8:11] == [float("inf")] * 3
    assert y[11] == 0.0
    assert y[12] != y[12]  # NaN


def fold(scores: torch.Tensor, k0: int, first_query: int | None, row_max: torch.Tensor, k: int,
         top: tuple[torch.Tensor, torch.Tensor] | None = None, pool: int = 0, blocks: int = 0,
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    heads, bq, _ = scores.shape
    scores = scores.clone()
    tile_max = torch.empty(heads, bq)
    top_val, top_idx = top if top is not None else (torch.full((heads, bq, k), -torch.inf),
                                                    torch.full((heads, bq, k), -1))
    row_block = torch.full((heads, bq, blocks), -torch.inf)
    fused.fold_scores(scores, k0, first_query, row_max, tile_max, top_val if k else None,
                      top_idx if k else None, row_block if pool else None, pool)
    return scores, tile_max, top_val, top_idx, row_block


def reference_top(values: list[float], first_key: int, k: int) -> tuple[list[float], list[int]]:
    """The k largest unmasked values, heaviest first, the earlier key first among equals."""
    order = sorted((-v, first_key + j) for j, v in enumerate(values) if v > -1e29)[:k]
    vals = [-v for v, _ in order] + [-float("inf")] * (k - len(order))
    return vals, [j for _, j in order] + [-1] * (k - len(order))


@pytest.fixture(autouse=True, params=[0, 1, 2], ids=["scalar", "avx2", "avx512"])
def skip_level(request: pytest.FixtureRequest):  # noqa: ANN201
    """The top-k's group scan in each version this CPU can run (the module picks the widest)."""
    assert fused._native is not None
    if fused._native.use_skip(request.param) != request.param:
        fused._native.use_skip(-1)
        pytest.skip(f"this CPU cannot run scan level {request.param}")
    yield request.param
    fused._native.use_skip(-1)


@pytest.fixture(params=[False, True], ids=["denormals", "flushed"])
def flush_denormals(request: pytest.FixtureRequest):  # noqa: ANN201
    """The worker threads flush denormals to zero (and read them as zero): run both ways."""
    torch.set_flush_denormal(request.param)
    yield
    torch.set_flush_denormal(False)


@pytest.mark.usefixtures("flush_denormals")
@pytest.mark.parametrize(("width", "k"), [(40, 5), (3, 5), (17, 1), (64, 16), (100, 17),
                                          (512, 5)])
def test_fold_scores_top_k_keeps_the_earlier_of_equal_keys(width: int, k: int) -> None:
    gen = torch.Generator().manual_seed(width)
    # Small integers: many ties, and across two tiles the running top-k must merge them.
    first = torch.randint(-4, 4, (2, 3, width), generator=gen).float()
    second = torch.randint(-4, 4, (2, 3, width), generator=gen).float()
    row_max = torch.randint(-3, 3, (2, 3), generator=gen).float()
    _, tile_max, val, idx, _ = fold(first, 100, None, row_max, k)
    _, _, val, idx, _ = fold(second, 100 + width, None, row_max, k, (val, idx))
    assert torch.equal(tile_max, first.amax(-1))
    for h in range(2):
        for r in range(3):
            absolute = (torch.cat([first[h, r], second[h, r]]) + row_max[h, r]).tolist()
            want_val, want_idx = reference_top(absolute, 100, k)
            assert val[h, r].tolist() == want_val
            assert idx[h, r].tolist() == want_idx


def test_fold_scores_masks_the_keys_after_each_query() -> None:
    scores = torch.randn(2, 4, 10, generator=torch.Generator().manual_seed(1))
    # Queries 20..23 against keys 18..27: query 20 sees keys 18..20, query 23 keys 18..23.
    masked, tile_max, val, idx, _ = fold(scores, 18, 20, torch.zeros(2, 4), 5)
    keys, queries = torch.arange(18, 28), torch.arange(20, 24)
    future = keys[None, :] > queries[:, None]  # (4, 10)
    assert (masked[:, future] == MASKED).all()
    assert torch.equal(masked[:, ~future], scores[:, ~future])
    assert torch.equal(tile_max, scores.masked_fill(future, -torch.inf).amax(-1))
    assert (idx <= queries[None, :, None]).all()
    # Query 20 sees 3 keys, 21 sees 4: the slots past them stay empty.
    assert (idx >= 0).sum(-1).tolist() == [[3, 4, 5, 5]] * 2
    assert ((idx >= 18) | (idx == -1)).all()


def test_fold_scores_a_wholly_masked_row_adds_nothing() -> None:
    scores = torch.randn(1, 2, 8)
    _, tile_max, val, idx, _ = fold(scores, 30, 10, torch.zeros(1, 2), 3)  # keys after queries
    assert (tile_max == MASKED).all()
    assert (idx == -1).all() and (val == -torch.inf).all()


@pytest.mark.parametrize(("k0", "width", "pool"), [(0, 40, 8), (12, 40, 8), (5, 3, 4),
                                                   (30, 50, 64), (64, 64, 1)])
def test_fold_scores_block_maxima(k0: int, width: int, pool: int) -> None:
    gen = torch.Generator().manual_seed(k0 + width)
    scores = torch.randn(2, 3, width, generator=gen)
    row_max = torch.randn(2, 3, generator=gen)
    blocks = -(-(k0 + width) // pool)
    _, tile_max, _, _, row_block = fold(scores, k0, None, row_max, 0, pool=pool, blocks=blocks)
    assert torch.equal(tile_max, scores.amax(-1))
    for b in range(blocks):
        lo, hi = max(b * pool, k0) - k0, min((b + 1) * pool, k0 + width) - k0
        if hi <= lo:
            assert (row_block[..., b] == -torch.inf).all()
        else:
            assert torch.equal(row_block[..., b], scores[..., lo:hi].amax(-1) + row_max)


@pytest.mark.usefixtures("flush_denormals")
def test_fold_scores_top_k_at_zero() -> None:
    # The k-th best score exactly 0: a key at it still enters (the bar under it must not be a
    # denormal, which the workers read as 0).
    scores = torch.full((1, 2, 40), MASKED)
    scores[0, 0, :3] = torch.tensor([0.0, 0.25, 0.5])
    scores[0, 1, :] = 0.0
    scores[0, 1, 7] = 1.0
    _, _, val, idx, _ = fold(scores, 0, None, torch.zeros(1, 2), 3)
    assert idx[0].tolist() == [[2, 1, 0], [7, 0, 1]]
    assert val[0].tolist() == [[0.5, 0.25, 0.0], [1.0, 0.0, 0.0]]


@pytest.mark.usefixtures("flush_denormals")
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_fold_scores_top_k_of_random_rows(scale: float) -> None:
    # Two tiles of random scores, some rows partly masked: against torch.topk of the whole rows.
    gen = torch.Generator().manual_seed(int(scale * 1000))
    first, second = (torch.randn(3, 40, 96, generator=gen) * scale for _ in range(2))
    row_max = torch.randn(3, 40, generator=gen) * scale
    _, _, val, idx, _ = fold(first, 0, None, row_max, 5)
    masked, _, val, idx, _ = fold(second, 96, 150, row_max, 5, (val, idx))
    scores = torch.cat([first, masked.masked_fill(masked <= -1e29, -torch.inf)], -1)
    want_val, want_idx = (scores + row_max[..., None]).topk(5, dim=-1)
    assert torch.equal(idx, want_idx)
    assert_near(val, want_val)


def test_fold_scores_block_maxima_and_top_k_in_one_call() -> None:
    gen = torch.Generator().manual_seed(9)
    scores = torch.randn(2, 3, 50, generator=gen)
    row_max = torch.randn(2, 3, generator=gen)
    _, _, val, idx, row_block = fold(scores, 30, None, row_max, 4, pool=16, blocks=5)
    want_val, want_idx = (scores + row_max[..., None]).topk(4, dim=-1)
    assert torch.equal(idx, want_idx + 30)
    assert_near(val, want_val)
    for b, (lo, hi) in zip(range(1, 5), [(0, 2), (2, 18), (18, 34), (34, 50)], strict=True):
        assert torch.equal(row_block[..., b], scores[..., lo:hi].amax(-1) + row_max)
    assert (row_block[..., 0] == -torch.inf).all()


@pytest.mark.parametrize("width", [1, 15, 16, 100])
def test_exp_stats_sums(width: int) -> None:
    gen = torch.Generator().manual_seed(width)
    scores = torch.randn(2, 3, width, generator=gen) * 4
    scores[0, 0, -1] = MASKED
    shift = torch.randn(2, 3, generator=gen)
    sums = [torch.randn(2, 3, generator=gen) for _ in range(3)]  # added to, not overwritten
    plogp, key_sum, row_sum = (s.clone() for s in sums)
    weights = scores.clone()
    fused.exp_stats(weights, 7, shift, plogp, key_sum, row_sum)
    x = (scores - shift[..., None]).double()  # the difference is taken in float32
    p = torch.exp2(x)
    assert_near(weights.double(), p)
    keys = torch.arange(7, 7 + width, dtype=torch.float64)
    assert_near(plogp.double(), sums[0].double() + (p * x).sum(-1))
    assert_near(key_sum.double(), sums[1].double() + p @ keys)
    assert_near(row_sum.double(), sums[2].double() + p.sum(-1))


def test_exp_stats_without_shift() -> None:
    scores = torch.tensor([[[0.0, -1.0, MASKED, 3.0]]])
    sums = [torch.zeros(1, 1) for _ in range(3)]
    fused.exp_stats(scores, 0, None, *sums)
    assert scores.tolist() == [[[1.0, 0.5, 0.0, 8.0]]]
    assert [s.item() for s in sums] == [-0.5 + 24.0, 0.5 + 24.0, 9.5]


def test_rescored_scores_the_keys_again_and_sorts_them() -> None:
    gen = torch.Generator().manual_seed(3)
    keys = torch.randn(20, 2, 8, generator=gen).transpose(0, 1)  # (2, 20, 8), not contiguous
    q_tile = torch.randn(2, 4, 8, generator=gen)  # (heads, bq, head_dim)
    top_idx = torch.tensor([[[3, 7, -1], [0, 1, 2], [19, 5, 5], [-1, -1, -1]],
                            [[4, -1, 6], [2, 2, 9], [1, 0, 3], [8, 18, 11]]])  # (2, 4, 3)
    best, index = fused.rescored(q_tile, keys, top_idx)
    scores = torch.einsum("hqd,hkd->hqk", q_tile, keys)  # (heads, bq, N)
    for h in range(2):
        for r in range(4):
            slots = sorted(((-scores[h, r, i].item(), c, i) for c, i in
                            enumerate(top_idx[h, r].tolist()) if i >= 0))
            want = [i for _, _, i in slots] + [-1] * (3 - len(slots))
            assert index[h, r].tolist() == want
            for c, i in enumerate(want):
                if i < 0:
                    assert best[h, r, c].item() == -float("inf")
                else:
                    assert best[h, r, c].item() == pytest.approx(scores[h, r, i].item(), abs=1e-5)
    assert top_idx[0, 0].tolist() == [3, 7, -1]  # the input is left as it was


def test_usable_only_for_float32_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fused.usable(torch.zeros(2)) == fused.ENABLED
    assert not fused.usable(torch.zeros(2, dtype=torch.float64))
    monkeypatch.setattr(fused, "ENABLED", False)
    assert not fused.usable(torch.zeros(2))


def test_wrong_dtypes_and_sizes_are_refused() -> None:
    # The C code trusts what it is given: a long index read as int32, or a short buffer, would
    # run past the end.
    scores, rows = torch.zeros(2, 3, 8), torch.zeros(2, 3)
    with pytest.raises(ValueError, match="int64"):
        fused.fold_scores(scores, 0, None, rows, rows.clone(), torch.zeros(2, 3, 5),
                          torch.zeros(2, 3, 5, dtype=torch.int32))
    with pytest.raises(ValueError, match="elements"):
        fused.fold_scores(scores, 0, None, torch.zeros(5), rows.clone(), None, None)
    with pytest.raises(ValueError, match="float32"):
        fused.exp_stats(scores.double(), 0, None, rows, rows.clone(), rows.clone())
    with pytest.raises(ValueError, match="past the keys"):
        fused.rescored(torch.zeros(2, 3, 4), torch.zeros(2, 10, 4),
                       torch.full((2, 3, 2), 10))


def test_non_contiguous_tensors_are_refused() -> None:
    scores = torch.zeros(2, 8, 3).transpose(1, 2)  # (2, 3, 8), not contiguous
    with pytest.raises(ValueError, match="contiguous"):
        fused.fold_scores(scores, 0, None, torch.zeros(2, 3), torch.zeros(2, 3), None, None)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_fast_math_build_refuses_to_compile() -> None:
    # -ffast-math would fold exp2's rounding away and give 2^round(x); the source refuses, so
    # setuptools' optional build falls back to the torch operations instead of wrong weights.
    source = Path(fused.__file__).with_name("_fused.c")
    include = sysconfig.get_paths()["include"]
    plain = subprocess.run(["gcc", "-fsyntax-only", f"-I{include}", str(source)],
                           capture_output=True, text=True)
    fast = subprocess.run(["gcc", "-fsyntax-only", "-ffast-math", f"-I{include}", str(source)],
                          capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert fast.returncode != 0 and "strict float32" in fast.stderr
