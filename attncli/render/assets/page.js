// attncli's interactive page: plain JavaScript, no libraries, no network.
// It reads the command's --json document (#attncli-data) and render-only extras (#attncli-extra).
// page.py joins page.js, page-long.js, page-heads.js, page-lessons.js and page-generate.js into
// one function and calls main() at its end.

const doc = JSON.parse(document.getElementById("attncli-data").textContent);
const extra = JSON.parse(document.getElementById("attncli-extra").textContent || "{}") || {};
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]];
const RDBU = [[33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43]];
const WEIGHT_STAGES = ["softmax", "dropped", "weights"];
const TOKEN_STAGES = ["scores", "scaled", "capped", "masked", "softmax", "dropped", "weights"];
// What a focused row of a stage that is not weights holds.
const HOLDS = {
  inputs: "its input embedding x (token plus position)", queries: "its query q = x·W_query",
  keys: "its key k = x·W_key", values: "its value v = x·W_value",
  scores: "its attention scores ω = q·kᵀ over the keys, before the softmax",
  scaled: "its scaled scores ω ÷ √d_k over the keys, before the softmax",
  capped: "its soft-capped scores cap · tanh(scaled ÷ cap), before the mask",
  masked: "its masked scores (future keys −∞), before the softmax",
  heads_context: "each head's context vector, side by side", context: "its context vector z = Σ α·v",
};
const SVGNS = "http://www.w3.org/2000/svg";
const state = { choice: 0, head: "all", focus: null, clicked: null };
let model = null;

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  return node;
}

// f in [0, 1] along viridis (or RdBu when signed, 0.5 the middle).
function ramp(f, signed) {
  const stops = signed ? RDBU : VIRIDIS;
  const pos = Math.min(Math.max(f, 0), 1) * (stops.length - 1);
  const low = Math.min(Math.floor(pos), stops.length - 2), t = pos - low;
  const rgb = [0, 1, 2].map((i) => Math.round(stops[low][i] + (stops[low + 1][i] - stops[low][i]) * t));
  return "rgb(" + rgb.join(",") + ")";
}

function colour(value, top, signed) {
  if (top <= 0) return ramp(0.5, signed);
  return ramp(signed ? 0.5 + 0.5 * value / top : value / top, signed);
}

function is2d(m) { return m.length === 0 || !Array.isArray(m[0][0]); }
function labelsOf(tokens) { return (tokens || []).map((t) => (typeof t === "string" ? t : t.text)); }
function dims(n) { return Array.from({ length: n }, (_, j) => "d" + j); }
function range(a, b) { return Array.from({ length: Math.max(b - a, 0) }, (_, k) => a + k); }
function isCausal(variant) { return variant === "causal" || variant === "multihead"; }
// A checkpoint's run is causal unless its model says its attention is bidirectional (an encoder).
function causalDoc() {
  return doc.model != null ? doc.model.attention !== "bidirectional" : isCausal(doc.variant);
}

// What run --measure put in doc.weights instead of the weights: its name and its legend.
function measureOf() { return (doc.config && doc.config.measure) || null; }
function measureNote() {
  const m = measureOf();
  if (m === "norm") return "norm: ‖α_ij·W_O v_j‖ per head (Kobayashi et al. 2020), rows "
    + "renormalised to sum to 1; the JSON's \"norm\" holds the raw lengths";
  if (m === "rollout") return "rollout to layer " + doc.config.layer + ": Ã_L···Ã_0, each Ã = "
    + "0.5·I + 0.5·(mean over heads of A), rows renormalised (Abnar & Zuidema 2020): one "
    + "matrix, heads averaged";
  return null;
}

function stageModel() {
  const tokens = labelsOf(doc.tokens);
  const all = range(0, tokens.length);
  const causal = causalDoc();
  const list = [{ label: measureOf() || "weights", heads: doc.weights || [], rows: all, cols: all,
    signed: false, causal, ranked: true, legendNote: measureNote() }];
  for (const [name, data] of Object.entries(doc.stages || {})) {
    if (data === null || name === "weights" || !Array.isArray(data) || !data.length) continue;
    const heads = is2d(data) ? [data] : data;
    const cols = TOKEN_STAGES.includes(name) ? all : dims((heads[0][0] || []).length);
    const weights = WEIGHT_STAGES.includes(name);
    list.push({ label: name, heads, rows: all, cols, signed: !weights, ranked: weights,
      causal: causal && weights, holds: HOLDS[name] || "the " + name + " stage's row" });
  }
  return { kind: "stage", tokens, list };
}

