// Typeset the TeX of HTML pages to SVG, in place, with the MathJax that `npm ci` installed here: the pages
// then show their math with no script and no network (the grader's feedback pages, read offline).
//
//   node web/typeset-math.js PAGE.html [...]
//
// The TeX settings are mathjax-tex.json's (shared with the pages that inline MathJax): the delimiters of
// Jupyter's markdown, $...$, \(...\), $$...$$, \[...\] and environments;
// <pre>, <code>, <script> and <style> are left alone. Prints one line per page it could not typeset and
// exits 1 if there was any (the others are written). MathJax is started by mathjax-svg.js.
'use strict';
const fs = require('fs');
const {start, feedbackTexSettings} = require('./mathjax-svg.js');

const pages = process.argv.slice(2);

start(feedbackTexSettings()).then((MathJax) => {
  const {mathjax} = MathJax._.mathjax;
  const adaptor = MathJax.startup.adaptor;
  let failed = 0;
  for (const page of pages) {
    try {
      // The SVG output keeps the stylesheet it made for the first page and, finding it already placed
      // there, would give no later page one: each page gets its own.
      MathJax.startup.output.svgStyles = null;
      const document = mathjax.document(fs.readFileSync(page, 'utf8'),
        {InputJax: MathJax.startup.input, OutputJax: MathJax.startup.output});
      document.render();
      const html = adaptor.doctype(document.document) + '\n' + adaptor.outerHTML(adaptor.root(document.document));
      fs.writeFileSync(page + '.partial', html);
      fs.renameSync(page + '.partial', page);
    } catch (error) {
      failed += 1;
      console.log(`${page}: ${String(error && error.message || error).split('\n')[0]}`);
    }
  }
  process.exit(failed ? 1 : 0);
}).catch((error) => {
  console.log(`MathJax could not start: ${error.message}`);
  process.exit(2);
});
