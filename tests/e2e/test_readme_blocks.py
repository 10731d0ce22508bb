"""The README comparison itself: JSON by value, masks, elisions (tests/readme_blocks.py)."""

from __future__ import annotations

import json

from tests.readme_blocks import (
    ROUNDING,
    TIMINGS,
    Block,
    Example,
    differences,
    document_blocks,
    examples,
    listed,
    stages,
)

SHOWN = [b for b in document_blocks() if b.shows_commands]  # the README's and the docs'


def test_json_is_compared_by_value() -> None:
    example = next(e for b in SHOWN for e in examples(b) if e.shown and e.shown[0] == "{")
    compact = json.dumps(json.loads("\n".join(example.shown)), separators=(",", ":"))
    assert differences(example, compact, []) == ""
    assert differences(example, compact.replace('"seed":123', '"seed":124'), []) != ""


def test_masks_hide_times_but_not_bytes() -> None:
    shown = ("tokens  naive time  naive bytes", "   128     47.8 ms    304.0 KiB", "─────",
             "naive bytes 1.99, tiled bytes 1.00; naive time 2.46, tiled time 2.13.")
    example = Example(1, "attncli cost", shown)
    slower = ("tokens    naive time  naive bytes\n   128  10,047.8 ms    304.0 KiB\n───────\n"
              "naive bytes 1.99, tiled bytes 1.00; naive time 3.54, tiled time 1.24.\n")
    assert differences(example, slower, TIMINGS) == ""
    assert differences(example, slower.replace("304.0", "305.0"), TIMINGS) != ""
    assert differences(example, slower.replace("1.99", "1.98"), TIMINGS) != ""


def test_json_floats_match_within_the_house_bound_only() -> None:
    example = Example(1, "attncli run --json", ("[0.13854756951332092, 0.5, 3]",))
    assert differences(example, "[0.13854758441448212, 0.5, 3]", []) == ""  # AVX-512's
    assert differences(example, "[0.138557, 0.5, 3]", []) == ""  # 9.4e-6 <= 1e-5 + 1.4e-6
    assert differences(example, "[0.13857, 0.5, 3]", []) != ""  # 2.2e-5 off
    assert differences(example, "[0.13854756951332092, 0.5, 4]", []) != ""  # integers exactly


def test_printed_decimals_match_within_one_unit_of_their_last_place() -> None:
    example = Example(1, "attncli run", ("journey  0.1385  0.2379  -0.031", "rows 6 of 6 (1.99)"))
    assert differences(example, "journey  0.1386  0.2379  -0.030\nrows 6 of 6 (1.99)\n", []) == ""
    for wrong in ("journey  0.1387  0.2379  -0.031", "journey  1.1385  0.2379  -0.031",
                  "journey  0.13850  0.2379  -0.031", "journey  0.1385  0.2379  -0.031 x"):
        assert differences(example, f"{wrong}\nrows 6 of 6 (1.99)\n", []) != "", wrong
    assert differences(example, "journey  0.1385  0.2379  -0.031\nrows 6 of 6 (1.98)\n",
                       []) != ""  # fewer than three places: compared as text


def test_rounding_masks_hide_noise_but_not_a_difference() -> None:
    example = Example(1, "attncli kvcache", ("(max |diff| weights 8.9e-08, context 2.1e-07)",
                                             "(max |diff| =", "1.1e-16): invariant"))
    noise = "(max |diff| weights 3.0e-08, context 1.8e-07)\n(max |diff| =\n1.7e-16): invariant\n"
    assert differences(example, noise, ROUNDING) == ""
    assert differences(example, noise.replace("3.0e-08", "3.0e-03"), ROUNDING) != ""
    assert differences(example, noise.replace("1.7e-16", "1.7e-01"), ROUNDING) != ""


def test_an_elided_block_matches_only_around_its_gaps() -> None:
    example = Example(1, "attncli x", ("first", "…", "middle", "…", "last"))
    assert differences(example, "first\na\nmiddle\nb\nc\nlast\n", []) == ""
    assert differences(example, "first\nmiddle\nlast\n", []) == ""
    assert differences(example, "first\na\nmiddle\nlast\nmore\n", []) != ""
    assert differences(example, "first\na\nlast\n", []) != ""
    assert differences(example, "a\nfirst\nmiddle\nlast\n", []) != ""


def test_a_time_exponent_not_given_is_masked_as_one_given() -> None:
    example = Example(1, "attncli cost", ("naive time 2.46, tiled time –.",))
    assert differences(example, "naive time –, tiled time 1.07.\n", TIMINGS) == ""


def test_commands_are_read_with_their_continuations_and_output() -> None:
    block = Block(10, "text", ("$ attncli run x \\", "      --precision 2", "out 1", "",
                               "$ echo 'a | b' | attncli tokens", "out 2"))
    found = examples(block)
    assert [(e.line, e.command, e.shown) for e in found] == [
        (11, "attncli run x --precision 2", ("out 1", "")),
        (15, "echo 'a | b' | attncli tokens", ("out 2",))]
    assert stages(found[1].command) == [["echo", "a | b"], ["attncli", "tokens"]]
    assert stages("attncli run x > out.txt") is None


def test_listed_commands_keep_their_comments() -> None:
    block = Block(1, "sh", ("# set-up", "make demo    # creates .venv", "", "attncli x \\",
                            "  --y"))
    assert listed(block) == [(3, "make demo    # creates .venv"), (5, "attncli x --y")]
