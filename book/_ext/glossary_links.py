"""Sphinx extension: on every chapter page, the first use of each glossary term links to its entry.

The terms come from the book's own glossary (the ``{glossary}`` directive of ``book/glossary.md``):
an entry lists its English term, its variants and its Chinese terms, one per line, and every one of
those lines is a term Sphinx registers. After all documents are read, the entries are collected from
the glossary's doctree; when a chapter page is written, the first occurrence of each term in its
prose becomes a link to the entry (to the entry's first, English, term, whichever form was used).

What counts as an occurrence (``TermMatcher``):

- the longest term wins: "soft attention" is one term, not "attention" after "soft";
- English terms match whole words only ("key" not in "keyboard"); an all-lower-case term matches in
  any case ("Soft attention" at the start of a sentence), a term with a capital letter only as
  written ("GRU", "Transformer", "REINFORCE");
- the last word of an English term may take a plural: "keys" is "key", "queries" is "query";
- words may be separated by any whitespace (a line break), and a hyphen matches any dash
  ("encoder–decoder" and "encoder-decoder");
- Chinese terms match anywhere, except that a one-character term (键, 值) must not touch another
  Chinese character, so that 值 is not found inside 均值.

Each form (the English term, each variant, each Chinese term) is linked once per page, at its
first occurrence; with ``glossary_links_once_per_entry`` (the Chinese edition, where a term and its
English gloss stand side by side: 软注意力（soft attention）), each entry is linked once, at the first
occurrence of any of its forms. Never linked: code, math, headings and other titles, captions, existing links,
raw output, executed cells, and the glossary itself; nor the phrases listed in
``glossary_links_ignore`` (``_config.yml``), in which a term's word means something else ("source" in
"the source notes"). A term an author already links (``{term}``) counts as linked. The pages linked
are those whose names match ``glossary_links_docs`` (default: the numbered chapters, ``book/[0-9]*``).

When the glossary changes, every chapter page is written again (``env-updated``), so that no page
keeps links to entries that are gone.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Iterable, Iterator

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.nodes import make_refnode

from attention_course.i18n import language_of, translator

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
DASHES = "-\u2010\u2011\u2012\u2013\u2014"
_HAS_HAN = re.compile(f"[{HAN}]")
_LATIN_EDGE = re.compile(r"[A-Za-z0-9]")

# Text inside these nodes is never linked.
SKIPPED_NODES: tuple[type[nodes.Node], ...] = (
    nodes.FixedTextElement,  # literal blocks, doctest blocks, math blocks, line blocks
    nodes.literal,
    nodes.math,
    nodes.math_block,
    nodes.title,
    nodes.subtitle,
    nodes.rubric,
    nodes.caption,
    nodes.legend,
    nodes.reference,
    nodes.target,
    nodes.raw,
    nodes.comment,
    nodes.image,
    nodes.term,
    nodes.field_name,
    nodes.substitution_definition,
    nodes.abbreviation,
    addnodes.pending_xref,
    addnodes.glossary,
    addnodes.toctree,
    addnodes.desc_signature,
    addnodes.index,
)


@dataclass(frozen=True)
class Entry:
    """One glossary entry: where it is, and every term that names it (English first)."""

    docname: str
    anchor: str
    terms: tuple[str, ...]


def normalise(text: str) -> str:
    """The form two spellings of one term share: case folded, runs of space and dashes made uniform."""
    text = re.sub(r"\s+", " ", text.strip().casefold())
    return re.sub(f"[{DASHES}]", "-", text)


def plural(word: str) -> str:
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    return word + "s"


def spellings(term: str) -> list[str]:
    """The spellings of ``term`` that count as the term: itself and, for English, its plural."""
    term = " ".join(term.split())
    if _HAS_HAN.search(term) or not re.search(r"[A-Za-z]$", term):
        return [term]
    return [term, plural(term)]


def _pattern(spelling: str) -> str:
    """The regular expression of one spelling, without the word boundary before a Latin start."""
    body = ""
    for char in spelling:
        if char.isspace():
            body += r"\s+"
        elif char in DASHES:
            body += f"[{DASHES}]"
        else:
            body += re.escape(char)
    if _ignores_case(spelling):
        body = f"(?i:{body})"
    if len(spelling) == 1 and _HAS_HAN.match(spelling):
        return f"(?<![{HAN}]){body}(?![{HAN}])"
    return body + (r"(?![A-Za-z0-9])" if _LATIN_EDGE.match(spelling[-1]) else "")


def _ignores_case(spelling: str) -> bool:
    return not _HAS_HAN.search(spelling) and spelling == spelling.lower()


def _alternation(spellings: list[str]) -> str:
    """One expression for all spellings, longest first among those that can start at the same place.

    The spellings are grouped by their first character, each group behind a look-ahead for it, and the
    English ones behind one shared word boundary: a plain alternation of a few hundred spellings would
    try every one of them at every character of a chapter.
    """
    groups: dict[str, list[str]] = {}
    for spelling in sorted(spellings, key=len, reverse=True):
        groups.setdefault(spelling[0].casefold(), []).append(spelling)
    latin, other = [], []
    for first, members in groups.items():
        starts = {m[0] for m in members} | {c for m in members if _ignores_case(m) for c in (first, first.upper())}
        group = f"(?=[{''.join(re.escape(c) for c in sorted(starts))}])(?:{'|'.join(_pattern(m) for m in members)})"
        (latin if _LATIN_EDGE.match(first) else other).append(group)
    if latin:
        other.insert(0, f"(?<![A-Za-z0-9])(?:{'|'.join(latin)})")
    return "|".join(other)


class TermMatcher:
    """Finds the occurrences of a set of terms in text: longest first, whole words for English."""

    def __init__(self, terms: Iterable[str], ignore: Iterable[str] = ()):
        """``ignore``: phrases in which a term's word means something else ("the source notes")."""
        terms, ignore = list(terms), list(ignore)
        self._term_of: dict[str, str | None] = {normalise(phrase): None for phrase in ignore}
        spelled = {normalise(phrase): " ".join(phrase.split()) for phrase in ignore}
        for term in terms:
            for spelling in spellings(term):
                self._term_of.setdefault(normalise(spelling), term)
                spelled.setdefault(normalise(spelling), spelling)
        self._regex = re.compile(_alternation(list(spelled.values()))) if spelled else None

    def finditer(self, text: str) -> Iterator[tuple[int, int, str]]:
        """(start, end, term) for every occurrence in ``text``, left to right, without overlaps."""
        if self._regex is None:
            return
        for match in self._regex.finditer(text):
            term = self._term_of[normalise(match.group())]
            if term is not None:
                yield match.start(), match.end(), term


