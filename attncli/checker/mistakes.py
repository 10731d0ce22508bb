"""The known mistakes in a chapter-3 attention class: what each is called, what it computes
(a switch of checker/reference.py, or a change to the weights) and which classes can make it."""

from __future__ import annotations

from dataclasses import dataclass

from attncli.checker.kinds import Kind


@dataclass(frozen=True)
class Mistake:
    """One known mistake and how to say it."""

    id: str
    text: str
    applies: str = "all"  # all, causal (the masked classes), dropout, multihead, bias or stacked
    weights: str | None = None  # "extra_bias" or "missing_bias": the weights change, not the code

    def fits(self, kind: Kind) -> bool:
        """Whether a class of this kind can make the mistake."""
        return {"all": True, "causal": kind.causal, "dropout": kind.dropout,
                "multihead": kind.multihead, "bias": kind.linear and not kind.stacked,
                "stacked": kind.stacked}[self.applies]


MISTAKES = (
    Mistake("no_scale", "the scores are not divided by √d_k before the softmax"),
    Mistake("scale_d_out", "the scores are divided by √d_out instead of √head_dim "
            "(head_dim = d_out // num_heads)", "multihead"),
    Mistake("scale_d_in", "the scores are divided by √d_in instead of √d_k (d_k = the keys' "
            "width, d_out)"),
    Mistake("softmax_queries", "the softmax runs over the wrong dimension: over the queries "
            "(dim=-2) instead of the keys (dim=-1)"),
    Mistake("softmax_heads", "the softmax runs over the wrong dimension: dim=1 is the heads on "
            "(b, num_heads, T, T) scores; the keys are dim=-1", "multihead"),
    Mistake("mask_sees_next", "the causal mask is off by one: triu(..., diagonal=2) lets each "
            "token see the next one; the book masks with diagonal=1", "causal"),
    Mistake("mask_includes_diagonal", "the causal mask is off by one: triu(..., diagonal=0) "
            "hides each token from itself (the first row is all -inf, so NaN); the book "
            "masks with diagonal=1", "causal"),
    Mistake("mask_after_softmax", "the mask is applied after the softmax (future weights set to "
            "0 without renormalising the rows); mask the scores with -inf before it", "causal"),
    Mistake("mask_zero", "masked scores are filled with 0 instead of -inf, so the future still "
            "gets weight after the softmax", "causal"),
    Mistake("mask_discarded", "no mask is applied: scores.masked_fill(...) returns a new tensor "
            "and its result is thrown away; use masked_fill_ (in place), as the book does, or "
            "assign it: scores = scores.masked_fill(...)", "causal"),
    Mistake("scores_transposed", "the scores are keys @ queriesᵀ instead of queries @ keysᵀ"),
    Mistake("weights_times_keys", "the context vectors are the weights times the keys instead of "
            "the values"),
    Mistake("split_no_transpose", "the heads are split with .view(b, num_heads, T, head_dim) "
            "without the .transpose(1, 2): view as (b, T, num_heads, head_dim) first",
            "multihead"),
    Mistake("merge_no_transpose", "the heads are merged without .transpose(1, 2) back before "
            ".contiguous().view(b, T, d_out), so the heads' rows are mixed up", "multihead"),
    Mistake("dropout_before_mask", "dropout is applied to the scores before the mask and the "
            "softmax; the book drops the attention weights after the softmax", "dropout"),
    Mistake("dropout_before_softmax", "dropout is applied to the scores before the softmax "
            "(a dropped -inf becomes 0, so the future gets weight); the book drops the attention "
            "weights after the softmax", "dropout"),
    Mistake("dropout_on_context", "dropout is applied to the context vectors instead of the "
            "attention weights", "dropout"),
    Mistake("dropout_in_eval", "dropout still acts in eval mode: use nn.Dropout, or "
            "F.dropout(..., training=self.training)", "dropout"),
    Mistake("no_out_proj", "out_proj is left out: the heads' concatenated context is returned "
            "without the output projection", "multihead"),
    Mistake("heads_reversed", "the heads are concatenated in reverse order: torch.cat([head(x) "
            "for head in self.heads], dim=-1) keeps head 0 first", "stacked"),
    Mistake("heads_run_reversed", "the heads are run and concatenated in reverse order "
            "(reversed(self.heads) or self.heads[::-1]): torch.cat([head(x) for head in "
            "self.heads], dim=-1) keeps head 0 first", "stacked"),
    Mistake("extra_bias", "W_query, W_key and W_value have biases although qkv_bias=False: "
            "nn.Linear adds one unless bias=qkv_bias", "bias", weights="extra_bias"),
    Mistake("missing_bias", "qkv_bias=True is ignored: W_query, W_key and W_value have no bias",
            "bias", weights="missing_bias"),
)
# A forward that raises this (torch's words) left out .contiguous() before .view.
CONTIGUOUS = "view size is not compatible with input tensor's size and stride"
MISSING_CONTIGUOUS = ("missing_contiguous", ".view() on the transposed context needs "
                      ".contiguous() first (or use .reshape): "
                      "context_vec.transpose(1, 2).contiguous().view(b, T, d_out)")
# A batched class that took .T of a tensor of 3 or more dimensions (recorded while it ran).
TRANSPOSE_2D = ("keys_T_batched", "keys.T on a batched (b, T, d_out) tensor reverses all its "
                "dimensions, since .T is the transpose of a 2-D matrix: use "
                "keys.transpose(1, 2) as the book does (or keys.mT)")
