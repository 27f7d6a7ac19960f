"""The glossary is complete, sorted and bilingual, and every chapter links the terms it uses to it.

The links are made at build time by ``book/_ext/glossary_links.py``. Its rules are tested here on a
throwaway Sphinx project of three small pages (a few seconds); the built book is checked page by page
(every glossary term a chapter's prose uses, in English or in Chinese, links to its entry).
"""

from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
HAN = "\u4e00-\u9fff"
# A chapter introduces a term as "soft attention (软注意力)" or "(注意力范围, the range of attention)".
INTRODUCED = re.compile(rf"\(([{HAN}]+)[,)]")

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import glossary_links  # noqa: E402  (the extension under test: it defines what counts as a use of a term)


# --- The glossary's source -------------------------------------------------------------------


@dataclass
class SourceEntry:
    terms: list[str]  # English first, then variants and Chinese terms, one per line
    definition: str

    @property
    def english(self) -> str:
        return self.terms[0]

    @property
    def chinese(self) -> list[str]:
        return [term for term in self.terms if re.search(f"[{HAN}]", term)]


def source_entries(text: str | None = None) -> list[SourceEntry]:
    text = GLOSSARY.read_text(encoding="utf-8") if text is None else text
    body = text.split("```{glossary}\n", 1)[1].split("\n```", 1)[0]
    entries = []
    for block in re.split(r"\n\s*\n", body.strip("\n")):
        lines = block.splitlines()
        terms = [line.strip() for line in lines if not line[:1].isspace()]
        definition = [line.strip() for line in lines if line[:1].isspace()]
        assert lines[: len(terms)] == terms, f"an entry's terms must come before its definition: {block!r}"
        entries.append(SourceEntry(terms, " ".join(definition)))
    return entries


def sort_key(english: str) -> str:
    """The order the glossary promises: alphabetical by the English term, ignoring case and hyphens."""
    return re.sub(r"[\s\-\u2010-\u2014]+", " ", english.casefold()).strip()


def test_the_glossary_is_sorted_alphabetically_by_its_english_terms():
    keys = [sort_key(entry.english) for entry in source_entries()]
    out_of_order = [(a, b) for a, b in zip(keys, keys[1:]) if a > b]
    assert out_of_order == []
    assert "sorted alphabetically by the English term" in GLOSSARY.read_text(encoding="utf-8")


def test_every_entry_has_an_english_and_a_chinese_term_a_definition_and_a_chapter():
    entries = source_entries()
    assert len(entries) >= 90
    problems = []
    for entry in entries:
        if not re.match(r"[A-Za-z]", entry.english) or re.search(f"[{HAN}]", entry.english):
            problems.append(f"{entry.english}: the first term must be the English one")
        if not entry.chinese:
            problems.append(f"{entry.english}: no Chinese term")
        chapters = re.findall(r"\{doc\}`[^`<]*<([^>`]+)>`", entry.definition)
        prose = re.sub(r"\{doc\}`[^`]*`|→|,", " ", entry.definition)
        if len(prose.split()) < 5:
            problems.append(f"{entry.english}: no definition")
        if not chapters:
            problems.append(f"{entry.english}: no link to the chapter that introduces it")
        for chapter in chapters:
            if not (ROOT / "book" / f"{chapter}.md").is_file():
                problems.append(f"{entry.english}: links to {chapter}, which is not a page of the book")
    assert problems == []


def test_no_term_names_two_entries():
    # A term under two entries could not link to either; the extension treats dash variants as one.
    owner: dict[str, str] = {}
    clashes = []
    for entry in source_entries():
        for term in entry.terms:
            key = glossary_links.normalise(term)
            if key in owner:
                clashes.append((term, owner[key], entry.english))
            owner[key] = entry.english
    assert clashes == []


def test_the_terms_the_issue_found_missing_are_there_with_the_notes_words_beside_the_usual_ones():
    chinese = {term for entry in source_entries() for term in entry.chinese}
    wanted = {"加性注意力", "缩放点积注意力", "掩码", "填充", "强制教学", "贪心搜索", "束搜索", "多头注意力", "核回归",
              # the notes' term and the usual one, side by side
              "集中注意力", "注意力汇聚", "隐含层节点状态", "隐状态", "影响力模型"}
    assert wanted - chinese == set()


