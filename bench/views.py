"""Which view of an answer token's attention says what the answer needed: each view against
occlusion (the drop in the answer token's log-probability when a prompt token is masked).

On SmolLM2 (chat template, greedy answers of --new tokens) over PROMPTS (facts, lists, code,
Chinese): per answer token, the Spearman rank correlation between a view's row over the
prompt's own tokens (the template's tokens and the first token left out, as every view leaves
them out) and occlusion's drops over the same tokens, averaged over answer tokens, then over
prompts; and how often the view's top prompt token is a function word or punctuation.

    python bench/views.py [--model FILE] [--new 8] [--raw] [--json]

Not a timing: the numbers are the same on any machine.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SMOLLM2 = Path.home() / ".cache" / "attncli" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPTS = {
    "facts": ["What is the capital of France?", "Who wrote Romeo and Juliet?",
              "What is the largest planet in the solar system?",
              "At what temperature does water boil in Celsius?",
              "Which animal is known as the king of the jungle?",
              "What language is spoken in Brazil?", "How many legs does a spider have?",
              "What colour is the sky on a clear day?", "Who painted the Mona Lisa?",
              "What is the chemical symbol for gold?"],
    "lists": ["List three primary colours.", "Name four seasons of the year.",
              "Give three fruits that are red.", "List the first five even numbers.",
              "Name three planets closest to the sun.", "Give three words that rhyme with cat.",
              "List three animals that live in the ocean."],
    "code": ["Write a Python function that adds two numbers.",
             "In Python, how do I reverse a list called items?",
             "Write a SQL query that selects all rows from the users table.",
             "What does the JavaScript expression 2 + '2' return?",
             "Write a Python loop that prints the numbers 1 to 3.",
             "How do I read a file called data.txt in Python?",
             "What keyword defines a function in Python?"],
    "chinese": ["法国的首都是哪里？", "一年有几个季节？", "请列出三种水果。", "水在多少度沸腾？",
                "天空是什么颜色的？", "谁写了《红楼梦》？"],
}
FUNCTION_WORDS = set("""a an the of to in on at by for with from and or but if is are was were be
been am do does did what which who whom whose how why when where that this these those it its
i you he she we they me him her us them my your his our their as than then so not no yes can
could will would should shall may might must has have had there here about into over under
please give name list write""".split()) | set("的了是在吗呢吧和与也都就很哪里什么谁几")
PUNCTUATION = re.compile(r"^[\W_]*$")


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank."""
    order = values.argsort(kind="stable")
    ranked = np.empty(len(values))
    ranked[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranked[tied] = ranked[tied].mean()
    return ranked


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rho of a and b, None where either is constant."""
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def is_function(text: str) -> bool:
    """A function word or punctuation (or whitespace), as a reader would not call a reason."""
    word = text.strip().lower()
    return not word or bool(PUNCTUATION.match(word)) or word in FUNCTION_WORDS


_HF: dict[str, Any] = {}


def _gradient_rows(model: str, ids: list[int], p: int,
                   left_out: list[int]) -> dict[str, Callable[[int], np.ndarray]]:
    """Two first-order estimates of occlusion, per answer token s, from transformers' forward
    over the same GGUF (dequantized) and one backward of log p(answer token s):
    attn_grad: Σ over layers, heads and queries i ≠ j of α_ij (g_ij - Σ_k α_ik g_ik), g = ∂ log p
    / ∂α: the derivative of the drop when key j's weight is scaled down and the rest
    renormalised (masking it is the far end); grad_input: -(∂ log p / ∂e_j) · e_j, the
    embedding's gradient times itself (zeroing it, to first order)."""
    import torch
    from transformers import AutoModelForCausalLM

    if model not in _HF:
        path = Path(model)
        _HF[model] = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, attn_implementation="eager",
            dtype=torch.float32).eval()
    hf = _HF[model]
    embeds = hf.get_input_embeddings()(torch.tensor([ids])).detach().requires_grad_(True)
    out = hf(inputs_embeds=embeds, output_attentions=True)
    logprobs = torch.log_softmax(out.logits[0].double(), dim=-1)  # (T, vocab)
    n = len(ids)
    attn_grad, grad_input = [], []
    for s in range(n - p):
        target = logprobs[p - 1 + s, ids[p + s]]
        grads = torch.autograd.grad(target, [embeds, *out.attentions], retain_graph=True)
        grad_input.append((-(grads[0][0] * embeds[0]).sum(-1))[:p].detach().numpy())
        score = torch.zeros(n, dtype=torch.float64)
        for alpha, g in zip(out.attentions, grads[1:], strict=True):  # (1, H, T, T) each
            a, g = alpha[0].detach().double(), g[0].double()  # (H, T, T)
            centred = a * (g - (a * g).sum(-1, keepdim=True))  # (H, T, T)
            centred = centred * (1 - torch.eye(n, dtype=torch.float64))  # query j keeps j
            score += centred.sum(dim=(0, 1))  # (T,)
        attn_grad.append(score[:p].detach().numpy())
    for row in (*attn_grad, *grad_input):
        row[left_out] = 0.0
    return {"attn_grad": lambda s: attn_grad[s], "grad_input": lambda s: grad_input[s]}


