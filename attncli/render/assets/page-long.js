// A long run (the tiled path): the summary, pooled maps on a log range, and the exact window,
// which moves along the text when the page holds the weights near the diagonal (#attncli-extra's
// band: each row's exact weights on its keys around it).

const win = { start: 0, side: 0, drag: null, moved: false };

// Log range of the pooled maps, shared by every head: equal colour steps for equal ratios.
function logRange(maps) {
  let low = Infinity, top = 0;
  for (const pmap of maps) for (const row of pmap.values) for (const v of row) {
    if (v !== null && v > 0) { low = Math.min(low, v); top = Math.max(top, v); }
  }
  if (!(top > 0)) return { low: 1, top: 1, fraction: () => 1 };
  low = Math.max(low, top / 1e4);
  const span = Math.log(top / low);
  return { low, top, fraction: (v) => (span > 0 ? Math.min(Math.max(Math.log(Math.max(v, low) / low) / span, 0), 1) : 1) };
}

// The band's window of side × side weights on the diagonal from start, per head.
function bandWindow(start) {
  const band = extra.band, w = band.width, side = win.side;
  return band.values.map((rowsOf) => range(start, start + side).map((i) => range(start, start + side)
    .map((j) => { const v = rowsOf[i][j - i + w - 1]; return v === undefined ? null : v; })));
}

function moveTo(start) {
  const n = model.tokens.length;
  const next = Math.min(Math.max(Math.round(start), 0), Math.max(n - win.side, 0));
  const choice = model.moving;
  win.start = next;
  choice.rows = range(next, next + win.side);
  choice.cols = choice.rows;
  choice.heads = bandWindow(next);
  if (state.focus !== null && !choice.rows.includes(state.focus) && current() === choice) state.focus = null;
}

function movingChoice(causal) {
  win.side = Math.min(extra.band.width, model.tokens.length);
  const choice = { label: "moving window", heads: [], rows: [], cols: [], signed: false,
    ranked: true, causal, scaleNote: "this window's own scale, shared by the heads shown",
    headName: (h) => "head " + extra.band.heads[h], draw: drawMoving, afterFocus: topKeys,
    note: "its keys inside this window, heaviest first (its top-k in the whole text below)" };
  model.moving = choice;
  const a = doc.window.rows[0];
  moveTo(doc.window.rows[0] === doc.window.cols[0] ? a : 0);
  return choice;
}

function drawMoving(box) {
  const choice = current(), heads = shownHeads(), top = rangeTop(choice, heads);
  for (const h of heads) {
    const fig = heatmap(choice, h, (v) => colour(v, top, false), {
      caption: "exact weights, head " + extra.band.heads[h] + ", rows and keys " + win.start + "–"
        + (win.start + win.side - 1),
      onCell: (i) => { if (!win.moved) { state.focus = choice.rows[i]; state.clicked = h; render(); } } });
    fig.querySelector("svg").addEventListener("pointerdown", (e) => {
      win.drag = { x: e.clientX, y: e.clientY, start: win.start };
      win.moved = false;
      e.preventDefault();
    });
    box.appendChild(fig);
  }
  box.appendChild(el("p", { class: "legend" }, "sequential map, 0 to " + top.toFixed(4) + " · "
    + choice.scaleNote + " · drag the picture, use the buttons, or ←/→ (Shift: 64 tokens), "
    + "PageUp/PageDown, Home/End to move the window; click a pooled block to jump there"));
}

// The focused query's heaviest keys over the whole text, from the tiled pass's top-k.
function topKeys(box) {
  const top = doc.stats && doc.stats.top_k, h = focusHead();
  if (!top || !top.index[h] || !top.index[h][state.focus]) return;
  const pairs = top.index[h][state.focus].map((j, r) => [j, top.weight[h][state.focus][r]])
    .filter(([j]) => j >= 0);
  box.appendChild(el("h3", {}, "its top " + pairs.length + " keys in the whole text"));
  const list = el("ol", { class: "top-k" });
  for (const [j, w] of pairs) list.appendChild(el("li", { "data-key": j }, w.toFixed(4) + " " + axisLabel(j)));
  box.appendChild(list);
}

function longModel() {
  const tokens = labelsOf(doc.tokens);
  const [a, b] = doc.window.rows, [c, d] = doc.window.cols;
  const causal = causalDoc();
  model = { kind: "window", tokens, list: [], extras: longExtras, afterRender: markPooled };
  if (extra.band && extra.band.values.length === doc.weights.length) model.list.push(movingChoice(causal));
  model.list.push({ label: (measureOf() ? measureOf() + " " : "") + "window " + a + ":" + b + " × "
    + c + ":" + d + " (the JSON's)", legendNote: measureNote(),
    heads: doc.weights, rows: range(a, b), cols: range(c, d), signed: false, ranked: true, causal,
    afterFocus: topKeys, scaleNote: "this window's own scale, shared by the heads shown",
    note: "its keys inside this window, heaviest first (its top-k in the whole text below)" });
  model.controls = longControls;
  return model;
}

function button(id, text, title, onClick) {
  const b = el("button", { id, type: "button", title, class: "move" }, text);
  b.addEventListener("click", onClick);
  return b;
}

