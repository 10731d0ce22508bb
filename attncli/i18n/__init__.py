"""Stage titles, explanations and demo narration in English and Simplified Chinese.

Each entry is (English, 简体中文). Placeholders such as {seed} are the same in both; numbers,
JSON keys and option names never change with the language.
"""

from __future__ import annotations

from collections.abc import Mapping

LANGS = ("en", "zh")

STRINGS: dict[str, tuple[str, str]] = {
    # Variants and the walk-through frame.
    "variant.simple": ("simple self-attention", "简单自注意力"),
    "variant.qkv": ("self-attention with trainable weights", "带可训练权重的自注意力"),
    "variant.causal": ("causal attention", "因果注意力"),
    "variant.multihead": ("multi-head attention", "多头注意力"),
    "variant.gpt2": ("a trained GPT-2 layer's multi-head attention",
                     "训练好的 GPT-2 某一层的多头注意力"),
    "explain.header": ("How {variant} turns the inputs into context vectors, step by step.",
                       "{variant}如何一步步把输入变成上下文向量。"),
    "step": ("Step {k} of {n}", "第 {k} 步（共 {n} 步）"),
    "axes.tokens": ("row = query, column = key", "行 = 查询，列 = 键"),
    "axes.vectors": ("row = token, column = dimension", "行 = 词元，列 = 维度"),
    "head": ("head {h} of {n}", "头 {h}（共 {n} 个头）"),
    # Stage titles.
    "title.inputs": ("Inputs X", "输入 X"),
    "title.inputs.gpt2": ("Layer input X = ln_1(residual stream)", "该层的输入 X = ln_1(残差流)"),
    "title.qkv": ("Queries, keys and values", "查询、键和值"),
    "title.queries": ("Queries Q = X·W_query", "查询 Q = X·W_query"),
    "title.keys": ("Keys K = X·W_key", "键 K = X·W_key"),
    "title.values": ("Values V = X·W_value", "值 V = X·W_value"),
    "title.scores": ("Attention scores ω = Q·Kᵀ", "注意力分数 ω = Q·Kᵀ"),
    "title.scores.simple": ("Attention scores ω = X·Xᵀ", "注意力分数 ω = X·Xᵀ"),
    "title.scaled": ("Scaled scores ω ÷ √d_k (d_k = {d_k}, √d_k = {root})",
                     "缩放后的注意力分数 ω ÷ √d_k（d_k = {d_k}，√d_k = {root}）"),
    "title.masked": ("Causal mask applied", "应用因果掩码"),
    "title.softmax": ("Attention weights α = softmax(scores)",
                      "注意力权重 α = softmax(注意力分数)"),
    "title.dropped": ("Attention weights after dropout (p = {p})",
                      "dropout 之后的注意力权重（p = {p}）"),
    "title.weights": ("Attention weights used for the context vectors",
                      "用于计算上下文向量的注意力权重"),
    "title.heads_context": ("Context vectors of each head z⁽ʰ⁾ = α⁽ʰ⁾·V⁽ʰ⁾",
                            "每个头的上下文向量 z⁽ʰ⁾ = α⁽ʰ⁾·V⁽ʰ⁾"),
    "title.context": ("Context vectors z = α·V", "上下文向量 z = α·V"),
    "title.context.simple": ("Context vectors z = α·X", "上下文向量 z = α·X"),
    "title.context.multihead": ("Heads concatenated, then the output projection",
                                "拼接各头，再做输出投影"),
    "label.concat": ("heads concatenated (the input of out_proj)",
                     "拼接后的各头输出（out_proj 的输入）"),
    "label.projected": ("after out_proj: the context vectors", "out_proj 之后：上下文向量"),
    # One-line explanations.
    "explain.inputs": (
        "Each row is one token's embedding: its token embedding plus its position embedding "
        "(random, seed {seed}), {d_in} numbers per token.",
        "每一行是一个词元的嵌入向量：词元嵌入加上位置嵌入（随机初始化，种子 {seed}），"
        "每个词元 {d_in} 个数。"),
    "explain.inputs.gpt2": (
        "Each row is what this layer's attention reads for one token: the residual stream "
        "(token + position embeddings plus every earlier block's output) after LayerNorm ln_1, "
        "{d_in} numbers per token.",
        "每一行是这一层的注意力为一个词元读取的内容：残差流（词元嵌入加位置嵌入，再加上之前每个块的"
        "输出）经过 LayerNorm ln_1 之后的结果，每个词元 {d_in} 个数。"),
    "explain.qkv.gpt2": (
        "The layer's trained weights (c_attn, one fused matrix) project each input into a query "
        "(what the token looks for), a key (what it offers to be matched against) and a value "
        "(what it passes on).",
        "这一层训练好的权重（c_attn，一个融合矩阵）把每个输入投影成查询（这个词元在找什么）、"
        "键（供别的查询来匹配）和值（它要传递出去的信息）。"),
    "explain.inputs.vectors": (
        "Each row is one token's input vector, given directly (no tokeniser, no embedding "
        "table), {d_in} numbers per token.",
        "每一行是一个词元的输入向量，直接给出（不经过分词器和嵌入表），每个词元 {d_in} 个数。"),
    "explain.qkv": (
        "Three weight matrices (random with seed {seed}; training would learn them) project each "
        "input into a query (what the token looks for), a key (what it offers to be matched "
        "against) and a value (what it passes on).",
        "三个权重矩阵（以种子 {seed} 随机初始化，训练时会学习它们）把每个输入投影成查询（这个词元"
        "在找什么）、键（供别的查询来匹配）和值（它要传递出去的信息）。"),
    "explain.qkv.heads": (
        "d_out = {d_out} is split into {heads} heads of head_dim = {head_dim}: each head works "
        "on its own slice of Q, K and V.",
        "d_out = {d_out} 被拆分为 {heads} 个头，每个头 head_dim = {head_dim}：每个头只处理自己"
        "那一份 Q、K、V。"),
    "explain.scores": (
        "Entry (i, j) is the dot product of query i with key j: the larger it is, the better "
        "token i's query matches token j's key.",
        "第 (i, j) 项是查询 i 与键 j 的点积：值越大，词元 i 的查询与词元 j 的键越匹配。"),
    "explain.scores.simple": (
        "Without trainable weights each input is its own query and key: entry (i, j) is the "
        "dot product x_i · x_j, how similar tokens i and j are.",
        "没有可训练权重时，每个输入既是查询也是键：第 (i, j) 项是点积 x_i · x_j，"
        "表示词元 i 与 j 有多相似。"),
    "explain.scaled": (
        "Dividing by √d_k keeps the scores from growing with the key size, so the softmax does "
        "not saturate into almost one-hot weights whose gradients vanish.",
        "除以 √d_k 可以防止注意力分数随键的维度增大而变大，使 softmax 不会饱和成近似独热"
        "（one-hot）的权重，从而避免梯度消失。"),
    "explain.masked": (
        "Query i may only look at keys 0…i: the future positions (·) are set to −∞, so the "
        "softmax gives them weight 0 and no token sees the tokens after it.",
        "查询 i 只能看到键 0…i：未来的位置（·）被设为 −∞，softmax 之后它们的权重为 0，"
        "因此没有词元能看到它后面的词元。"),
    "explain.softmax": (
        "Softmax turns each row of scores into attention weights: exponentiate, then divide by "
        "the row's sum, so every weight lies between 0 and 1 and each row sums to 1.",
        "softmax 把每一行注意力分数变成注意力权重：先取指数，再除以该行之和，因此每个权重"
        "都在 0 与 1 之间，且每行之和为 1。"),
    "check.rows_ok": ("Check: every row sums to 1 (largest deviation {dev}).",
                      "检查：每行之和都是 1（最大偏差 {dev}）。"),
    "check.rows_bad": ("Check failed: the row sums range from {low} to {high}.",
                       "检查未通过：各行之和介于 {low} 与 {high} 之间。"),
    "explain.dropped": (
        "In training, dropout zeroes each weight with probability p = {p} and multiplies the "
        "kept ones by 1/(1−p) = {scale}, so each row still sums to 1 on average; at inference "
        "there is no dropout.",
        "训练时，dropout 以概率 p = {p} 把每个权重置零，并把保留下来的权重乘以 1/(1−p) = "
        "{scale}，使每行之和的期望仍为 1；推理时不使用 dropout。"),
    "check.dropout": (
        "Zeroed {zeroed} of {total} weights; kept weights are rescaled, e.g. row {i}, "
        "column {j}: {before} × {scale} = {after}.",
        "{total} 个权重中有 {zeroed} 个被置零；保留的权重被放大，例如第 {i} 行第 {j} 列："
        "{before} × {scale} = {after}。"),
    "check.dropout_none": ("Zeroed {zeroed} of {total} weights; none was kept.",
                           "{total} 个权重中有 {zeroed} 个被置零，没有保留任何权重。"),
    "explain.weights": (
        "The weights that multiply the values: after dropout when there is dropout, otherwise "
        "the softmax weights.",
        "与值向量相乘的权重：有 dropout 时是 dropout 之后的权重，否则就是 softmax 的结果。"),
    "explain.heads_context": (
        "Each head mixes its own values with its own attention weights, giving every token a "
        "context vector of head_dim = {head_dim}.",
        "每个头用自己的注意力权重对自己的值向量加权求和，为每个词元得到长度为 head_dim = "
        "{head_dim} 的上下文向量。"),
    "explain.context": (
        "Each context vector is the sum of the value vectors weighted by that query's "
        "attention weights: z_i = Σ_j α_ij · v_j.",
        "每个上下文向量是值向量按该查询的注意力权重所做的加权和：z_i = Σ_j α_ij · v_j。"),
    "explain.context.simple": (
        "Each context vector is the sum of the input vectors weighted by that query's "
        "attention weights: z_i = Σ_j α_ij · x_j.",
        "每个上下文向量是输入向量按该查询的注意力权重所做的加权和：z_i = Σ_j α_ij · x_j。"),
    "explain.context.multihead": (
        "The heads' context vectors are placed side by side ({d_out} numbers per token), then "
        "the output projection out_proj, a trainable {d_out}×{d_out} linear layer, mixes what "
        "the heads found.",
        "各头的上下文向量并排拼接（每个词元 {d_out} 个数），然后由输出投影 out_proj（一个可训练"
        "的 {d_out}×{d_out} 线性层）融合各头得到的信息。"),
    # One query's view.
    "query.title": ("What query {i} ({label}) attends to, largest weight first",
                    "查询 {i}（{label}）关注哪些词元，按权重从大到小排列"),
    "query.masked": ("keys {a}–{b}: masked (future tokens), weight 0",
                     "键 {a}–{b}：被因果掩码遮住（未来的词元），权重为 0"),
    "query.windowed": ("keys {a}–{b}: masked (past the sliding window of {w}), weight 0",
                       "键 {a}–{b}：在滑动窗口（{w}）之外，被掩码遮住，权重为 0"),
    # The demo.
    "demo.title": ("attncli demo: attention step by step, on the book's chapter-3 example",
                   "attncli 演示：用书中第 3 章的例子一步步理解注意力"),
    "demo.intro.title": ("Six tokens, six input vectors", "六个词元，六个输入向量"),
    "demo.intro.text": (
        "The sentence “Your journey starts with one step” as six tokens, each already embedded "
        "as a 3-dimensional vector x⁽¹⁾ … x⁽⁶⁾. These are the book's numbers, so you can "
        "compare every table with the text.",
        "句子 “Your journey starts with one step” 被切分为六个词元，每个词元已嵌入为一个三维"
        "向量 x⁽¹⁾ … x⁽⁶⁾。这些都是书中的数字，你可以把每张表与书中的内容逐一对照。"),
    "demo.query.title": ("Simple attention for one query: x⁽²⁾ “journey”",
                         "单个查询的简单注意力：x⁽²⁾ “journey”"),
    "demo.query.text": (
        "The book starts with one query, x⁽²⁾ (index 1). Its attention scores are its dot "
        "products with every input, the softmax turns them into attention weights, and its "
        "context vector z⁽²⁾ is the sum of the inputs weighted by them.",
        "书中先看一个查询 x⁽²⁾（索引 1）。它的注意力分数是它与每个输入的点积，softmax 把这些"
        "分数变成注意力权重，它的上下文向量 z⁽²⁾ 就是按这些权重对输入所做的加权和。"),
    "demo.all.title": ("All six queries at once", "同时计算全部六个查询"),
    "demo.all.text": (
        "Every query at once takes two matrix products: scores = X·Xᵀ, the softmax row by row, "
        "then context = weights·X. Row 1 is the query above.",
        "同时计算所有查询只需要两次矩阵乘法：注意力分数 = X·Xᵀ，逐行做 softmax，最后上下文向量 = "
        "注意力权重·X。第 1 行就是上面那个查询。"),
    "demo.qkv.title": ("Self-attention with trainable weights (seed 789, d_out = 2)",
                       "带可训练权重的自注意力（种子 789，d_out = 2）"),
    "demo.qkv.text": (
        "Now the inputs are projected by W_query, W_key and W_value (the book's "
        "SelfAttention_v2, created right after torch.manual_seed(789)), and the scores are "
        "divided by √d_k before the softmax.",
        "现在输入先经过 W_query、W_key 和 W_value 投影（即书中的 SelfAttention_v2，紧接在 "
        "torch.manual_seed(789) 之后创建），注意力分数在 softmax 之前除以 √d_k。"),
    "demo.causal.title": ("Causal attention (seed 123, d_out = 2)",
                          "因果注意力（种子 123，d_out = 2）"),
    "demo.causal.text": (
        "A language model predicts the next token, so no token may see the tokens after it: "
        "the causal mask hides them before the softmax.",
        "语言模型要预测下一个词元，所以任何词元都不能看到它后面的词元：因果掩码在 softmax 之前"
        "把它们遮住。"),
    "demo.dropout.title": ("Dropout on the attention weights (p = 0.5)",
                           "对注意力权重使用 dropout（p = 0.5）"),
    "demo.dropout.text": (
        "In training, dropout zeroes random attention weights and scales the kept ones by "
        "1/(1−p) = 2; this reduces overfitting. The mask is the same as above.",
        "训练时，dropout 随机把一些注意力权重置零，并把保留的权重乘以 1/(1−p) = 2，"
        "以减少过拟合。因果掩码与上面相同。"),
    "demo.multihead.title": ("Multi-head attention (2 heads, seed 123, d_out = 2)",
                             "多头注意力（2 个头，种子 123，d_out = 2）"),
    "demo.multihead.text": (
        "Several causal attention heads run side by side, each on its own slice of Q, K and V; "
        "their context vectors are concatenated and mixed by out_proj.",
        "多个因果注意力头并行运行，每个头只处理自己那一份 Q、K、V；它们的上下文向量拼接起来，"
        "再由 out_proj 融合。"),
    "demo.outro": ("Try it on your own text:", "在你自己的文本上试试："),
    "demo.pause": ("Enter: next step · q: quit", "回车：下一步 · q：退出"),
}
from attncli.i18n.check import CHECK_STRINGS  # noqa: E402
from attncli.i18n.models import ENCODER_STRINGS, LLAMA_STRINGS  # noqa: E402

STRINGS |= LLAMA_STRINGS | ENCODER_STRINGS | CHECK_STRINGS  # families' stages, check's report


def text(lang: str, key: str, **values: object) -> str:
    """The string for key in lang, with its placeholders filled in."""
    template = STRINGS[key][LANGS.index(lang)]
    return template.format(**values) if values else template


def resolve_lang(option: str | None, environ: Mapping[str, str]) -> str:
    """--lang if given, else zh when LC_ALL, LC_MESSAGES or LANG (first set) says Chinese."""
    if option is not None:
        return option
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"
