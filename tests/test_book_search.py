"""Searching the built book, as readers do: an English word and Chinese words, in both editions (English
and 中文), on a phone, a tablet and a desktop, light and dark, with the book served and opened from file://.

A search must list exactly the pages whose text uses the word (Chinese words included: the book quotes
the notes' terms), each with an excerpt that shows the word; and nothing may fail on the way, no console
error from file:// included. The built pages are checked too: only the search page loads the search
scripts and index, and the index holds the course's Chinese vocabulary as words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from browser_audit import DEVICES, SCHEMES, editions, pages_of, reader, serve

pytestmark = pytest.mark.browser

# An English word, a Chinese word found inside longer terms (自注意力, 注意力机制), a Chinese word that
# few pages of the English edition use; and in the Chinese edition one of the notes' terms.
QUERIES = {"en": ("softmax", "注意力", "编码器"), "zh_CN": ("softmax", "注意力", "编码器", "软注意力")}
# Sphinx writes the summary, which says how many pages it found in the edition's language ("found 9
# page(s)", "匹配到 9 页"), when the search is done; until then it holds a no-break space.
FINISHED = (
    "() => { const s = document.querySelector('#search-results .search-summary');"
    " return s !== null && s.textContent.trim() !== ''; }"
)


@pytest.fixture(scope="module", params=["en", "zh_CN"])
def edition(request, built_html) -> tuple[str, Path]:
    """An edition of the book: (its language, its HTML folder)."""
    return request.param, editions(built_html)[request.param]


@pytest.fixture(scope="module")
def roots(edition):
    """The edition served over HTTP (under a sub-path), and opened from the disk."""
    folder = edition[1]
    with serve(folder) as base:
        yield {"http": base, "file": folder.resolve().as_uri() + "/"}


@pytest.fixture(scope="module")
def page_texts(browser, edition) -> dict[str, str]:
    """Every page's article text, as a browser reads it from the page's HTML (scripts, styles and heading
    marks left out), by docname. Independent of the build's own excerpt file."""
    folder = edition[1]
    pages = {
        path[: -len(".html")]: (folder / path).read_text(encoding="utf-8")
        for path in pages_of(folder)
        if path.startswith("book/")
    }
    context = browser.new_context()
    page = context.new_page()
    texts = page.evaluate(
        """pages => Object.fromEntries(Object.entries(pages).map(([name, html]) => {
             const doc = new DOMParser().parseFromString(html, "text/html");
             doc.querySelectorAll("script, style, .headerlink").forEach(el => el.remove());
             const article = doc.querySelector("article.bd-article");
             return [name, article ? article.textContent : ""];
           }))""",
        pages,
    )
    context.close()
    assert len(texts) >= 15 and all(texts.values()), "pages without an article"
    return texts


def uses(text: str, word: str) -> bool:
    """Whether ``text`` uses ``word``: Chinese anywhere; English as a whole word, in any case."""
    if re.search(r"[\u4e00-\u9fff]", word):
        return word in text
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", text, re.IGNORECASE) is not None


def results(page) -> list[dict]:
    page.wait_for_function(FINISHED, timeout=30000)
    # Sphinx adds one result every few milliseconds after it says how many it found.
    page.wait_for_function(
        "() => { const s = document.querySelector('#search-results .search-summary').textContent;"
        " const n = Number((s.match(/(\\d+)/) || [0, 0])[1]);"
        " return document.querySelectorAll('#search-results ul.search > li').length === n; }",
        timeout=30000,
    )
    return page.evaluate(
        """() => [...document.querySelectorAll('#search-results ul.search > li')].map(li => ({
             href: li.querySelector('a').getAttribute('href'),
             title: li.querySelector('a').textContent,
             excerpt: li.querySelector('p.context') ? li.querySelector('p.context').textContent : null,
             marked: [...li.querySelectorAll('p.context .highlighted')].map(s => s.textContent),
           }))"""
    )


@pytest.mark.parametrize("scheme", ["http", "file"])
def test_a_search_lists_the_pages_that_use_the_word_with_an_excerpt_showing_it(
    browser, edition, roots, page_texts, scheme
):
    for query in QUERIES[edition[0]]:
        _search_finds_the_pages_that_use(browser, roots[scheme], page_texts, query)


