"""The flags renamed so that one name means one thing (issue #48): display's --view is --draw
(generate's --view ranks the prompt tokens), ablate's and patch's --at is --position (generate's
and show's --at is an answer token), and the head counts of run and its kin, `heads` and `cost`
are --num-heads (ablate's --heads lists L.H heads). Each old spelling is still taken, hidden from
--help, with one line on stderr, and refused beside its new one; show's --view resolves by value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TEXT = "the cat sat on the mat and the cat sat on the"
TOY = "samples/toy-gpt2"


def _note(old: str, new: str) -> str:
    return f"attncli: {old} is now {new} (the old spelling goes in the next release)\n"


# (command's arguments, the new flag and its value, the old flag)
RENAMED = [
    (("run", "one two three", "--json"), ("--draw", "heatmap"), "--view"),
    (("compare", "one two three", "--json"), ("--draw", "table"), "--view"),
    (("explain", "one two three", "--json"), ("--draw", "table"), "--view"),
    (("run", "one two three", "--variant", "multihead", "--json"), ("--num-heads", "4"), "--heads"),
    (("kvcache", "one two three", "--variant", "multihead", "--json"), ("--num-heads", "4"),
     "--heads"),
    (("heads", TEXT, "--model", TOY, "--json"), ("--num-heads", "4"), "--heads"),
    (("ablate", TEXT, "--model", TOY, "--heads", "0.0", "--json"), ("--position", "3"), "--at"),
    (("patch", TEXT, "the dog ran at the hat and the cat sat on the", "--model", TOY, "--answer",
      " mat", "--json"), ("--position", "-2"), "--at"),
]


@pytest.mark.parametrize(("args", "new", "old"), RENAMED,
                         ids=[f"{a[0]} {o}" for a, _, o in RENAMED])
def test_an_old_spelling_is_taken_with_a_note_and_hidden(
        cli, args: tuple[str, ...], new: tuple[str, str], old: str) -> None:  # noqa: ANN001
    flag, value = new
    by_new, by_old = cli(*args, flag, value), cli(*args, old, value)
    assert by_new.code == by_old.code == 0, by_old.err
    assert json.loads(by_old.out) == json.loads(by_new.out)
    assert by_old.err == _note(old, flag) and _note(old, flag) not in by_new.err
    both = cli(*args, flag, value, old, value)
    assert both.code == 2 and both.err == f"attncli: error: {old} is the old spelling of {flag}: " \
        "give one\n"
    shown = cli(args[0], "--help").out
    assert f"{flag} " in shown and f"{old} " not in shown.replace("--heads all", "")


def test_cost_takes_num_heads_and_its_old_spelling(cli) -> None:  # noqa: ANN001
    """cost's head count, refused here before anything is measured: the old spelling is read
    as the new one (the refusal names --num-heads) with the note before it."""
    new = cli("cost", "--num-heads", "3", "--emb-dim", "64")
    old = cli("cost", "--heads", "3", "--emb-dim", "64")
    assert new.code == old.code == 2
    assert old.err == _note("--heads", "--num-heads") + new.err
    assert "--num-heads " in cli("cost", "--help").out


def test_position_names_itself_when_out_of_range(cli) -> None:  # noqa: ANN001
    bad = cli("ablate", TEXT, "--model", TOY, "--heads", "0.0", "--position", "12")
    assert bad.code == 2 and bad.err.startswith("attncli: error: --position 12 is outside the 12 "
                                                "tokens")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run's JSON and a generation's made with the value view (it holds raw weights and the
    value norms, not occlusion)."""
    from attncli.cli.main import execute

    folder = tmp_path_factory.mktemp("renamed")
    files = {"run": folder / "run.json", "generate": folder / "generate.json"}
    assert execute(["run", "one two three", "--save-json", str(files["run"]), "-q"]) == 0
    assert execute(["generate", "the cat", "--model", TOY, "--raw", "--max-new-tokens", "2",
                    "--view", "value", "--save-json", str(files["generate"]), "-q"]) == 0
    return files


def test_show_view_names_a_generations_view_or_is_old_draw(cli, saved: dict[str, Path]) -> None:  # noqa: ANN001
    """show --view: raw, value or occlusion draw a saved generation in that view (if it holds
    it; as made by default); table, heatmap or auto are --draw's old spelling, with the note."""
    generation = str(saved["generate"])
    made = cli("show", generation)
    assert made.code == 0 and "value" in made.out
    assert cli("show", generation, "--view", "value").out == made.out
    raw = cli("show", generation, "--view", "raw")
    assert raw.code == 0 and raw.out != made.out and raw.err == ""
    missing = cli("show", generation, "--view", "occlusion")
    assert missing.code == 2 and "the occlusion view needs what this result did not compute" \
        in missing.err
    run = str(saved["run"])
    drawn, old = cli("show", run, "--draw", "heatmap"), cli("show", run, "--view", "heatmap")
    assert drawn.code == old.code == 0 and old.out == drawn.out
    assert old.err == _note("--view", "--draw") and drawn.err == ""
    assert cli("show", run, "--view", "heatmap", "--draw", "table").err == \
        "attncli: error: --view is the old spelling of --draw: give one\n"
    not_generation = cli("show", run, "--view", "raw")
    assert not_generation.code == 2 and "apply to `generate` JSON only" in not_generation.err
    unknown = cli("show", run, "--view", "bars")
    assert unknown.code == 2 and unknown.err == "attncli: error: --view must be one of raw, " \
        "value, occlusion (a saved generation's view) or, as --draw, auto, table, heatmap (got " \
        "'bars')\n"


@pytest.mark.parametrize("args, suggested", [
    (("run", "x", "--headz", "2"), "(Possible options: --head, --num-heads)"),
    (("run", "x", "--top-kk", "2"), "(Possible options: --top-keys)"),
    (("ablate", "x", "--att", "2"), "(Possible options: --repeat, --top)")])
def test_a_mistyped_option_is_never_pointed_at_an_old_spelling(cli, args: tuple[str, ...],  # noqa: ANN001
                                                                suggested: str) -> None:
    """--heads, --top-k and --at are hidden old spellings: click suggested them beside the
    new names, as if both were current."""
    run = cli(*args)
    assert run.code == 2 and run.err.endswith(f"{suggested}\n"), run.err
