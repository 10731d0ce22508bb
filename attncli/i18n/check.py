"""The strings of `attncli check`'s report, and each known mistake's, in English and 简体中文.

The JSON keeps the English (its contract); the text report looks the mistakes up here by id.
"""

from __future__ import annotations

import re

CHECK_STRINGS: dict[str, tuple[str, str]] = {
    "verdict.notice": ("attncli check runs your code: {target} is imported, constructed and "
                       "called.", "attncli check 会运行你的代码：{target} 会被导入、构造并调用。"),
    "verdict.by_names": ("by the book's names ({names})", "按书中的名字（{names}）"),
    "verdict.by_shapes": ("by shape: {pairs}", "按形状：{pairs}"),
    "verdict.copied": ("Checked as the book's {book}; the book's weights copied into yours "
                       "{how}.", "按书中的 {book} 检查；书中的权重已{how}复制到你的类中。"),
    "verdict.guessed": (
        "Your names do not say which is the query, the key and the value: they were told apart "
        "by declaration order, or by the order that passes.",
        "你的名字没有说明哪个是查询、键和值：它们按声明顺序区分，或按能通过的顺序区分。"),
    "verdict.ignored": ("Yours that the book has no counterpart for, left as they were: "
                        "{names}.", "书中没有对应项、保持原样的参数：{names}。"),
    "verdict.settings": (
        "Your code changed torch's globals ({changes}): your class ran with them, the book's "
        "reference with torch's defaults (float32, torch's own functions).",
        "你的代码修改了 torch 的全局设置（{changes}）：你的类在这些设置下运行，书中的参考实现则"
        "使用 torch 的默认设置（float32、torch 自己的函数）。"),
    "verdict.case": ("case", "用例"),
    "verdict.diff": ("max |yours − book's|", "最大 |你的 − 书中的|"),
    "verdict.pass": (
        ": your {cls} equals the book's {book} on all {n} cases (largest difference {diff}; "
        "tolerance {atol} + {rtol}·|book's|).",
        "：你的 {cls} 在全部 {n} 个用例上与书中的 {book} 一致（最大差异 {diff}；容差 "
        "{atol} + {rtol}·|书中的|）。"),
    "verdict.fail": (": {failed} of {n} cases differ ({case}: {size}).",
                     "：{n} 个用例中有 {failed} 个不一致（{case}：{size}）。"),
    "verdict.largest": ("largest difference {diff}", "最大差异 {diff}"),
    "verdict.diagnosis": ("Diagnosis: ", "诊断："),
    "verdict.explains_one": ("With that mistake the book's class gives your output in every "
                             "case.", "书中的类犯了这个错误后，在每个用例上都给出你的输出。"),
    "verdict.explains_two": ("With those mistakes the book's class gives your output in every "
                             "case.", "书中的类犯了这些错误后，在每个用例上都给出你的输出。"),
    "verdict.none": ("None of the known mistakes matches your output.",
                     "已知的错误都与你的输出不符。"),
    "verdict.first": ("The first row that differs: {case}, {where}",
                      "第一个不一致的行：{case}，{where}"),
    "verdict.batch": ("batch {batch}, ", "批次 {batch}，"),
    "verdict.token": ("token {token}", "词元 {token}"),
    "verdict.yours": ("yours: ", "你的："),  # as wide as book's: in each language
    "verdict.book": ("book's:", "书中："),
}

