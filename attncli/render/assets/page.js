// attncli's interactive page: plain JavaScript, no libraries, no network.
// It reads the command's --json document (#attncli-data) and render-only extras (#attncli-extra).
"use strict";

(() => {

const doc = JSON.parse(document.getElementById("attncli-data").textContent);
const extra = JSON.parse(document.getElementById("attncli-extra").textContent || "{}");
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]];
const RDBU = [[33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
  [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43]];
const WEIGHT_STAGES = ["softmax", "dropped", "weights"];
const TOKEN_STAGES = ["scores", "scaled", "masked", "softmax", "dropped", "weights"];
const SVGNS = "http://www.w3.org/2000/svg";
const state = { choice: 0, head: "all", focus: null };

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

function colour(value, top, signed) {
  const stops = signed ? RDBU : VIRIDIS;
  let f = top > 0 ? (signed ? 0.5 + 0.5 * value / top : value / top) : 0.5;
  f = Math.min(Math.max(f, 0), 1) * (stops.length - 1);
  const low = Math.min(Math.floor(f), stops.length - 2), t = f - low;
  const rgb = [0, 1, 2].map((i) => Math.round(stops[low][i] + (stops[low + 1][i] - stops[low][i]) * t));
  return "rgb(" + rgb.join(",") + ")";
}

function is2d(m) { return m.length === 0 || !Array.isArray(m[0][0]); }
function labelsOf(tokens) { return tokens.map((t) => t.text); }
function dims(n) { return Array.from({ length: n }, (_, j) => "d" + j); }
function range(a, b) { return Array.from({ length: b - a }, (_, k) => a + k); }

// One choice per thing the first selector picks: a stage, a variant or a layer.
function choices() {
  const tokens = labelsOf(doc.tokens || (doc.variants ? doc.variants[0].tokens : []));
  const all = range(0, tokens.length);
  if (doc.variants) {
    return { kind: "variant", tokens, list: doc.variants.map((v) => ({
      label: v.variant, heads: v.weights, rows: all, cols: all, signed: false, weights: v.weights,
      causal: v.variant !== "simple" && v.variant !== "qkv" })) };
  }
  if (extra.thumbnails) {
    const side = extra.thumbnails[0][0].length, exact = side === tokens.length;
    const axis = exact ? all : range(0, side);
    return { kind: "layer", tokens, blocks: !exact, list: extra.thumbnails.map((heads, layer) => ({
      label: "layer " + layer, heads, rows: axis, cols: axis, signed: false,
      weights: exact ? heads : null, causal: true, layer })) };
  }
  if (doc.stats) {
    const [a, b] = doc.window.rows, [c, d] = doc.window.cols;
    return { kind: "window", tokens, list: [{ label: "window", heads: doc.weights,
      rows: range(a, b), cols: range(c, d), signed: false, weights: doc.weights,
      causal: doc.variant !== "simple" && doc.variant !== "qkv" }] };
  }
  const causal = doc.model != null || doc.variant === "causal" || doc.variant === "multihead";
  const list = [{ label: "weights", heads: doc.weights, rows: all, cols: all, signed: false,
    weights: doc.weights, causal }];
  for (const [name, data] of Object.entries(doc.stages || {})) {
    if (data === null || name === "weights") continue;
    const heads = is2d(data) ? [data] : data;
    const cols = TOKEN_STAGES.includes(name) ? all : dims(heads[0][0].length);
    list.push({ label: name, heads, rows: all, cols, signed: !WEIGHT_STAGES.includes(name),
      weights: doc.weights, causal: causal && WEIGHT_STAGES.includes(name), rankCausal: causal });
  }
  return { kind: "stage", tokens, list };
}

const model = choices();

function current() { return model.list[state.choice]; }
function shownHeads() {
  const n = current().heads.length;
  return state.head === "all" ? range(0, n) : [Math.min(Number(state.head), n - 1)];
}
function focusHead() { return shownHeads()[0]; }
function axisLabel(index) {
  if (typeof index === "string") return index;
  if (model.blocks) return "block " + index;
  return index + " " + JSON.stringify(model.tokens[index]);
}

function rangeTop(choice) {
  let best = 0;
  for (const m of choice.heads) for (const row of m) for (const v of row) {
    if (v !== null) best = Math.max(best, choice.signed ? Math.abs(v) : v);
  }
  return best || 1;
}

function shortLabel(index) {
  if (typeof index === "string") return index;
  if (model.blocks) return String(index);
  const text = model.tokens[index].replace(/ /g, "\u00b7");
  return text.length > 10 ? text.slice(0, 9) + "\u2026" : text;
}

// Masked keys: null in the data, or, for causal weights, the keys after the query.
function masked(choice, i, j, v) {
  return v === null || (choice.causal && typeof choice.cols[j] === "number"
    && typeof choice.rows[i] === "number" && choice.cols[j] > choice.rows[i] && !model.blocks);
}

function heatmap(choice, head, scaleTop) {
  const m = choice.heads[head], n = (m[0] || []).length;
  const cell = Math.max(m.length, n) > 32 ? 12 : 22;
  const labelled = m.length <= 64 && n <= 64, pad = labelled ? 80 : 0;
  const box = el("figure", { class: "heat" });
  box.appendChild(el("figcaption", {}, choice.heads.length > 1 ? "head " + head : choice.label));
  const pic = svg("svg", { width: pad + cell * n, height: pad + cell * m.length, role: "img",
    "data-head": head });
  if (labelled) {
    choice.rows.forEach((r, i) => {
      const t = svg("text", { x: pad - 4, y: pad + i * cell + 15, "text-anchor": "end" });
      t.textContent = shortLabel(r);
      pic.appendChild(t);
    });
    choice.cols.forEach((c, j) => {
      const x = pad + j * cell + 15;
      const t = svg("text", { x, y: pad - 4, transform: "rotate(-60 " + x + " " + (pad - 4) + ")" });
      t.textContent = shortLabel(c);
      pic.appendChild(t);
    });
  }
  m.forEach((row, i) => row.forEach((v, j) => {
    const hidden = masked(choice, i, j, v);
    const rect = svg("rect", { x: pad + j * cell, y: pad + i * cell, width: cell - 1,
      height: cell - 1, fill: hidden ? "#d0d0d0" : colour(v, scaleTop, choice.signed),
      "data-row": i, "data-col": j });
    if (state.focus !== null && choice.rows[i] === state.focus) rect.setAttribute("class", "focus");
    const tip = "query " + axisLabel(choice.rows[i]) + " · key " + axisLabel(choice.cols[j])
      + " · " + choice.label + " " + (hidden ? "masked" : v.toFixed(4));
    rect.addEventListener("mousemove", (e) => showTip(e, tip));
    rect.addEventListener("mouseleave", hideTip);
    pic.appendChild(rect);
  }));
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

// The keys of the focused query, heaviest first (masked keys left out).
function ranking() {
  const choice = current();
  if (state.focus === null || !choice.weights) return [];
  const i = choice.rows.indexOf(state.focus);
  if (i < 0) return [];
  const row = choice.weights[focusHead()][i];
  const keys = [];
  row.forEach((w, j) => {
    const key = choice.cols[j];
    const causal = choice.rankCausal === undefined ? choice.causal : choice.rankCausal;
    if (w !== null && !(causal && key > state.focus)) keys.push([key, w]);
  });
  return keys.sort((p, q) => q[1] - p[1] || p[0] - q[0]);
}

function renderFocus() {
  const box = document.getElementById("attncli-focus");
  box.textContent = "";
  const keys = ranking();
  if (!keys.length) {
    box.appendChild(el("p", { class: "hint" }, "Click a token to see what it attends to."));
    return;
  }
  const heads = current().heads.length;
  box.appendChild(el("h3", {}, "query " + axisLabel(state.focus)
    + (heads > 1 ? " · head " + focusHead() : "")));
  const list = el("ol", {});
  for (const [key, w] of keys) {
    const item = el("li", { "data-key": key });
    item.appendChild(el("span", { class: "w" }, w.toFixed(4)));
    item.appendChild(el("span", { class: "k" }, " " + axisLabel(key)));
    list.appendChild(item);
  }
  box.appendChild(list);
  renderLines(keys);
}

// bertviz-style: the focused query on the left, a line to every key, opacity by weight.
function renderLines(keys) {
  const box = document.getElementById("attncli-lines");
  box.textContent = "";
  const choice = current();
  if (!keys.length || model.blocks) return;
  const step = 20, width = 360, n = Math.max(choice.rows.length, choice.cols.length);
  const pic = svg("svg", { width, height: step * n + 10, role: "img" });
  const best = keys[0][1] || 1;
  choice.cols.forEach((key, j) => {
    const t = svg("text", { x: width - 110, y: step * j + 15 });
    t.textContent = axisLabel(key);
    pic.appendChild(t);
  });
  const i = choice.rows.indexOf(state.focus);
  const q = svg("text", { x: 0, y: step * i + 15, class: "focus" });
  q.textContent = axisLabel(state.focus);
  pic.appendChild(q);
  for (const [key, w] of keys) {
    const j = choice.cols.indexOf(key);
    pic.appendChild(svg("line", { x1: 110, y1: step * i + 10, x2: width - 115, y2: step * j + 10,
      stroke: "#1f77b4", "stroke-width": 3, "stroke-opacity": (w / best).toFixed(3) }));
  }
  box.appendChild(pic);
}

function renderStrip() {
  const strip = document.getElementById("attncli-tokens");
  strip.textContent = "";
  const rows = current().rows.filter((r) => typeof r === "number").slice(0, 400);
  for (const i of rows) {
    const label = model.blocks ? "block " + i : model.tokens[i];
    const token = el("button", { class: "token", "data-token-index": i, type: "button",
      title: "token " + i }, label.replace(/ /g, "\u00b7") || "\u2205");
    if (i === state.focus) token.classList.add("focus");
    token.addEventListener("click", () => { state.focus = i; render(); });
    strip.appendChild(token);
  }
}

function renderMaps() {
  const box = document.getElementById("attncli-maps");
  box.textContent = "";
  const choice = current(), scaleTop = rangeTop(choice);
  for (const h of shownHeads()) box.appendChild(heatmap(choice, h, scaleTop));
  const legend = el("p", { class: "legend" }, (choice.signed ? "diverging map, 0 in the middle, ±"
    : "sequential map, 0 to ") + scaleTop.toFixed(4) + " · shared scale (every head shown)");
  box.appendChild(legend);
}

function selector(id, label, options, onChange) {
  const wrap = el("label", {}, label + " ");
  const select = el("select", { id });
  options.forEach(([value, text]) => select.appendChild(el("option", { value }, text)));
  select.addEventListener("change", () => { onChange(select.value); render(); });
  wrap.appendChild(select);
  return wrap;
}

function controls() {
  const bar = document.getElementById("attncli-controls");
  if (model.list.length > 1) {
    bar.appendChild(selector("attncli-" + model.kind, model.kind,
      model.list.map((c, k) => [String(k), c.label]), (v) => { state.choice = Number(v); }));
  }
  const heads = Math.max(...model.list.map((c) => c.heads.length));
  if (heads > 1) {
    bar.appendChild(selector("attncli-head", "head",
      [["all", "all"], ...range(0, heads).map((h) => [String(h), String(h)])],
      (v) => { state.head = v; }));
  }
}

function table(title, rows) {
  if (!rows || !rows.length) return null;
  const box = el("section", {});
  box.appendChild(el("h2", {}, title));
  const t = el("table", {});
  const head = el("tr", {});
  Object.keys(rows[0]).forEach((k) => head.appendChild(el("th", {}, k)));
  t.appendChild(head);
  for (const row of rows) {
    const tr = el("tr", {});
    Object.values(row).forEach((v) => tr.appendChild(el("td", {},
      typeof v === "number" && !Number.isInteger(v) ? v.toFixed(4) : String(v))));
    t.appendChild(tr);
  }
  box.appendChild(t);
  return box;
}

function extras() {
  const box = document.getElementById("attncli-extras");
  const summary = table("Summary per head", doc.summary);
  if (summary) box.appendChild(summary);
  for (const pmap of extra.pooled || []) {
    const blocks = range(0, pmap.edges.length - 1).map((b) => pmap.edges[b] + "–" + (pmap.edges[b + 1] - 1));
    const choice = { label: "pooled (" + (doc.config.pool || "max") + ")", heads: [pmap.values],
      rows: blocks, cols: blocks, signed: false };
    const fig = heatmap(choice, 0, rangeTop(choice));
    fig.firstChild.textContent = "pooled weights, head " + pmap.head + " (blocks of tokens)";
    box.appendChild(fig);
  }
  const measures = table("Measures per head", doc.heads);
  if (measures) box.appendChild(measures);
}

function render() {
  renderStrip();
  renderMaps();
  renderFocus();
}

function header() {
  const c = doc.config || (doc.variants ? doc.variants[0].config : {});
  const what = doc.variants ? "compare: " + doc.variants.map((v) => v.variant).join(", ")
    : doc.heads ? "heads of " + (doc.model ? doc.model.path || "a GPT-2" : "a model")
    : (doc.variant || "attention") + (doc.stats ? " · tiled" : "");
  document.getElementById("attncli-title").textContent = what + " · "
    + (c.num_tokens || model.tokens.length) + " tokens";
}

header();
controls();
extras();
render();
})();