def test_global_attention_is_not_called_another_name_for_soft_attention():
    # Soft/hard (how the weights are made) and global/local (which keys are eligible) are independent.
    entries = {entry.english: entry.definition for entry in source_entries()}
    assert "other name for soft attention" not in entries["global attention"]
    assert "Luong" in entries["global attention"] and "local attention" in entries["global attention"]
    assert "not global" in entries["local attention"]


def _prose(markdown: str) -> str:
    """A chapter's text without code cells and tables (chapter 1's map of the notes quotes their section titles)."""
    markdown = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return "\n".join(line for line in markdown.splitlines() if not line.lstrip().startswith("|"))


def test_every_term_a_chapter_introduces_is_in_the_glossary():
    chinese = {term for entry in source_entries() for term in entry.chinese}
    missing = {}
    for chapter in sorted((ROOT / "book").glob("[0-9]*.md")):
        for term in INTRODUCED.findall(_prose(chapter.read_text(encoding="utf-8"))):
            if term not in chinese:
                missing.setdefault(chapter.name, []).append(term)
    assert missing == {}, f"terms introduced in chapters but missing from book/glossary.md: {missing}"


# --- Reading built pages ----------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Not prose: code, math, headings and titles, captions, links, executed cells, glossary terms.
SKIPPED_TAGS = {"a", "abbr", "code", "pre", "kbd", "samp", "h1", "h2", "h3", "h4", "h5", "h6", "figcaption",
                "caption", "script", "style", "math", "dt", "svg", "button", "label"}
SKIPPED_CLASSES = {"math", "admonition-title", "caption", "caption-text", "code-block-caption", "cell",
                   "cell_input", "cell_output", "rubric", "legend", "toctree-wrapper", "sidebar-title",
                   "topic-title", "highlight", "headerlink"}
# The page's own content, without the theme's navigation, header and footer.
CONTENT_CLASSES = {"bd-article", "body"}


class PageText(HTMLParser):
    """The prose of a page's content (text outside skipped elements) and its links (href, text)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.prose: list[str] = []
        self.links: list[tuple[str, str]] = []
        self._stack: list[tuple[str, bool, bool]] = []  # (tag, inside the content, skipped)
        self._link: list | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = set((attributes.get("class") or "").split())
        content, skipped = self._stack[-1][1:] if self._stack else (False, False)
        content = content or bool(classes & CONTENT_CLASSES)
        skipped = skipped or tag in SKIPPED_TAGS or bool(classes & SKIPPED_CLASSES)
        if tag == "a" and content and self._link is None:
            self._link = [attributes.get("href") or "", ""]
        if tag not in VOID:
            self._stack.append((tag, content, skipped))

    def handle_endtag(self, tag):
        if tag == "a" and self._link is not None:
            self.links.append((self._link[0], self._link[1]))
            self._link = None
        # An end tag without its start (stray HTML in a cell's output) must not close the article.
        if any(open_tag == tag for open_tag, _, _ in self._stack):
            while self._stack.pop()[0] != tag:
                pass

    def handle_data(self, data):
        if self._link is not None:
            self._link[1] += data
        if self._stack and self._stack[-1][1] and not self._stack[-1][2]:
            self.prose.append(data)


class GlossaryPage(HTMLParser):
    """The entries of a built glossary: for each, the id of its first term and all its terms."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.entries: list[tuple[str, list[str]]] = []
        self._term: list | None = None  # [id, text] of the <dt> being read
        self._in_headerlink = False
        self._new_entry = True

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "dt" and attributes.get("id", "").startswith("term-"):
            self._term = [attributes["id"], ""]
        elif tag == "a" and "headerlink" in (attributes.get("class") or ""):
            self._in_headerlink = True
        elif tag == "dd":
            self._new_entry = True

    def handle_endtag(self, tag):
        if tag == "a":
            self._in_headerlink = False
        elif tag == "dt" and self._term is not None:
            anchor, text = self._term[0], " ".join(self._term[1].split())
            if self._new_entry:
                self.entries.append((anchor, []))
                self._new_entry = False
            self.entries[-1][1].append(text)
            self._term = None

    def handle_data(self, data):
        if self._term is not None and not self._in_headerlink:
            self._term[1] += data


