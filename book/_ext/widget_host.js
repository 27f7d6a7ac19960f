// The book's own host for the anywidget widgets embedded in its static pages (no kernel, no CDN).
//
// Copied by book/_ext/offline_assets.py to _static/offline/widget-host.js and loaded only by pages
// that embed a widget. It replaces the Jupyter widgets HTML manager (3.6 MB with RequireJS), which the
// book needed only to run anywidget front ends: it reads the page's saved widget state, and for every
// widget view the page shows it imports the model's ES module (its `_esm`), adds its `_css`, and calls
// the module's `render({ model, el })` with a model that keeps its state in the page. The model offers
// what an anywidget front end may use without a kernel: get, set, on, off, save_changes (a no-op here,
// as nothing listens), send (likewise). A widget that is not an anywidget is refused at build time
// (offline_assets.py), and a widget that fails here says so in the page and on the console.
(function () {
  "use strict";

  const STATE_TYPE = "application/vnd.jupyter.widget-state+json";
  const VIEW_TYPE = "application/vnd.jupyter.widget-view+json";

  class StaticModel {
    constructor(state) {
      this._state = Object.assign({}, state);
      this._listeners = new Map();
    }
    get(name) {
      return this._state[name];
    }
    set(name, value) {
      const changes = typeof name === "object" && name !== null ? name : { [name]: value };
      const changed = Object.keys(changes).filter((key) => this._state[key] !== changes[key]);
      Object.assign(this._state, changes);
      for (const key of changed) this._emit(`change:${key}`, this._state[key]);
      if (changed.length) this._emit("change");
    }
    on(event, callback) {
      for (const name of String(event).split(/\s+/)) {
        if (!this._listeners.has(name)) this._listeners.set(name, new Set());
        this._listeners.get(name).add(callback);
      }
    }
    off(event, callback) {
      for (const name of event ? String(event).split(/\s+/) : [...this._listeners.keys()]) {
        const set = this._listeners.get(name);
        if (!set) continue;
        if (callback) set.delete(callback);
        else set.clear();
      }
    }
    save_changes() {}
    send() {}
    _emit(name, value) {
      for (const callback of [...(this._listeners.get(name) || [])]) callback(value);
    }
  }

  const styled = new Set();
  function addStyle(id, css) {
    if (!css || styled.has(id)) return;
    styled.add(id);
    const style = document.createElement("style");
    style.dataset.widgetCss = id;
    style.textContent = css;
    document.head.appendChild(style);
  }

  const modules = new Map();
  function loadModule(esm) {
    if (!modules.has(esm)) {
      const url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
      modules.set(esm, import(url).finally(() => URL.revokeObjectURL(url)));
    }
    return modules.get(esm);
  }

  async function mount(el, spec, models) {
    const entry = models[spec.model_id];
    if (!entry || entry.model_name !== "AnyModel") {
      throw new Error(`widget ${spec.model_id} is not an anywidget with saved state`);
    }
    const state = entry.state;
    for (const name of state._dom_classes || []) el.classList.add(name);
    addStyle(state._anywidget_id || spec.model_id, state._css);
    const module = await loadModule(state._esm);
    let widget = module.default !== undefined ? module.default : module;
    if (typeof widget === "function") widget = await widget();
    const model = new StaticModel(state);
    if (typeof widget.initialize === "function") await widget.initialize({ model });
    await widget.render({ model, el });
  }

  function start() {
    const stateScript = document.querySelector(`script[type="${STATE_TYPE}"]`);
    const models = stateScript ? JSON.parse(stateScript.textContent).state || {} : {};
    for (const view of document.querySelectorAll(`script[type="${VIEW_TYPE}"]`)) {
      const spec = JSON.parse(view.textContent);
      const el = document.createElement("div");
      el.className = "course-widget";
      view.replaceWith(el);
      mount(el, spec, models).catch((error) => {
        console.error("A widget on this page could not be shown:", error);
        const message = document.createElement("p");
        message.className = "course-widget-error";
        message.textContent = `This interactive figure could not be shown (${error.message}).`;
        el.replaceChildren(message);
      });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
