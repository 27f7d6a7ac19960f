/* The widgets' interface in the reader's language. Imported by playground.js and alignment.js; the
 * Python side (front_end.py) inlines it into each widget's module for the page, and sends each widget
 * the translations of its messages in the model's `messages` ({language: {message: translation}}),
 * from the package's "widgets" catalog (attention_course/i18n.py). English is the message itself. */

export /** Marks a message for the catalogs (`make catalogs`); it is translated where it is shown, with t(). */
const N_ = (message) => message;

export /** The widget's language: its `language` trait or, when that is "auto", the page's ("zh-CN" -> "zh"). */
function widgetLanguage(model, el) {
  const chosen = model.get("language");
  if (chosen && chosen !== "auto") return chosen;
  const tag = (el.closest && el.closest("[lang]")?.getAttribute("lang")) || document.documentElement.lang || "en";
  return tag.toLowerCase().split(/[-_]/)[0];
}

export /** t(message, {name: value}): the message in the widget's language, each {name} filled in. */
function translator(model, el) {
  const table = (model.get("messages") || {})[widgetLanguage(model, el)] || {};
  return (message, values = {}) => (table[message] || message).replace(
    /\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}