function compareModel() {
  const tokens = labelsOf(doc.variants[0].tokens);
  const all = range(0, tokens.length);
  return { kind: "variant", tokens, list: doc.variants.map((v) => ({ label: v.variant,
    heads: v.weights, rows: all, cols: all, signed: false, ranked: true,
    causal: isCausal(v.variant) })) };
}

function buildModel() {
  if (doc.kind === "generate") return generateModel();
  if (doc.kind === "patch") return patchModel();
  if (doc.kind === "ablate") return ablateModel();
  if (doc.rows && doc.fit) return costModel();
  if (Array.isArray(doc.steps) && doc.block !== undefined) return flashModel();
  if (Array.isArray(doc.steps) && doc.totals) return kvcacheModel();
  if (doc.permutation) return permuteModel();
  if (doc.variants) return compareModel();
  if (doc.scan && doc.heads) return scanModel();
  if (extra.thumbnails && doc.heads) return headsModel();
  if (doc.stats) return longModel();
  if (Array.isArray(doc.weights)) return stageModel();
  return { kind: "none", tokens: [], list: [] };
}

function current() { return model.list[state.choice]; }
function tokensOf(choice) { return (choice && choice.tokens) || model.tokens; }
function shownHeads() {
  const choice = current();
  const n = choice ? choice.heads.length : 0;
  return state.head === "all" ? range(0, n) : [Math.min(Number(state.head), n - 1)];
}
function focusHead() {
  const shown = shownHeads();
  return shown.includes(state.clicked) ? state.clicked : shown[0];
}
function axisLabel(index, choice) {
  if (typeof index === "string") return index;
  if (model.indexLabels) return "token " + index;
  const tokens = tokensOf(choice || current());
  if (model.blocks || index >= tokens.length) return "block " + index;
  return index + " " + JSON.stringify(tokens[index]);
}

function rangeTop(choice, heads) {
  let best = 0;
  for (const h of heads || range(0, choice.heads.length)) {
    for (const row of choice.heads[h]) for (const v of row) {
      if (v !== null) best = Math.max(best, choice.signed ? Math.abs(v) : v);
    }
  }
  return best || 1;
}

function shortLabel(index, choice) {
  if (typeof index === "string") return index;
  if (model.indexLabels) return String(index);
  const tokens = tokensOf(choice);
  if (model.blocks || index >= tokens.length) return String(index);
  const text = tokens[index].replace(/ /g, "\u00b7");
  return text.length > 10 ? text.slice(0, 9) + "\u2026" : text;
}

// Masked keys: null in the data, or, for causal weights, the keys after the query.
function masked(choice, i, j, v) {
  return v === null || v === undefined || (choice.causal && typeof choice.cols[j] === "number"
    && typeof choice.rows[i] === "number" && choice.cols[j] > choice.rows[i] && !model.blocks);
}

