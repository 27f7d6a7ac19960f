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

  // Each widget is drawn in a task of its own, those near the screen first (as they come near it), the
  // others one at a time when the browser is idle. At DOMContentLoaded they were all drawn in the one
  // task in which their module arrived, while the page was still busy laying itself out (chapter 4's
  // playground alone: 90-115 ms at a phone's CPU, traced at 4x slowdown). None waits long: the idle
  // ones have a deadline (IDLE_DEADLINE ms).
  const IDLE_DEADLINE = 1500;
  function show(el, spec, models) {
    return mount(el, spec, models).catch((error) => {
      console.error("A widget on this page could not be shown:", error);
      const message = document.createElement("p");
      message.className = "course-widget-error";
      message.textContent = `This interactive figure could not be shown (${error.message}).`;
      el.replaceChildren(message);
    });
  }

  function start() {
    const stateScript = document.querySelector(`script[type="${STATE_TYPE}"]`);
    const models = stateScript ? JSON.parse(stateScript.textContent).state || {} : {};
    const waiting = new Map();  // placeholder element -> its view spec, until it is drawn
    for (const view of document.querySelectorAll(`script[type="${VIEW_TYPE}"]`)) {
      const el = document.createElement("div");
      el.className = "course-widget";
      view.replaceWith(el);
      waiting.set(el, JSON.parse(view.textContent));
    }
    const later = (work) => setTimeout(work, 0);  // a task of its own
    const near = "IntersectionObserver" in window
      ? new IntersectionObserver((entries) => {
          for (const entry of entries) if (entry.isIntersecting) later(() => draw(entry.target));
        }, { rootMargin: "50% 0px" })
      : null;
    const draw = (el) => {
      const spec = waiting.get(el);
      if (!spec) return Promise.resolve();
      waiting.delete(el);
      if (near) near.unobserve(el);
      return show(el, spec, models);
    };
    if (near) for (const el of waiting.keys()) near.observe(el);
    const whenIdle = window.requestIdleCallback
      ? (work) => window.requestIdleCallback(work, { timeout: IDLE_DEADLINE })
      : (work) => setTimeout(work, 50);
    // The next one only once this one is drawn: widgets that share a module would otherwise all be
    // drawn in the task in which it arrives.
    const drawNextWhenIdle = () => {
      const next = waiting.keys().next();
      if (!next.done) draw(next.value).then(() => whenIdle(drawNextWhenIdle));
    };
    whenIdle(drawNextWhenIdle);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
