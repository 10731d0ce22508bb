// The lessons' pages: kvcache (each step's weights over its cache), permute (both texts, with and
// without positions), flash (one query's weights and its key blocks), cost (the measured sizes).

function kvcacheModel() {
  const steps = doc.steps, count = steps.length, heads = steps[0].weights.length;
  const tokens = [];
  steps.forEach((s) => { tokens[s.index] = s.token; });
  const rows = steps.map((s) => s.index);
  const matrices = range(0, heads).map((h) => steps.map((s) => {
    const row = new Array(count).fill(null), w = s.weights[h], first = s.index - w.length + 1;
    w.forEach((v, k) => { row[first + k] = v; });
    return row;
  }));
  return { kind: "step", tokens, title: "kvcache: decoding with a KV cache", list: [{
    label: "weights over the cache", heads: matrices, rows, cols: range(0, count), signed: false,
    ranked: true, causal: true, scaleNote: "shared scale (every head shown); row t: step t's query "
      + "over the keys in its cache" }],
  extras: (box) => {
    const plain = steps.map((s) => Object.fromEntries(Object.entries(s)
      .filter(([k]) => k !== "weights" && k !== "context")));
    for (const part of [table("Steps", plain), table("Totals", [doc.totals])]) if (part) box.appendChild(part);
  } };
}

function permuteModel() {
  const texts = { a: labelsOf(doc.a.tokens), b: labelsOf(doc.b.tokens) };
  const list = [], checks = [];
  for (const [key, name] of [["without_positions", "without positions"], ["with_positions", "with positions"]]) {
    const part = doc[key];
    if (!part) continue;
    checks.push({ setting: name, equivariant: part.equivariant, max_abs_diff: part.max_abs_diff });
    for (const side of ["a", "b"]) {
      const toks = texts[side], all = range(0, toks.length);
      list.push({ label: name + " · text " + side.toUpperCase(), heads: part["weights_" + side],
        tokens: toks, rows: all, cols: all, signed: false, ranked: true, causal: false });
    }
  }
  return { kind: "permute", tokens: texts.a, title: "permute: the same tokens in another order", list,
    extras: (box) => {
      box.appendChild(table("Permutation equivariance", checks));
      box.appendChild(el("p", {}, "permutation: text B's token k is text A's token "
        + doc.permutation.map((p, k) => k + "←" + p).join(", ")));
    } };
}

function flashModel() {
  const count = doc.weights.length;
  const keys = range(0, count);
  return { kind: "flash", tokens: [], indexLabels: true, focus: doc.query,
    title: "flash: the online softmax, key blocks of " + doc.block, list: [{
      label: "weights of query " + doc.query, heads: [[doc.weights]], rows: [doc.query], cols: keys,
      signed: false, ranked: true, causal: false, scaleNote: "0 to the largest weight" }],
    extras: (box) => {
      const steps = doc.steps.map((s) => ({ keys: s.keys[0] + "–" + s.keys[s.keys.length - 1],
        scores: s.scores, block_max: s.block_max, m: s.m, rescale: s.scale, l: s.l }));
      for (const part of [table("Key blocks", steps), table("Memory", [doc.memory]),
        table("Check", [{ max_abs_diff: doc.max_abs_diff }])]) if (part) box.appendChild(part);
    } };
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let k = 0;
  while (n >= 1024 && k < units.length - 1) { n /= 1024; k += 1; }
  return (k ? n.toFixed(1) : String(n)) + " " + units[k];
}

function costModel() {
  return { kind: "cost", tokens: [], list: [], title: "cost: attention's O(n²), measured",
    extras: (box) => {
      const rows = doc.rows.map((r) => ({ tokens: r.tokens, "naive time": (1000 * r.naive_seconds).toFixed(1) + " ms",
        "naive bytes": bytes(r.naive_bytes), "tiled time": (1000 * r.tiled_seconds).toFixed(1) + " ms",
        "tiled bytes": bytes(r.tiled_bytes) }));
      box.appendChild(table("Measured", rows));
      const top = Math.max(...doc.rows.map((r) => Math.max(r.naive_bytes, r.tiled_bytes)), 1);
      const bars = el("section", { id: "attncli-bars" });
      bars.appendChild(el("h2", {}, "Peak bytes, one scale for both paths"));
      const pic = svg("svg", { width: 520, height: 22 * 2 * doc.rows.length + 4, role: "img" });
      doc.rows.forEach((r, k) => [["naive", r.naive_bytes, "#3e4989"], ["tiled", r.tiled_bytes, "#35b779"]]
        .forEach(([name, value, fill], s) => {
          const y = 22 * (2 * k + s);
          const t = svg("text", { x: 0, y: y + 15 });
          t.textContent = r.tokens + " " + name;
          pic.appendChild(t);
          pic.appendChild(svg("rect", { x: 110, y: y + 3, height: 16, fill,
            width: Math.max(1, 300 * value / top), class: "bar" }));
          const v = svg("text", { x: 116 + 300 * value / top, y: y + 15 });
          v.textContent = bytes(value);
          pic.appendChild(v);
        }));
      bars.appendChild(pic);
      box.appendChild(bars);
      const fit = table("Growth exponents (log-log fit)", [doc.fit]);
      if (fit) box.appendChild(fit);
      const projection = table("Projected", Object.entries(doc.projection || {}).map(([n, p]) => ({
        tokens: n, "naive bytes": bytes(p.naive_bytes), "tiled bytes": bytes(p.tiled_bytes) })));
      if (projection) box.appendChild(projection);
    } };
}
