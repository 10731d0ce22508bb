// `attncli heads`: every layer × head on one screen, as the terminal shows them. Click a picture
// to pick its head, a token to rank that query's keys in the picked head.

const pick = { layer: 0, head: 0 };

// The token range of thumbnail block k of side p over T tokens (adaptive max pooling's bins).
function bin(k, side, count) {
  return [Math.floor(k * count / side), Math.ceil((k + 1) * count / side) - 1];
}

function headsModel() {
  const tokens = labelsOf(doc.tokens), count = tokens.length;
  const thumbs = extra.thumbnails, side = thumbs[0][0].length;
  const exact = extra.weights || (side === count ? thumbs : null);
  const all = range(0, count);
  const choice = { label: "layers × heads", heads: [[]], rows: all, cols: all, signed: false,
    ranked: true, causal: causalDoc(), draw: drawGrid,
    headName: () => "layer " + (firstLayer() + pick.layer) + " · head " + pick.head,
    rankOf: (q) => {
      if (exact) {
        const row = exact[pick.layer][pick.head][q];
        return row.map((w, j) => [j, w]).filter(([j]) => j <= q || !choice.causal)
          .sort((p, r) => r[1] - p[1] || p[0] - r[0]);
      }
      const k = range(0, side).find((b) => bin(b, side, count)[1] >= q);
      return thumbs[pick.layer][pick.head][k].map((w, c) => [c, w])
        .filter(([c]) => bin(c, side, count)[0] <= q || !choice.causal).sort((p, r) => r[1] - p[1] || p[0] - r[0]);
    },
  };
  if (!exact) {
    choice.note = "keys in blocks, each the largest weight of its tokens (this page holds no "
      + "exact weights for " + count + " tokens × every head)";
    choice.keyLabel = (c) => { const [a, b] = bin(c, side, count); return "tokens " + a + "–" + b; };
  }
  return { kind: "layer", tokens, list: [choice], ownControls: true, controls: headsControls,
    afterRender: syncPick };
}

// The first layer the run shows (--layers a:b); pictures are numbered from it.
function firstLayer() {
  return (doc.config.layers || [0])[0];
}

// Each head's scores as a layer × head table per score, a sink head marked *, a labelled one +.
function drawScores(box, rows = doc.heads || []) {
  if (!rows.length || rows[0].induction === undefined) return;
  const byHead = new Map(rows.map((r) => [r.layer + ":" + r.head, r]));
  const layers = [...new Set(rows.map((r) => r.layer))].sort((a, b) => a - b);
  const heads = [...new Set(rows.map((r) => r.head))].sort((a, b) => a - b);
  for (const name of ["previous_token", "duplicate_token", "induction"]) {
    const table = el("table", { class: "scores" });
    const head = el("tr", {}, "");
    head.appendChild(el("th", {}, name));
    heads.forEach((h) => head.appendChild(el("th", {}, "h" + h)));
    table.appendChild(head);
    for (const l of layers) {
      const tr = el("tr", {});
      tr.appendChild(el("th", {}, "L" + l));
      for (const h of heads) {
        const r = byHead.get(l + ":" + h);
        const mark = (r.labels.includes(name) ? "+" : "") + (r.first >= 0.5 ? "*" : "");
        const td = el("td", { title: "layer " + l + " head " + h + ": " + name + " "
          + r[name].toFixed(4) }, r[name].toFixed(2) + mark);
        td.style.background = colour(r[name], 1, false);
        td.style.color = r[name] > 0.5 ? "#000" : "#fff";
        tr.appendChild(td);
      }
      table.appendChild(tr);
    }
    box.appendChild(table);
  }
  const sinks = (doc.layers || []).map((s) => "L" + s.layer + " "
    + (s.first_share === null ? "–" : s.first_share.toFixed(2))
    + (s.norm_ratio === null ? "" : " (" + s.norm_ratio.toFixed(1) + "×)")).join(" · ");
  box.appendChild(el("p", { class: "legend" }, "head scores (TransformerLens's detect_head: the "
    + "share of each head's attention on the pattern, raw weights); + labelled (≥ "
    + doc.config.threshold + "), * sink head (≥ 0.50 on the first token). Sinks per layer, share "
    + "on the first token (first token's norm ÷ the median): " + sinks));
}

