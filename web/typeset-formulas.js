// Draw a batch of TeX formulas as SVG, with the MathJax that `npm ci` installed here (started by
// mathjax-svg.js): the book typesets every formula of an edition in one run of this (book/_ext/book_math.py).
//
//   node web/typeset-formulas.js < REQUEST.json > ANSWER.json
//
// REQUEST: {"tex": {MathJax's TeX settings}, "formulas": [{"tex": "x^2", "display": false}, ...]}
// ANSWER:  {"html": [one <mjx-container> per formula, its assistive MathML inside], "glyphs": {id: "<path
//           id=... d=...>"}, "errors": [{"index": i, "tex": "...", "message": "..."}], "stylesheet": "the CSS
//           the formulas need"}
//
// The formulas draw their characters with <use href="#MJX-TEX-…">: the glyphs' paths are not in each
// formula (a page with 100 formulas would carry the path of α 100 times) but in "glyphs", once each; a
// page must carry, once, those its formulas use (book_math.py puts them in a hidden <svg>).
//
// Strict: a formula with a TeX error or an unknown command (\foo) is an error, not a red box in the page.
// Exits 1 if any formula failed (the answer is written all the same), 2 if MathJax could not start.
'use strict';
const fs = require('fs');
const {start} = require('./mathjax-svg.js');

const request = JSON.parse(fs.readFileSync(0, 'utf8'));
const errors = [];
let current = -1;
const tex = Object.assign({}, request.tex || {}, {
  // Without `noundefined` an unknown command is a TeX error instead of red text.
  packages: {'[-]': ['noundefined']},
  formatError(jax, error) {
    errors.push({index: current, tex: request.formulas[current].tex, message: error.message});
    return jax.formatError(error);
  },
});

start(tex).then((MathJax) => {
  const adaptor = MathJax.startup.adaptor;
  const glyphs = {};
  const html = request.formulas.map((formula, index) => {
    current = index;
    try {
      // Each formula's own glyph cache (fontCache "local") names its paths MJX-<n>-TEX-…: one name a glyph.
      const drawn = adaptor.outerHTML(MathJax.tex2svg(formula.tex, {display: Boolean(formula.display)}))
        .replace(/MJX-\d+-TEX-/g, 'MJX-TEX-');
      return drawn.replace(/<defs>(.*?)<\/defs>/s, (defs, paths) => {
        for (const path of paths.match(/<path [^>]*><\/path>/g) || []) glyphs[path.match(/id="([^"]+)"/)[1]] = path;
        return '';
      });
    } catch (error) {
      errors.push({index, tex: formula.tex, message: String(error && error.message || error)});
      return '';
    }
  });
  const stylesheet = adaptor.textContent(MathJax.svgStylesheet());
  // Exit once the answer is written: a pipe takes it in parts, and exit() would cut it short.
  process.stdout.write(JSON.stringify({html, glyphs, errors, stylesheet}), () => process.exit(errors.length ? 1 : 0));
}).catch((error) => {
  console.error(`MathJax could not start: ${error.message}`);
  process.exit(2);
});
