// The live explorer's front end: the reader writes an English sentence, a chapter's trained model
// translates it in the page, one word at a time, and each step's attention over the source is drawn.
// "What if": hide a source word from attention, or make the model write another word at a step.
// With chapter 10's Transformer (the `attention_maps` trait names its layers and heads) the reader
// chooses the map: cross-attention, the decoder's or the encoder's self-attention, a layer, a head or
// the heads averaged; hiding a word takes it out of cross-attention only (the encoder still reads it).
//
// Nothing heavy loads with the page: the engine (live_engine.js) and the model's weights (the file the
// build exported, `model_file`) are classic scripts under the book's _static/live/, added to the page
// when the reader first focuses the sentence box or presses Translate.

import { html } from "./dom.js";
import { translator } from "./i18n.js";

const STEP_DELAY_MS = 60; // the translation appears word by word, as it is generated
const loading = new Map(); // script URL -> Promise

function loadScript(url) {
  if (!loading.has(url)) {
    loading.set(url, new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = resolve;
      script.onerror = () => { loading.delete(url); reject(new Error(url)); };
      document.head.append(script);
    }));
  }
  return loading.get(url);
}

/** The folder of the book's live files, relative to this page (Sphinx's data-content_root). */
function liveFolder() {
  const root = document.documentElement.dataset.content_root;
  if (root === undefined) return null; // not a page of the book (JupyterLab): the files are not there
  return new URL(`${root}_static/live/`, document.baseURI).href;
}

async function loadModel(file) {
  const folder = liveFolder();
  if (folder === null) throw new Error("no book");
  await loadScript(folder + "live-engine.js");
  await loadScript(folder + file);
  return globalThis.AttentionCourseLiveEngine.load(globalThis.attentionCourseLiveModels[file]);
}

/** The sentence's words: split on spaces, a final full stop or question mark dropped. */
export function wordsOf(text) {
  return text.replace(/[.?!]+\s*$/, "").split(/\s+/).filter(Boolean);
}

