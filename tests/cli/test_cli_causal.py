"""`attncli ablate` and `attncli patch` end to end, equal to TransformerLens on the same
GPT-2- and Llama-shaped checkpoints (hook_z edits, patching.get_act_patch_attn_head_out_*),
within 1e-5 + 1e-5·|ref|; and every bad input one line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.encoder_fixtures import save_encoder
from tests.models.causal.tl import gpt2_pair, hooked_logits, llama_pair, z_hook
from tests.tolerance import assert_near

TEXT = "the cat sat on the mat and the cat sat on the"
CORRUPT = "the dog ran at the hat and the cat sat on the"
HAT = "the cat sat on the hat and the cat sat on the"  # as many tokens as TEXT in the Llama's


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("causal-cli-gpt2")
    return folder, gpt2_pair(folder)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("causal-cli") / "llama"
    return folder, llama_pair(folder)


def _close(got: Any, ref: Any) -> None:
    assert_near(np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64))


def _losses(logits: torch.Tensor, ids: list[int]) -> np.ndarray:
    """torch's cross-entropy of each next token, from the reference's logits."""
    return F.cross_entropy(logits[:-1].double(), torch.tensor(ids[1:]),
                           reduction="none").numpy()


def _kl(before: torch.Tensor, after: torch.Tensor) -> float:
    """torch's kl_div: KL(before ‖ after) of two logit rows."""
    return float(F.kl_div(F.log_softmax(after.double(), -1), F.log_softmax(before.double(), -1),
                          log_target=True, reduction="sum"))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_ablate_heads_equals_transformer_lens(cli, gpt2, llama, family: str) -> None:  # noqa: ANN001
    folder, bridge = gpt2 if family == "gpt2" else llama
    doc = cli("ablate", TEXT, "--model", str(folder), "--heads", "1.2,0.1", "--answer", " mat",
              "--position", "-3", "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    clean = hooked_logits(bridge, ids, [])
    _, cache = bridge.run_with_cache(torch.tensor([ids]))
    # Each head's mean over the positions of the clean run (the lower edit changes the upper
    # head's inputs; its replacement stays the clean mean).
    means = {(layer, head): cache[f"blocks.{layer}.attn.hook_z"][0, :, head].mean(0)
             for layer, head in ((1, 2), (0, 1))}
    after = hooked_logits(bridge, ids, [
        (f"blocks.{layer}.attn.hook_z", z_hook(head, lambda t, m=m: m.expand_as(t)))
        for (layer, head), m in means.items()])
    _close([r["before"] for r in doc["losses"]], _losses(clean, ids))
    _close([r["after"] for r in doc["losses"]], _losses(after, ids))
    at = len(ids) - 3
    assert doc["at"] == at and doc["heads"] == [[1, 2], [0, 1]]
    _close(doc["kl"], _kl(clean[at], after[at]))
    start = doc["answer"]["start"]
    for key, logits in (("before", clean), ("after", after)):
        ref = -_losses(logits, ids)[start - 1:].sum()
        _close(doc["answer"][key], ref)
    probs = torch.softmax(after[at].double(), -1)
    top = probs.topk(5)
    assert [e["id"] for e in doc["top"]["after"]] == top.indices.tolist()
    _close([e["prob"] for e in doc["top"]["after"]], top.values.numpy())


def test_ablate_all_ranks_every_head_as_transformer_lens(cli, gpt2) -> None:  # noqa: ANN001
    folder, bridge = gpt2
    doc = cli("ablate", TEXT, "--model", str(folder), "--how", "zero", "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    clean = hooked_logits(bridge, ids, [])
    assert len(doc["ranking"]) == 2 * 4 and doc["heads"] == "all"
    for row in doc["ranking"]:
        hook = (f"blocks.{row['layer']}.attn.hook_z", z_hook(row["head"], torch.zeros_like))
        after = hooked_logits(bridge, ids, [hook])
        _close(row["loss_change"], _losses(after, ids).mean() - _losses(clean, ids).mean())
        _close(row["kl"], _kl(clean[-1], after[-1]))
        assert row["effect"] == row["loss_change"]
    effects = [r["effect"] for r in doc["ranking"]]
    assert effects == sorted(effects, reverse=True)
    scores = cli("heads", TEXT, "--model", str(folder), "--json").json()["heads"]
    for row in doc["ranking"]:  # beside each head: `heads`' own pattern scores
        mine = next(h for h in scores if (h["layer"], h["head"]) == (row["layer"], row["head"]))
        _close(row["induction"], mine["induction"])


def test_ablate_resample_takes_the_shuffled_texts_output(cli, gpt2) -> None:  # noqa: ANN001
    from attncli.models.causal.ablate import shuffled

    folder, bridge = gpt2
    doc = cli("ablate", TEXT, "--model", str(folder), "--heads", "1.3", "--how", "resample",
              "--seed", "4", "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    _, cache = bridge.run_with_cache(torch.tensor([shuffled(ids, 4)]))
    other = cache["blocks.1.attn.hook_z"][0, :, 3]  # (T, hd)
    after = hooked_logits(bridge, ids, [("blocks.1.attn.hook_z", z_hook(3, lambda t: other))])
    _close([r["after"] for r in doc["losses"]], _losses(after, ids))
    assert "shuffled" in doc["legend"]


def _tl_grid(bridge: Any, target: list[int], source: list[int], metric: Any,
             per_position: bool = False) -> np.ndarray:
    from transformer_lens import patching

    _, cache = bridge.run_with_cache(torch.tensor([source]))
    act = (patching.get_act_patch_attn_head_out_by_pos if per_position
           else patching.get_act_patch_attn_head_out_all_pos)
    with torch.no_grad():
        return act(bridge, torch.tensor([target]), cache, metric).double().numpy()


@pytest.mark.parametrize("denoise", [True, False], ids=["denoise", "noise"])
def test_patch_logit_diff_equals_transformer_lens(cli, gpt2, denoise: bool) -> None:  # noqa: ANN001
    folder, bridge = gpt2
    doc = cli("patch", TEXT, CORRUPT, "--model", str(folder), "--tokens", " mat", " hat",
              "--denoise" if denoise else "--noise", "--attribution", "--json").json()
    right, wrong = (t["id"] for t in doc["tokens"])
    clean, corrupt = (cli("tokens", t, "--json").json() for t in (TEXT, CORRUPT))
    clean_ids = [t["id"] for t in clean["tokens"]]
    corrupt_ids = [t["id"] for t in corrupt["tokens"]]

    def metric(logits: torch.Tensor) -> torch.Tensor:
        return logits[0, -1, right].double() - logits[0, -1, wrong].double()

    target, source = (corrupt_ids, clean_ids) if denoise else (clean_ids, corrupt_ids)
    _close(doc["raw"], _tl_grid(bridge, target, source, metric))
    base = {k: float(metric(hooked_logits(bridge, ids, [])[None]))
            for k, ids in (("clean", clean_ids), ("corrupt", corrupt_ids))}
    _close([doc["baseline"]["clean"], doc["baseline"]["corrupt"]],
           [base["clean"], base["corrupt"]])
    shift = base["corrupt" if denoise else "clean"]
    _close(doc["grid"], (np.array(doc["raw"]) - shift) / (base["clean"] - base["corrupt"]))
    # Attribution patching agrees with the exact grid on this model's 8 heads: a rank
    # correlation of at least 0.6 (measured 0.95 denoising here; a first-order estimate).
    assert doc["attribution"]["spearman"] >= 0.6


def test_patch_answer_metric_equals_transformer_lens(cli, llama) -> None:  # noqa: ANN001
    folder, bridge = llama
    doc = cli("patch", TEXT, HAT, "--model", str(folder), "--metric", "answer",
              "--answer", " mat", "--json").json()
    full = [t["id"] for t in cli("tokens", TEXT + " mat", "--model", str(folder),
                                 "--json").json()["tokens"]]
    bad = [t["id"] for t in cli("tokens", HAT + " mat", "--model", str(folder),
                                "--json").json()["tokens"]]
    start = len(cli("tokens", TEXT, "--model", str(folder), "--json").json()["tokens"])
    assert doc["clean"][start:] and len(doc["clean"]) == len(full)

    def metric(logits: torch.Tensor) -> torch.Tensor:
        log_probs = torch.log_softmax(logits[0, start - 1:-1].double(), -1)
        return log_probs.gather(-1, torch.tensor(full[start:])[:, None]).sum()

    _close(doc["raw"], _tl_grid(bridge, bad, full, metric))


@pytest.mark.slow
def test_patch_per_position_with_an_answer_equals_transformer_lens(cli, llama) -> None:  # noqa: ANN001
    """The answer's rows span positions: a patch between them runs from the first row read,
    one after the last row read is the target's own metric (no run), every cell as TL's."""
    folder, bridge = llama
    doc = cli("patch", TEXT, HAT, "--model", str(folder), "--answer", " mat", "--per-position",
              "--json").json()
    full, bad = ([t["id"] for t in cli("tokens", text + " mat", "--model", str(folder),
                                       "--json").json()["tokens"]] for text in (TEXT, HAT))
    start = len(cli("tokens", TEXT, "--model", str(folder), "--json").json()["tokens"])
    assert len(full) - start >= 2  # the answer's rows: more than one position

    def metric(logits: torch.Tensor) -> torch.Tensor:
        log_probs = torch.log_softmax(logits[0, start - 1:-1].double(), -1)
        return log_probs.gather(-1, torch.tensor(full[start:])[:, None]).sum()

    ref = _tl_grid(bridge, bad, full, metric, per_position=True)  # (layer, pos, head) denoise
    clean, corrupt = (float(metric(hooked_logits(bridge, ids, [])[None])) for ids in (full, bad))
    _close(doc["positions"], (ref.transpose(0, 2, 1) - corrupt) / (clean - corrupt))


@pytest.mark.slow
def test_patch_per_position_equals_transformer_lens(cli, gpt2) -> None:  # noqa: ANN001
    folder, bridge = gpt2
    clean, corrupt = "the cat sat on the", "the dog sat on the"
    doc = cli("patch", clean, corrupt, "--model", str(folder), "--tokens", " mat", " hat",
              "--per-position", "--json").json()
    right, wrong = (t["id"] for t in doc["tokens"])
    ids = [[t["id"] for t in cli("tokens", x, "--json").json()["tokens"]] for x in (clean, corrupt)]

    def metric(logits: torch.Tensor) -> torch.Tensor:
        return logits[0, -1, right].double() - logits[0, -1, wrong].double()

    ref = _tl_grid(bridge, ids[1], ids[0], metric, per_position=True)  # (layer, pos, head)
    base = metric(hooked_logits(bridge, ids[0], [])[None]) - metric(
        hooked_logits(bridge, ids[1], [])[None])
    shift = float(metric(hooked_logits(bridge, ids[1], [])[None]))
    _close(doc["positions"], (ref.transpose(0, 2, 1) - shift) / float(base))


BAD = [
    (("ablate", TEXT, "--heads", "2.0"), "layer 2 is out of range: the model has 2 layers"),
    (("ablate", TEXT, "--heads", "0.4"), "head 4 is out of range: each layer has 4 heads"),
    (("ablate", TEXT, "--heads", "-3.0"), "layer -3 is out of range"),
    (("ablate", TEXT, "--heads", "1,2"), "--heads '1' is not LAYER.HEAD"),
    (("ablate", TEXT, "--heads", "1.0", "--position", "12"), "--position 12 is outside the 12 "
     "tokens"),
    (("ablate", TEXT, "--answer", ""), "--answer is empty"),
    (("ablate", "the", "--heads", "0.0"), "causal checks need at least 2 tokens (got 1)"),
    (("ablate", "--repeat", "4096", "--heads", "0.0"), "--repeat 4,096: 8193 tokens is more "
     "than this model's context of 128 positions (n_positions); use a --repeat of at most 63"),
    (("patch", TEXT, CORRUPT, "--tokens", " mat", " hatstand"),
     "--tokens ' hatstand' is 2 tokens after the text in this model's vocabulary, not one"),
    (("patch", TEXT, CORRUPT), "give --tokens RIGHT WRONG or --answer TEXT"),
    (("patch", TEXT, CORRUPT, "--metric", "logit-diff"),
     "--metric logit-diff needs --tokens RIGHT WRONG"),
    (("patch", TEXT, CORRUPT, "--metric", "answer"), "--metric answer needs --answer TEXT"),
    (("patch", TEXT, "the dog", "--tokens", " mat", " hat"),
     "CLEAN and CORRUPT must be the same number of tokens, position for position: CLEAN is 12 "
     "('the' | ' cat' | ' sat' | ' on' | ' the' | ' mat' | ' and' | ' the' | ' cat' | ' sat' | "
     "' on' | ' the'), CORRUPT is 2 ('the' | ' dog')"),
    (("patch", TEXT, TEXT, "--tokens", " mat", " hat"), "CLEAN and CORRUPT give the same "
     "metric"),  # the grid divides by their difference: it was the raw difference, unsaid
    (("patch", TEXT, CORRUPT, "--tokens", " mat", " hat", "--no-exact"),
     "--no-exact leaves nothing to compute without --attribution"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a[2:])[:40] for a, _ in BAD])
def test_bad_input_is_one_line(cli, gpt2, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    folder, _ = gpt2
    run = cli(*args, "--model", str(folder))
    assert run.code == 2, run.err
    assert run.out == ""
    assert run.err.count("\n") == 1 and message in run.err, run.err


def test_an_encoder_is_refused(cli, tmp_path: Path) -> None:  # noqa: ANN001
    save_encoder(tmp_path, "bert", seed=3)
    for args in (("ablate", "a b c"), ("patch", "a b c", "a b d", "--tokens", "a", "b")):
        run = cli(*args, "--model", str(tmp_path))
        assert run.code == 2 and run.out == ""
        assert run.err == ("attncli: error: BERT-style encoder models have no next-token logits to "
                           "ablate or patch: use a decoder (GPT-2 or a Llama-family "
                           "checkpoint)\n")


def test_heads_effect_is_ablates_mean_ranking(cli, gpt2) -> None:  # noqa: ANN001
    """`heads --effect`: each head's mean-ablation loss rise, as `ablate --heads all` (checked
    against TransformerLens above) gives it; the rest of `heads`' JSON unchanged."""
    folder, _ = gpt2
    plain = cli("heads", TEXT, "--model", str(folder), "--json").json()
    with_effect = cli("heads", TEXT, "--model", str(folder), "--effect", "--json").json()
    ranking = cli("ablate", TEXT, "--model", str(folder), "--json").json()["ranking"]
    loss = {(r["layer"], r["head"]): r["loss_change"] for r in ranking}
    for row, bare in zip(with_effect["heads"], plain["heads"], strict=True):
        effect = row.pop("effect")
        assert row == bare
        _close(effect, loss[(row["layer"], row["head"])])


def test_show_draws_ablate_and_patch_json_as_the_commands_do(cli, gpt2,  # noqa: ANN001
                                                              tmp_path: Path) -> None:
    """show reads ablate's and patch's JSON back (with or without their kind: their documents
    hold "heads" and "model" as a heads document does) and prints the commands' own tables,
    through the same renderers; show --json gives the document back."""
    import json

    folder, _ = gpt2
    model = ("--model", str(folder))
    runs = {"ablate": ("ablate", TEXT, *model, "--heads", "1.2", "--answer", " on"),
            "ranking": ("ablate", TEXT, *model, "--how", "zero"),
            "patch": ("patch", TEXT, CORRUPT, *model, "--tokens", " mat", " hat",
                      "--attribution")}
    for name, args in runs.items():
        table, doc = cli(*args), cli(*args, "--json").json()
        assert table.code == 0, table.err
        for written in (doc, {k: v for k, v in doc.items() if k != "kind"}):
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(written))
            shown = cli("show", str(path))
            assert shown.code == 0, shown.err
            assert shown.out == table.out
            assert cli("show", str(path), "--json").json() == doc
    cli("show", str(path), "--head", "1").assert_usage_error(
        "--head does not apply to `patch` JSON")


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("how"), "saved file: the file has no 'how'"),
    (lambda d: d.update(at=10**6), "saved file: at is 1000000, outside"),
    (lambda d: d["losses"][0].update(before="x"), "losses[0].before is \"x\", not a finite"),
    (lambda d: d.update(heads=[[1]]), "heads[0] has 1 items, expected 2"),
    # whole parts, but not what its tables draw
    (lambda d: d["losses"][0].pop("after"), "losses must list each token's loss after"),
    (lambda d: d.update(losses=[]), "losses must list each token's loss after"),
    (lambda d: d.update(heads="all"), "heads is \"all\" but there is no ranking"),
])
def test_show_refuses_a_broken_ablate_json_in_one_line(cli, gpt2, tmp_path: Path,  # noqa: ANN001
                                                       change: Any, message: str) -> None:
    import json

    folder, _ = gpt2
    doc = cli("ablate", TEXT, "--model", str(folder), "--heads", "1.2", "--json").json()
    change(doc)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    cli("show", str(path)).assert_usage_error(message)
