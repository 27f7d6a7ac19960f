// The attention playground's front-end: one query and several keys in a plane, each key with a value.
//
// The first half of this file is the computation, as small pure functions that mirror
// attention_course.attention (the same formulas, in the same order, in float64): Node imports them
// in tests/test_widgets.py and compares them with PyTorch. The second half draws the widget; it is
// what anywidget runs, in JupyterLab and in the static book, where no kernel is there to compute.

import { radioKeys } from "./a11y.js";
import { html, svg } from "./dom.js";
import { N_, translator, widgetLanguage } from "./i18n.js";

// ---------------------------------------------------------------------------------------------
// The computation.

const DEGREE = Math.PI / 180;

/** A vector given as {angle (degrees), length} -> [x, y]. */
export function polarToXY({ angle, length }) {
  const radians = angle * DEGREE;
  return [length * Math.cos(radians), length * Math.sin(radians)];
}

/** [x, y] -> {angle (degrees, in (-180, 180]), length}. */
export function xyToPolar([x, y]) {
  return { angle: Math.atan2(y, x) / DEGREE, length: Math.hypot(x, y) };
}

function dot(a, b) {
  let total = 0;
  for (let i = 0; i < a.length; i++) total += a[i] * b[i];
  return total;
}

function norm(a) {
  return Math.sqrt(dot(a, a));
}

/** q · k (attention.dot_score). */
export function dotScore(query, key) {
  return dot(query, key);
}

/** q · k / sqrt(d) (attention.scaled_dot_score). */
export function scaledDotScore(query, key) {
  return dot(query, key) / Math.sqrt(query.length);
}

/** The cosine of the angle between q and k; a zero vector scores 0 (attention.cosine_score). */
export function cosineScore(query, key, eps = 1e-8) {
  // Divide by max(|v|, eps), as the course's function does: a zero vector becomes 0, never NaN.
  const queryNorm = Math.max(norm(query), eps);
  const keyNorm = Math.max(norm(key), eps);
  return dot(query.map((x) => x / queryNorm), key.map((x) => x / keyNorm));
}

/** w_v · tanh(W_q q + W_k k) with fixed weights {W_q (h, d), W_k (h, d), w_v (h)} (attention.AdditiveScore). */
export function additiveScore(query, key, { W_q, W_k, w_v }) {
  let total = 0;
  for (let h = 0; h < w_v.length; h++) {
    total += w_v[h] * Math.tanh(dot(W_q[h], query) + dot(W_k[h], key));
  }
  return total;
}

export const SCORE_FUNCTIONS = {
  dot: { label: N_("dot product"), formula: "sᵢ = q · kᵢ" },
  scaled_dot: { label: N_("scaled dot product"), formula: "sᵢ = q · kᵢ / √d,  d = 2" },
  cosine: { label: N_("cosine"), formula: "sᵢ = q · kᵢ / (‖q‖ ‖kᵢ‖)" },
  additive: { label: N_("additive (MLP)"), formula: "sᵢ = w_vᵀ tanh(W_q q + W_k kᵢ)" },
};

/** The score of the query against every key: query [x, y], keys [[x, y], ...] -> [s_1, ..., s_K]. */
export function scoreAll(name, query, keys, additiveWeights) {
  switch (name) {
    case "dot":
      return keys.map((key) => dotScore(query, key));
    case "scaled_dot":
      return keys.map((key) => scaledDotScore(query, key));
    case "cosine":
      return keys.map((key) => cosineScore(query, key));
    case "additive":
      return keys.map((key) => additiveScore(query, key, additiveWeights));
    default:
      throw new RangeError(`unknown score function ${JSON.stringify(name)}; the choices are ${Object.keys(SCORE_FUNCTIONS).join(", ")}`);
  }
}

/**
 * Weights exp(s_i / τ) / Σ_j exp(s_j / τ), stable at any temperature τ > 0 (attention.softmax).
 *
 * The largest scaled score is subtracted first, so no exp exceeds 1 and the total is at least 1:
 * at τ = 0.01 the scaled scores reach the hundreds, and the weights still come out one-hot, not NaN.
 */