function longControls(bar) {
  if (!model.moving) {
    bar.appendChild(el("span", { class: "hint" }, "the exact window stays put: this page holds no "
      + "weights near the diagonal (attncli run --save page.html keeps them up to 4M; try --head H)"));
    return;
  }
  const n = model.tokens.length, go = (k) => { moveTo(k); render(); };
  const box = el("span", { id: "attncli-move", class: "move" });
  box.appendChild(button("attncli-win-first", "start", "to the start", () => go(0)));
  box.appendChild(button("attncli-win-back64", "−64", "64 tokens back", () => go(win.start - 64)));
  box.appendChild(button("attncli-win-back", "−1", "one token back", () => go(win.start - 1)));
  const slider = el("input", { id: "attncli-win-start", type: "range", min: 0,
    max: Math.max(n - win.side, 0), step: 1, value: win.start, "aria-label": "window start" });
  slider.addEventListener("input", () => go(Number(slider.value)));
  box.appendChild(slider);
  box.appendChild(button("attncli-win-fwd", "+1", "one token on", () => go(win.start + 1)));
  box.appendChild(button("attncli-win-fwd64", "+64", "64 tokens on", () => go(win.start + 64)));
  box.appendChild(button("attncli-win-last", "end", "to the end", () => go(n)));
  box.appendChild(el("span", { id: "attncli-win-label" }));
  bar.appendChild(box);
  document.addEventListener("keydown", (e) => {
    if (current() !== model.moving || /^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName)) return;
    const step = { ArrowLeft: e.shiftKey ? -64 : -1, ArrowRight: e.shiftKey ? 64 : 1,
      PageUp: -64, PageDown: 64 }[e.key];
    if (step !== undefined) go(win.start + step);
    else if (e.key === "Home") go(0);
    else if (e.key === "End") go(n);
    else return;
    e.preventDefault();
  });
  document.addEventListener("pointermove", (e) => {
    if (!win.drag) return;
    const delta = Math.round(((win.drag.x - e.clientX) + (win.drag.y - e.clientY)) / 2 / 12);
    if (delta !== 0 && win.drag.start + delta !== win.start) { win.moved = true; go(win.drag.start + delta); }
  });
  document.addEventListener("pointerup", () => { win.drag = null; setTimeout(() => { win.moved = false; }, 0); });
}

function longExtras(box) {
  const summary = table("Summary per head", doc.summary);
  if (summary) box.appendChild(summary);
  const maps = extra.pooled || [];
  if (!maps.length) return;
  const span = logRange(maps);
  for (const pmap of maps) {
    const blocks = range(0, pmap.edges.length - 1).map((k) => pmap.edges[k] + "–" + (pmap.edges[k + 1] - 1));
    const choice = { label: "pooled (" + (doc.config.pool || "max") + ")", heads: [pmap.values],
      rows: blocks, cols: blocks, signed: false };
    const fig = heatmap(choice, 0, (v) => ramp(span.fraction(v), false), {
      caption: "pooled weights, head " + pmap.head + " (blocks of " + (pmap.edges[1] - pmap.edges[0])
        + " tokens, each the " + (doc.config.pool || "max") + " of its weights)",
      cell: Math.max(3, Math.min(12, Math.floor(768 / blocks.length))), bare: false, extraClass: "pooled",
      onCell: (i) => { if (model.moving) { state.choice = model.list.indexOf(model.moving); moveTo(pmap.edges[i]); render(); } } });
    fig.querySelector("svg").setAttribute("data-edges", JSON.stringify(pmap.edges));
    box.appendChild(fig);
  }
  box.appendChild(el("p", { class: "legend", id: "attncli-pooled-legend" }, "log scale, "
    + span.low.toExponential(1) + " to " + span.top.toFixed(4) + ", shared by every head: each "
    + "×10 the same step of colour (smaller weights at the lowest); row 0 holds query 0's one weight, 1"));
  const measures = table("Measures per head", doc.heads);
  if (measures) box.appendChild(measures);
}

// Outline, on every pooled map, the blocks the moving window covers.
function markPooled() {
  const label = document.getElementById("attncli-win-label");
  const slider = document.getElementById("attncli-win-start");
  if (!model.moving) return;
  if (label) label.textContent = " rows and keys " + win.start + "–" + (win.start + win.side - 1) + " of " + model.tokens.length;
  if (slider) slider.value = win.start;
  for (const pic of document.querySelectorAll("figure.pooled svg")) {
    const edges = JSON.parse(pic.getAttribute("data-edges"));
    const first = edges.findIndex((e, k) => edges[k + 1] > win.start);
    const last = edges.findIndex((e, k) => edges[k + 1] >= win.start + win.side);
    const cell = Number(pic.getAttribute("data-cell")), pad = Number(pic.getAttribute("data-pad"));
    let mark = pic.querySelector("rect.window-mark");
    if (!mark) { mark = svg("rect", { class: "window-mark" }); pic.appendChild(mark); }
    for (const [k, v] of Object.entries({ x: pad + first * cell, y: pad + first * cell,
      width: (last - first + 1) * cell, height: (last - first + 1) * cell })) mark.setAttribute(k, v);
  }
}
