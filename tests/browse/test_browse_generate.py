"""browse on a generation (browse --generate, --generation FILE): each layer a row of heads,
the query of answer step s holding that step's own weights, the rest empty."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attncli.browse.app import BrowseApp
from attncli.browse.generation import generation_matrices, generation_source
from attncli.models.generate.run import generate_model
from attncli.models.generate.sampling import Sampling
from attncli.records.asking import GenerationRequest
from attncli.render.jsonout import json_pieces
from tests.browse.test_browse import drive, ranked, screen_text, settle
from tests.llama_fixtures import save_family

# Longer than the head view's window (14 rows at 100 × 30): the answer's rows start below it.
PROMPT = "the cat sat on the mat and the dog ran after it because it was there"


@pytest.fixture(scope="module")
def answered(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("browse-generate") / "llama"
    save_family(folder, "llama", seed=21)
    return folder, generate_model(GenerationRequest(
        str(folder), PROMPT, sampling=Sampling(max_new_tokens=4), raw=True,
        view="raw", exclude_sinks=False))


def test_each_steps_query_row_holds_its_own_weights_and_the_rest_is_empty(answered: Any) -> None:
    _, result = answered
    p, n = len(result.prompt), len(result.answer)
    matrices = generation_matrices(result)  # (layers, heads, T, T)
    assert matrices.shape == (3, 4, p + n, p + n)
    for s, held in enumerate(result.weights):
        np.testing.assert_array_equal(matrices[:, :, p - 1 + s, :p + s], held)
        assert np.isnan(matrices[:, :, p - 1 + s, p + s:]).all()
    steps = [p - 1 + s for s in range(n)]
    others = [q for q in range(p + n) if q not in steps]
    assert np.isnan(matrices[:, :, others]).all()


def test_the_head_view_opens_on_the_answer_and_ranks_each_steps_keys(answered: Any) -> None:
    """browse --generate opens on answer token 0's step, its rows at the top of the window, and
    names each step's answer token as `generate` numbers them (from 0, its `#` column)."""
    _, result = answered
    p, n = len(result.prompt), len(result.answer)
    source = generation_source(result)
    assert source.tokens == result.labels() and [r.name for r in source.rows] == [
        "layer 0", "layer 1", "layer 2"]

    async def script(app: BrowseApp, pilot: Any) -> None:
        assert "answer of 4 tokens" in screen_text(app)
        await pilot.press("down", "right", "enter")  # L1 h1: opens on the answer's first step
        await settle(app, pilot)
        assert type(app.screen).__name__ == "HeadScreen" and app.sel.query == p - 1
        for step in (0, 2):
            text = screen_text(app)
            first, last = map(int, re.search(r"exact weights: queries (\d+)–(\d+)",
                                             text).groups())  # type: ignore[union-attr]
            assert first <= p - 1 and last >= p + n - 2 and last - first < p  # every step's row
            assert (f"query {p - 1 + step} {source.tokens[p - 1 + step]!r}, which chose answer "
                    f"token {step} {result.answer[step].text!r}, attends most to:") in text
            row = np.asarray(result.weights[step], dtype=np.float64)[1, 1]  # (P + step,)
            shown = ranked(text)  # as many as the panel has lines for
            assert len(shown) >= 3 and shown == list(np.argsort(-row, kind="stable"))[:len(shown)]
            await pilot.press("right", "right")
            await settle(app, pilot)
        await pilot.press("q")

    app = drive(source, script)
    assert app.return_code == 0


