/* Building the widgets' elements. Imported by playground.js and alignment.js; the Python side
 * (front_end.py) inlines it into each widget's module for the page. */

const SVG_NS = "http://www.w3.org/2000/svg";

/** An element with attributes ("text" sets its text) and children. */
export function html(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

/** The same in SVG. */
export function svg(tag, attributes = {}, children = []) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}
