"""The contract slips fixed with the reshape: --head in the JSON, options that cannot apply."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import SENTENCE, CliRun

Cli = Callable[..., CliRun]


@pytest.mark.parametrize("extra", [[], ["--impl", "tiled"]])
def test_head_json_holds_that_head_alone(cli: Cli, extra: list[str]) -> None:
    args = ("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--json", *extra)
    both = cli(*args).json()
    one = cli(*args, "--head", "1", "--query", "2").json()
    assert one["config"]["head"] == 1 and "head" not in both["config"]
    assert one["weights"] == [both["weights"][1]]
    assert len(one["query"]["weights"]) == 1
    assert one["context"] == both["context"]
    if extra:
        assert one["summary"] == [both["summary"][1]]
        assert one["stats"]["lse"] == [both["stats"]["lse"][1]]


def test_head_json_on_explain_filters_every_per_head_stage(cli: Cli) -> None:
    args = ("explain", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--json")
    both, one = cli(*args).json(), cli(*args, "--head", "0").json()
    for name in ("queries", "keys", "values", "scores", "scaled", "masked", "softmax"):
        assert one["stages"][name] == [both["stages"][name][0]], name
    assert one["stages"]["heads_context"] == both["stages"]["heads_context"]


@pytest.mark.parametrize(("args", "message"), [
    (["run", SENTENCE, "--layer", "1"], "--layer applies with --model only"),
    (["explain", SENTENCE, "--layer", "0"], "--layer applies with --model only"),
    (["run", SENTENCE, "--impl", "naive", "--top-keys", "3"],
     "--top-keys applies to the tiled path"),
    (["run", SENTENCE, "--impl", "naive", "--pool", "mean"], "--pool applies to the tiled path"),
    (["run", SENTENCE, "--impl", "naive", "--full", "--json"],
     "--full applies to the tiled path"),
    (["run", "--inputs", "samples/journey.json", "--context-length", "9"],
     "--context-length applies to text input"),
    (["run", SENTENCE, "--seed", str(2**64)], "--seed 18446744073709551616 is out of range"),
    (["run", SENTENCE, "--head", "2", "--variant", "multihead"], "--head 2 is out of range"),
])
def test_options_that_cannot_apply_are_refused(cli: Cli, args: list[str], message: str) -> None:
    res = cli(*args)
    assert res.code == 2 and res.out == ""
    assert res.err.startswith("attncli: error: ") and message in res.err
    assert res.err.count("\n") == 1


TOY = "samples/toy-gpt2"
# Each command's --json and the kind its document says it is (show reads them by it).
KINDS = [
    (("run", SENTENCE), "run"), (("run", SENTENCE, "--impl", "tiled"), "run"),
    (("explain", SENTENCE), "run"), (("compare", SENTENCE, "--variants", "qkv,causal"), "compare"),
    (("heads", SENTENCE, "--model", TOY), "heads"), (("tokens", SENTENCE), "tokens"),
    (("permute", "猫吃鱼", "鱼吃猫"), "permute"), (("kvcache", SENTENCE), "kvcache"),
    (("flash", SENTENCE, "--block", "2"), "flash"), (("cost", "--max-tokens", "256"), "cost"),
    (("models",), "models"), (("config", "list"), "config"),
]


@pytest.mark.parametrize(("args", "kind"), KINDS, ids=[" ".join(a[:2]) for a, _ in KINDS])
def test_every_document_says_its_kind(cli: Cli, args: tuple[str, ...], kind: str) -> None:
    run = cli(*args, "--json")
    assert run.code == 0, run.err
    assert next(iter(run.json().items())) == ("kind", kind)  # the first key, the kind