export function softmax(scores, temperature = 1) {
  if (!(temperature > 0) || !Number.isFinite(temperature)) {
    throw new RangeError(`temperature must be a finite number > 0, got ${temperature}`);
  }
  if (scores.length === 0) throw new RangeError("softmax needs at least one score");
  const scaled = scores.map((s) => s / temperature);
  let shift = -Infinity;
  for (const s of scaled) if (s > shift) shift = s;
  if (shift === -Infinity) shift = 0; // everything masked: all weights 0, as in the course's softmax
  const exps = scaled.map((s) => Math.exp(s - shift));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / Math.max(total, 1));
}

/** Σ_i a_i v_i for values that are numbers, or vectors (arrays of equal length). */
export function weightedSum(weights, values) {
  if (weights.length !== values.length) {
    throw new RangeError(`${weights.length} weights but ${values.length} values`);
  }
  if (values.length > 0 && Array.isArray(values[0])) {
    const total = new Array(values[0].length).fill(0);
    values.forEach((value, i) => value.forEach((x, j) => { total[j] += weights[i] * x; }));
    return total;
  }
  return values.reduce((total, value, i) => total + weights[i] * value, 0);
}

/**
 * The three stages for one setting of the playground, as the Python side computes them:
 * {query {angle, length}, key_vectors [{angle, length}], values [number], score, temperature, additive_weights}
 * (the model's own traits)
 * -> {scores, weights, output}. Scores are before the temperature; weights are softmax(scores / τ).
 */
export function attend({ query, key_vectors: keys, values, score, temperature, additive_weights }) {
  if (keys.length === 0) throw new RangeError("the playground needs at least one key");
  if (keys.length !== values.length) {
    throw new RangeError(`${keys.length} keys but ${values.length} values: every key needs a value`);
  }
  const scores = scoreAll(score, polarToXY(query), keys.map(polarToXY), additive_weights);
  const weights = softmax(scores, temperature);
  return { scores, weights, output: weightedSum(weights, values) };
}

/** -Σ a log a (0 log 0 = 0): log K for uniform weights, 0 for one-hot ones. */
export function entropy(weights) {
  return -weights.reduce((total, a) => total + (a > 0 ? a * Math.log(a) : 0), 0);
}

/** A number with 4 decimals, never "-0.0000". */
export function format4(x) {
  const text = x.toFixed(4);
  return /^-0\.0+$/.test(text) ? text.slice(1) : text;
}

// ---------------------------------------------------------------------------------------------
// The view.

// The keys' colours are CSS variables (--ap-k0 ... --ap-k5), with light and dark values in playground.css.
const KEY_COLOURS = 6;
const SUBSCRIPTS = "₀₁₂₃₄₅₆₇₈₉";
const MAX_KEYS = KEY_COLOURS;
const ANNOUNCE_AFTER_MS = 600; // the live region speaks once a drag or a slider pauses, not on every step
const PLANE_PX = 300;
const TEMPERATURE_LOG10 = [-2, 2]; // the temperature slider spans 0.01 ... 100

function keyName(i) {
  return "k" + String(i + 1).split("").map((d) => SUBSCRIPTS[d]).join("");
}

function keyColour(i) {
  return `var(--ap-k${i % KEY_COLOURS})`;
}

function formatTemperature(t) {
  return t < 0.1 ? t.toFixed(3) : t < 10 ? t.toFixed(2) : t.toFixed(1);
}

/** A button that stays focusable when it cannot act (aria-disabled), so that the focus is never dropped. */
function setEnabled(button, enabled) {
  button.setAttribute("aria-disabled", String(!enabled));
}

function formatMatrix(rows) {
  const number = (x) => String(Math.round(x * 1000) / 1000);
  return "[" + rows.map((row) => (Array.isArray(row) ? "[" + row.map(number).join(", ") + "]" : number(row))).join(", ") + "]";
}

/** True when the kernel's results are those of the current inputs (not of an older move still in flight). */
function sameNumbers(a, b) {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  return a.every((x, i) => Math.abs(x - b[i]) <= 1e-9 * (1 + Math.abs(b[i])));
}