def measure(model: str, prompt: str, new: int, raw: bool,
            gradients: bool = False) -> dict[str, dict[str, float]]:
    """Each view's mean Spearman with occlusion and its function-word share, on one prompt."""
    from attncli.models.generate.run import generate_model
    from attncli.models.generate.sampling import Sampling
    from attncli.records.asking import GenerationRequest
    from attncli.records.generation import GenerateView

    sampling = Sampling(max_new_tokens=new)
    result = generate_model(GenerationRequest(model, prompt, sampling=sampling, raw=raw,
                                              view="raw", exclude_sinks=False,
                                              also=("value", "occlusion"), occlude="token"))
    # The same greedy answer again, occluded a word at a time (its tokens masked together).
    by_word = generate_model(GenerationRequest(model, prompt, sampling=sampling, raw=raw,
                                               view="raw", exclude_sinks=False,
                                               also=("occlusion",)))
    assert [t.id for t in by_word.answer] == [t.id for t in result.answer], "greedy twice"
    p, sinks = len(result.prompt), set(result.sinks)
    content = [j for j in range(p) if j not in sinks]
    out: dict[str, dict[str, float]] = {}
    layers = result.model.layers
    late = (layers // 2, layers)
    views = {"raw": GenerateView(kind="raw"), "value": GenerateView(kind="value"),
             "raw_with_sinks": GenerateView(kind="raw", exclude_sinks=False),
             "raw_late": GenerateView(kind="raw", layers=late),
             "value_late": GenerateView(kind="value", layers=late),
             "value_max": GenerateView(kind="value", combine="max")}
    drops = [np.asarray(result.row(s, GenerateView(kind="occlusion")))[content]
             for s in range(len(result.answer))]
    rows: dict[str, Callable[[int], np.ndarray]] = {
        name: (lambda s, v=view: np.asarray(result.row(s, v))[:p]) for name, view in views.items()}
    occluded = GenerateView(kind="occlusion")
    rows["occlusion_word"] = lambda s: np.asarray(by_word.row(s, occluded))[:p]
    if gradients:
        ids = [t.id for t in result.prompt] + [t.id for t in result.answer]
        rows.update(_gradient_rows(model, ids, p, sorted(set(result.left_out()))))
    rows["occlusion"] = lambda s: np.asarray(result.row(s, occluded))[:p]
    for name, row_of in rows.items():
        rhos, function = [], []
        for s in range(len(result.answer)):
            row = row_of(s)
            if name != "occlusion":
                rho = spearman(row[content], drops[s])
                if rho is not None:
                    rhos.append(rho)
            top = max(content if name != "raw_with_sinks" else range(p),
                      key=lambda j, r=row: (r[j], -j))
            function.append(is_function(result.prompt[top].text))
        out[name] = {"spearman": statistics.fmean(rhos) if rhos else float("nan"),
                     "function_top": statistics.fmean(function)}
    return out


def _mean(values: Iterable[float]) -> float:
    """The mean of the values that are numbers (a constant row gives no correlation)."""
    kept = [v for v in values if not np.isnan(v)]
    return statistics.fmean(kept) if kept else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(SMOLLM2))
    parser.add_argument("--new", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--raw", action="store_true",
                        help="the prompt without the chat template (a pass of 14 tokens, not 50)")
    parser.add_argument("--gradients", action="store_true",
                        help="also attention x gradient and gradient x input (transformers)")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, dict[str, float]]]] = {}
    # Kinds taken in turn, so that a run stopped early has measured each of them.
    turns = [(kind, prompts[i]) for i in range(max(map(len, PROMPTS.values())))
             for kind, prompts in PROMPTS.items() if i < len(prompts)]
    for kind, prompt in turns:
        rows.setdefault(kind, []).append(measure(args.model, prompt, args.new, args.raw,
                                                 args.gradients))
        print(json.dumps({"kind": kind, "prompt": prompt, "views": rows[kind][-1]},
                         ensure_ascii=False), file=sys.stderr, flush=True)
    every = [r for kind in rows.values() for r in kind]
    summary: dict[str, dict[str, object]] = {}
    for view in every[0]:
        numbers: dict[str, object] = {"function_top": statistics.fmean(
            r[view]["function_top"] for r in every)}
        if view != "occlusion":  # occlusion against itself: nothing to measure
            numbers["spearman"] = _mean(r[view]["spearman"] for r in every)
            numbers["by_kind"] = {kind: _mean(r[view]["spearman"] for r in rs)
                                  for kind, rs in rows.items()}
        summary[view] = numbers
    report = {"model": args.model, "prompts": len(every), "new_tokens": args.new, "raw": args.raw,
              "views": summary}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{len(every)} prompts, {args.new} answer tokens each, on {args.model}")
    for view, numbers in summary.items():
        rho = numbers.get("spearman")
        shown = "" if not isinstance(rho, float) else f"Spearman with occlusion {rho:.3f}  "
        print(f"  {view:15} {shown}top token a function word/punctuation "
              f"{numbers['function_top']:.0%}")


if __name__ == "__main__":
    main()