def test_the_cli_needs_a_terminal_and_a_model(cli, answered: Any, tmp_path: Path,  # noqa: ANN001
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import attncli.cli.commands.browse as browse

    folder, result = answered
    piped = cli("browse", "the cat", "--generate", "--model", str(folder))
    assert piped.code == 2 and "needs a terminal" in piped.err
    monkeypatch.setattr(browse, "check_terminal", lambda: None)
    shown: list[Any] = []

    class Recorder:
        def __init__(self, source: Any, **kwargs: Any) -> None:
            shown.append(source)
            self.return_code = 0

        def run(self) -> None:
            pass

    monkeypatch.setattr("attncli.browse.app.BrowseApp", Recorder)
    missing = cli("browse", "the cat", "--generate")
    assert missing.code == 2 and "needs --model" in missing.err
    ran = cli("browse", PROMPT, "--generate", "--raw", "--max-new-tokens", "4", "--model",
              str(folder))
    assert ran.code == 0, ran.err
    saved = tmp_path / "answer.json"
    saved.write_bytes(b"".join(json_pieces(result.to_dict())))  # as --json writes it
    again = cli("browse", "--generation", str(saved))
    assert again.code == 0, again.err
    assert len(shown) == 2 and shown[0].tokens == shown[1].tokens == result.labels()
    assert "made with the occlusion view (the default, --view auto)" in shown[0].title
    for row in range(3):
        np.testing.assert_array_equal(shown[0].get(row).weights, shown[1].get(row).weights)


def test_a_given_answer_names_its_turns_view_and_receipt(tmp_path: Path) -> None:
    from attncli.models.generate.receipt import read_logprobs
    folder = tmp_path / "llama"
    save_family(folder, "llama", seed=21)
    (folder / "tokenizer_config.json").write_text(
        '{"chat_template": "{% for m in messages %}{{ \'<|im_start|>\' + m[\'role\'] + \'\\\\n\' '
        '+ m[\'content\'] + \'<|im_end|>\\\\n\' }}{% endfor %}{% if add_generation_prompt %}'
        '{{ \'<|im_start|>assistant\\\\n\' }}{% endif %}", "eos_token": "<|im_end|>"}')
    logprobs = tmp_path / "logprobs.json"
    logprobs.write_text('{"logprobs": [{"token": "sat", "logprob": -2.5}, '
                        '{"token": " on", "logprob": -9.0}]}')
    result = generate_model(GenerationRequest(
        str(folder), messages=[{"role": "user", "content": "the cat"}],
        reported=read_logprobs(logprobs), view="raw", exclude_sinks=False))
    title = generation_source(result).title
    assert "a given answer, teacher-forced, of" in title and "made with the raw view" in title
    turn = result.turns[0]
    assert f"turns: [user] {turn.start}–{turn.end - 1}" in title
    assert result.receipt is not None
    assert f"receipt: largest difference {result.receipt.largest.difference:+.4f}" in title


def test_the_overview_shows_the_turns_and_the_receipts_rows(tmp_path: Path) -> None:
    from attncli.models.generate.receipt import read_logprobs
    folder = tmp_path / "llama"
    save_family(folder, "llama", seed=21)
    logprobs = tmp_path / "logprobs.json"  # ' on' altered by hand: flagged
    logprobs.write_text('{"logprobs": [{"token": "sat", "logprob": -2.5}, '
                        '{"token": " on", "logprob": -40.0}]}')
    result = generate_model(GenerationRequest(str(folder), "the cat", raw=True,
                                              view="raw", exclude_sinks=False,
                                              reported=read_logprobs(logprobs)))
    assert result.receipt is not None
    on = next(r for r in result.receipt.rows if r.text == " on")
    source = generation_source(result)
    flagged = (f"  flagged: ' on' attncli {on.attncli:.4f}, runtime -40.0000 "
               f"({on.difference:+.4f} nat)")
    assert flagged in source.notes
    assert source.notes[0].startswith("receipt: largest difference")
    assert any(line.startswith("  largest: ' on'") for line in source.notes)

    shown: list[str] = []

    async def read(app: BrowseApp, pilot: Any) -> None:
        shown.append(screen_text(app))

    drive(source, read, size=(160, 30))
    assert flagged.strip() in shown[0]  # on the screen, not only in the title line