// One head's matrix as an SVG heatmap; fill(v) gives a cell's colour, one listener per picture.
function heatmap(choice, head, fill, opts) {
  const o = opts || {};
  const m = choice.heads[head], n = (m[0] || []).length;
  const cell = o.cell || (Math.max(m.length, n) > 32 ? 12 : 22);
  const labelled = !o.bare && m.length <= 64 && n <= 64, pad = labelled ? 80 : 0;
  const box = el("figure", { class: "heat" + (o.extraClass ? " " + o.extraClass : "") });
  if (!o.bare) box.appendChild(el("figcaption", {}, o.caption || (choice.heads.length > 1 ? "head " + head : choice.label)));
  const pic = svg("svg", { width: pad + cell * n, height: pad + cell * m.length, role: "img",
    "data-head": head, "data-cell": cell, "data-pad": pad });
  if (labelled) {
    choice.rows.forEach((r, i) => {
      const t = svg("text", { x: pad - 4, y: pad + i * cell + cell * 0.7, "text-anchor": "end" });
      t.textContent = shortLabel(r, choice);
      pic.appendChild(t);
    });
    choice.cols.forEach((c, j) => {
      const x = pad + j * cell + cell * 0.7;
      const t = svg("text", { x, y: pad - 4, transform: "rotate(-60 " + x + " " + (pad - 4) + ")" });
      t.textContent = shortLabel(c, choice);
      pic.appendChild(t);
    });
  }
  const gap = cell > 8 ? 1 : 0;
  m.forEach((row, i) => row.forEach((v, j) => {
    const hidden = masked(choice, i, j, v);
    const rect = svg("rect", { x: pad + j * cell, y: pad + i * cell, width: cell - gap,
      height: cell - gap, fill: hidden ? "#d0d0d0" : fill(v), "data-row": i, "data-col": j });
    if (state.focus !== null && choice.rows[i] === state.focus) rect.setAttribute("class", "focus");
    pic.appendChild(rect);
  }));
  pic.addEventListener("mousemove", (e) => {
    const i = e.target.getAttribute("data-row"), j = e.target.getAttribute("data-col");
    if (i === null) { hideTip(); return; }
    const v = m[i][j], hidden = masked(choice, Number(i), Number(j), v);
    showTip(e, "query " + axisLabel(choice.rows[i], choice) + " · key " + axisLabel(choice.cols[j], choice)
      + " · " + choice.label + " " + (hidden ? "masked" : v.toFixed(4)));
  });
  pic.addEventListener("mouseleave", hideTip);
  if (o.onCell) {
    pic.addEventListener("click", (e) => {
      const i = e.target.getAttribute("data-row");
      if (i !== null) o.onCell(Number(i), Number(e.target.getAttribute("data-col")));
    });
  }
  box.appendChild(pic);
  return box;
}

function showTip(event, text) {
  const tip = document.getElementById("attncli-tooltip");
  tip.textContent = text;
  tip.style.left = event.pageX + 12 + "px";
  tip.style.top = event.pageY + 12 + "px";
  tip.hidden = false;
}
function hideTip() { document.getElementById("attncli-tooltip").hidden = true; }

// The keys of the focused query, heaviest first (masked keys left out): only for weight rows.
function ranking() {
  const choice = current();
  if (state.focus === null || !choice || !choice.ranked) return [];
  if (choice.rankOf) return choice.rankOf(state.focus, focusHead());
  const i = choice.rows.indexOf(state.focus);
  if (i < 0) return [];
  const keys = [];
  choice.heads[focusHead()][i].forEach((w, j) => {
    if (!masked(choice, i, j, w)) keys.push([choice.cols[j], w]);
  });
  return keys.sort((p, q) => q[1] - p[1] || p[0] - q[0]);
}

// A focused row that is not weights: say what it holds, and its numbers in order.
function renderHeld(box, choice) {
  const i = choice.rows.indexOf(state.focus);
  box.appendChild(el("h3", {}, "query " + axisLabel(state.focus, choice) + " · " + choice.label
    + (choice.heads.length > 1 ? " · head " + focusHead() : "")));
  const row = i < 0 ? [] : choice.heads[focusHead()][i];
  box.appendChild(el("p", { class: "held" }, "This row holds " + choice.holds + ": "
    + row.length + " numbers, not weights over keys, so nothing is ranked. Pick "
    + "weights (or softmax) to rank its keys."));
  const cells = row.slice(0, 64).map((v, j) => shortLabel(choice.cols[j], choice) + " "
    + (masked(choice, i, j, v) ? "masked" : v.toFixed(4)));
  box.appendChild(el("p", { class: "row-values" }, cells.join(" · ") + (row.length > 64 ? " …" : "")));
}

function renderFocus() {
  const box = document.getElementById("attncli-focus");
  box.textContent = "";
  document.getElementById("attncli-lines").textContent = "";
  const choice = current();
  if (!choice) {
    box.appendChild(el("p", { class: "hint" }, model.kind === "none" ? "Nothing to draw here: "
      + "the data is in the attncli-data element." : "No weights to focus here: the tables below hold the numbers."));
    return;
  }
  if (state.focus !== null && !choice.ranked && choice.holds) {
    renderHeld(box, choice);
    return;
  }
  const keys = ranking();
  if (!keys.length) {
    box.appendChild(el("p", { class: "hint" }, state.focus === null
      ? "Click a token to see what it attends to." : "query " + axisLabel(state.focus, choice)
        + ": no keys of it in this view."));
    return;
  }
  box.appendChild(el("h3", {}, (choice.focusLabel ? choice.focusLabel(state.focus)
    : "query " + axisLabel(state.focus, choice))
    + (choice.heads.length > 1 || choice.headName ? " · " + (choice.headName ? choice.headName(focusHead()) : "head " + focusHead()) : "")));
  if (choice.note) box.appendChild(el("p", { class: "hint" }, choice.note));
  const list = el("ol", {});
  for (const [key, w] of keys.slice(0, 64)) {
    const item = el("li", { "data-key": key });
    item.appendChild(el("span", { class: "w" }, w.toFixed(4)));
    item.appendChild(el("span", { class: "k" }, " " + (choice.keyLabel ? choice.keyLabel(key) : axisLabel(key, choice))));
    list.appendChild(item);
  }
  box.appendChild(list);
  if (keys.length > 64) box.appendChild(el("p", { class: "hint" }, "the 64 heaviest of " + keys.length + " keys"));
  if (choice.afterFocus) choice.afterFocus(box);
  if (!model.blocks && !choice.rankOf) renderLines(keys);
}

