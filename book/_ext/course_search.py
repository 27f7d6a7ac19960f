"""Sphinx extension: the book's search finds Chinese words as well as English ones, and shows where
they are, from a server or from ``file://``, without a console error.

Sphinx's own search fails a reader of this book three ways:

- **Chinese words.** Indexed as English, a run of Chinese characters is one "word" up to the next
  space or punctuation mark, so 注意力 is found only where it stands alone (2 of the 8 pages that use
  it). With ``html_search_language: zh`` Sphinx cuts the text into words with jieba — but only if
  jieba is installed; without it Sphinx silently indexes no Chinese at all. So the build *requires*
  jieba when the search language is Chinese (pinned in ``requirements.txt``), and this extension:

  - cuts without jieba's guessing of unknown words (``HMM=False``), with every Chinese term of the
    glossary added to jieba's dictionary, so that the course's vocabulary (自注意力, 非自主性提示, 键,
    值) is cut as the course uses it; for words longer than two characters jieba also indexes the
    dictionary words inside them (注意力 in 自注意力);
  - keeps one-character Chinese words (键 "key", 值 "value"), which Sphinx's Chinese search drops, and
    drops Chinese and English function words (的, 和, "the") and bare numbers;
  - gives the browser a query splitter (``search_assets/split-query.js``, in ``language_data.js``):
    Sphinx's splitter keeps 注意力机制 as one term, which matches no indexed word; ours cuts each run
    of Chinese characters, longest first, into words the index holds.

- **Excerpts from file://.** Sphinx fetches each result page to show an excerpt; a page opened from
  ``file://`` may not fetch, so every result logs an error and has no excerpt. Here the excerpts come
  from ``_static/course-search-texts.js``, the text of every page's article (and where its anchors
  are), written when the search page is, after every other page, and loaded by the search page only
  (``search_assets/static/course-search.js``).

- **Ranking.** Each glossary term is an index entry, which Sphinx scores far above a match in a
  chapter's text: for 注意力 the first 15 results were glossary entries. ``search_assets/scorer.js``
  keeps the entry that is exactly the query first and puts the other entries after the chapters.

- **Weight.** The theme loads the search scripts and the whole index on every page, for a
  search-as-you-type box the book does not use. Only the search page loads them now: this extension
  tells the book's page template (``templates/layout.html``, which ``reader_ux`` installs) which page
  is the search page.
"""

from __future__ import annotations

import json
import logging as std_logging
import re
from html.parser import HTMLParser
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError
from sphinx.search import zh
from sphinx.util import logging

from reader_ux import HAN, files_hash

logger = logging.getLogger(__name__)

ASSETS = Path(__file__).with_name("search_assets")
TEXTS_FILE = "course-search-texts.js"
JIEBA_PIN = "jieba==0.42.1"

_ALL_HAN = re.compile(f"[{HAN}]+")
_WORDLIKE = re.compile(r"\w")
# Chinese function words, never indexed and dropped from queries (language_data.js's stopwords).
CHINESE_STOPWORDS = frozenset(
    "的 地 得 了 着 过 和 与 及 或 而 且 并 也 都 就 还 又 是 在 于 以 为 把 被 对 从 向 给 这 那 之 其 "
    "个 些 吗 呢 吧 啊 我 你 他 她 它 我们 你们 他们 它们 一个 这个 那个 这些 那些 因为 所以 但是 如果".split()
)


class CourseSearch(zh.SearchChinese):
    """Chinese and English: jieba for Chinese (dictionary words only), Sphinx's English stemmer for Latin."""

    lang = "zh"
    language_name = "Chinese and English"
    stopwords = zh.SearchChinese.stopwords | CHINESE_STOPWORDS
    js_splitter_code = (ASSETS / "split-query.js").read_text(encoding="utf-8")

    def init(self, options: dict[str, str]) -> None:
        require_jieba()
        super().init(options)

    def split(self, input: str) -> list[str]:
        import jieba

        latin = [term.strip() for term in self.latin1_letters.findall(input)]
        self.latin_terms.extend(latin)
        return list(jieba.cut_for_search(input, HMM=False)) + latin

    def word_filter(self, word: str) -> bool:
        if not _WORDLIKE.search(word) or word.isdigit() or word in self.stopwords:
            return False
        return len(word) > 1 or bool(_ALL_HAN.fullmatch(word))


def require_jieba() -> None:
    if not zh.JIEBA:
        raise ConfigError(
            "html_search_language is 'zh' but jieba is not installed, so Sphinx would index no Chinese "
            f"word at all: pip install {JIEBA_PIN} (requirements.txt pins it; `make book` installs it)"
        )


def configure(app: Sphinx, config: Config) -> None:
    if config.html_search_language == "zh":
        require_jieba()
    # The search page shows excerpts from course-search-texts.js; Sphinx's own would fetch every result
    # page, which a page opened from file:// may not do.
    config.html_show_search_summary = False
    config.html_static_path = list(config.html_static_path) + [str(ASSETS / "static")]
    # The glossary's index entries no longer rank above every chapter (search_assets/scorer.js).
    config.html_search_scorer = str(ASSETS / "scorer.js")
    # A change to this file or its assets must rewrite every page.
    config.course_search_assets = files_hash(Path(__file__), ASSETS)