def glossary_of(html: str) -> list[tuple[str, list[str]]]:
    page = GlossaryPage()
    page.feed(html)
    return page.entries


def book_ignored_phrases() -> list[str]:
    """The phrases ``_config.yml`` tells the extension to leave alone ("the source notes")."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["sphinx"]["config"].get("glossary_links_ignore", [])


def unlinked_terms(page_html: str, glossary: list[tuple[str, list[str]]], glossary_page: str,
                   ignore: list[str] = ()) -> set[str]:
    """The glossary terms the page's prose uses that no link on the page takes to their entry."""
    anchor_of = {term: anchor for anchor, terms in glossary for term in terms}
    matcher = glossary_links.TermMatcher(anchor_of, ignore)
    page = PageText()
    page.feed(page_html)
    # The parser kept its place to the end of the page: it saw every link the extension made.
    assert sum("glossary-link" in link for link in re.findall(r"<a [^>]*>", page_html)) <= sum(
        1 for href, _ in page.links if href.partition("#")[0].endswith(glossary_page)
        and "#term-" in href), "the page's HTML lost the parser"
    used = {term for text in page.prose for _, _, term in matcher.finditer(text)}
    linked = set()
    for href, text in page.links:
        target, _, anchor = href.partition("#")
        if target.endswith(glossary_page):
            linked |= {term for _, _, term in matcher.finditer(text) if anchor_of[term] == anchor}
    return used - linked


# --- The extension, on a throwaway project ------------------------------------------------------

TINY_GLOSSARY = """\
Glossary
========

.. glossary::

   attention
   注意力
      Weighting the parts of an input.

   GRU
   门控循环单元
      A recurrent network.

   key
   键
      What an item offers to be compared with.

   soft attention
   软注意力
      Every key gets a weight.

   value
   值
      What is taken from an item.
"""

TINY_CHAPTER = """\
The values of a heading
=======================

A ``value`` in code, :math:`value` in math, and `a value link <https://example.org>`_ are not prose.

.. code-block:: python
   :caption: A caption about a value

   value = 1

.. table:: A table whose title names a value

   =====  =====
   one    two
   =====  =====

The key point, an ignored phrase, is not linked.
Soft attention (软注意力) weighs every one of its keys; later, soft
attention and 软注意力 are not linked again. Plain Attention is, once.
A keyboard has no key. 均值 is not 值, and the key has its value.
GRUs differ from a gru; the keyboard stays unlinked.
"""

TINY_OTHER = """\
Not a chapter
=============

Soft attention is not linked on a page outside the chapters.
"""


def _build(source: Path) -> tuple[str, dict[str, str]]:
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    log = io.StringIO()
    with docutils_namespace():  # leaves docutils' global registries as it found them
        app = Sphinx(str(source), str(source), str(source / "_build" / "html"), str(source / "_build" / "doctrees"),
                     "html", status=None, warning=log, freshenv=False)
        app.build()
    pages = {name: (source / "_build" / "html" / f"{name}.html").read_text(encoding="utf-8")
             for name in ("glossary", "chapter", "other")}
    return log.getvalue(), pages


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory):
    source = tmp_path_factory.mktemp("tiny-book")
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        "extensions = ['glossary_links']\nglossary_links_docs = ['chapter*']\n"
        "glossary_links_ignore = ['key point']\nhtml_theme = 'basic'\n"
    )
    (source / "index.rst").write_text("Tiny\n====\n\n.. toctree::\n\n   chapter\n   other\n   glossary\n")
    (source / "glossary.rst").write_text(TINY_GLOSSARY, encoding="utf-8")
    (source / "chapter.rst").write_text(TINY_CHAPTER, encoding="utf-8")
    (source / "other.rst").write_text(TINY_OTHER, encoding="utf-8")
    warnings, pages = _build(source)
    return source, warnings, pages


def _glossary_links(html: str) -> list[tuple[str, str]]:
    page = PageText()
    page.feed(html)
    return [(" ".join(text.split()), href.partition("#")[2]) for href, text in page.links
            if href.partition("#")[0].endswith("glossary.html")]