// bertviz-style: the focused query on the left, a line to every key, opacity by weight.
function renderLines(keys) {
  const box = document.getElementById("attncli-lines");
  const choice = current();
  const step = 20, width = 360, n = Math.max(choice.rows.length, choice.cols.length);
  if (n > 64) return;
  const pic = svg("svg", { width, height: step * n + 10, role: "img" });
  const best = keys[0][1] || 1;
  choice.cols.forEach((key, j) => {
    const t = svg("text", { x: width - 110, y: step * j + 15 });
    t.textContent = axisLabel(key, choice);
    pic.appendChild(t);
  });
  const i = choice.rows.indexOf(state.focus);
  const q = svg("text", { x: 0, y: step * i + 15, class: "focus" });
  q.textContent = axisLabel(state.focus, choice);
  pic.appendChild(q);
  for (const [key, w] of keys) {
    const j = choice.cols.indexOf(key);
    pic.appendChild(svg("line", { x1: 110, y1: step * i + 10, x2: width - 115, y2: step * j + 10,
      stroke: "#1f77b4", "stroke-width": 3, "stroke-opacity": (Math.max(w, 0) / best).toFixed(3) }));
  }
  box.appendChild(pic);
}

function renderStrip() {
  const strip = document.getElementById("attncli-tokens");
  strip.textContent = "";
  const choice = current();
  if (!choice) return;
  const tokens = tokensOf(choice);
  const rows = (choice.stripRows || choice.rows).filter((r) => typeof r === "number").slice(0, 400);
  for (const i of rows) {
    const label = model.indexLabels ? "token " + i
      : model.blocks || i >= tokens.length ? "block " + i : tokens[i];
    const token = el("button", { class: "token", "data-token-index": i, type: "button",
      title: choice.focusLabel ? choice.focusLabel(i) : "token " + i }, label.replace(/ /g, "\u00b7") || "\u2205");
    if (i === state.focus) token.classList.add("focus");
    token.addEventListener("click", () => { state.focus = i; render(); });
    strip.appendChild(token);
  }
}

function renderMaps() {
  const box = document.getElementById("attncli-maps");
  box.textContent = "";
  const choice = current();
  if (!choice) return;
  if (choice.draw) { choice.draw(box); return; }
  const heads = shownHeads(), scaleTop = rangeTop(choice, heads);
  for (const h of heads) {
    box.appendChild(heatmap(choice, h, (v) => colour(v, scaleTop, choice.signed), {
      onCell: (i) => { state.focus = choice.rows[i]; state.clicked = h; render(); } }));
  }
  box.appendChild(el("p", { class: "legend" }, (choice.signed ? "diverging map, 0 in the middle, ±"
    : "sequential map, 0 to ") + scaleTop.toFixed(4) + " · " + (choice.scaleNote
    || "shared scale (every head shown)") + (choice.legendNote ? " · " + choice.legendNote : "")));
}

function selector(id, label, options, onChange, value) {
  const wrap = el("label", {}, label + " ");
  const select = el("select", { id });
  options.forEach(([v, text]) => select.appendChild(el("option", { value: v }, text)));
  if (value !== undefined) select.value = value;
  select.addEventListener("change", () => { onChange(select.value); render(); });
  wrap.appendChild(select);
  return wrap;
}

function controls() {
  const bar = document.getElementById("attncli-controls");
  if (!model.ownControls) defaultControls(bar);
  if (model.controls) model.controls(bar);
}

