// Drops the rules of a stylesheet that no page of the book can use (PurgeCSS), for book/_ext/page_speed.py.
//
//   node purge-styles.js < {"stylesheets": {"out.css": "css text", ...}, "content": ["page.html", "x.js", ...]}
//   -> {"out.css": {"css": "kept rules", "rejected": N}, ...}
//
// A selector is kept when every class, id, tag and attribute value it names occurs as a word in some page
// or script of the edition: the pages, and every script in _static (the themes', Bootstrap's, the book's,
// the widgets'), since scripts add classes ("show", "pst-sidebar-hidden") that no page has until then.
// @font-face, @keyframes and custom properties are kept whole, and so are the focus rings (:focus-visible).
'use strict';

const fs = require('fs');
const {PurgeCSS} = require('purgecss');

async function main() {
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  const content = request.content.map((file) => ({
    raw: fs.readFileSync(file, 'utf8'),
    extension: file.endsWith('.js') ? 'js' : 'html',
  }));
  const answer = {};
  for (const [name, css] of Object.entries(request.stylesheets)) {
    // A rule for whatever has the keyboard's focus names no class a page has (":focus-visible").
    const [result] = await new PurgeCSS().purge({content, css: [{raw: css}], rejected: true,
                                                 safelist: {standard: [/focus-visible/]}});
    answer[name] = {css: result.css, rejected: (result.rejected || []).length};
  }
  process.stdout.write(JSON.stringify(answer));
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack || error) + '\n');
  process.exit(1);
});
