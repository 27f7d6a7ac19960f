/* The book's query splitter (book/_ext/course_search.py puts it in language_data.js).
 *
 * Sphinx splits a query at spaces and punctuation only, so "注意力机制" stays one term and matches
 * no indexed word. The index holds jieba's words; here each run of Chinese characters is cut, longest
 * first, into words the index holds (注意力 + 机制). Characters that begin no indexed word are kept
 * together as one term, so that a word the book never uses finds nothing rather than everything.
 * Latin words are split as Sphinx splits them.
 */
var splitQuery = (query) => {
  const index = typeof Search !== "undefined" ? Search._index : null;
  // A word with pages (an incremental build leaves words of old pages in the index, with none).
  const has = (table, word) =>
    Object.prototype.hasOwnProperty.call(table, word) &&
    (typeof table[word] === "number" || table[word].length > 0);
  const indexed = (word) => index !== null && (has(index.terms, word) || has(index.titleterms, word));
  if (index !== null && splitQuery.longest === undefined)
    splitQuery.longest = Math.max(
      1,
      ...[index.terms, index.titleterms].flatMap((table) =>
        Object.keys(table).filter((word) => has(table, word)).map((word) => word.length)
      )
    );
  const longest = splitQuery.longest || 1;
  const terms = [];
  const cut = (run) => {
    let unknown = "";
    for (let start = 0; start < run.length; ) {
      let end = Math.min(run.length, start + longest);
      while (end > start && !indexed(run.slice(start, end))) end -= 1;
      if (end === start) {
        unknown += run[start];
        start += 1;
        continue;
      }
      if (unknown) terms.push(unknown);
      unknown = "";
      terms.push(run.slice(start, end));
      start = end;
    }
    if (unknown) terms.push(unknown);
  };
  for (const chunk of query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)) {
    for (const run of chunk.match(/\p{Script=Han}+|\P{Script=Han}+/gu) || []) {
      if (index !== null && /\p{Script=Han}/u.test(run)) cut(run);
      else terms.push(run);
    }
  }
  return terms;
};
