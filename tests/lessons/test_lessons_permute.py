"""`attncli permute` and --positions: the permutation, the equivariance finding, the JSON keys."""

from __future__ import annotations

import torch

from attncli.core.embed import embed
from attncli.core.request import Request
from attncli.lessons.permute import find_permutation, permute
from tests.tolerance import assert_near

CAT, FISH = "猫吃鱼", "鱼吃猫"
CASE_KEYS = {"equivariant", "max_abs_diff", "weights_a", "weights_b"}


def _reordered(weights: list, perm: list[int]) -> torch.Tensor:
    index = torch.tensor(perm)
    return torch.tensor(weights, dtype=torch.float64)[:, index][:, :, index]


def test_json_keys_are_pinned(cli) -> None:  # noqa: ANN001
    doc = cli("permute", CAT, FISH, "--json").json()
    assert set(doc) == {"a", "b", "permutation", "without_positions", "with_positions"}
    assert set(doc["a"]) == {"tokens"} and set(doc["b"]) == {"tokens"}
    assert set(doc["without_positions"]) == CASE_KEYS and set(doc["with_positions"]) == CASE_KEYS
    assert doc["permutation"] == [5, 6, 7, 3, 4, 0, 1, 2]
    assert [t["id"] for t in doc["a"]["tokens"]][:3] == [163, 234, 104]


def test_equal_tokens_are_matched_in_order() -> None:
    labels = {1: "the", 2: "cat", 3: "fish"}
    assert find_permutation([1, 2, 1, 3], [1, 3, 1, 2], labels) == [0, 3, 2, 1]
    cat, fish = "the cat eats the fish", "the fish eats the cat"
    result = permute(Request(text=cat, variant="qkv"), cat, fish)
    assert result.permutation == [0, 4, 2, 3, 1]


def test_without_positions_b_is_a_reordered(cli) -> None:  # noqa: ANN001
    doc = cli("permute", CAT, FISH, "--variant", "qkv", "--json").json()
    case = doc["without_positions"]
    ours = torch.tensor(case["weights_b"], dtype=torch.float64)
    diff = float((ours - _reordered(case["weights_a"], doc["permutation"])).abs().max())
    assert diff <= 1e-6 and case["equivariant"] and case["max_abs_diff"] <= 1e-6
    with_pos = doc["with_positions"]
    diff = float((torch.tensor(with_pos["weights_b"], dtype=torch.float64)
                  - _reordered(with_pos["weights_a"], doc["permutation"])).abs().max())
    assert diff > 1e-3 and not with_pos["equivariant"] and with_pos["max_abs_diff"] >= diff


def test_weights_are_those_of_run_without_positions(cli) -> None:  # noqa: ANN001
    doc = cli("permute", CAT, FISH, "--variant", "qkv", "--json").json()
    for case, flag in (("without_positions", "--no-positions"), ("with_positions", "--positions")):
        run_a = cli("run", CAT, "--variant", "qkv", flag, "--json").json()
        run_b = cli("run", FISH, "--variant", "qkv", flag, "--json").json()
        for ours, theirs in ((doc[case]["weights_a"], run_a), (doc[case]["weights_b"], run_b)):
            assert_near(torch.tensor(ours, dtype=torch.float32),
                                       torch.tensor(theirs["weights"]))
        assert run_a["config"]["positions"] is (flag == "--positions")


def test_simple_and_multihead() -> None:
    simple = permute(Request(text=CAT, variant="simple"), CAT, FISH)
    assert simple.without_positions.equivariant and simple.without_positions.max_abs_diff <= 1e-6
    for variant in ("causal", "multihead"):
        masked = permute(Request(text=CAT, variant=variant), CAT, FISH)
        assert not masked.without_positions.equivariant  # the mask carries order
        assert masked.masked


def test_the_mask_is_explained_and_the_finding_printed(cli) -> None:  # noqa: ANN001
    res = cli("permute", CAT, FISH, "--variant", "causal")
    assert res.code == 0 and "the causal mask" in res.out and "max |diff|" in res.out
    zh = cli("permute", CAT, FISH, "--lang", "zh")
    joined = zh.out.replace("\n", "")  # Chinese prose may break between any two characters
    assert "置换不变" in joined and "位置嵌入" in joined


def test_different_tokens_exit_2_naming_them(cli) -> None:  # noqa: ANN001
    res = cli("permute", "the cat", "the dog")
    res.assert_usage_error("only in A: ' cat' (id 3797); only in B: ' dog' (id 3290)")
    cli("permute", "a a b", "a b").assert_usage_error("only in A: ' a' (id 257)")


def test_embed_without_positions_keeps_the_token_embeddings() -> None:
    ids = [10, 20, 30]
    with_pos = embed(ids, 100, 4, None, seed=5)
    without = embed(ids, 100, 4, None, seed=5, positions=False)
    torch.manual_seed(5)
    torch.empty(100, 4).normal_()  # the token table, drawn first
    pos_table = torch.empty(3, 4).normal_()  # (context_length, emb_dim)
    assert_near(without + pos_table, with_pos, atol=0, rtol=0)


def test_positions_option_on_run_explain_compare(cli) -> None:  # noqa: ANN001
    on = cli("run", "one two three", "--json").json()
    off = cli("run", "one two three", "--no-positions", "--json").json()
    assert on["config"]["positions"] is True and off["config"]["positions"] is False
    assert on["weights"] != off["weights"]
    assert cli("explain", "one two", "--no-positions").code == 0
    doc = cli("compare", "one two", "--no-positions", "--json").json()
    assert all(v["config"]["positions"] is False for v in doc["variants"])
    vectors = cli("run", "--inputs", "samples/journey.json", "--json").json()
    assert "positions" not in vectors["config"]
    cli("run", "--inputs", "samples/journey.json", "--no-positions").assert_usage_error(
        "--no-positions applies to text")
    cli("run", "x", "--model", "samples/toy-gpt2", "--no-positions").assert_usage_error(
        "--no-positions does not apply with --model")


def test_texts_far_apart_name_a_few_tokens_and_count_the_rest(cli) -> None:
    # two long unrelated texts listed every differing token: a line of 20 KB
    text_a = " ".join(f"w{i}" for i in range(3000))
    res = cli("permute", text_a, "x")
    res.assert_usage_error("only in A: 'w' (id 86)")
    line = res.err.strip()
    assert len(line) < 600 and "other token(s); only in B: 'x' (id 87)" in line
