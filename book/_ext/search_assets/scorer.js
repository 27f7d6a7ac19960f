/* The book's search scores (html_search_scorer, set by book/_ext/course_search.py): Sphinx's own, except
 * that the glossary's entries no longer bury the chapters.
 *
 * Every glossary term is an index entry, and Sphinx scores a matching index entry 100 × (query length /
 * entry length): for 注意力 the 15 entries that contain it (自注意力, 注意力机制 …) scored 60-100 and came
 * before every chapter, which a match in the text scores 2-16. Here the glossary entry that is exactly
 * the query keeps its place at the top (its definition); the other glossary entries come after the
 * chapters.
 */
var Scorer = {
  score: (result) => {
    const [docname, , anchor, , score] = result;
    const glossaryEntry = /(^|\/)glossary$/.test(docname) && anchor !== "";
    if (!glossaryEntry || score >= 100) return score;
    return 1;
  },

  // Sphinx's defaults (basic theme's searchtools.js).
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {
    0: 15,
    1: 5,
    2: -5,
  },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
