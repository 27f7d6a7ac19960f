// The alignment explorer's front-end: pick a sentence and an output step i; row i of the attention
// matrix lights up, and the context vector C_i = Σ_j a_ij h_j is shown as bars of a_ij and as a
// picture of the weighted vectors a_ij h_j laid tip to tail.
//
// The computation is the small pure function below (Node imports it in tests/test_widgets.py and
// compares it with PyTorch); the rest draws the widget, in JupyterLab and in the static book.

import { radioKeys } from "./a11y.js";
import { html, svg } from "./dom.js";
import { translator, widgetLanguage } from "./i18n.js";

// ---------------------------------------------------------------------------------------------
// The computation.

/** C_i = Σ_j a_ij h_j: row (S numbers) and vectors (S × [x, y]) -> [x, y]. */
export function contextVector(row, vectors) {
  if (row.length !== vectors.length) throw new RangeError(`${row.length} weights but ${vectors.length} vectors`);
  const context = [0, 0];
  row.forEach((a, j) => { context[0] += a * vectors[j][0]; context[1] += a * vectors[j][1]; });
  return context;
}

/** The partial sums Σ_{j<m} a_ij h_j for m = 0..S: where each weighted vector starts and ends, tip to tail. */
export function tipToTail(row, vectors) {
  const points = [[0, 0]];
  row.forEach((a, j) => {
    const [x, y] = points[points.length - 1];
    points.push([x + a * vectors[j][0], y + a * vectors[j][1]]);
  });
  return points;
}

/** A number with 4 decimals, never "-0.0000". */
export function format4(x) {
  const text = x.toFixed(4);
  return /^-0\.0+$/.test(text) ? text.slice(1) : text;
}

// ---------------------------------------------------------------------------------------------
// The view.

const PICTURE_PX = 260;
const SUBSCRIPTS = "₀₁₂₃₄₅₆₇₈₉";

function subscript(n) {
  return String(n).split("").map((d) => SUBSCRIPTS[d]).join("");
}