def test_the_first_use_of_each_term_on_a_chapter_links_to_its_entry(tiny_book):
    _, warnings, pages = tiny_book
    assert warnings == ""
    assert _glossary_links(pages["chapter"]) == [
        ("Soft attention", "term-soft-attention"),
        ("软注意力", "term-soft-attention"),  # the Chinese term links to the same entry
        ("keys", "term-key"),                  # a plural is the term
        ("Attention", "term-attention"),       # lower-case terms match in any case
        ("值", "term-value"),                  # a one-character term, but not inside 均值
        ("value", "term-value"),               # each form once: the English term after the Chinese
        ("GRUs", "term-GRU"),                  # a capitalised term matches as written, not "gru"
    ]


def test_code_math_headings_captions_links_and_other_pages_are_left_alone(tiny_book):
    _, _, pages = tiny_book
    chapter = pages["chapter"]
    # "value" is used in a heading, code, math, a link, a code caption and a table title before the prose:
    # only the prose's 值 and value link to it.
    assert [text for text, anchor in _glossary_links(chapter) if anchor == "term-value"] == ["值", "value"]
    assert chapter.count('href="glossary.html#term-value"') == 2
    assert "keyboard" in chapter and ">keyboard<" not in chapter
    assert "均值" in chapter
    assert _glossary_links(pages["other"]) == []
    assert "glossary-link" not in pages["glossary"]


def test_the_page_check_agrees_with_the_extension_and_finds_an_unlinked_term(tiny_book):
    _, _, pages = tiny_book
    glossary = glossary_of(pages["glossary"])
    assert [terms for _, terms in glossary][:2] == [["attention", "注意力"], ["GRU", "门控循环单元"]]
    assert unlinked_terms(pages["chapter"], glossary, "glossary.html", ["key point"]) == set()
    # The control: the same page with its first link undone.
    undone = re.sub(r'<a [^>]*href="glossary\.html#term-soft-attention"[^>]*>(.*?)</a>', r"\1", pages["chapter"],
                    count=1, flags=re.S)
    assert unlinked_terms(undone, glossary, "glossary.html", ["key point"]) == {"soft attention"}
    assert unlinked_terms(pages["other"], glossary, "glossary.html") == {"soft attention"}


def test_a_change_to_the_glossary_relinks_chapters_that_did_not_change(tiny_book):
    source, _, _ = tiny_book
    glossary = source / "glossary.rst"
    glossary.write_text(TINY_GLOSSARY + "\n   keyboard\n   键盘\n      Not a key.\n", encoding="utf-8")
    warnings, pages = _build(source)
    assert warnings == ""
    assert ("keyboard", "term-keyboard") in _glossary_links(pages["chapter"])


# --- The built book -------------------------------------------------------------------------------


def test_every_glossary_term_a_chapter_uses_links_to_its_entry(built_html):
    glossary = glossary_of((built_html / "book" / "glossary.html").read_text(encoding="utf-8"))
    assert len(glossary) == len(source_entries())
    ignore = book_ignored_phrases()
    chapters = sorted((built_html / "book").glob("[0-9]*.html"))
    assert len(chapters) >= 8
    unlinked = {}
    for chapter in chapters:
        missing = unlinked_terms(chapter.read_text(encoding="utf-8"), glossary, "glossary.html", ignore)
        if missing:
            unlinked[chapter.name] = sorted(missing)
    assert unlinked == {}


def test_the_check_of_the_built_book_finds_a_term_left_unlinked(built_html):
    glossary = glossary_of((built_html / "book" / "glossary.html").read_text(encoding="utf-8"))
    html = (built_html / "book" / "02-soft-hard.html").read_text(encoding="utf-8")
    link = re.search(r'<a [^>]*href="glossary\.html#(term-[^"]+)"[^>]*>(.*?)</a>', html, flags=re.S)
    assert link is not None, "chapter 2 links no glossary term"
    undone = html[: link.start()] + link.group(2) + html[link.end():]
    ignore = book_ignored_phrases()
    newly_unlinked = (unlinked_terms(undone, glossary, "glossary.html", ignore)
                      - unlinked_terms(html, glossary, "glossary.html", ignore))
    terms_of_entry = next(terms for anchor, terms in glossary if anchor == link.group(1))
    assert len(newly_unlinked) == 1 and newly_unlinked <= set(terms_of_entry)
