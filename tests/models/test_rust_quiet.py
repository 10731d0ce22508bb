"""What a Rust panic prints on file descriptor 2 never reaches the user: one line only."""

from __future__ import annotations

import os

import pytest

from attncli.errors import AttnCliError
from attncli.models.hf_tokens import _calling


def test_panic_lines_on_fd2_are_dropped_and_one_line_raised(capfd: pytest.CaptureFixture[str]
                                                            ) -> None:
    def panics() -> None:
        os.write(2, b"thread '<unnamed>' panicked at src/normalizers/replace.rs:1:1\n")
        raise BaseException("called `Result::unwrap()` on an `Err` value\nnote: backtrace")

    with pytest.raises(AttnCliError) as err:
        _calling(panics, "the tokenizer failed on this text")
    assert str(err.value) == ("the tokenizer failed on this text: called `Result::unwrap()` on "
                              "an `Err` value")
    assert "panicked" not in capfd.readouterr().err


def test_fd2_is_restored_after_a_call(capfd: pytest.CaptureFixture[str]) -> None:
    assert _calling(lambda: 3, "x") == 3
    os.write(2, b"after\n")
    assert "after" in capfd.readouterr().err