function drawGrid(box) {
  const thumbs = extra.thumbnails, side = thumbs[0][0].length, count = model.tokens.length;
  let top = 0;
  for (const layer of thumbs) for (const m of layer) for (const row of m) for (const v of row) top = Math.max(top, v);
  top = top || 1;
  const axis = range(0, side), cell = Math.max(3, Math.floor(120 / side));
  const grid = el("div", { id: "attncli-grid" });
  thumbs.forEach((layer, l) => {
    const line = el("div", { class: "grid-row" });
    line.appendChild(el("span", { class: "grid-label" }, "L" + (firstLayer() + l)));
    layer.forEach((m, h) => {
      const choice = { label: "layer " + (firstLayer() + l) + " head " + h, heads: [m], rows: axis, cols: axis,
        signed: false, causal: side === count && causalDoc(), tokens: model.tokens };
      const fig = heatmap(choice, 0, (v) => colour(v, top, false), { cell, caption: "h" + h,
        extraClass: "thumb" + (l === pick.layer && h === pick.head ? " picked" : "") });
      fig.setAttribute("data-layer", l);
      fig.setAttribute("data-head", h);
      fig.querySelector("svg").querySelectorAll("rect.focus").forEach((r) => r.removeAttribute("class"));
      fig.addEventListener("click", () => { pick.layer = l; pick.head = h; render(); });
      line.appendChild(fig);
    });
    grid.appendChild(line);
  });
  drawScores(box);
  box.appendChild(grid);
  box.appendChild(el("p", { class: "legend" }, "every layer (rows) × head (columns): query rows × "
    + "key columns" + (side === count ? "" : ", max-pooled to " + side + "×" + side) + "; sequential "
    + "map, 0 to " + top.toFixed(4) + " · shared scale (every head); click a picture to pick its head"));
}

function headsControls(bar) {
  const layers = extra.thumbnails.length, heads = extra.thumbnails[0].length;
  bar.appendChild(selector("attncli-layer", "layer", range(0, layers).map((l) => [String(l), String(firstLayer() + l)]),
    (v) => { pick.layer = Number(v); }));
  bar.appendChild(selector("attncli-head", "head", range(0, heads).map((h) => [String(h), String(h)]),
    (v) => { pick.head = Number(v); }));
}

function syncPick() {
  const layer = document.getElementById("attncli-layer"), head = document.getElementById("attncli-head");
  if (layer) layer.value = String(pick.layer);
  if (head) head.value = String(pick.head);
}

// `attncli scan`: a corpus's summary: the documents, each score's grid of corpus means (as
// heads draws one text's), the share of documents on which each head passes, the top heads.
function scanModel() {
  const choice = { label: "corpus", heads: [[]], rows: [], cols: [], signed: false, draw: drawScan };
  return { kind: "scan", title: "scan of " + (doc.scan.corpus || "a corpus") + " · "
    + (doc.model ? doc.model.path || "a model" : "a model"), tokens: [], list: [choice],
    ownControls: true };
}

function drawScan(box) {
  const d = doc.scan.documents;
  box.appendChild(el("p", {}, d.scored + " documents scored (" + d.cut + " cut), " + d.tokens
    + " tokens, " + d.skipped + " skipped" + Object.entries(d.skipped_because || {})
    .map(([why, n]) => "; " + n + " " + why).join("")));
  box.appendChild(el("h2", {}, "Corpus mean of each head's score"));
  drawScores(box);
  box.appendChild(el("h2", {}, "Share of documents on which the head scores "
    + doc.scan.threshold + " or more"));
  drawScores(box, doc.heads.map((r) => ({ ...r, ...r.share })));
  const table = el("table", { class: "scores" });
  const names = ["previous_token", "duplicate_token", "induction"];
  const top = el("tr", {});
  names.forEach((n) => top.appendChild(el("th", {}, "top " + n)));
  table.appendChild(top);
  const length = Math.max(...names.map((n) => doc.scan.top[n].length));
  for (let k = 0; k < length; k++) {
    const tr = el("tr", {});
    for (const n of names) {
      const t = doc.scan.top[n][k];
      tr.appendChild(el("td", {}, t ? "L" + t.layer + " h" + t.head + " " + t.share.toFixed(2)
        + " (" + t.mean.toFixed(2) + ")" : ""));
    }
    table.appendChild(tr);
  }
  box.appendChild(table);
}
