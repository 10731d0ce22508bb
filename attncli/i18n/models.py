"""The model families' strings: the stages and explanations trained checkpoints add.

Kept apart from the chapter-3 strings (attncli/i18n/__init__.py); i18n.STRINGS takes them in.
"""

from __future__ import annotations

# Each entry is (English, 简体中文), merged into STRINGS.
LLAMA_STRINGS: dict[str, tuple[str, str]] = {
    "variant.llama": ("a trained decoder layer's attention (RoPE, and grouped-query where the "
                      "model has fewer key/value heads)",
                      "训练好的解码器某一层的注意力（RoPE；键/值头较少的模型为分组查询注意力）"),
    "title.inputs.llama": ("Layer input X = the {norm} residual stream",
                           "该层的输入 X = {norm} 残差流"),
    "explain.inputs.llama": (
        "Each row is what this layer's attention reads for one token: the residual stream "
        "(the token embedding, with no position embedding, plus every earlier block's output), "
        "{norm}, {d_in} numbers per token.",
        "每一行是这一层的注意力为一个词元读取的内容：残差流（词元嵌入，没有位置嵌入，再加上之前每个"
        "块的输出），{norm}，每个词元 {d_in} 个数。"),
    "explain.qkv.llama": (
        "The trained q_proj, k_proj and v_proj project each input into queries, keys and values. "
        "There are fewer key/value heads than query heads (grouped-query attention): query heads "
        "of one group read the same keys and values, shown here repeated for each query head.",
        "训练好的 q_proj、k_proj、v_proj 把每个输入投影成查询、键和值。键/值头比查询头少（分组查询"
        "注意力）：同一组的查询头读取相同的键和值，这里为每个查询头重复显示。"),
    "title.qk_norm": ("Qwen3's RMSNorm on each query and key head",
                      "Qwen3 对每个查询头和键头做的 RMSNorm"),
    "explain.qk_norm": (
        "Each head's query and key are RMS-normalised over head_dim, with trained scales "
        "(q_norm, k_norm), before RoPE: this keeps the scores from growing large.",
        "在 RoPE 之前，每个头的查询和键在 head_dim 上做 RMS 归一化，并乘以训练好的缩放"
        "（q_norm、k_norm）：这样注意力分数不会变得过大。"),
    "title.queries_norm": ("Queries after q_norm", "q_norm 之后的查询"),
    "title.keys_norm": ("Keys after k_norm", "k_norm 之后的键"),
    "title.rope": ("Rotary position embedding (RoPE)", "旋转位置编码（RoPE）"),
    "explain.rope": (
        "Positions enter here, not in the inputs: each pair of dimensions of a query or key at "
        "position i is turned by the angle i·θ_k. A query at i and a key at j then meet at the "
        "angle (i − j)·θ_k, so their score depends on how far apart they are.",
        "位置信息在这里加入，而不是在输入中：位置 i 上的查询或键的每一对维度都旋转角度 i·θ_k。"
        "于是位置 i 的查询与位置 j 的键之间的夹角是 (i − j)·θ_k，注意力分数只取决于两者相距多远。"),
    "title.queries_rope": ("Queries after RoPE", "RoPE 之后的查询"),
    "title.keys_rope": ("Keys after RoPE", "RoPE 之后的键"),
    "title.scores.llama": ("Attention scores ω = RoPE(Q)·RoPE(K)ᵀ",
                           "注意力分数 ω = RoPE(Q)·RoPE(K)ᵀ"),
    "title.masked.llama": ("Causal mask (and sliding window) applied",
                           "应用因果掩码（以及滑动窗口）"),
    "explain.masked.llama": (
        "Query i may only look at keys 0…i: the future positions (·) are set to −∞. In a "
        "sliding-window layer (Mistral) keys older than the window are masked too.",
        "查询 i 只能看到键 0…i：未来的位置（·）被设为 −∞。在滑动窗口层（Mistral）中，"
        "比窗口更早的键也被掩码。"),
    "title.context.llama": ("Heads concatenated, then o_proj", "拼接各头，再做 o_proj 输出投影"),
}
# BERT-style encoders (bert, roberta): bidirectional attention, no mask, post-LN blocks.
ENCODER_STRINGS: dict[str, tuple[str, str]] = {
    "variant.bert": (
        "a trained encoder layer's bidirectional multi-head attention (no mask: every token "
        "attends to every token, before and after it)",
        "训练好的编码器某一层的双向多头注意力（没有掩码：每个词元都关注所有词元，包括它前后的词元）"),
    "title.inputs.bert": ("Layer input X = the residual stream", "该层的输入 X = 残差流"),
    "explain.inputs.bert": (
        "Each row is what this layer's attention reads for one token: word + position + token "
        "type embeddings after LayerNorm for layer 0, else the block before's output (post-LN: "
        "each block normalises after adding), {d_in} numbers per token.",
        "每一行是这一层的注意力为一个词元读取的内容：第 0 层是词嵌入加位置嵌入加词元类型嵌入再经过 "
        "LayerNorm，其余各层是前一个块的输出（后置 LayerNorm：每个块先相加再归一化），每个词元 "
        "{d_in} 个数。"),
    "explain.qkv.bert": (
        "The trained query, key and value layers (each with a bias) project each input into a "
        "query, a key and a value, as in chapter 3.",
        "训练好的 query、key、value 层（各带偏置）把每个输入投影成查询、键和值，与第 3 章相同。"),
}

# Soft-capping (Gemma 2) and layers without positions (SmolLM3's NoPE layers).
LLAMA_STRINGS |= {
    "title.capped": ("Soft-capped scores cap · tanh(scaled ÷ cap)",
                     "软上限后的分数 cap · tanh(缩放分数 ÷ cap)"),
    "explain.capped": (
        "Gemma 2 bends every scaled score into ±cap with cap · tanh(score ÷ cap): small scores "
        "pass almost unchanged, large ones flatten, so no single key can take the whole row.",
        "Gemma 2 用 cap · tanh(分数 ÷ cap) 把每个缩放后的分数压进 ±cap：小分数几乎不变，"
        "大分数被压平，任何一个键都无法独占整行。"),
    "explain.rope.partial": (
        "Here only the first {turned} of each head's {head_dim} dimensions turn (partial "
        "rotary); the rest pass through unchanged, carrying content without position.",
        "这里每个头的 {head_dim} 个维度中只有前 {turned} 个旋转（部分旋转）；其余维度原样通过，"
        "只携带内容而不携带位置。"),
    "explain.nope": (
        "Layer {layer} has no positional encoding (NoPE): its queries and keys are used as "
        "projected, so only their content and the causal mask tell positions apart.",
        "第 {layer} 层没有位置编码（NoPE）：查询和键按投影原样使用，只有内容和因果掩码区分位置。"),
}
