"""On the real SmolLM2 (Q4_1 GGUF, from scripts/fetch_model.py): the known structure holds. On
repeated random tokens, ablating the heads `heads --probe induction` scores highest raises the
loss on the second copy (where induction predicts); ablating heads that score low does not.

"Low" is low on both the induction and the previous-token score: the circuit has two parts, and
SmolLM2's strongest previous-token head (16.0, previous_token 0.87, induction 0.00) is the head
whose ablation raises the second copy's loss most (+3.7 nats in `ablate --repeat 20 --heads
all`), as the induction circuit's previous-token head should."""

from __future__ import annotations

import pytest

from tests.gguf_fixtures import smollm2

pytestmark = pytest.mark.slow
LENGTH, COUNT = 20, 3


def _second_copy_loss(doc: dict) -> tuple[float, float]:
    rows = [r for r in doc["losses"] if r["index"] >= doc["scored_from"]]
    return (sum(r["before"] for r in rows) / len(rows), sum(r["after"] for r in rows) / len(rows))


def test_ablating_induction_heads_raises_the_second_repeats_loss(cli) -> None:  # noqa: ANN001
    model = str(smollm2())
    heads = cli("heads", "--probe", "induction", "--probe-length", str(LENGTH), "--model", model,
                "--json").json()["heads"]
    ranked = sorted(heads, key=lambda h: -h["induction"])
    quiet = sorted(heads, key=lambda h: max(h["induction"], h["previous_token"]))
    top = ",".join(f"{h['layer']}.{h['head']}" for h in ranked[:COUNT])
    low = ",".join(f"{h['layer']}.{h['head']}" for h in quiet[:COUNT])
    effects = {}
    for name, chosen in (("top", top), ("low", low)):
        doc = cli("ablate", "--repeat", str(LENGTH), "--heads", chosen, "--model", model,
                  "--json").json()
        assert doc["scored_from"] == len(doc["tokens"]) - LENGTH
        before, after = _second_copy_loss(doc)
        effects[name] = after - before
    print(f"top induction heads {top}: second-copy loss +{effects['top']:.3f} nats; "
          f"lowest {low}: {effects['low']:+.3f}")
    assert effects["top"] > 0.5  # measured +1.31 nats (18.6, 17.5, 17.4 mean-ablated)
    # Measured +0.17 nats for the three quietest heads (18.8, 14.3, 15.6) together: not zero,
    # a seventh of the induction heads' rise (a first guess of 0.1 was too tight for three).
    assert effects["top"] > 5 * abs(effects["low"])
