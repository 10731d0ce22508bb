// `attncli generate`: the conversation, and what each answer token looked at. Click or hover an
// answer token: the prompt lights up by its step's weights, the layers and heads picked combined
// by mean or max, sinks left out and the rest renormalised unless kept (as the terminal view);
// by the view the JSON was made with (raw weights, value-weighted, occlusion), and the others it
// holds. A conversation's turns are marked; a runtime's receipt is a table under the answer's.

const gen = { layer: "all", head: "all", combine: "mean", sinks: "exclude",
  view: (doc.config && doc.config.view) || "raw" };
const VIEWS = { raw: "raw attention weights",
  value: "value-weighted attention α·‖W_O v‖ per head (Kobayashi 2020), rows renormalised",
  occlusion: "occlusion: the answer token's log-prob drop (nats) with the prompt " + ({
    token: "token", word: "token's word (its tokens together)",
    turn: "token's turn (its tokens together)" })[(doc.occlusion_spans || {}).by || "token"]
    + " masked in every layer and head" };

// The views this document holds: raw always, value with its value norms, occlusion with its drops.
function viewsHeld() {
  return ["raw"].concat(doc.value_norms ? ["value"] : [], doc.occlusion ? ["occlusion"] : []);
}

// Answer token s's row over its P + s keys, from its step's raw weights (layers, heads, keys),
// each weight times its key's value norm in the value view; occlusion's drops over the prompt.
function generatedRow(s) {
  const held = doc.steps[s].weights, kept = doc.config.weights, p = doc.prompt.length;
  if (gen.view === "occlusion") {
    const row = range(0, p + s).map((j) => (j < p ? doc.occlusion[s][j] : 0));
    if (gen.sinks === "exclude") for (const i of doc.sinks) if (i < row.length) row[i] = 0;
    return row;
  }
  const layers = gen.layer === "all" ? range(0, held.length) : [Number(gen.layer) - kept.layers[0]];
  const heads = gen.head === "all" ? range(0, held[0].length)
    : [kept.head === null ? Number(gen.head) : 0];
  const norm = (l, h, j) => (gen.view !== "value" ? 1
    : doc.value_norms[kept.layers[0] + l][kept.head === null ? h : kept.head][j]);
  const rows = [];
  for (const l of layers) for (const h of heads) rows.push(held[l][h].map((w, j) => w * norm(l, h, j)));
  const row = rows[0].map((_, j) => (gen.combine === "max"
    ? Math.max(...rows.map((r) => r[j])) : rows.reduce((sum, r) => sum + r[j], 0) / rows.length));
  if (gen.sinks === "exclude" || gen.view === "value") {
    if (gen.sinks === "exclude") for (const i of doc.sinks) if (i < row.length) row[i] = 0;
    const total = row.reduce((sum, w) => sum + w, 0);
    if (total > 0) return row.map((w) => w / total);
  }
  return row;
}

// The prompt tokens answer token q (its index, P + s) looked at most: [key, weight], heaviest
// first, ties by position; sinks left out when they are.
function generatedRank(q) {
  const p = doc.prompt.length, row = generatedRow(q - p), sinks = new Set(doc.sinks);
  return range(0, p).filter((j) => gen.sinks !== "exclude" || !sinks.has(j))
    .map((j) => [j, row[j]]).sort((a, b) => b[1] - a[1] || a[0] - b[0]);
}

function viewText() {
  const kept = doc.config.weights;
  if (gen.view === "occlusion") {
    return VIEWS.occlusion + "; the whole model; " + (gen.sinks === "exclude"
      ? "sinks not shown (the first token and the template's own)" : "sinks shown");
  }
  const layers = gen.layer === "all" ? "layers " + kept.layers[0] + ":" + kept.layers[1] : "layer " + gen.layer;
  const heads = gen.head === "all" ? (kept.head === null ? "every head" : "head " + kept.head) : "head " + gen.head;
  return VIEWS[gen.view] + "; " + layers + ", " + heads + ", combined by " + gen.combine + "; "
    + (gen.sinks === "exclude"
    ? "sinks left out (the first token and the template's own) and the rest renormalised"
    : "sinks kept (raw weights)");
}

function focusAnswer(q) {
  if (state.focus === q) return;
  state.focus = q;
  render();
}