def _search_finds_the_pages_that_use(browser, root, page_texts, query):
    expected = {name for name, text in page_texts.items() if uses(text, query)}
    assert len(expected) >= 3, f"{query!r}: too few pages use it to test search with"
    with reader(browser, root, f"search.html?q={quote(query)}", "desktop") as page:
        found = results(page)
    pages = {item["href"].split("#")[0].removesuffix(".html") for item in found}
    assert pages == expected, (
        f"{query!r}: missing {sorted(expected - pages)}, listed though they do not use it {sorted(pages - expected)}"
    )
    for item in found:
        assert item["excerpt"], f"{item['href']}: no excerpt"
        assert query.lower() in item["excerpt"].lower(), f"{item['href']}: the excerpt lacks {query!r}: {item['excerpt']}"
        assert any(mark.lower() == query.lower() for mark in item["marked"]), f"{item['href']}: {query!r} not marked"


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("device", sorted(DEVICES))
def test_a_reader_searches_from_a_chapter_on_every_screen(browser, roots, device, scheme):
    """From chapter 4, the reader opens search (the navbar's button on a phone or tablet, the sidebar's
    field on a desktop), types a word, presses Enter and reads the results; one English and one Chinese,
    in both editions."""
    for query in ("softmax", "注意力的权重"):
        with reader(browser, roots["http"], "book/04-three-stages.html", device, scheme) as page:
            buttons = [b for b in page.locator("button.search-button__button").all() if b.is_visible()]
            assert buttons, "no search button to see"
            buttons[0].click()
            field = page.locator("#pst-search-dialog input[name=q]")
            page.wait_for_function("document.querySelector('#pst-search-dialog').open")
            assert field.evaluate("el => el === document.activeElement")
            field.fill(query)
            field.press("Enter")
            page.wait_for_url(re.compile(r"search\.html\?q="))
            found = results(page)
            assert found, f"{query!r} found nothing"
            first = page.locator("#search-results ul.search > li").first
            box, width = first.bounding_box(), DEVICES[device][0]
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, f"results wider than the screen: {box}"
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            # The words of the query are what the excerpts mark: 注意力的权重 is cut into 注意力 + 的 + 权重,
            # and 的 ("of") is a function word that no search looks for.
            marked = {m for item in found for m in item["marked"]}
            if query == "注意力的权重":
                assert "注意力" in marked and "的" not in marked and "注意力的权重" not in marked, marked
            else:
                assert {m.lower() for m in marked} == {"softmax"}, marked


def test_the_query_splitter_cuts_chinese_into_the_words_the_index_holds(browser, roots):
    with reader(browser, roots["file"], "search.html", "desktop") as page:
        page.wait_for_function("typeof Search !== 'undefined' && Search._index !== null")
        split = page.evaluate(
            "qs => qs.map(q => splitQuery(q))",
            ["自注意力的计算", "软注意力和硬注意力", "查询、键和值", "softmax 注意力", "Q和K", "麒麟"],
        )
    assert split[0] == ["自注意力", "的", "计算"]
    assert split[1] == ["软注意力", "和", "硬注意力"]  # 和 is a stopword: the search drops it
    assert split[2] == ["查询", "键", "和", "值"]
    assert split[3] == ["softmax", "注意力"]
    assert split[4] == ["Q", "和", "K"]
    assert split[5] == ["麒麟"]  # no indexed word: kept whole, so that it finds nothing


def test_only_the_search_page_loads_the_search_index(edition):
    folder = edition[1]
    search_scripts = ("searchtools.js", "language_data.js", "searchindex.js")
    for path in pages_of(folder):
        html = (folder / path).read_text(encoding="utf-8")
        loaded = [name for name in search_scripts if re.search(rf'<script src="[^"]*{name}', html)]
        if path == "search.html":
            assert loaded == list(search_scripts), path
            assert "course-search-texts.js" in html and "course-search.js" in html
        else:
            assert loaded == [], f"{path} loads {loaded}"
            assert "course-search" not in html, path


