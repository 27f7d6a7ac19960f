/* Excerpts for the search page's results (book/_ext/course_search.py).
 *
 * Sphinx would fetch every result page to cut an excerpt from it, which a page opened from file://
 * may not do. The build writes the text of every page into course-search-texts.js instead; as
 * Sphinx lists each result, this adds the passage around the first place the page uses one of the
 * query's words, with the words marked.
 */
(() => {
  "use strict";
  const texts = window.COURSE_SEARCH_TEXTS || {};
  const BEFORE = 90;
  const LENGTH = 260;

  // The words to look for: the query's words as typed and as stemmed ("computing" matches a page
  // through its stem, "comput"), as Sphinx's own search parsed them.
  const queryWords = () => {
    const query = new URLSearchParams(window.location.search).get("q") || "";
    const [, stems, , typed] = Search._parseQuery(query);
    return [...new Set([...typed, ...stems])].filter((word) => word.length > 0);
  };

  // The page a result links to (its docname) and the anchor inside it, if any.
  const targetOf = (link) => {
    const root = new URL(document.documentElement.dataset.content_root || "./", window.location.href);
    const target = new URL(link.getAttribute("href"), window.location.href);
    const docname = decodeURIComponent(target.pathname.slice(root.pathname.length)).replace(/\.html$/, "");
    return [docname, decodeURIComponent(target.hash.slice(1))];
  };

  // Text nodes for `passage` with each occurrence of `words` in a <span class="highlighted">.
  const marked = (passage, words) => {
    const fragment = document.createDocumentFragment();
    const lower = passage.toLowerCase();
    let at = 0;
    while (at < passage.length) {
      let next = -1;
      let word = "";
      for (const candidate of words) {
        const found = lower.indexOf(candidate, at);
        if (found !== -1 && (next === -1 || found < next || (found === next && candidate.length > word.length))) {
          next = found;
          word = candidate;
        }
      }
      if (next === -1) break;
      fragment.append(passage.slice(at, next));
      const span = document.createElement("span");
      span.className = "highlighted";
      span.textContent = passage.slice(next, next + word.length);
      fragment.append(span);
      at = next + word.length;
    }
    fragment.append(passage.slice(at));
    return fragment;
  };

  // The passage around the first of `words` at or after `from` (a result's anchor), or from `from`.
  const excerpt = (text, words, from) => {
    const lower = text.toLowerCase();
    const positions = words.map((word) => lower.indexOf(word, from)).filter((at) => at !== -1);
    const first = positions.length ? Math.min(...positions) : from;
    const start = Math.max(from, first - BEFORE);
    const passage = text.slice(start, start + LENGTH).trim();
    const summary = document.createElement("p");
    summary.className = "context";
    if (start > 0) summary.append("… ");
    summary.append(marked(passage, words));
    if (start + LENGTH < text.length) summary.append(" …");
    return summary;
  };

  const watch = () => {
    const results = document.getElementById("search-results");
    if (!results) return;
    let words = null; // once the index has loaded: the query's words are cut against it
    const annotate = (item) => {
      if (item.dataset.courseExcerpt) return;
      const link = item.querySelector("a");
      if (!link) return;
      const [docname, anchor] = targetOf(link);
      const page = texts[docname];
      if (words === null) words = queryWords();
      item.dataset.courseExcerpt = "1";
      if (page) item.append(excerpt(page.text, words, (anchor && page.anchors[anchor]) || 0));
    };
    new MutationObserver(() => results.querySelectorAll("ul.search > li").forEach(annotate)).observe(results, {
      childList: true,
      subtree: true,
    });
    results.querySelectorAll("ul.search > li").forEach(annotate);
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watch);
  else watch();
})();