@functools.lru_cache(maxsize=4)
def _matcher(terms: tuple[str, ...], ignore: tuple[str, ...]) -> TermMatcher:
    """One matcher per build, not one per page."""
    return TermMatcher(terms, ignore)


def glossary_entries(doctree: nodes.document, docname: str) -> list[Entry]:
    """The entries of every ``{glossary}`` in one document, in order."""
    entries = []
    for glossary in doctree.findall(addnodes.glossary):
        for item in glossary.findall(nodes.definition_list_item):
            terms = [child for child in item.children if isinstance(child, nodes.term)]
            if terms and terms[0]["ids"]:
                entries.append(Entry(docname, terms[0]["ids"][0], tuple(t.astext().strip() for t in terms)))
    return entries


def collect_entries(app: Sphinx, env) -> list[str]:
    """After reading: gather the glossary entries; if they changed, every linked page is rewritten."""
    std = env.get_domain("std")
    glossary_docs = sorted({docname for (kind, _), (docname, _) in std.objects.items() if kind == "term"})
    entries = [entry for docname in glossary_docs for entry in glossary_entries(env.get_doctree(docname), docname)]
    previous = getattr(env, "glossary_links_entries", None)
    env.glossary_links_entries = entries
    if previous is not None and previous != entries:
        return sorted(docname for docname in env.found_docs if is_linked_page(app, docname, entries))
    return []