const CHINESE = /[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+/g;
const ANNOUNCE_AFTER_MS = 400;

/** ``text`` as nodes for ``parent``, each run of Chinese characters in a <span lang="zh"> (a <tspan> in SVG). */
function withLang(parent, text) {
  const inSvg = parent instanceof SVGElement;
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(CHINESE)) {
    if (match.index > last) nodes.push(text.slice(last, match.index));
    nodes.push(inSvg ? svg("tspan", { lang: "zh", text: match[0] }) : html("span", { lang: "zh", text: match[0] }));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(text.slice(last));
  parent.replaceChildren(...nodes);
  return parent;
}

function render({ model, el }) {
  const t = translator(model, el);
  const root = html("div", { class: "alignment-explorer", lang: widgetLanguage(model, el) });
  const title = html("div", { class: "ae-title" });
  const sentenceSelect = html("select", { class: "ae-sentence", "aria-label": t("sentence") });
  const previous = html("button", { type: "button", class: "ae-nav ae-previous", "aria-label": t("previous output step"), text: "◀" });
  const next = html("button", { type: "button", class: "ae-nav ae-next", "aria-label": t("next output step"), text: "▶" });
  const steps = html("div", { class: "ae-steps", role: "radiogroup", "aria-label": t("output step i") });
  // What a screen reader says after a change of step or sentence: the step's weights and context.
  const live = html("div", { class: "ae-live widget-live", role: "status", "aria-live": "polite" });
  const heatmapBox = html("div", { class: "ae-heatmap-box" });
  const formula = html("div", { class: "ae-formula" });
  const bars = html("div", { class: "ae-bars" });
  const picture = svg("svg", { class: "ae-picture", viewBox: `0 0 ${PICTURE_PX} ${PICTURE_PX}`, role: "img" });
  const contextText = html("div", { class: "ae-context-line" });
  const note = html("div", { class: "ae-note" });
  // A small heatmap sits beside the picture; a wide one (a long sentence) gets the full width.
  const main = html("div", { class: "ae-main" }, [
    heatmapBox, formula, bars, html("div", { class: "ae-picture-box" }, [picture, contextText]),
  ]);

  root.append(
    title,
    html("label", { class: "ae-field" }, [html("span", { class: "ae-label", text: t("Sentence") }), sentenceSelect]),
    html("div", { class: "ae-field" }, [
      html("span", { class: "ae-label", text: t("Output step i (the target word being written)") }),
      html("div", { class: "ae-step-row" }, [previous, steps, next]),
    ]),
    main,
    note,
    live,
  );
  el.append(root);

  const record = () => model.get("sentences")[model.get("sentence")];
  const setStep = (i) => {
    const count = record().target.length;
    model.set("step", Math.max(0, Math.min(count - 1, i)));
    model.save_changes();
  };

  sentenceSelect.addEventListener("change", () => {
    model.set("sentence", Number(sentenceSelect.value));
    model.set("step", 0);
    model.save_changes();
  });
  // ◀ and ▶ stay focusable at the ends (aria-disabled, not disabled): a click never drops the focus.
  previous.addEventListener("click", () => setStep(model.get("step") - 1));
  next.addEventListener("click", () => setStep(model.get("step") + 1));
  radioKeys(steps, () => (built ? built.stepButtons : []), setStep);

  // ---- Parts that depend only on the sentence: the menu, the step buttons, the heatmap.
  let built = null; // {index, stepButtons, rowOutlines, cells, barParts, picture parts}

  function buildMenu() {
    sentenceSelect.replaceChildren(...model.get("sentences").map((s, i) => html("option", { value: i, text: t(s.label) })));
  }

  function buildSentence() {
    const { source, target, weights, vectors, schematic } = record();
    const S = source.length;
    const T = target.length;

    const stepButtons = target.map((token, i) => {
      const button = html("button", { type: "button", class: "ae-step", role: "radio", "data-step": i, tabindex: -1 }, [
        html("span", { class: "ae-step-index", text: `${i + 1}` }), ...withLang(html("span"), token).childNodes,
      ]);
      button.addEventListener("click", () => setStep(i));
      return button;
    });
    steps.replaceChildren(...stepButtons);

    // The heatmap: target tokens down the side (one row per output step), source tokens across the top.
    const cell = Math.max(18, Math.min(52, Math.floor(560 / S)));
    const rowLabelWidth = 14 + 15 * Math.max(...target.map((t) => [...t].length * (/[\u3000-\u9fff]/.test(t) ? 1 : 0.6)));
    const longest = Math.max(...source.map((s) => s.length));
    const rotate = cell < 8 * longest;
    const top = rotate ? 14 + 5.6 * longest : 22;
    const width = rowLabelWidth + S * cell + 8 + (rotate ? 4.6 * longest : 0);
    const height = top + T * cell + 4;
    const map = svg("svg", {
      class: "ae-heatmap", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": t("the attention matrix: one row of weights per output step, one column per source word; click a row to choose its step. The bars below give the chosen row's weights"),
    });
    const cells = [];
    source.forEach((token, j) => {
      const x = rowLabelWidth + (j + 0.5) * cell;
      map.append(svg("text", rotate
        ? { class: "ae-col-label", x, y: top - 6, transform: `rotate(-50 ${x} ${top - 6})`, "text-anchor": "start", text: token }
        : { class: "ae-col-label", x, y: top - 7, "text-anchor": "middle", text: token }));
      withLang(map.lastChild, token);
    });
    const rowOutlines = [];
    target.forEach((token, i) => {
      const y = top + i * cell;
      const label = withLang(svg("text", { class: "ae-row-label", x: rowLabelWidth - 8, y: y + cell / 2 + 5, "text-anchor": "end" }), token);
      map.append(label);
      const rowCells = source.map((_, j) => {
        const a = weights[i][j];
        const rect = svg("rect", {
          class: "ae-cell", x: rowLabelWidth + j * cell + 0.5, y: y + 0.5, width: cell - 1, height: cell - 1,
          "fill-opacity": (0.06 + 0.94 * a).toFixed(3), "data-step": i, "data-source": j,
        });
        rect.addEventListener("click", () => setStep(i));
        const group = svg("g", {}, [rect]);
        if (cell >= 34 && a >= 0.005) {
          group.append(svg("text", {
            class: "ae-cell-text" + (a > 0.5 ? " ae-on-dark" : ""), x: rowLabelWidth + (j + 0.5) * cell, y: y + cell / 2 + 4,
            "text-anchor": "middle", text: a.toFixed(2),
          }));
        }
        map.append(group);
        return rect;
      });
      cells.push(rowCells);
      label.addEventListener("click", () => setStep(i));
      rowOutlines.push({ label, y });
    });
    const highlight = svg("rect", {
      class: "ae-row-highlight", x: rowLabelWidth - 1, width: S * cell + 2, height: cell + 1, rx: 3,
    });
    map.append(highlight);
    heatmapBox.replaceChildren(map);
    main.classList.toggle("ae-side", width <= 400);
    main.classList.toggle("ae-stacked", width > 400);

    // Bars of a_ij, one per source word.
    const barParts = source.map((token, j) => {
      const bar = html("div", { class: "ae-bar" });
      const number = html("span", { class: "ae-weight", "data-source": j });
      const label = withLang(html("span", { class: "ae-bar-label" }), token);
      return { row: html("div", { class: "ae-bar-row" }, [label, html("div", { class: "ae-bar-track" }, [bar]), number]), bar, number };
    });
    bars.classList.toggle("ae-many", S > 10);
    bars.replaceChildren(
      html("div", { class: "ae-bars-title", text: t("this step's weights over the source words") }),
      html("div", { class: "ae-bar-list", style: S > 10 ? `grid-template-rows: repeat(${Math.ceil(S / 2)}, auto)` : "" }, barParts.map((p) => p.row)),
    );

    // The picture: every h_j from the origin (faint), the a_ij h_j tip to tail, and C_i from the origin.
    // Fit the origin and every h_j (hence every C_i, a weighted average of them) into the square.
    const xs = [0, ...vectors.map((v) => v[0])];
    const ys = [0, ...vectors.map((v) => v[1])];
    const [xMin, xMax, yMin, yMax] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    // Room for the labels: beside the picture for the longest word, above and below for one line.
    const marginX = Math.min(64, 16 + 6 * Math.max(...source.map((token) => token.length)));
    const marginY = 30;
    const scale = Math.min((PICTURE_PX - 2 * marginX) / Math.max(xMax - xMin, 1e-9), (PICTURE_PX - 2 * marginY) / Math.max(yMax - yMin, 1e-9));
    // The picture is as tall as its content needs (schematic h_j fill only a half circle).
    const pictureHeight = Math.round(Math.max(PICTURE_PX * 0.55, (yMax - yMin) * scale + 2 * marginY));
    picture.setAttribute("viewBox", `0 0 ${PICTURE_PX} ${pictureHeight}`);
    const centre = [
      PICTURE_PX / 2 - ((xMin + xMax) / 2) * scale,
      pictureHeight / 2 + ((yMin + yMax) / 2) * scale,
    ];
    const toPx = ([x, y]) => [centre[0] + x * scale, centre[1] - y * scale];
    picture.replaceChildren();
    picture.append(svg("line", { class: "ae-axis", x1: 8, x2: PICTURE_PX - 8, y1: centre[1], y2: centre[1] }));
    picture.append(svg("line", { class: "ae-axis", x1: centre[0], x2: centre[0], y1: 8, y2: pictureHeight - 8 }));
    const hParts = vectors.map((v, j) => {
      const [px, py] = toPx(v);
      const line = svg("line", { class: "ae-h", x1: centre[0], y1: centre[1], x2: px, y2: py });
      const dx = px - centre[0];
      const dy = py - centre[1];
      const r = Math.hypot(dx, dy) || 1;
      const label = svg("text", {
        class: "ae-h-label", x: px + (dx / r) * 10, y: py + (dy / r) * 10 + 4,
        "text-anchor": dx > 8 ? "start" : dx < -8 ? "end" : "middle",
      });
      withLang(label, source[j]);
      picture.append(line, label);
      return { line, label };
    });
    const chain = vectors.map(() => {
      const segment = svg("line", { class: "ae-segment" });
      picture.append(segment);
      return segment;
    });
    const contextArrow = svg("line", { class: "ae-context-arrow", x1: centre[0], y1: centre[1] });
    const contextHead = svg("circle", { class: "ae-context-head", r: 4.5 });
    const contextLabel = svg("text", { class: "ae-context-label", "text-anchor": "middle" });
    picture.append(contextArrow, contextHead, contextLabel);
    picture.setAttribute("aria-label", t("the vectors h_j of the source words, and C_i, their weighted sum"));

    note.textContent = schematic
      ? t("The h_j drawn here are schematic: one direction per source word, since no encoder states came with this sentence.")
      : t("The h_j are the encoder states, projected onto the plane in which they spread most (a linear map, so the sum is drawn exactly).");

    built = { index: model.get("sentence"), stepButtons, cells, rowOutlines, highlight, barParts, hParts, chain, contextArrow, contextHead, contextLabel, toPx, T };
  }

  function update() {
    if (sentenceSelect.options.length !== model.get("sentences").length) buildMenu();
    if (!built || built.index !== model.get("sentence") || built.sentences !== model.get("sentences")) {
      buildSentence();
      built.sentences = model.get("sentences");
    }
    const { source, target, weights, vectors } = record();
    const i = Math.max(0, Math.min(target.length - 1, model.get("step")));
    const row = weights[i];
    sentenceSelect.value = String(model.get("sentence"));
    withLang(title, model.get("title") ? t(model.get("title")) : "");
    title.hidden = !model.get("title");

    built.stepButtons.forEach((button, k) => {
      button.classList.toggle("ae-on", k === i);
      button.setAttribute("aria-checked", String(k === i));
      button.tabIndex = k === i ? 0 : -1; // a roving tab stop: Tab reaches the group once, at its checked step
    });
    previous.setAttribute("aria-disabled", String(i === 0));
    next.setAttribute("aria-disabled", String(i === target.length - 1));
    built.highlight.setAttribute("y", built.rowOutlines[i].y - 0.5);
    built.rowOutlines.forEach(({ label }, k) => label.classList.toggle("ae-row-on", k === i));
    root.dataset.sentence = String(model.get("sentence"));
    root.dataset.step = String(i);

    const n = subscript(i + 1);
    formula.replaceChildren(
      // One message around the target word, which is drawn in bold where {word} stands.
      ...t("Step {step}, writing {word}: the context C{n} = Σⱼ a{n}ⱼ hⱼ weighs each source word's vector hⱼ by row {step} of the matrix.", { n, step: i + 1 })
        .split("{word}")
        .flatMap((text, k) => (k === 0 ? [html("span", { text })] : [withLang(html("strong", { class: "ae-target-word" }), target[i]), html("span", { text })])),
    );

    const best = row.indexOf(Math.max(...row));
    built.barParts.forEach(({ bar, number, row: line }, j) => {
      bar.style.width = `${(100 * row[j]).toFixed(2)}%`;
      number.textContent = format4(row[j]);
      number.dataset.exact = String(row[j]);
      line.classList.toggle("ae-best", j === best);
    });

    const points = tipToTail(row, vectors);
    built.chain.forEach((segment, j) => {
      const [x1, y1] = built.toPx(points[j]);
      const [x2, y2] = built.toPx(points[j + 1]);
      segment.setAttribute("x1", x1);
      segment.setAttribute("y1", y1);
      segment.setAttribute("x2", x2);
      segment.setAttribute("y2", y2);
      segment.style.opacity = String(row[j] > 1e-6 ? 0.35 + 0.65 * row[j] : 0);
    });
    // With many source words, only those this step attends to (a_ij >= 0.05) keep their labels.
    const crowded = source.length > 6;
    built.hParts.forEach(({ line, label }, j) => {
      line.classList.toggle("ae-h-on", j === best);
      label.classList.toggle("ae-h-on", j === best);
      // Words this step hardly attends to are greyed (never faded: a faded word would be hard to read).
      label.style.opacity = crowded && row[j] < 0.05 ? "0" : "";
      label.classList.toggle("ae-h-faint", row[j] < 0.25);
    });
    const context = contextVector(row, vectors);
    const [cx, cy] = built.toPx(context);
    built.contextArrow.setAttribute("x2", cx);
    built.contextArrow.setAttribute("y2", cy);
    built.contextHead.setAttribute("cx", cx);
    built.contextHead.setAttribute("cy", cy);
    // C_i's label beside the middle of its arrow, on the side away from the chain of a_ij h_j.
    const [ox, oy] = built.toPx([0, 0]);
    const length = Math.hypot(cx - ox, cy - oy) || 1;
    let [nx, ny] = [-(cy - oy) / length, (cx - ox) / length];
    const [bx, by] = built.toPx(points[Math.max(1, best + 1)]);
    if ((bx - ox) * nx + (by - oy) * ny > 0) [nx, ny] = [-nx, -ny];
    built.contextLabel.setAttribute("x", (ox + cx) / 2 + nx * 14);
    built.contextLabel.setAttribute("y", (oy + cy) / 2 + ny * 14 + 4);
    built.contextLabel.textContent = `C${n}`;
    contextText.replaceChildren(
      html("span", { text: `C${n} = (` }),
      html("span", { class: "ae-context", "data-axis": 0, "data-exact": String(context[0]), text: format4(context[0]) }),
      html("span", { text: ", " }),
      html("span", { class: "ae-context", "data-axis": 1, "data-exact": String(context[1]), text: format4(context[1]) }),
      html("span", { text: ")  " + t("as drawn") }),
    );
    announce(t("Step {step}, {word}: weights {weights}; context ({x}, {y}).", {
      step: i + 1, word: target[i], weights: source.map((word, j) => `${word} ${row[j].toFixed(2)}`).join(", "),
      x: context[0].toFixed(2), y: context[1].toFixed(2),
    }));
  }

  let spoken = null; // null until the first view: the live region speaks of changes only
  let announcing = null;
  function announce(text) {
    if (spoken === null) { spoken = text; return; }
    clearTimeout(announcing);
    announcing = setTimeout(() => { if (text !== spoken) { spoken = text; withLang(live, text); } }, ANNOUNCE_AFTER_MS);
  }

  const names = ["sentences", "sentence", "step", "title"];
  for (const name of names) model.on(`change:${name}`, update);
  update();
  return () => {
    clearTimeout(announcing);
    for (const name of names) model.off(`change:${name}`, update);
  };
}

export default { render };
