"""What `attncli kvcache --keep` says (StreamingLLM's evicted caches, Xiao et al. 2023), en and zh.

Each entry is (English, 简体中文), as in attncli/i18n.py; numbers, policy labels and option names
never change with the language.
"""

from __future__ import annotations

from attncli.i18n import LANGS

STRINGS: dict[str, tuple[str, str]] = {
    "stream.title": ("StreamingLLM: evicted KV caches on {model} ({n} tokens, all {layers} layers)",
                     "StreamingLLM：在 {model} 上淘汰 KV 缓存（{n} 个词元，全部 {layers} 层）"),
    "stream.explain": (
        "At position t, window:{w} keeps only the keys of tokens t−{back}…t{sinks}. Each cache "
        "runs as one pass whose mask lets query t see exactly the keys its cache holds: the "
        "logits that decoding with that cache gives. Perplexity is exp(mean −log p(token t+1 | "
        "tokens ≤ t)) over a range of positions t; top-1 is the share of positions whose most "
        "likely next token is the full cache's.",
        "在位置 t，window:{w} 只保留词元 t−{back}…t 的键{sinks}。每种缓存都作为一次前向计算运行，"
        "其掩码让查询 t 恰好只看到该缓存中的键：这就是用该缓存逐个解码得到的 logits。困惑度是某段"
        "位置 t 上 exp(平均 −log p(词元 t+1 | 词元 ≤ t))；top-1 是最可能的下一个词元与完整缓存"
        "相同的位置所占比例。"),
    "stream.explain_sinks": ("; {label} also keeps tokens 0…{last}, the attention sinks",
                             "；{label} 还保留词元 0…{last}（注意力汇聚点）"),
    "stream.positions": (
        "Keys keep their positions in the text: the cache is not re-rotated to positions "
        "within it, as StreamingLLM does.",
        "键保留其在文本中的位置：缓存中的键不会像 StreamingLLM 那样按缓存内的位置重新旋转。"),
    "stream.columns": ("positions t|full cache perplexity|{window} perplexity|{window} top-1"
                       "|{sinks} perplexity|{sinks} top-1",
                       "位置 t|完整缓存 困惑度|{window} 困惑度|{window} top-1"
                       "|{sinks} 困惑度|{sinks} top-1"),
    "stream.filling": ("{a}–{b} (window filling)", "{a}–{b}（窗口未满）"),
    "stream.after": ("{a}–{b} (all after)", "{a}–{b}（窗口满后全部）"),
    "stream.measured": (
        "Measured after the window fills (positions {a}–{b}): perplexity {full} with the full "
        "cache, {window} with {window_label} (top-1 agreement {window_top}){sinks}.",
        "窗口填满之后（位置 {a}–{b}）测得：完整缓存的困惑度为 {full}，{window_label} 为 {window}"
        "（top-1 一致率 {window_top}）{sinks}。"),
    "stream.measured_sinks": (", {sinks} with {sinks_label} ({sinks_top})",
                              "，{sinks_label} 为 {sinks}（{sinks_top}）"),
}


def text(lang: str, key: str, **values: object) -> str:
    """The string for key in lang, with its placeholders filled in."""
    template = STRINGS[key][LANGS.index(lang)]
    return template.format(**values) if values else template