def is_linked_page(app: Sphinx, docname: str, entries: list[Entry]) -> bool:
    if any(entry.docname == docname for entry in entries):
        return False
    return any(fnmatch(docname, pattern) for pattern in app.config.glossary_links_docs)


def _skipped(node: nodes.Element) -> bool:
    if isinstance(node, SKIPPED_NODES):
        return True
    # An executed notebook cell (MyST-NB): its source and outputs are not prose.
    return isinstance(node, nodes.container) and (
        "cell" in node.get("classes", []) or str(node.get("nb_element", "")).startswith("cell")
    )


def link_terms(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    entries: list[Entry] = getattr(app.env, "glossary_links_entries", [])
    if not entries or not is_linked_page(app, docname, entries):
        return
    entry_of = {term: entry for entry in entries for term in entry.terms}
    matcher = _matcher(tuple(entry_of), tuple(app.config.glossary_links_ignore))
    # What counts as already linked: each form, or (glossary_links_once_per_entry) each entry.
    key = (lambda term: entry_of[term].anchor) if app.config.glossary_links_once_per_entry else (lambda term: term)
    tr = translator(language_of(app.config.language), "book", strict=True)
    title = tr("Glossary: {terms}")

    linked: set[str] = set()
    # A term the author linked to its entry already counts as linked.
    for reference in doctree.findall(nodes.reference):
        for _, _, term in matcher.finditer(reference.astext()):
            if reference.get("refuri", "").endswith("#" + entry_of[term].anchor):
                linked.add(key(term))

    replacements = []
    for parent, index, run in _text_runs(doctree):
        source, pieces, position = "".join(run), [], 0
        for start, end, term in matcher.finditer(source):
            if key(term) in linked:
                continue
            linked.add(key(term))
            entry = entry_of[term]
            shown = source[start:end]
            label = nodes.inline(shown, shown, classes=["xref", "std", "std-term"])
            reference = make_refnode(app.builder, docname, entry.docname, entry.anchor, label,
                                     title=title.format(terms=" · ".join(entry.terms)))
            reference["classes"].append("glossary-link")
            pieces += [nodes.Text(source[position:start]), reference]
            position = end
        if pieces:
            pieces.append(nodes.Text(source[position:]))
            pieces = [p for p in pieces if not (isinstance(p, nodes.Text) and not p)]
            replacements.append((parent, index, len(run), pieces))
    # Last first, so that the indices of the earlier runs in the same parent still hold.
    for parent, index, length, pieces in reversed(replacements):
        parent[index:index + length] = pieces


def _text_runs(node: nodes.Element) -> Iterator[tuple[nodes.Element, int, list[nodes.Text]]]:
    """(parent, index of the first, nodes) for each run of consecutive sibling text nodes, in document order.

    A run is matched as one text: MyST makes each soft line break a text node of its own.
    """
    if _skipped(node):
        return
    run: list[nodes.Text] = []
    for index, child in enumerate(node.children):
        if isinstance(child, nodes.Text):
            run.append(child)
            continue
        if run:
            yield node, index - len(run), run
            run = []
        if isinstance(child, nodes.Element):
            yield from _text_runs(child)
    if run:
        yield node, len(node.children) - len(run), run


def setup(app: Sphinx) -> dict:
    # Document names (fnmatch patterns) of the pages whose terms are linked: the numbered chapters.
    app.add_config_value("glossary_links_docs", ["book/[0-9]*"], "env", [list, tuple])
    # Phrases in which a term's word means something else, never linked: "the source notes".
    app.add_config_value("glossary_links_ignore", [], "env", [list, tuple])
    # Link each entry once per page (at the first of its forms), not each form.
    app.add_config_value("glossary_links_once_per_entry", False, "env", [bool])
    app.connect("env-updated", collect_entries)
    app.connect("doctree-resolved", link_terms)
    return {"version": "1", "env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}