function render({ model, el }) {
  const t = translator(model, el);
  const uid = Math.random().toString(36).slice(2, 8);
  const sourceWords = model.get("source_words");
  const layout = model.get("attention_maps") || {};
  const layered = Boolean(layout.heads); // a Transformer: a map per kind of attention, layer and head
  let engine = null;
  let state = { words: [], ids: [], hidden: new Set(), forced: {}, steps: [], selected: 0, encoder: [] };
  // The map shown: at first the last layer's cross-attention averaged over its heads, the weights of
  // Transformer.greedy_decode (and of chapter 6's one attention).
  const view = { kind: "cross", layer: (layout.decoder || 1) - 1, head: "mean" };
  let run = 0; // the latest generation; an older one stops drawing

  const input = html("input", {
    type: "text", id: `lt-input-${uid}`, class: "lt-input", autocomplete: "off", autocapitalize: "off",
    spellcheck: "false", enterkeyhint: "go", value: model.get("example"),
    "aria-describedby": `lt-hint-${uid} lt-message-${uid}`,
  });
  const go = html("button", { type: "button", class: "lt-go", text: t("Translate") });
  const hint = html("p", {
    id: `lt-hint-${uid}`, class: "lt-hint",
    text: t("Write an English sentence with the words below (e.g. Tom chase Jerry in the kitchen yesterday) and press Enter. The model runs in your browser."),
  });
  const message = html("p", { id: `lt-message-${uid}`, class: "lt-message", role: "status" });
  const chips = html("div", { class: "lt-chips" }, sourceWords.map((word) => {
    const chip = html("button", { type: "button", class: "lt-chip", text: word });
    chip.addEventListener("click", () => {
      input.value = `${input.value.replace(/\s+$/, "")} ${word}`.trimStart();
      input.focus();
      prepare();
    });
    return chip;
  }));
  const vocabulary = html("details", { class: "lt-vocab" }, [
    html("summary", { text: t("The words the model knows ({count})", { count: sourceWords.length }) }), chips,
  ]);
  const output = html("p", {
    class: "lt-output", lang: "zh", "data-live-output": "", "aria-live": "polite", "aria-atomic": "true",
  });
  const outputLabel = html("p", { class: "lt-label", text: t("Translation") });
  const stepsLabel = html("p", { class: "lt-label", id: `lt-steps-${uid}`, text: t("Output steps: choose one to see its attention") });
  const steps = html("div", { class: "lt-steps", role: "group", "aria-labelledby": `lt-steps-${uid}` });
  const heat = html("div", { class: "lt-heat" });
  const detail = html("div", { class: "lt-detail" });
  // A Transformer's maps: which attention, which layer, which head.
  const kindChoice = html("select", { id: `lt-kind-${uid}`, class: "lt-view-kind" }, [
    html("option", { value: "cross", text: t("Cross-attention (decoder → source)") }),
    html("option", { value: "decoder", text: t("Decoder self-attention") }),
    html("option", { value: "encoder", text: t("Encoder self-attention") }),
  ]);
  const layerChoice = html("select", { id: `lt-layer-${uid}`, class: "lt-view-layer" });
  const headChoice = html("select", { id: `lt-head-${uid}`, class: "lt-view-head" }, [
    ...Array.from({ length: layout.heads || 0 }, (_, r) => html("option", { value: String(r), text: t("Head {head}", { head: r + 1 }) })),
    html("option", { value: "mean", text: t("All heads, averaged") }),
  ]);
  const field = (label, choice) => html("div", { class: "lt-view-field" }, [html("label", { for: choice.id, text: label }), choice]);
  const chooser = html("div", { class: "lt-view", role: "group", "aria-labelledby": `lt-view-${uid}` }, [
    html("p", { class: "lt-label", id: `lt-view-${uid}`, text: t("Which attention map") }),
    html("div", { class: "lt-view-row" }, [field(t("Attention"), kindChoice), field(t("Layer"), layerChoice), field(t("Head"), headChoice)]),
  ]);
  const mapNote = html("p", { class: "lt-hint lt-map-note" });
  const hideLabel = html("p", {
    class: "lt-label", id: `lt-hide-${uid}`,
    text: layered ? t("What if cross-attention could not see a word? Hide it (the encoder still reads it):")
      : t("What if attention could not see a word? Hide it:"),
  });
  const hides = html("div", { class: "lt-hides", role: "group", "aria-labelledby": `lt-hide-${uid}` });
  const force = html("select", { id: `lt-force-${uid}`, class: "lt-force" });
  const forceLabel = html("label", { for: `lt-force-${uid}`, class: "lt-label" });
  const reset = html("button", { type: "button", class: "lt-reset", text: t("Undo the changes") });
  const whatIf = html("div", { class: "lt-whatif", hidden: "" }, [
    hideLabel, hides, html("div", { class: "lt-force-row" }, [forceLabel, force]), reset,
  ]);
  const results = html("div", { class: "lt-results", hidden: "" }, layered ? [stepsLabel, steps, chooser, heat, mapNote, detail]
    : [stepsLabel, steps, heat, detail]);

  el.classList.add("live-translator");
  el.setAttribute("data-live-model", model.get("model_file"));
  el.replaceChildren(
    html("p", { class: "lt-title", text: t("Try the trained model") }),
    html("label", { for: input.id, class: "lt-label", text: t("English sentence") }),
    html("div", { class: "lt-row" }, [input, go]),
    hint, message, vocabulary, outputLabel, output, results, whatIf,
  );

  function say(text, problem = false) {
    message.textContent = text;
    message.classList.toggle("lt-problem", problem);
  }

  function prepare() {
    if (!engine) {
      say(t("Loading the model…"));
      engine = loadModel(model.get("model_file")).then(
        (loaded) => { say(""); return loaded; },
        (error) => {
          engine = null;
          say(t("The model could not be loaded here: it runs in the built book's pages."), true);
          throw error;
        });
    }
    return engine;
  }

  async function translate() {
    let loaded;
    try { loaded = await prepare(); } catch { return; }
    const words = wordsOf(input.value);
    if (!words.length) { say(t("Write a sentence first."), true); return; }
    const { ids, unknown } = loaded.encodeWords(words);
    if (unknown.length) {
      say(t("The model does not know: {words}. Use only the words it knows (listed below; capitals count).",
        { words: unknown.join(", ") }), true);
      vocabulary.open = true;
      return;
    }
    say("");
    state = { words, ids, hidden: new Set(), forced: {}, steps: [], selected: 0, encoder: [] };
    await generate(loaded);
  }

  async function generate(loaded) {
    const mine = ++run;
    const decoder = loaded.start(state.ids, { hidden: [...state.hidden], forced: state.forced });
    state.steps = [];
    state.encoder = decoder.encoder || []; // a Transformer's encoder maps, [layer][head][row]
    output.setAttribute("aria-busy", "true");
    output.textContent = "";
    for (let step = decoder.next(); step; step = decoder.next()) {
      if (mine !== run) return;
      state.steps.push(step);
      if (step.token !== loaded.special.eos) {
        output.textContent = state.steps.filter((s) => s.token !== loaded.special.eos).map((s) => loaded.targetVocab[s.token]).join(" ");
      }
      state.selected = state.steps.length - 1;
      draw(loaded);
      await new Promise((resolve) => setTimeout(resolve, STEP_DELAY_MS));
    }
    if (mine !== run) return;
    state.selected = 0; // the first word's attention, until the reader chooses another step
    output.removeAttribute("aria-busy");
    draw(loaded);
  }

  function wordOf(loaded, token) {
    return token === loaded.special.eos ? t("(end)") : loaded.targetVocab[token];
  }

  /** One map's rows, weights per head [head][j] → the chosen head's, or the heads averaged. */
  function chosenHead(perHead) {
    if (view.head !== "mean") return perHead[Number(view.head)];
    return Float64Array.from(perHead[0], (_, j) => perHead.reduce((sum, a) => sum + a[j], 0) / perHead.length);
  }

  /** The map to draw: its caption and what its rows and columns are (`note`), its columns, its rows ({label,
   * values, step}); `struck` marks the columns that attention may not see. Chapter 6's model has one map:
   * each step's weights. */
  function chosenMap(loaded) {
    const stepRows = (values) => state.steps.map((step, i) => ({ label: wordOf(loaded, step.token), lang: "zh", values: values(step), step: i }));
    if (!layered) {
      return {
        caption: t("Attention of each output step (rows) over the source words (columns)"),
        columns: state.words, rows: stepRows((step) => step.weights), struck: (j) => state.hidden.has(j),
      };
    }
    const names = { layer: view.layer + 1, head: view.head === "mean" ? t("the heads averaged") : t("head {head}", { head: Number(view.head) + 1 }) };
    if (view.kind === "encoder") {
      return {
        caption: t("Encoder self-attention, layer {layer}, {head}", names),
        note: t("Rows and columns: the source words. The encoder reads the sentence once, before the first step, so this map is the same at every step."),
        columns: state.words, struck: () => false,
        rows: state.words.map((word, i) => ({ label: word, lang: "en", values: chosenHead(state.encoder[view.layer].map((head) => head[i])) })),
      };
    }
    if (view.kind === "decoder") {
      return {
        caption: t("Decoder self-attention, layer {layer}, {head}", names),
        note: t("Rows: the output steps. Columns: what the decoder has read, the start and then the words written so far; a dash marks a later word, which the causal mask hides."),
        columns: [t("(start)"), ...state.steps.slice(0, -1).map((step) => wordOf(loaded, step.token))], columnLang: "zh",
        rows: stepRows((step) => chosenHead(step.self[view.layer])), struck: () => false,
      };
    }
    return {
      caption: t("Cross-attention, layer {layer}, {head}", names),
      note: t("Rows: the output steps. Columns: the source words."),
      columns: state.words, rows: stepRows((step) => chosenHead(step.cross[view.layer])), struck: (j) => state.hidden.has(j),
    };
  }

  // The chosen map as a matrix (a row per step, or per source word), and the chosen step's row as bars.
  function drawMap(loaded) {
    const map = chosenMap(loaded);
    const weightCell = (a) => {
      if (a === undefined) return html("td", { class: "lt-masked", "data-weight": "0", text: "–" });
      const cell = html("td", { "data-weight": a.toFixed(6), text: a.toFixed(2) });
      cell.style.setProperty("--lt-a", a.toFixed(4));
      if (a > 0.5) cell.classList.add("lt-dark");
      return cell;
    };
    const columnLang = map.columnLang ? { lang: map.columnLang } : {};
    const table = html("table", { class: "lt-matrix" }, [
      html("caption", { text: map.caption }),
      html("tr", {}, [html("th", { scope: "col", text: "" }), ...map.columns.map((w, j) =>
        html("th", { scope: "col", class: map.struck(j) ? "lt-hidden-word" : "", ...columnLang, text: w }))]),
      ...map.rows.map((row) => html("tr", { class: row.step === state.selected ? "lt-selected" : "" }, [
        html("th", { scope: "row", lang: row.lang, text: row.label }),
        ...map.columns.map((_, j) => weightCell(row.values[j])),
      ])),
    ]);
    heat.replaceChildren(table);
    mapNote.textContent = map.note || "";
    const selected = state.steps[state.selected];
    const chosen = map.rows.find((row) => row.step === state.selected);
    if (!chosen) { // the encoder's map: no output step to choose
      detail.replaceChildren();
      return;
    }
    // The chosen step's weights, word by word.
    detail.replaceChildren(
      html("p", { class: "lt-label", text: t("Step {step}, {word}: its weights a_ij", { step: state.selected + 1, word: wordOf(loaded, selected.token) }) }),
      html("ul", { class: "lt-bars" }, Array.from(chosen.values, (a, j) => {
        const bar = html("span", { class: "lt-bar" });
        bar.style.width = `${(a * 100).toFixed(1)}%`;
        return html("li", {}, [html("span", { class: "lt-bar-word", ...columnLang, text: map.columns[j] }), html("span", { class: "lt-bar-track" }, [bar]),
          html("span", { class: "lt-bar-value", text: a.toFixed(4) })]);
      })),
    );
  }

  function draw(loaded) {
    results.hidden = false;
    whatIf.hidden = false;
    const selected = state.steps[state.selected];
    steps.replaceChildren(...state.steps.map((step, i) => {
      const button = html("button", {
        type: "button", class: "lt-step", "aria-pressed": String(i === state.selected), lang: "zh",
        "aria-label": t("Step {step}: {word}", { step: i + 1, word: wordOf(loaded, step.token) }),
      });
      button.textContent = `${i + 1} ${wordOf(loaded, step.token)}`;
      if (step.token !== step.greedy) button.classList.add("lt-forced");
      button.addEventListener("click", () => { state.selected = i; draw(loaded); steps.children[i].focus(); });
      return button;
    }));
    drawMap(loaded);
    // What if: hide a source word; write another word at the chosen step.
    hides.replaceChildren(...state.words.map((w, j) => {
      const button = html("button", {
        type: "button", class: "lt-hide", "aria-pressed": String(state.hidden.has(j)),
        "aria-label": t("Hide {word} (word {position})", { word: w, position: j + 1 }), text: w,
      });
      button.addEventListener("click", () => {
        if (state.hidden.has(j)) state.hidden.delete(j); else state.hidden.add(j);
        if (state.hidden.size === state.words.length) state.hidden.delete(j); // attention needs one word to look at
        state.forced = {};
        generate(loaded).then(() => hides.children[j]?.focus());
      });
      return button;
    }));
    forceLabel.textContent = t("What if step {step} wrote another word?", { step: state.selected + 1 });
    const choices = loaded.targetVocab.map((word, id) => [word, id]).filter(([, id]) => id === loaded.special.eos || id > 3);
    force.replaceChildren(...choices.map(([word, id]) => {
      const option = html("option", { value: String(id), text: id === selected.greedy ? t("{word} (the model's choice)", { word: wordOf(loaded, id) }) : wordOf(loaded, id) });
      if (id === selected.token) option.selected = true;
      return option;
    }));
  }

  function chooseLayers() {
    const count = layout[view.kind === "encoder" ? "encoder" : "decoder"] || 1;
    view.layer = Math.min(view.layer, count - 1);
    layerChoice.replaceChildren(...Array.from({ length: count }, (_, l) =>
      html("option", { value: String(l), text: t("Layer {layer}", { layer: l + 1 }) })));
    layerChoice.value = String(view.layer);
  }
  if (layered) {
    kindChoice.value = view.kind;
    headChoice.value = view.head;
    chooseLayers();
    const redraw = async () => { if (engine && state.steps.length) drawMap(await engine); };
    kindChoice.addEventListener("change", () => { view.kind = kindChoice.value; chooseLayers(); redraw(); });
    layerChoice.addEventListener("change", () => { view.layer = Number(layerChoice.value); redraw(); });
    headChoice.addEventListener("change", () => { view.head = headChoice.value; redraw(); });
  }

  force.addEventListener("change", async () => {
    if (!engine) return;
    const loaded = await engine;
    const chosen = Number(force.value);
    const kept = {};
    for (const [step, token] of Object.entries(state.forced)) if (Number(step) < state.selected) kept[step] = token;
    if (chosen !== state.steps[state.selected].greedy) kept[state.selected] = chosen;
    state.forced = kept;
    const at = state.selected;
    await generate(loaded);
    state.selected = Math.min(at, state.steps.length - 1);
    draw(loaded);
    force.focus();
  });
  reset.addEventListener("click", async () => {
    if (!engine) return;
    state.hidden = new Set();
    state.forced = {};
    await generate(await engine);
  });
  input.addEventListener("focus", prepare, { once: true });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); translate(); }
  });
  go.addEventListener("click", () => translate());
  return () => { run += 1; };
}

export default { render };