MISTAKES_ZH: dict[str, str] = {
    "no_scale": "softmax 之前没有把注意力分数除以 √d_k",
    "scale_d_out": "注意力分数除以了 √d_out，而不是 √head_dim（head_dim = d_out // num_heads）",
    "scale_d_in": "注意力分数除以了 √d_in，而不是 √d_k（d_k = 键的维度，即 d_out）",
    "softmax_queries": "softmax 的维度错了：在查询上（dim=-2）而不是在键上（dim=-1）",
    "softmax_heads": "softmax 的维度错了：在 (b, num_heads, T, T) 的分数上 dim=1 是头；键是 dim=-1",
    "mask_sees_next": "因果掩码差了一位：triu(..., diagonal=2) 让每个词元看到下一个词元；"
                      "书中用 diagonal=1",
    "mask_includes_diagonal": "因果掩码差了一位：triu(..., diagonal=0) 把每个词元对自己也遮住了"
                              "（第一行全是 -inf，于是得到 NaN）；书中用 diagonal=1",
    "mask_after_softmax": "掩码放在了 softmax 之后（未来的权重置 0 后没有重新归一化）；"
                          "应在 softmax 之前用 -inf 遮住分数",
    "mask_zero": "被遮住的分数填成了 0 而不是 -inf，所以 softmax 之后未来仍然有权重",
    "mask_discarded": "没有应用掩码：scores.masked_fill(...) 返回一个新张量，而它的结果被丢掉了；"
                      "像书中那样用 masked_fill_（原地），或赋值：scores = scores.masked_fill(...)",
    "scores_transposed": "注意力分数算成了 keys @ queriesᵀ，而不是 queries @ keysᵀ",
    "weights_times_keys": "上下文向量用注意力权重乘以了键，而不是值",
    "split_no_transpose": "拆分头时用了 .view(b, num_heads, T, head_dim) 却没有 .transpose(1, 2)："
                          "应先 view 成 (b, T, num_heads, head_dim)",
    "merge_no_transpose": "合并头之前没有先 .transpose(1, 2) 再 .contiguous().view(b, T, d_out)，"
                          "各头的行被打乱了",
    "dropout_before_mask": "dropout 用在了掩码和 softmax 之前的分数上；书中在 softmax 之后对注意力"
                           "权重做 dropout",
    "dropout_before_softmax": "dropout 用在了 softmax 之前的分数上（被丢弃的 -inf 变成 0，"
                              "未来就有了权重）；书中在 softmax 之后对注意力权重做 dropout",
    "dropout_on_context": "dropout 用在了上下文向量上，而不是注意力权重上",
    "dropout_in_eval": "评估模式下 dropout 仍然起作用：请用 nn.Dropout，或 "
                       "F.dropout(..., training=self.training)",
    "no_out_proj": "漏掉了 out_proj：直接返回了各头拼接后的上下文，没有输出投影",
    "heads_reversed": "各头按相反的顺序拼接：torch.cat([head(x) for head in self.heads], dim=-1) "
                      "让第 0 个头在最前面",
    "heads_run_reversed": "各头按相反的顺序运行和拼接（reversed(self.heads) 或 self.heads[::-1]）："
                          "torch.cat([head(x) for head in self.heads], dim=-1) 让第 0 个头在最前面",
    "extra_bias": "qkv_bias=False 时 W_query、W_key 和 W_value 却有偏置：nn.Linear 默认带偏置，"
                  "除非写 bias=qkv_bias",
    "missing_bias": "qkv_bias=True 被忽略了：W_query、W_key 和 W_value 没有偏置",
    "missing_contiguous": "对转置后的上下文调用 .view() 之前需要先 .contiguous()（或用 .reshape）："
                          "context_vec.transpose(1, 2).contiguous().view(b, T, d_out)",
    "keys_T_batched": "在批量的 (b, T, d_out) 张量上用 keys.T 会把所有维度都反过来，因为 .T 是二维"
                      "矩阵的转置：像书中那样用 keys.transpose(1, 2)（或 keys.mT）",
}

# A case's name and a line of the reader's, phrase by phrase (numbers and code stay as they are).
_PHRASES_ZH = ((r"book inputs", "书中的输入"), (r"random inputs", "随机输入"),
               (r"batch (\d+)", r"批大小 \1"), (r"(\d+) heads of (\d+)", r"\1 个头、每头 \2 维"),
               (r" ?\(seed (\d+)\)", r"（种子 \1）"), (r" in eval mode", "（评估模式）"),
               (r", ", "，"))
_LINES_ZH = ((r"^your forward raised ", "你的 forward 抛出了 "),
             (r"^your forward returned ", "你的 forward 返回了 "))


def mistake_text(lang: str, mistake_id: str, english: str) -> str:
    """A diagnosis (one id, or two joined by " + ") in lang; English as the JSON says it."""
    if lang != "zh":
        return english
    parts = [MISTAKES_ZH.get(one) for one in mistake_id.split(" + ")]
    return english if None in parts else "；并且".join(p for p in parts if p)


def phrase(lang: str, value: str, line: bool = False) -> str:
    """A case name (or with line, the start of an error line, whose code stays as it is) in
    lang."""
    if lang != "zh":
        return value
    for pattern, replacement in _LINES_ZH if line else _PHRASES_ZH:
        value = re.sub(pattern, replacement, value)
    return value