// The prompt and the answer as text: each prompt token shaded by the focused answer token's weight.
function drawConversation(box) {
  const p = doc.prompt.length, tokens = model.tokens;
  const focus = state.focus !== null && state.focus >= p ? state.focus : null;
  const row = focus === null ? null : generatedRow(focus - p);
  const top = row ? Math.max(...row.slice(0, p), 0) : 0;
  const text = el("div", { id: "attncli-conversation", class: "conversation" });
  const sinks = new Set(doc.sinks);
  const turns = new Map((doc.turns || []).filter((t) => t.end > t.start).map((t) => [t.start, t.role]));
  tokens.forEach((label, i) => {
    if (turns.has(i)) text.appendChild(el("span", { class: "turn", "data-turn": turns.get(i) },
      "[" + turns.get(i) + "] "));
    const answer = i >= p;
    const span = el("span", { class: answer ? "said answer" : "said", "data-index": i,
      title: answer ? "answer token " + (i - p) : "prompt token " + i
        + (row ? " · weight " + row[i].toFixed(4) : "") }, label);
    if (!answer && row && gen.sinks === "exclude" && sinks.has(i)) {
      span.classList.add("sink");
      span.title += " · a sink, left out";
    } else if (!answer && row) {
      span.style.background = colour(row[i], top, false);
      if (row[i] / (top || 1) < 0.6) span.style.color = "#fff";
      span.setAttribute("data-weight", row[i].toFixed(6));
    }
    if (answer) {
      if (i === focus) span.classList.add("focus");
      span.addEventListener("click", () => focusAnswer(i));
      span.addEventListener("mouseenter", () => focusAnswer(i));
    }
    text.appendChild(span);
  });
  box.appendChild(text);
  box.appendChild(el("p", { class: "legend" }, viewText() + " · shade: weight, 0 to the row's largest "
    + "on the prompt (" + top.toFixed(4) + ")" + (gen.sinks === "exclude" ? "; grey: sinks left out" : "")
    + (turns.size ? "; [role]: where each turn of the conversation begins" : "")));
}

function generateControls(bar) {
  const kept = doc.config.weights, heads = doc.model.heads;
  bar.appendChild(selector("attncli-view", "view", viewsHeld().map((v) => [v, v]),
    (v) => { gen.view = v; }, gen.view));
  bar.appendChild(selector("attncli-layer", "layer", [["all", "all"],
    ...range(kept.layers[0], kept.layers[1]).map((l) => [String(l), String(l)])], (v) => { gen.layer = v; }));
  const headChoices = kept.head === null ? range(0, heads) : [kept.head];
  bar.appendChild(selector("attncli-head", "head", [["all", "all"],
    ...headChoices.map((h) => [String(h), String(h)])], (v) => { gen.head = v; }));
  bar.appendChild(selector("attncli-combine", "combine", [["mean", "mean"], ["max", "max"]],
    (v) => { gen.combine = v; }));
  bar.appendChild(selector("attncli-sinks", "sinks", [["exclude", "left out"], ["keep", "kept"]],
    (v) => { gen.sinks = v; }));
}

function generateModel() {
  const p = doc.prompt.length, tokens = labelsOf(doc.prompt).concat(labelsOf(doc.answer));
  const answer = range(p, tokens.length);
  return { kind: "generate", tokens, ownControls: true, controls: generateControls,
    focus: answer.length ? p : null,
    title: "generate · " + doc.model.path + " · " + answer.length + (doc.config.given
      ? " tokens of a given answer, teacher-forced" : " answer tokens, stopped: " + doc.config.stopped),
    list: [{ label: "what the answer looked at", heads: [[]], rows: answer, stripRows: answer,
      cols: range(0, tokens.length), signed: false, ranked: true, causal: true,
      // From 0, as the terminal's # and --at.
      focusLabel: (q) => "answer token " + (q - p) + " " + JSON.stringify(tokens[q]),
      headName: viewText, rankOf: generatedRank, draw: drawConversation }],
    extras: (box) => {
      if (!doc.steps.length) return;
      box.appendChild(table("Answer", doc.steps.map((s) => ({ "#": s.index,
        token: JSON.stringify(tokens[p + s.index]), prob: s.prob, rank: s.rank === undefined ? "" : s.rank,
        // Where the model would have chosen otherwise (a given answer): its own choice.
        "model's choice": s.rank > 1 && s.top.length ? JSON.stringify(s.top[0].text) : "",
        "likeliest next": candidatesText(s.top) }))));
      if (doc.receipt) box.appendChild(receiptTable(doc.receipt));
    } };
}

// The receipt: the runtime's log-probability of each token (or span, where the two cut the text
// differently) beside attncli's, the largest difference, and where the two would have chosen
// differently.
function receiptTable(receipt) {
  const flagged = new Set(receipt.flagged), differ = new Set(receipt.choices_differ);
  const box = table("Receipt: the runtime's log-probabilities against attncli's (compared by "
    + receipt.compared + ")", receipt.rows.map((r, k) => ({ text: JSON.stringify(r.text),
    attncli: r.attncli, runtime: r.runtime, difference: r.difference,
    flag: flagged.has(k) ? "over " + receipt.flag_above + " nat" : "",
    "choices differ": differ.has(k) ? "runtime " + JSON.stringify(r.runtime_choice) + ", attncli "
      + JSON.stringify(r.attncli_choice) : "" })));
  box.id = "attncli-receipt";
  box.appendChild(el("p", { class: "legend" }, "largest difference "
    + receipt.largest.difference.toFixed(4) + " nat at " + JSON.stringify(receipt.largest.text)
    + "; " + receipt.flagged.length + " flagged, " + receipt.choices_differ.length
    + " where the likeliest tokens differ"));
  return box;
}