def quiet_jieba(app: Sphinx) -> None:
    """jieba logs its start-up to stderr and caches its dictionary in /tmp; keep both in the build."""
    if not zh.JIEBA:
        return
    import jieba

    jieba.setLogLevel(std_logging.WARNING)
    cache = Path(app.doctreedir).parent / ".jieba"
    cache.mkdir(parents=True, exist_ok=True)
    jieba.dt.tmp_dir = str(cache)


def glossary_words(app: Sphinx, env) -> list[str]:
    """Add the glossary's Chinese terms to jieba's dictionary; if they changed, re-index every page."""
    std = env.get_domain("std")
    words = sorted(
        {name for (kind, name) in std.objects if kind == "term" and _ALL_HAN.fullmatch(name)}
    )
    if zh.JIEBA:
        import jieba

        for word in words:
            jieba.add_word(word)
    previous = getattr(env, "course_search_words", None)
    env.course_search_words = words
    if previous is not None and previous != words:
        return sorted(env.found_docs)
    return []


def search_page_only(app: Sphinx, pagename, templatename, context, doctree) -> None:
    context["course_search_page"] = pagename == "search"
    if pagename == "search":
        # Sphinx writes the search page after every other page: their text is final now, and the
        # file's checksum in the page's <script src="...?v="> will be that of this text.
        write_texts(app)
        app.add_js_file(TEXTS_FILE, loading_method="defer")
        app.add_js_file("course-search.js", loading_method="defer")


class _ArticleText(HTMLParser):
    """The text a reader sees in a page's ``<article class="bd-article">``: no scripts, styles, heading
    link marks or math source (shown as " … "); each element with an id leaves a mark where it begins."""

    SKIP_CLASSES = {"headerlink", "math", "MathJax"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0  # open elements inside the article; 0 outside it
        self.skip_depth = 0  # open elements inside a skipped one
        self.parts: list[str] = []
        self.term_group: str | None = None  # the marker of the glossary entry whose terms (dt) are open
        self.aliases: dict[str, str] = {}  # a term's id -> its entry's marker

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        attributes = dict(attrs)
        classes = set((attributes.get("class") or "").split())
        if self.depth == 0:
            if tag == "article" and "bd-article" in classes:
                self.depth = 1
            return
        self.depth += 1
        if self.skip_depth:
            pass
        elif tag == "dt":
            # A glossary entry is one or more terms (dt), then their definition (dd): each term's
            # anchor leads to the entry's first term.
            if self.term_group is None:
                self.term_group = f"#entry-{len(self.aliases)}"
                self.parts.append(f"\x00{self.term_group}\x01")
            if attributes.get("id"):
                self.aliases[attributes["id"]] = self.term_group
        elif attributes.get("id"):
            self.parts.append(f"\x00{attributes['id']}\x01")
        if tag in ("dd", "dl"):
            self.term_group = None
        if self.skip_depth:
            self.skip_depth += 1
        elif tag in ("script", "style", "template") or classes & self.SKIP_CLASSES:
            self.skip_depth = 1
            if "math" in classes:
                self.parts.append(" … ")
        if tag in ("p", "div", "li", "tr", "h1", "h2", "h3", "h4", "pre", "figcaption", "dt", "dd", "br"):
            self.parts.append(" ")

    def handle_endtag(self, tag):
        if tag in self.VOID or self.depth == 0:
            return
        self.depth -= 1
        if self.skip_depth:
            self.skip_depth -= 1

    def handle_data(self, data):
        if self.depth and not self.skip_depth:
            self.parts.append(data)

    def result(self) -> dict:
        """``{"text": the text, "anchors": {element id: where the element's text starts}}``."""
        marked = re.sub(r"\s+", " ", "".join(self.parts)).strip()
        text, anchors, at = [], {}, 0
        for piece in re.split(r"(\x00[^\x01]*\x01)", marked):
            if piece.startswith("\x00"):
                anchors.setdefault(piece[1:-1], at)
            else:
                text.append(piece)
                at += len(piece)
        for anchor, group in self.aliases.items():
            anchors[anchor] = anchors[group]
        anchors = {anchor: at for anchor, at in anchors.items() if not anchor.startswith("#")}
        return {"text": "".join(text), "anchors": anchors}


def article_text(html: str) -> dict:
    """The text of a page's article, and where in it each element with an id begins."""
    parser = _ArticleText()
    parser.feed(html)
    parser.close()
    return parser.result()


def write_texts(app: Sphinx) -> None:
    """``_static/course-search-texts.js``: the text of every page of the book, and its anchors."""
    outdir = Path(app.outdir)
    texts = {}
    for docname in sorted(app.env.found_docs):
        page = outdir / app.builder.get_target_uri(docname)
        if page.is_file():
            texts[docname] = article_text(page.read_text(encoding="utf-8"))
    payload = json.dumps(texts, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    target = outdir / "_static" / TEXTS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        "/* The text of every page and where its anchors are, for the search page's excerpts\n"
        "   (book/_ext/course_search.py). */\n"
        f"window.COURSE_SEARCH_TEXTS = {payload};\n",
        encoding="utf-8",
    )


def setup(app: Sphinx) -> dict:
    app.add_search_language(CourseSearch)
    app.add_config_value("course_search_assets", "", "html", [str])
    app.connect("config-inited", configure)
    app.connect("builder-inited", quiet_jieba)
    app.connect("env-updated", glossary_words)
    # Before offline_assets' handler (500), which replaces the page's list of scripts.
    app.connect("html-page-context", search_page_only, priority=400)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