function defaultControls(bar) {
  if (model.list.length > 1) {
    bar.appendChild(selector("attncli-" + model.kind, model.kind,
      model.list.map((c, k) => [String(k), c.label]), (v) => { state.choice = Number(v); }));
  }
  const heads = Math.max(0, ...model.list.map((c) => c.heads.length));
  if (heads > 1) {
    bar.appendChild(selector("attncli-head", "head",
      [["all", "all"], ...range(0, heads).map((h) => [String(h), String(h)])],
      (v) => { state.head = v; }));
  }
}

function cellText(v) {
  if (typeof v === "number" && !Number.isInteger(v)) {
    return Math.abs(v) >= 1e-4 || v === 0 ? v.toFixed(4) : v.toExponential(2);
  }
  if (Array.isArray(v)) return v.length > 8 ? v.length + " numbers" : v.map(cellText).join(" ");
  if (v === null || v === undefined) return "—";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function table(title, rows) {
  if (!Array.isArray(rows) || !rows.length || typeof rows[0] !== "object") return null;
  const box = el("section", {});
  box.appendChild(el("h2", {}, title));
  const t = el("table", {});
  const head = el("tr", {});
  const keys = Object.keys(rows[0]);
  keys.forEach((k) => head.appendChild(el("th", {}, k)));
  t.appendChild(head);
  for (const row of rows) {
    const tr = el("tr", {});
    keys.forEach((k) => tr.appendChild(el("td", {}, cellText(row[k]))));
    t.appendChild(tr);
  }
  box.appendChild(t);
  return box;
}

// --predict: each position's likeliest next tokens (and explain's logit lens). Token texts are
// the model's vocabulary, untrusted: they go in as text only.
function candidatesText(top) {
  return (top || []).map((c) => JSON.stringify(String(c.text)) + " " + Number(c.prob).toFixed(4)).join("  ");
}

function predictions() {
  const list = doc.predictions;
  if (!Array.isArray(list) || !list.length) return null;
  const lens = Array.isArray(list[0].lens), layer = (doc.config || {}).layer;
  const box = el("section", { id: "attncli-predictions" });
  box.appendChild(el("h2", {}, "Next-token predictions" + (lens ? " and the logit lens of layer " + layer : "")));
  box.appendChild(el("p", { class: "hint" }, "top " + (list[0].top || []).length + " per position: "
    + "the last layer's output through the final norm and the unembedding, softmax over the whole "
    + "vocabulary" + (lens ? "; the lens reads layer " + layer + "'s output the same way" : "")));
  const t = el("table", {});
  const head = el("tr", {});
  ["#", "token", ...(lens ? ["layer " + layer + " lens"] : []), "predicted next"]
    .forEach((h) => head.appendChild(el("th", {}, h)));
  t.appendChild(head);
  for (const entry of list) {
    const tr = el("tr", { "data-index": String(entry.index) });
    tr.appendChild(el("td", {}, String(entry.index)));
    tr.appendChild(el("td", {}, JSON.stringify(String(entry.token))));
    if (lens) tr.appendChild(el("td", {}, candidatesText(entry.lens)));
    tr.appendChild(el("td", {}, candidatesText(entry.top)));
    t.appendChild(tr);
  }
  box.appendChild(t);
  return box;
}

function extras() {
  const box = document.getElementById("attncli-extras");
  const predicted = predictions();
  if (predicted) box.appendChild(predicted);
  if (model.extras) { model.extras(box); return; }
  const measures = table("Measures per head", doc.heads);
  if (measures) box.appendChild(measures);
}

function render() {
  renderStrip();
  renderMaps();
  renderFocus();
  if (model.afterRender) model.afterRender();
}

function header() {
  const c = doc.config || (doc.variants ? doc.variants[0].config : {}) || {};
  const what = model.title || (doc.variants ? "compare: " + doc.variants.map((v) => v.variant).join(", ")
    : doc.heads ? "heads of " + (doc.model ? doc.model.path || "a GPT-2" : "a model")
    : (doc.variant || "attention") + (doc.stats ? " · tiled" : "")
      + (measureOf() ? " · " + measureOf() : ""));
  const count = c.num_tokens || model.tokens.length;
  document.getElementById("attncli-title").textContent = what + (count ? " · " + count + " tokens" : "");
}

function main() {
  model = buildModel();
  if (model.focus !== undefined) state.focus = model.focus;
  header();
  controls();
  extras();
  render();
}
