// The MathJax that `npm ci` installed here, started in Node to draw TeX as SVG: pages then show their math
// with no script, no font file and no network. Shared by typeset-math.js (the grader's feedback pages,
// typeset whole) and typeset-formulas.js (the book's formulas, one batch per edition).
//
// Each formula keeps a copy of itself in MathML (<mjx-assistive-mml>, visually hidden), which screen
// readers read in place of the drawing.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, 'node_modules', 'mathjax', 'es5');

// The TeX settings of the feedback pages: the delimiters of Jupyter's markdown (mathjax-tex.json).
function feedbackTexSettings() {
  return JSON.parse(fs.readFileSync(path.join(__dirname, 'mathjax-tex.json'), 'utf8'));
}

// Start MathJax with these TeX settings (MathJax's `tex` block) and SVG settings; resolves to MathJax.
function start(tex, svg = {fontCache: 'local'}) {
  return require(path.join(root, 'node-main.js')).init({
    loader: {
      paths: {mathjax: root},
      load: ['input/tex-full', 'output/svg', 'adaptors/liteDOM', 'a11y/assistive-mml'],
      versionWarnings: false,
    },
    tex,
    svg,
    startup: {typeset: false},
  });
}

module.exports = {start, feedbackTexSettings};
