"""Titles, findings and demo narration of the lessons (permute, kvcache, flash, cost), en and zh.

Each entry is (English, 简体中文), as in render/i18n.py; numbers, JSON keys and option names never
change with the language.
"""

from __future__ import annotations

from attncli.i18n import LANGS

STRINGS: dict[str, tuple[str, str]] = {
    # tables cut to fit the terminal
    "fit.note": ("To fit {width} columns: {what}; --json has every number.",
                 "为适应 {width} 列的宽度：{what}；--json 含全部数字。"),
    "fit.columns": ("left out {cols}", "省略了 {cols}"),
    "fit.decimals": ("{p} decimals instead of {asked}", "保留 {p} 位小数（而非 {asked} 位）"),
    "fit.and": ("; ", "；"),
    # permute
    "permute.title": ("Word order: {a} and {b} hold the same tokens in another order ({variant})",
                      "词序：{a} 与 {b} 由相同的词元组成，只是顺序不同（{variant}）"),
    "permute.permutation": ("Permutation (for each position of B, its position in A): {perm}",
                            "置换（B 的每个位置对应 A 中的位置）：{perm}"),
    "permute.without": ("Without positional embeddings (token embeddings only)",
                        "不加位置嵌入（只有词元嵌入）"),
    "permute.with": ("With positional embeddings", "加上位置嵌入"),
    "permute.weights": ("Attention weights of {which}", "{which} 的注意力权重"),
    "permute.head": (" · head {h} of {n} (--json has every head)",
                     " · 头 {h}（共 {n} 个头，--json 含所有头）"),
    "permute.equivariant": (
        "B's weights are A's with rows and columns reordered, and so are the context vectors "
        "(max |diff| = {diff}): attention alone is permutation-invariant and cannot tell the "
        "two orders apart.",
        "B 的注意力权重就是把 A 的行和列重新排列，上下文向量也一样（最大 |差| = {diff}）：注意力"
        "本身是置换不变的，分辨不出这两种顺序。"),
    "permute.masked": (
        "Not a reordering even without positions (max |diff| = {diff}): the causal mask lets "
        "each token see only the tokens before it, so the mask itself carries order.",
        "即使不加位置嵌入，也不只是重新排列（最大 |差| = {diff}）：因果掩码只让每个词元看到它"
        "前面的词元，所以掩码本身就带有顺序信息。"),
    "permute.differs": (
        "The weights differ (max |diff| = {diff}): the positional embedding gives each position "
        "its own vector, so the same token reads differently at another place.",
        "注意力权重不同（最大 |差| = {diff}）：位置嵌入给每个位置一个自己的向量，同一个词元换了"
        "位置，读起来就不一样了。"),
    "permute.same": ("Still a reordering (max |diff| = {diff}).",
                     "仍然只是重新排列（最大 |差| = {diff}）。"),
    # kvcache
    "kv.title": ("Decoding with a KV cache: {n} tokens, one at a time ({what})",
                 "使用键值缓存逐个解码：{n} 个词元，每次一个（{what}）"),
    "kv.explain": (
        "At step t the query is token t; the cache holds the keys and values of tokens 0…t, so "
        "only token t is projected. Without the cache, every step rebuilds the keys and values "
        "of the whole prefix.",
        "第 t 步的查询是词元 t；键值缓存保存词元 0…t 的键和值，所以只需投影词元 t。没有缓存时，"
        "每一步都要重新计算整个前缀的键和值。"),
    "kv.columns": ("step|token|cache|cache bytes|weights over the cache (head {h})|"
                   "MACs cached|MACs without",
                   "步|词元|缓存长度|缓存字节|对缓存的注意力权重（头 {h}）|"
                   "有缓存的乘加|无缓存的乘加"),
    "kv.check": ("Check: each step equals row t of the full causal pass (max |diff| weights "
                 "{weights}, context {context}).",
                 "检查：每一步都等于完整因果计算的第 t 行（最大 |差|：权重 {weights}，"
                 "上下文 {context}）。"),
    "kv.check_bad": ("Check failed: the steps differ from the full pass (max |diff| weights "
                     "{weights}, context {context}).",
                     "检查未通过：逐步结果与完整计算不同（最大 |差|：权重 {weights}，"
                     "上下文 {context}）。"),
    "kv.prefill": (
        "Prefill, all {n} tokens as one prompt in one pass, is what the first new token waits "
        "for: {macs} multiply-adds, the sum of the cached steps above (step 0 alone: {first}).",
        "预填充（把全部 {n} 个词元作为提示一次处理完）是生成第一个新词元之前必须等待的：{macs} 次"
        "乘加，正是上面各个有缓存步骤之和（仅第 0 步：{first}）。"),
    "kv.later": (
        "Each later token costs one step: {last} multiply-adds with the cache (it grows with "
        "the cache length), {recompute} without it. In all: {cached} with the cache, "
        "{total_recompute} without (×{ratio}). The cache holds {bytes} bytes.",
        "之后每个词元只需一步：有缓存 {last} 次乘加（随缓存长度增长），没有缓存 {recompute} 次。"
        "合计：有缓存 {cached} 次，没有缓存 {total_recompute} 次（×{ratio}）。"
        "缓存占 {bytes} 字节。"),
    # flash
    "flash.title": ("Flash attention's online softmax: query {i} ({label}), key blocks of {block}",
                    "Flash Attention 的在线 softmax：查询 {i}（{label}），每块 {block} 个键"),
    "flash.explain": (
        "The keys are processed in blocks (分块). Each block's scores may raise the running "
        "maximum m; what was summed so far is then rescaled by exp(m_old − m_new) (column "
        "rescale), so the softmax never needs the whole row of scores at once.",
        "键按块处理（分块）。每一块的分数可能提高当前最大值 m；之前累加的结果随之乘以 "
        "exp(m_old − m_new) 重新缩放（“重缩放”一列），因此在线 softmax 从不需要一次拿到整行分数。"),
    "flash.columns": ("keys|scaled scores|block max|m|rescale|l|accumulator",
                      "键|缩放后的分数|块内最大值|m|重缩放|l|累加器"),
    "flash.skipped": ("skipped", "跳过"),
    "flash.skipped_note": ("Skipped: a block whose every key is after the query.",
                           "跳过：这一块的键都在查询之后。"),
    "flash.final": ("Final weights exp(s − m) / l and context vector acc / l, then the check:",
                    "最终权重 exp(s − m) / l 与上下文向量 acc / l，然后检查："),
    "flash.check": ("Check: equal to the naive full pass (max |diff| weights {weights}, context "
                    "{context}); the tiled path that `attncli run` takes gives {tiled}.",
                    "检查：与朴素的完整计算相同（最大 |差|：权重 {weights}，上下文 {context}）；"
                    "`attncli run` 的分块路径与之相差 {tiled}。"),
    "flash.check_bad": ("Check failed: max |diff| from the naive pass: weights {weights}, "
                        "context {context}.",
                        "检查未通过：与朴素计算的最大 |差|：权重 {weights}，上下文 {context}。"),
    "flash.memory": (
        "Memory: the naive pass holds the {heads}×{n}×{n} score matrix ({naive} cells); the "
        "online softmax holds one block of scores with m, l and the accumulator ({tiled} cells "
        "per query row).",
        "内存：朴素计算要保存 {heads}×{n}×{n} 的分数矩阵（{naive} 个单元）；在线 softmax 每个查询"
        "行只保存一块分数以及 m、l 和累加器（{tiled} 个单元）。"),
    # cost
    "cost.title": ("The O(n²) cost: causal attention, {heads} head(s) of {head_dim}, N doubling",
                   "O(n²) 的代价：因果注意力，{heads} 个头，每头 {head_dim} 维，N 逐次翻倍"),
    "cost.explain": (
        "Each size runs in a fresh measurement: seconds, and the peak bytes of the tensors the "
        "pass allocates (tracked as torch creates and frees them). The tiled path uses "
        "{block}×{block} tiles (分块) and the online softmax.",
        "每个规模都单独测量：用时，以及该次计算所分配张量的峰值字节数（在 torch 创建和释放张量时"
        "跟踪）。分块路径使用 {block}×{block} 的块和在线 softmax。"),
    "cost.columns": ("tokens|naive time|naive bytes|tiled time|tiled bytes",
                     "词元数|朴素用时|朴素字节|分块用时|分块字节"),
    "cost.would_need": ("would need {size}", "需要 {size}"),
    "cost.bars": ("Peak bytes, one scale for both paths", "峰值字节，两条路径同一比例"),
    "cost.fit": ("Growth exponents, fitted on a log-log scale to what each doubling adds (so "
                 "fixed-size tiles do not hide the growth): naive bytes {nb}, tiled bytes {tb}; "
                 "naive time {ns}, tiled time {ts}.",
                 "增长指数（在对数-对数坐标上拟合每次翻倍所增加的量，这样固定大小的块不会掩盖增长）："
                 "朴素字节 {nb}，分块字节 {tb}；朴素用时 {ns}，分块用时 {ts}。"),
    "cost.unfitted": ("No exponent for {name}: {reason}.", "{name}没有给出增长指数：{reason}。"),
    "cost.series.naive_bytes": ("naive bytes", "朴素字节"),
    "cost.series.tiled_bytes": ("tiled bytes", "分块字节"),
    "cost.series.naive_seconds": ("naive time", "朴素用时"),
    "cost.series.tiled_seconds": ("tiled time", "分块用时"),
    # The English reasons are those of the JSON (records/lessons.py REASONS; a test keeps them
    # equal).
    "cost.reason.few": (
        "the range is too short: {sizes:.0f} size(s) measured, a fit needs {needed:.0f} "
        "(use a larger --max-tokens)",
        "测量范围太短：只测了 {sizes:.0f} 个规模，拟合至少需要 {needed:.0f} 个"
        "（请用更大的 --max-tokens）"),
    "cost.reason.flat": (
        "the range is too short: it did not grow from {a:,.0f} to {b:,.0f} tokens, so the "
        "noise is larger than the growth at these sizes",
        "测量范围太短：从 {a:,.0f} 到 {b:,.0f} 个词元没有增长，在这些规模上噪声比增长还大"),
    "cost.reason.shrinking": (
        "the range is too short: what each doubling adds shrank (exponent {exponent:.2f}), "
        "so the sizes are too small for the growth to show",
        "测量范围太短：每次翻倍所增加的量反而变小（指数 {exponent:.2f}），规模太小，还看不出增长"),
    "cost.reason.unsettled": (
        "the range is too short: the last doublings disagree (exponents {low:.2f} to "
        "{high:.2f}, more than {spread} apart), so the growth has not settled",
        "测量范围太短：最后几次翻倍的指数不一致（{low:.2f} 到 {high:.2f}，相差超过 {spread}），"
        "增长还没有稳定"),
    "cost.projection": ("At {n} tokens the naive path would need {naive}; the tiled path {tiled}.",
                        "在 {n} 个词元时，朴素路径需要 {naive}；分块路径需要 {tiled}。"),
    "cost.check": ("Check: the tiled context equals the naive one at every size both ran "
                   "(max |diff| {diff}).",
                   "检查：在两条路径都运行的每个规模上，分块的上下文向量与朴素的相同"
                   "（最大 |差| {diff}）。"),
    # demo chapters
    "demo.order.title": ("Why positions matter: 猫吃鱼 and 鱼吃猫",
                         "为什么需要位置：猫吃鱼与鱼吃猫"),
    "demo.order.text": (
        "“猫吃鱼” (the cat eats the fish) and “鱼吃猫” (the fish eats the cat) hold the same "
        "tokens. Without positional embeddings, attention is permutation-invariant: it gives "
        "the same weights, only reordered, so it cannot tell who eats whom.",
        "“猫吃鱼”和“鱼吃猫”由相同的词元组成。不加位置嵌入时，注意力是置换不变的：它给出的权重"
        "完全相同，只是顺序不同，所以分不清谁吃谁。"),
    "demo.kvcache.title": ("The KV cache: decoding one token at a time",
                           "键值缓存：每次解码一个词元"),
    "demo.kvcache.text": (
        "Causal attention never lets a token see later ones, so the keys and values of earlier "
        "tokens never change: a decoder keeps them in a cache and projects only the new token.",
        "因果注意力不让任何词元看到后面的词元，所以前面词元的键和值永远不变：解码器把它们保存在"
        "键值缓存里，每一步只投影新的词元。"),
    "demo.flash.title": ("Flash attention: the online softmax, block by block",
                         "Flash Attention：分块的在线 softmax"),
    "demo.flash.text": (
        "The tiled path never builds the N×N matrix: it streams the keys in blocks and keeps, "
        "for each query, a running maximum m, a running sum l and an accumulator.",
        "分块路径从不构造 N×N 矩阵：它把键分块依次读入，每个查询只保存当前最大值 m、当前和 l "
        "和一个累加器。"),
    "demo.cost.title": ("The O(n²) cost, measured", "实测 O(n²) 的代价"),
    "demo.cost.text": (
        "Doubling the text quadruples what the naive path holds; the tiled path grows only "
        "linearly. A quick run, up to {n} tokens:",
        "文本长度翻倍，朴素路径占用的内存变为四倍；分块路径只线性增长。快速测量，最多 {n} 个"
        "词元："),
}


def text(lang: str, key: str, **values: object) -> str:
    """The string for key in lang, with its placeholders filled in."""
    template = STRINGS[key][LANGS.index(lang)]
    return template.format(**values) if values else template


def size_text(num_bytes: float) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 286.3 MiB, 17.0 GiB."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def diff_text(value: float) -> str:
    """A max |diff| in two significant digits."""
    return f"{value:.1e}"
