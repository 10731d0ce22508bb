// `attncli generate`: the conversation, and what each answer token looked at. Click or hover an
// answer token: the prompt lights up by its step's weights, the layers and heads picked combined
// by mean or max, sinks left out and the rest renormalised unless kept (as the terminal view).

const gen = { layer: "all", head: "all", combine: "mean", sinks: "exclude" };

// Answer token s's row over its P + s keys, from its step's raw weights (layers, heads, keys).
function generatedRow(s) {
  const held = doc.steps[s].weights, kept = doc.config.weights;
  const layers = gen.layer === "all" ? range(0, held.length) : [Number(gen.layer) - kept.layers[0]];
  const heads = gen.head === "all" ? range(0, held[0].length)
    : [kept.head === null ? Number(gen.head) : 0];
  const rows = [];
  for (const l of layers) for (const h of heads) rows.push(held[l][h]);
  const row = rows[0].map((_, j) => (gen.combine === "max"
    ? Math.max(...rows.map((r) => r[j])) : rows.reduce((sum, r) => sum + r[j], 0) / rows.length));
  if (gen.sinks === "exclude") {
    for (const i of doc.sinks) if (i < row.length) row[i] = 0;
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
  const layers = gen.layer === "all" ? "layers " + kept.layers[0] + ":" + kept.layers[1] : "layer " + gen.layer;
  const heads = gen.head === "all" ? (kept.head === null ? "every head" : "head " + kept.head) : "head " + gen.head;
  return layers + ", " + heads + ", combined by " + gen.combine + "; " + (gen.sinks === "exclude"
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
  tokens.forEach((label, i) => {
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
    + "on the prompt (" + top.toFixed(4) + ")" + (gen.sinks === "exclude" ? "; grey: sinks left out" : "")));
}

function generateControls(bar) {
  const kept = doc.config.weights, heads = doc.model.heads;
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
    } };
}