function render({ model, el }) {
  const t = translator(model, el);
  // ---- What is on screen, built once; every update only changes attributes and text.
  const extent = Math.max(3, Math.ceil(Math.max(model.get("query").length, ...model.get("key_vectors").map((k) => k.length))));
  const half = PLANE_PX / 2;
  const scale = (PLANE_PX / 2 - 14) / extent;
  const toPx = ([x, y]) => [half + x * scale, half - y * scale];
  let selected = "q"; // "q" or the index of a key

  const root = html("div", { class: "attention-playground", lang: widgetLanguage(model, el) });

  // The plane.
  const plane = svg("svg", {
    class: "ap-plane", viewBox: `0 0 ${PLANE_PX} ${PLANE_PX}`, role: "img",
    "aria-label": t("The query and the keys as arrows in a plane. Drag an arrow's head to move it; with a keyboard, choose a vector below and turn it with the angle and length sliders"),
  });
  const grid = svg("g", { class: "ap-grid" });
  for (let i = -extent; i <= extent; i++) {
    const [gx] = toPx([i, 0]);
    const [, gy] = toPx([0, i]);
    const axis = i === 0 ? " ap-axis" : "";
    grid.append(svg("line", { class: "ap-gridline" + axis, x1: gx, x2: gx, y1: toPx([0, extent])[1], y2: toPx([0, -extent])[1] }));
    grid.append(svg("line", { class: "ap-gridline" + axis, y1: gy, y2: gy, x1: toPx([-extent, 0])[0], x2: toPx([extent, 0])[0] }));
  }
  grid.append(svg("circle", { class: "ap-unit-circle", cx: half, cy: half, r: scale }));
  // The unit circle's radius, marked where arrows rarely are: below the axis, left of the origin.
  grid.append(svg("text", { class: "ap-tick", x: toPx([-1, 0])[0] - 9, y: half + 13, text: "−1" }));
  plane.append(grid);
  const arrowLayer = svg("g");
  plane.append(arrowLayer);

  function makeArrow(id, colour, label) {
    const group = svg("g", { class: "ap-arrow", "data-vector": id, style: `--ap-colour: ${colour}` });
    const shaft = svg("line", { class: "ap-shaft", x1: half, y1: half });
    const head = svg("polygon", { class: "ap-head" });
    const handle = svg("circle", { class: "ap-handle", r: 6 });
    const hit = svg("circle", { class: "ap-hit", r: 15 });
    const text = svg("text", { class: "ap-label", text: label });
    group.append(shaft, head, handle, text, hit);
    hit.addEventListener("pointerdown", (event) => startDrag(event, id));
    // Chrome reads touch-action from the <svg>, not from the circle in it: a finger on a head must say itself
    // that it is not scrolling the page, or the browser takes the drag over (pointercancel) after a few pixels.
    hit.addEventListener("touchstart", (event) => event.preventDefault(), { passive: false });
    return { group, shaft, head, handle, hit, text };
  }

  function placeArrow(arrow, vector, width) {
    const [x, y] = polarToXY(vector);
    const [px, py] = toPx([x, y]);
    const lengthPx = Math.hypot(px - half, py - half);
    const [ux, uy] = lengthPx > 1e-9 ? [(px - half) / lengthPx, (py - half) / lengthPx] : [1, 0];
    const headLength = Math.min(11, lengthPx);
    const headWidth = 4 + width;
    const bx = px - ux * headLength;
    const by = py - uy * headLength;
    arrow.shaft.setAttribute("x2", bx);
    arrow.shaft.setAttribute("y2", by);
    arrow.shaft.setAttribute("stroke-width", width);
    arrow.head.setAttribute("points", `${px},${py} ${bx - uy * headWidth},${by + ux * headWidth} ${bx + uy * headWidth},${by - ux * headWidth}`);
    for (const circle of [arrow.handle, arrow.hit]) {
      circle.setAttribute("cx", px);
      circle.setAttribute("cy", py);
    }
    // The label sits just beyond the head, on the far side from the origin.
    arrow.text.setAttribute("x", px + ux * 13 + (ux < -0.3 ? -6 : 0));
    arrow.text.setAttribute("y", py + uy * 13 + 4);
    arrow.group.dataset.angle = String(vector.angle);
    arrow.group.dataset.length = String(vector.length);
  }

  // The controls.
  const scoreSelect = html("select", { class: "ap-score-select", "aria-label": t("score function") });
  for (const [name, { label }] of Object.entries(SCORE_FUNCTIONS)) {
    scoreSelect.append(html("option", { value: name, text: t(label) }));
  }
  const formula = html("div", { class: "ap-formula" });
  const additiveNote = html("div", { class: "ap-note ap-additive-note" });

  const temperatureInput = html("input", {
    class: "ap-temperature", type: "range", min: TEMPERATURE_LOG10[0], max: TEMPERATURE_LOG10[1], step: 0.01,
    "aria-label": t("temperature (log scale)"),
  });
  const temperatureText = html("span", { class: "ap-readout ap-temperature-value" });

  const chips = html("div", { class: "ap-chips", role: "radiogroup", "aria-label": t("vector to move") });
  const addButton = html("button", {
    type: "button", class: "ap-small-button ap-add-key", title: t("add a key"), "aria-label": t("add a key"), text: t("+ key"),
  });
  const removeButton = html("button", {
    type: "button", class: "ap-small-button ap-remove-key", title: t("remove the selected key"), "aria-label": t("remove the selected key"), text: t("− key"),
  });

  const angleInput = html("input", { class: "ap-angle", type: "range", min: -180, max: 180, step: 1, "aria-label": t("angle in degrees") });
  const angleText = html("span", { class: "ap-readout ap-angle-value" });
  const lengthInput = html("input", { class: "ap-length", type: "range", min: 0, max: extent, step: 0.01, "aria-label": t("length") });
  const lengthText = html("span", { class: "ap-readout ap-length-value" });
  const valueInput = html("input", { class: "ap-value-input", type: "number", step: 1, "aria-label": t("value of the selected key") });
  const valueRow = html("label", { class: "ap-row ap-value-row" }, [html("span", { class: "ap-row-label", text: t("value") }), valueInput]);
  const selectedTitle = html("div", { class: "ap-selected-title" });
  let selectedPanel = null;
  const coordinates = html("div", { class: "ap-note ap-coordinates" });

  const controls = html("div", { class: "ap-controls" }, [
    html("label", { class: "ap-field" }, [html("span", { class: "ap-field-label", text: t("Score function") }), scoreSelect]),
    formula,
    additiveNote,
    html("label", { class: "ap-field" }, [
      html("span", { class: "ap-field-label" }, [html("span", { text: t("Temperature τ") + " " }), temperatureText]),
      temperatureInput,
      html("span", { class: "ap-scale" }, [html("span", { text: t("0.01 · hard") }), html("span", { text: "1" }), html("span", { text: t("soft · 100") })]),
    ]),
    html("div", { class: "ap-field" }, [
      html("span", { class: "ap-field-label", text: t("Move a vector (or drag its head)") }),
      html("div", { class: "ap-chip-row" }, [chips, addButton, removeButton]),
    ]),
    selectedPanel = html("div", { class: "ap-selected" }, [
      selectedTitle,
      html("label", { class: "ap-row" }, [html("span", { class: "ap-row-label", text: t("angle") }), angleInput, angleText]),
      html("label", { class: "ap-row" }, [html("span", { class: "ap-row-label", text: t("length") }), lengthInput, lengthText]),
      valueRow,
      coordinates,
    ]),
  ]);

  // The results.
  const tableBody = html("tbody");
  const table = html("table", { class: "ap-table" }, [
    html("thead", {}, [html("tr", {}, [
      html("th", { text: t("key") }), html("th", { class: "ap-num", text: t("score sᵢ") }),
      html("th", { class: "ap-bar-head", text: t("weight aᵢ = softmax(s / τ)ᵢ") }),
      html("th", { class: "ap-num", text: t("value vᵢ") }),
    ])]),
    tableBody,
  ]);
  const outputNumber = html("span", { class: "ap-output", "data-role": "output" });
  // The number line repeats the table's values and output as a picture: screen readers read the table.
  const numberLine = svg("svg", { class: "ap-number-line", viewBox: "0 0 600 46", "aria-hidden": "true" });
  const numberLineAxis = svg("line", { class: "ap-nl-axis", x1: 10, x2: 590, y1: 18, y2: 18 });
  const numberLineMarks = svg("g");
  const outputMarker = svg("path", { class: "ap-nl-output", d: "M0,-9 L7,0 L0,9 L-7,0 Z" });
  numberLine.append(numberLineAxis, numberLineMarks, outputMarker);
  const status = html("div", { class: "ap-status" });
  const source = html("span", { class: "ap-source" });
  // What a screen reader says after a change: the weights and the output, once the change pauses.
  const live = html("div", { class: "ap-live widget-live", role: "status", "aria-live": "polite" });
  const results = html("div", { class: "ap-results" }, [
    table,
    html("div", { class: "ap-output-row" }, [
      html("span", { class: "ap-output-label", text: t("output  Σ aᵢ vᵢ =") }), outputNumber,
    ]),
    numberLine,
    html("div", { class: "ap-footer" }, [status, source]),
    live,
  ]);

  root.append(html("div", { class: "ap-top" }, [html("div", { class: "ap-plane-box" }, [plane]), controls]), results);
  el.append(root);

  // ---- Per-key parts, rebuilt only when the number of keys changes.
  let queryArrow = null;
  let keyArrows = [];
  let rows = [];
  let chipButtons = [];

  function buildKeyParts(count) {
    arrowLayer.replaceChildren();
    keyArrows = Array.from({ length: count }, (_, i) => makeArrow(String(i), keyColour(i), keyName(i)));
    queryArrow = makeArrow("q", "var(--ap-query)", "q");
    queryArrow.group.classList.add("ap-query");
    for (const arrow of keyArrows) arrowLayer.append(arrow.group);
    arrowLayer.append(queryArrow.group); // the query on top

    tableBody.replaceChildren();
    rows = Array.from({ length: count }, (_, i) => {
      const bar = html("div", { class: "ap-bar", style: `background: ${keyColour(i)}` });
      const cells = {
        score: html("td", { class: "ap-num ap-score", "data-key": i }),
        bar,
        weight: html("span", { class: "ap-weight", "data-key": i }),
        value: html("td", { class: "ap-num ap-value", "data-key": i }),
      };
      const row = html("tr", { "data-key": i }, [
        html("td", { class: "ap-key" }, [html("span", { class: "ap-swatch", style: `background: ${keyColour(i)}` }), keyName(i)]),
        cells.score,
        html("td", { class: "ap-bar-cell" }, [html("div", { class: "ap-bar-wrap" }, [html("div", { class: "ap-bar-track" }, [bar]), cells.weight])]),
        cells.value,
      ]);
      row.addEventListener("click", () => select(i));
      tableBody.append(row);
      return cells;
    });

    const hadFocus = chips.contains(document.activeElement);
    chips.replaceChildren();
    chipButtons = ["q", ...Array.from({ length: count }, (_, i) => i)].map((id) => {
      const button = html("button", {
        type: "button", class: "ap-chip", role: "radio", "data-vector": String(id), tabindex: -1,
        "aria-label": id === "q" ? t("query q") : t("key {name}", { name: `k${id + 1}` }),
        style: `--ap-colour: ${id === "q" ? "var(--ap-query)" : keyColour(id)}`,
        text: id === "q" ? "q" : keyName(id),
      });
      button.addEventListener("click", () => select(id));
      chips.append(button);
      return button;
    });
    setEnabled(addButton, count < MAX_KEYS);
    if (hadFocus) queueMicrotask(() => chipButtons.find((b) => b.tabIndex === 0)?.focus());
  }
  radioKeys(chips, () => chipButtons, (at) => select(at === 0 ? "q" : at - 1));

  // ---- Reading and writing the model. Inputs are only ever replaced, never changed in place.
  function vectorOf(id) {
    return id === "q" ? model.get("query") : model.get("key_vectors")[id];
  }

  function setVector(id, vector) {
    const clean = { angle: Math.round(vector.angle * 10) / 10, length: Math.round(Math.min(vector.length, extent) * 100) / 100 };
    if (id === "q") model.set("query", clean);
    else model.set("key_vectors", model.get("key_vectors").map((key, i) => (i === id ? clean : key)));
    model.save_changes();
  }

  function select(id) {
    selected = id;
    updateSelection();
  }

  // ---- Dragging an arrow's head (pointer events: mouse, pen and touch alike).
  let dragging = null;
  function pointerToVector(event) {
    const box = plane.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * PLANE_PX;
    const py = ((event.clientY - box.top) / box.height) * PLANE_PX;
    return xyToPolar([(px - half) / scale, (half - py) / scale]);
  }
  function startDrag(event, id) {
    event.preventDefault();
    event.stopPropagation();
    select(id === "q" ? "q" : Number(id));
    dragging = { pointer: event.pointerId };
    plane.setPointerCapture(event.pointerId);
    root.classList.add("ap-dragging");
  }
  plane.addEventListener("pointerdown", (event) => {
    // A press on the empty plane moves the selected vector's head there, and keeps dragging it; a finger
    // there scrolls the page instead (touch-action in the CSS), and drags only from an arrow's head.
    if (event.button !== 0 || event.pointerType === "touch") return;
    startDrag(event, String(selected));
    setVector(selected, pointerToVector(event));
  });
  plane.addEventListener("pointermove", (event) => {
    if (dragging && event.pointerId === dragging.pointer) setVector(selected, pointerToVector(event));
  });
  const endDrag = (event) => {
    if (dragging && event.pointerId === dragging.pointer) {
      dragging = null;
      root.classList.remove("ap-dragging");
    }
  };
  plane.addEventListener("pointerup", endDrag);
  plane.addEventListener("pointercancel", endDrag);

  // ---- Controls -> model.
  scoreSelect.addEventListener("change", () => { model.set("score", scoreSelect.value); model.save_changes(); });
  temperatureInput.addEventListener("input", () => {
    model.set("temperature", Number(Math.pow(10, Number(temperatureInput.value)).toPrecision(6)));
    model.save_changes();
  });
  angleInput.addEventListener("input", () => setVector(selected, { ...vectorOf(selected), angle: Number(angleInput.value) }));
  lengthInput.addEventListener("input", () => setVector(selected, { ...vectorOf(selected), length: Number(lengthInput.value) }));
  valueInput.addEventListener("input", () => {
    const value = Number(valueInput.value);
    if (selected === "q" || valueInput.value === "" || !Number.isFinite(value)) return;
    model.set("values", model.get("values").map((v, i) => (i === selected ? value : v)));
    model.save_changes();
  });
  addButton.addEventListener("click", () => {
    const keys = model.get("key_vectors");
    if (keys.length >= MAX_KEYS) return;
    // A new key at an angle no other key uses, with the next round value.
    const angle = ((keys.length * 137) % 360) - 180;
    const values = model.get("values");
    model.set("key_vectors", [...keys, { angle, length: 1 }]);
    model.set("values", [...values, values.length ? Math.max(...values) + 10 : 10]);
    model.save_changes();
    select(keys.length);
  });
  removeButton.addEventListener("click", () => {
    const keys = model.get("key_vectors");
    if (selected === "q" || keys.length <= 1) return;
    model.set("key_vectors", keys.filter((_, i) => i !== selected));
    model.set("values", model.get("values").filter((_, i) => i !== selected));
    model.save_changes();
    select(Math.min(selected, keys.length - 2));
  });

  // ---- Model -> screen.
  function inputs() {
    return {
      query: model.get("query"), key_vectors: model.get("key_vectors"), values: model.get("values"),
      score: model.get("score"), temperature: model.get("temperature"), additive_weights: model.get("additive_weights"),
    };
  }

  function show(result, computedBy) {
    const { weights, scores, output } = result;
    const keys = model.get("key_vectors");
    const values = model.get("values");
    const best = weights.indexOf(Math.max(...weights));
    placeArrow(queryArrow, model.get("query"), 3);
    keys.forEach((key, i) => {
      placeArrow(keyArrows[i], key, 1.5 + 4 * weights[i]);
      // A faint arrow for a small weight, but never so faint that it loses its contrast; its label stays solid.
      const opacity = String(0.6 + 0.4 * Math.min(1, weights[i] * keys.length));
      keyArrows[i].shaft.style.opacity = opacity;
      keyArrows[i].head.style.opacity = opacity;
      rows[i].score.textContent = format4(scores[i]);
      rows[i].score.dataset.exact = String(scores[i]);
      rows[i].weight.textContent = format4(weights[i]);
      rows[i].weight.dataset.exact = String(weights[i]);
      rows[i].bar.style.width = `${(100 * weights[i]).toFixed(2)}%`;
      rows[i].value.textContent = String(Math.round(values[i] * 1e4) / 1e4);
    });
    outputNumber.textContent = format4(output);
    outputNumber.dataset.exact = String(output);

    // The number line: every value as a tick in its key's colour, the output as a diamond. It is drawn
    // in the page's pixels at whatever width it has, so that its labels keep their size on a phone.
    const lineWidth = Math.round(numberLine.getBoundingClientRect().width) || 600;
    numberLine.setAttribute("viewBox", `0 0 ${lineWidth} 46`);
    numberLineAxis.setAttribute("x2", String(lineWidth - 10));
    const low = Math.min(...values, output);
    const high = Math.max(...values, output);
    const pad = high > low ? 0 : 1;
    const at = (v) => 20 + ((v - (low - pad)) / (high - low + 2 * pad)) * (lineWidth - 40);
    numberLineMarks.replaceChildren(...values.map((v, i) => svg("g", {}, [
      svg("line", { class: "ap-nl-tick", x1: at(v), x2: at(v), y1: 8, y2: 28, style: `stroke: ${keyColour(i)}`, "stroke-width": 2 + 4 * weights[i] }),
      svg("text", { class: "ap-nl-label", x: at(v), y: 42, style: `fill: ${keyColour(i)}`, text: `${keyName(i)} = ${Math.round(v * 100) / 100}` }),
    ])));
    outputMarker.setAttribute("transform", `translate(${at(output)},18)`);

    const H = entropy(weights);
    const logK = Math.log(keys.length);
    if (weights[best] >= 0.9999) {
      status.textContent = t("Hard attention: {key} takes all the weight, and the output is its value.", { key: keyName(best) });
    } else if (keys.length > 1 && H >= 0.999 * logK) {
      status.textContent = t("Nearly uniform weights: the output is close to the plain average of the values.");
    } else {
      status.textContent = t("Entropy of the weights {entropy} (0 = hard, log K = {logK} = uniform).", { entropy: H.toFixed(3), logK: logK.toFixed(3) });
    }
    source.textContent = computedBy === "torch" ? t("numbers: PyTorch (attention_course.attention)") : t("numbers: computed in this page (JavaScript, same formulas)");
    source.dataset.source = computedBy;
    announce(t("Weights: {weights}; output {output}.", { weights: weights.map((w, i) => `k${i + 1} ${w.toFixed(2)}`).join(", "), output: Math.round(output * 100) / 100 }));
  }

  let spoken = null; // null until the first result: the live region speaks of changes, not of the first view
  let announcing = null;
  function announce(text) {
    if (spoken === null) { spoken = text; return; }
    clearTimeout(announcing);
    announcing = setTimeout(() => { if (text !== spoken) live.textContent = spoken = text; }, ANNOUNCE_AFTER_MS);
  }

  function updateSelection() {
    for (const button of chipButtons) {
      const on = button.dataset.vector === String(selected);
      button.classList.toggle("ap-on", on);
      button.setAttribute("aria-checked", String(on));
      button.tabIndex = on ? 0 : -1; // a roving tab stop: Tab reaches the group once, at its checked radio
    }
    queryArrow.group.classList.toggle("ap-selected-arrow", selected === "q");
    keyArrows.forEach((arrow, i) => arrow.group.classList.toggle("ap-selected-arrow", selected === i));
    rows.forEach((_, i) => tableBody.children[i].classList.toggle("ap-selected-row", selected === i));
    const vector = vectorOf(selected);
    const [x, y] = polarToXY(vector);
    selectedTitle.textContent = selected === "q" ? t("Query q") : t("Key {name}", { name: keyName(selected) });
    selectedPanel.style.setProperty("--ap-colour", selected === "q" ? "var(--ap-query)" : keyColour(selected));
    angleInput.value = String(vector.angle);
    angleText.textContent = `${vector.angle.toFixed(1)}°`;
    angleInput.setAttribute("aria-valuetext", t("{angle} degrees", { angle: vector.angle.toFixed(1) }));
    lengthInput.value = String(vector.length);
    lengthText.textContent = vector.length.toFixed(2);
    lengthInput.setAttribute("aria-valuetext", vector.length.toFixed(2));
    coordinates.textContent = `(x, y) = (${x.toFixed(2)}, ${y.toFixed(2)})`;
    valueRow.hidden = selected === "q";
    if (selected !== "q" && document.activeElement !== valueInput) valueInput.value = String(model.get("values")[selected]);
    setEnabled(removeButton, selected !== "q" && model.get("key_vectors").length > 1);
  }

  let current = null; // what the page computed for the inputs on screen
  function update() {
    const keys = model.get("key_vectors");
    if (keys.length !== keyArrows.length) {
      buildKeyParts(keys.length);
      if (selected !== "q" && selected >= keys.length) selected = keys.length - 1;
    }
    if (keys.length !== model.get("values").length) return; // the other half of a two-trait update is on its way
    try {
      current = attend(inputs());
    } catch (error) {
      status.textContent = t("Cannot compute: {error}", { error: error.message });
      return;
    }
    const score = model.get("score");
    if (scoreSelect.value !== score) scoreSelect.value = score;
    formula.textContent = SCORE_FUNCTIONS[score] ? SCORE_FUNCTIONS[score].formula : "";
    const weightsUsed = model.get("additive_weights");
    additiveNote.hidden = score !== "additive";
    additiveNote.textContent = t("fixed weights: W_q = {W_q}, W_k = {W_k}, w_v = {w_v}", { W_q: formatMatrix(weightsUsed.W_q), W_k: formatMatrix(weightsUsed.W_k), w_v: formatMatrix(weightsUsed.w_v) });
    const tau = model.get("temperature");
    temperatureText.textContent = formatTemperature(tau);
    // The slider moves along log10 τ: say τ itself, not its logarithm.
    temperatureInput.setAttribute("aria-valuetext", `τ = ${formatTemperature(tau)}`);
    if (document.activeElement !== temperatureInput) temperatureInput.value = String(Math.log10(tau));
    root.dataset.score = score;
    root.dataset.temperature = String(tau);
    root.dataset.values = JSON.stringify(model.get("values"));
    showBest();
    updateSelection();
  }

  // The kernel's numbers, when there is a kernel and they are for what is on screen; else the page's own.
  function showBest() {
    const fromKernel = { scores: model.get("scores"), weights: model.get("weights"), output: model.get("output") };
    const agrees = current && sameNumbers(fromKernel.weights, current.weights) && sameNumbers(fromKernel.scores, current.scores)
      && sameNumbers([fromKernel.output], [current.output]);
    show(agrees ? fromKernel : current, agrees ? "torch" : "browser");
  }

  let pending = false;
  const onResults = () => {
    // Python sets scores, weights and output together: show them once, after the last of the three.
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; if (current) showBest(); });
  };

  const inputNames = ["query", "key_vectors", "values", "score", "temperature", "additive_weights"];
  for (const name of inputNames) model.on(`change:${name}`, update);
  for (const name of ["scores", "weights", "output"]) model.on(`change:${name}`, onResults);
  update();
  // Redrawn when its width changes (a turned phone, an opened sidebar).
  let drawnWidth = numberLine.getBoundingClientRect().width;
  const resized = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => {
    const width = numberLine.getBoundingClientRect().width;
    if (Math.round(width) !== Math.round(drawnWidth) && current) showBest();
    drawnWidth = width;
  });
  if (resized) resized.observe(numberLine);

  return () => {
    clearTimeout(announcing);
    if (resized) resized.disconnect();
    for (const name of inputNames) model.off(`change:${name}`, update);
    for (const name of ["scores", "weights", "output"]) model.off(`change:${name}`, onResults);
  };
}

export default { render };
