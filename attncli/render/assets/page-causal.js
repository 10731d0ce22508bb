// `attncli patch`: the patched metric as a layer × head grid (diverging, 0 the middle), its
// top heads and the attribution estimate's grid; `attncli ablate`: the ranking's effects as a
// grid and every head listed, or what one ablation changed. Token texts go in as text only.
function causalGrid(box, title, grid, legend) {
  const top = Math.max(0, ...grid.flat().map((v) => Math.abs(v))) || 1;
  box.appendChild(el("h2", {}, title));
  const t = el("table", { class: "scores causal-grid" });
  const head = el("tr", {});
  head.appendChild(el("th", {}, "layer"));
  (grid[0] || []).forEach((_, h) => head.appendChild(el("th", {}, "h" + h)));
  t.appendChild(head);
  grid.forEach((row, l) => {
    const tr = el("tr", {});
    tr.appendChild(el("th", {}, "L" + l));
    row.forEach((v, h) => {
      const td = el("td", { title: "layer " + l + " head " + h + ": " + v.toFixed(6) },
        (v >= 0 ? "+" : "") + v.toFixed(3));
      td.style.background = colour(v, top, true);
      td.style.color = Math.abs(v) / top > 0.6 ? "#fff" : "#000";
      tr.appendChild(td);
    });
    t.appendChild(tr);
  });
  box.appendChild(t);
  box.appendChild(el("p", { class: "legend" }, legend + "; diverging map, ±" + top.toFixed(4)
    + " at the ends, 0 white"));
}

function patchModel() {
  const what = doc.metric === "logit-diff"
    ? "logit(" + (doc.tokens || []).map((t) => JSON.stringify(String(t.text))).join(") − logit(")
      + ") at position " + doc.at
    : "the answer's log-probability";
  return { kind: "patch", tokens: [], list: [], title: "patch · " + (doc.model.path || "a model")
    + " · " + doc.clean.length + " tokens", extras: (box) => {
    box.appendChild(el("p", {}, "metric " + what + ": clean " + doc.baseline.clean.toFixed(3)
      + ", corrupted " + doc.baseline.corrupt.toFixed(3) + "; --" + doc.direction + (doc.direction
      === "denoise" ? ": clean heads patched into the corrupted run (1: the clean metric restored)"
      : ": corrupted heads patched into the clean run (−1: the corrupted metric reached)")));
    if (doc.grid.length) {
      causalGrid(box, "Patched metric, normalised, layer × head", doc.grid, "each cell: the "
        + "metric with that head's output patched");
      const top = table("Top heads", (doc.top || []).map((c) => ({ head: c.layer + "." + c.head,
        effect: c.effect, metric: c.metric })));
      if (top) box.appendChild(top);
    }
    if (doc.attribution) {
      causalGrid(box, "Attribution patching (gradient estimate), normalised", doc.attribution.grid,
        "first-order estimate from one backward pass" + (doc.attribution.spearman === undefined ? ""
          : "; Spearman rank correlation with the exact grid " + doc.attribution.spearman.toFixed(3)));
    }
  } };
}

function ablateModel() {
  return { kind: "ablate", tokens: [], list: [], title: "ablate · " + (doc.model.path || "a model")
    + " · " + doc.tokens.length + " tokens", extras: (box) => {
    box.appendChild(el("p", {}, "Ablated: " + (Array.isArray(doc.heads) ? "heads " + doc.heads
      .map((p) => p.join(".")).join(", ") : "every head, one at a time") + "; " + doc.legend));
    if (doc.ranking) {
      const layers = 1 + Math.max(...doc.ranking.map((r) => r.layer));
      const heads = 1 + Math.max(...doc.ranking.map((r) => r.head));
      const grid = range(0, layers).map(() => range(0, heads).map(() => 0));
      doc.ranking.forEach((r) => { grid[r.layer][r.head] = r.effect; });
      causalGrid(box, "Effect of each head ablated alone, layer × head", grid, doc.answer
        ? "the answer's log-probability drop" : "the rise of the mean loss from token "
          + doc.scored_from);
      box.appendChild(table("Every head, by effect", doc.ranking.map((r) => ({ head: r.layer + "."
        + r.head, effect: r.effect, kl: r.kl, prev: r.previous_token, dup: r.duplicate_token,
        induction: r.induction }))));
    } else {
      box.appendChild(table("Loss per token (−log p)", doc.losses.map((r) => ({ "#": r.index,
        token: JSON.stringify(String(r.token)), before: r.before, after: r.after,
        change: r.after - r.before }))));
    }
  } };
}