def test_the_index_holds_the_courses_chinese_words(edition):
    folder = edition[1]
    raw = (folder / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(raw[raw.index("(") + 1 : raw.rindex(")")])
    terms = {word for word, docs in index["terms"].items() if docs != []}
    # Words of the glossary, one-character ones too; and the words inside longer ones.
    for word in ("注意力", "自注意力", "非自主性提示", "查询", "键", "值", "编码器", "解码器", "softmax"):
        assert word in terms, word
    # Function words are not indexed, Chinese or English.
    for word in ("的", "和", "the"):
        assert word not in terms, word
    language = (folder / "_static" / "language_data.js").read_text(encoding="utf-8")
    assert "var splitQuery" in language


def test_the_excerpts_come_from_the_text_of_every_page(edition, page_texts):
    language, folder = edition
    raw = (folder / "_static" / "course-search-texts.js").read_text(encoding="utf-8")
    texts = json.loads(raw[raw.index("{") : raw.rindex("}") + 1])
    assert set(texts) == set(page_texts)
    for name, entry in texts.items():
        # Words as the edition writes them: English words, or runs of Chinese characters.
        words = set(re.findall(r"[A-Za-z]{4,}" if language == "en" else r"[\u4e00-\u9fff]{2,}", page_texts[name]))
        assert words, name
        missing = [w for w in words if w not in entry["text"]]
        # Only words inside math source (shown as "…" in an excerpt) may be missing.
        assert len(missing) <= 0.1 * len(words), (name, sorted(missing)[:20])
    # Both terms of an entry lead to the entry, which starts with its English term in the English
    # edition and with its Chinese term (加性注意力) in the Chinese one.
    glossary = texts["book/glossary"]
    english, chinese = glossary["anchors"]["term-additive-attention"], glossary["anchors"]["term-0"]
    assert english == chinese
    assert glossary["text"][english:].lstrip().startswith("additive attention" if language == "en" else "加性注意力")


def test_a_build_without_jieba_stops_with_the_command_that_installs_it(monkeypatch):
    """Without jieba Sphinx indexes no Chinese word and says nothing; the book's build refuses instead."""
    import sys
    from types import SimpleNamespace

    from sphinx.errors import ConfigError
    from sphinx.search import zh

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
    import course_search

    config = SimpleNamespace(html_search_language="zh", templates_path=[], html_static_path=[])
    monkeypatch.setattr(zh, "JIEBA", False)
    with pytest.raises(ConfigError, match=r"pip install jieba==0\.42\.1"):
        course_search.configure(None, config)
    monkeypatch.setattr(zh, "JIEBA", True)
    course_search.configure(None, config)
    assert config.html_show_search_summary is False  # the excerpts come from the build, not from fetches
    requirements = (Path(__file__).resolve().parents[1] / "requirements.txt").read_text()
    assert course_search.JIEBA_PIN in requirements.splitlines()  # the message names the pinned release


# ---- Ranking and the search field ---------------------------------------------------------------------

# A query that many glossary entries contain (自注意力, 注意力机制 …; "self-attention", "attention head" …).
RANKED = {"en": "attention", "zh_CN": "注意力"}


def test_the_chapters_come_before_the_glossary_entries_that_merely_contain_the_word(browser, edition, roots):
    language = edition[0]
    with reader(browser, roots["http"], f"search.html?q={quote(RANKED[language])}", "desktop") as page:
        found = [item["href"] for item in results(page)]
    chapter = re.compile(r"^book/\d\d-[\w-]+\.html$")
    first_chapter = next(i for i, href in enumerate(found) if chapter.match(href))
    # At most the entry of the word itself comes first (its definition); then the chapters.
    assert first_chapter <= 1, found[:5]
    entries = [i for i, href in enumerate(found) if href.startswith("book/glossary.html#")]
    assert len(entries) >= 5  # the entries are still found ...
    assert all(i > first_chapter for i in entries[1:]), found[:10]  # ... after the chapters, but one
    chapters = [i for i, href in enumerate(found) if chapter.match(href)]
    assert max(chapters) < entries[1], found


@pytest.mark.parametrize("device", ["phone", "desktop"])
def test_the_search_icon_leaves_the_query_readable(browser, edition, roots, device):
    query = RANKED[edition[0]]
    with reader(browser, roots["http"], f"search.html?q={quote(query)}", device) as page:
        results(page)
        field = page.locator("main input[name=q]")
        assert field.input_value() == query
        icon_right, text_left = field.evaluate(
            """input => {
                 const icon = input.parentElement.querySelector('i');
                 const cs = getComputedStyle(input);
                 const glyph = icon.getBoundingClientRect();
                 return [glyph.right, input.getBoundingClientRect().left + parseFloat(cs.borderLeftWidth) + parseFloat(cs.paddingLeft)];
               }"""
        )
    assert icon_right <= text_left, f"the icon ends at {icon_right} px, the query's text starts at {text_left} px"
