// The live explorer's front end: the reader writes an English sentence, chapter 6's trained model
// translates it in the page, one word at a time, and each step's attention over the source is drawn.
// "What if": hide a source word from attention, or make the model write another word at a step.
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
  let engine = null;
  let state = { words: [], ids: [], hidden: new Set(), forced: {}, steps: [], selected: 0 };
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
  const hideLabel = html("p", { class: "lt-label", id: `lt-hide-${uid}`, text: t("What if attention could not see a word? Hide it:") });
  const hides = html("div", { class: "lt-hides", role: "group", "aria-labelledby": `lt-hide-${uid}` });
  const force = html("select", { id: `lt-force-${uid}`, class: "lt-force" });
  const forceLabel = html("label", { for: `lt-force-${uid}`, class: "lt-label" });
  const reset = html("button", { type: "button", class: "lt-reset", text: t("Undo the changes") });
  const whatIf = html("div", { class: "lt-whatif", hidden: "" }, [
    hideLabel, hides, html("div", { class: "lt-force-row" }, [forceLabel, force]), reset,
  ]);
  const results = html("div", { class: "lt-results", hidden: "" }, [stepsLabel, steps, heat, detail]);

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
    state = { words, ids, hidden: new Set(), forced: {}, steps: [], selected: 0 };
    await generate(loaded);
  }

  async function generate(loaded) {
    const mine = ++run;
    const decoder = loaded.start(state.ids, { hidden: [...state.hidden], forced: state.forced });
    state.steps = [];
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
    // The attention matrix: a row per output step, a column per source word.
    const table = html("table", { class: "lt-matrix" }, [
      html("caption", { text: t("Attention of each output step (rows) over the source words (columns)") }),
      html("tr", {}, [html("th", { scope: "col", text: "" }), ...state.words.map((w, j) =>
        html("th", { scope: "col", class: state.hidden.has(j) ? "lt-hidden-word" : "", text: w }))]),
      ...state.steps.map((step, i) => html("tr", { class: i === state.selected ? "lt-selected" : "" }, [
        html("th", { scope: "row", lang: "zh", text: wordOf(loaded, step.token) }),
        ...step.weights.map((a) => {
          const cell = html("td", { text: a.toFixed(2) });
          cell.style.setProperty("--lt-a", a.toFixed(4));
          if (a > 0.5) cell.classList.add("lt-dark");
          return cell;
        }),
      ])),
    ]);
    heat.replaceChildren(table);
    // The chosen step's weights, word by word.
    detail.replaceChildren(
      html("p", { class: "lt-label", text: t("Step {step}, {word}: its weights a_ij", { step: state.selected + 1, word: wordOf(loaded, selected.token) }) }),
      html("ul", { class: "lt-bars" }, state.words.map((w, j) => {
        const a = selected.weights[j];
        const bar = html("span", { class: "lt-bar" });
        bar.style.width = `${(a * 100).toFixed(1)}%`;
        return html("li", {}, [html("span", { class: "lt-bar-word", text: w }), html("span", { class: "lt-bar-track" }, [bar]),
          html("span", { class: "lt-bar-value", text: a.toFixed(4) })]);
      })),
    );
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
