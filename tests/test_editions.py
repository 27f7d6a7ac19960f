"""The book's two editions, English and 中文, as their readers get them.

Every page of each edition links to its twin in the other, and a reader who switches lands on the same
page at the same place; the Chinese pages read in Chinese (their prose, captions, alt text, the theme's
labels and the widgets' interface), show figures drawn in Chinese, and the glossary works both ways.
The pages are read as built (`make book` builds both editions); the browser tests open them served.
That a click on the switcher of every page lands on its twin and back is checked in tests/test_every_page.py,
on the same loads as the pages' other checks.
"""

from __future__ import annotations

import html as html_lib
import re
import sys
from pathlib import Path

import pytest

from browser_audit import DEVICES, click_where_it_is, editions, pages_of, reader, serve

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
ENGLISH, CHINESE = "en", "zh_CN"


@pytest.fixture(scope="module")
def folders(built_html) -> dict[str, Path]:
    found = editions(built_html)
    assert set(found) == {ENGLISH, CHINESE}, f"editions built: {sorted(found)}"
    return found


def _paragraphs(page_html: str) -> list[str]:
    """The text of every prose paragraph of the article (code cells, their outputs and math left out)."""
    from bs4 import BeautifulSoup

    article = BeautifulSoup(page_html, "html.parser").select_one("article.bd-article")
    for node in article.select("div.cell, pre, code, script, style, .math, a.headerlink"):
        node.decompose()
    return [text for p in article.find_all("p") if (text := " ".join(p.get_text(" ").split()))]


def _switcher(page_html: str) -> list[tuple[str, str, str | None]]:
    """(label, lang, href or None for the current edition) of the page's language switcher."""
    nav = re.search(r'<nav class="course-editions"[^>]*>(.*?)</nav>', page_html, re.S)
    assert nav, "no language switcher"
    found = []
    for tag in re.finditer(r'<(a|span) class="course-edition"([^>]*)>([^<]*)</\1>', nav.group(1)):
        attributes = dict(re.findall(r'(\w[\w-]*)="([^"]*)"', tag.group(2)))
        found.append((tag.group(3), attributes["lang"], attributes.get("href")))
    return found


# ---- Twins ---------------------------------------------------------------------------------------

def test_every_page_of_each_edition_links_to_the_same_page_of_the_other(folders):
    for language, folder in folders.items():
        other = folders[CHINESE if language == ENGLISH else ENGLISH]
        for path in pages_of(folder):
            if path == "index.html":  # the root's redirect to the first page
                continue
            page_html = (folder / path).read_text(encoding="utf-8")
            lang = re.search(r'<html lang="([^"]+)"', page_html).group(1)
            assert lang == ("en" if language == ENGLISH else "zh-CN"), path
            links = _switcher(page_html)
            assert [label for label, _, _ in links] == ["English", "中文"], path
            current = [l for l in links if l[2] is None]
            assert [l[1] for l in current] == [lang], f"{path}: the current edition is not marked"
            (href,) = [h for _, _, h in links if h is not None]
            target = (folder / path).parent / href
            assert target.resolve() == (other / path).resolve(), f"{path} links to {href}"
            assert f'rel="alternate" hreflang=' in page_html and href in page_html, path


@pytest.mark.browser
@pytest.mark.parametrize("device", ["phone", "desktop"])
def test_switching_language_keeps_the_readers_place(browser, built_html, device):
    """A reader half-way down chapter 4 in Chinese switches to English and lands at the same section,
    and back."""
    with serve(built_html) as base:
        with reader(browser, base, "zh/book/04-three-stages.html", device) as page:
            section = page.locator("section#stage-2-softmax")
            section.scroll_into_view_if_needed()
            page.evaluate("document.querySelector('section#stage-2-softmax').scrollIntoView()")
            assert "阶段 2" in section.locator("h2, h3").first.inner_text()
            link = page.locator("a.course-edition[hreflang=en]")
            assert link.is_visible()
            click_where_it_is(page, link)
            page.wait_for_url(re.compile(r"/book/04-three-stages\.html#stage-2-softmax$"))
            assert page.evaluate("document.documentElement.lang") == "en"
            assert page.locator("section#stage-2-softmax h2, section#stage-2-softmax h3").first.inner_text().startswith("Stage 2")
            page.wait_for_function("Math.abs(document.querySelector('section#stage-2-softmax').getBoundingClientRect().top) < 200")
            click_where_it_is(page, page.locator("a.course-edition[hreflang=zh-CN]"))
            page.wait_for_url(re.compile(r"/zh/book/04-three-stages\.html#stage-2-softmax$"))
            assert page.evaluate("document.documentElement.lang") == "zh-CN"


# ---- The Chinese edition reads in Chinese ------------------------------------------------------------

def _kept_in_english() -> set[str]:
    """The messages that a translator kept in English on purpose ('# keep:' in the catalog), as shown."""
    from babel.messages.pofile import read_po

    kept = set()
    for path in (Path(__file__).resolve().parents[1] / "book" / "locale").rglob("*.po"):
        with path.open("rb") as handle:
            for message in read_po(handle):
                if any(c.strip().startswith("keep:") for c in message.user_comments):
                    kept.add(" ".join(re.sub(r"[*`]", "", message.id).split()))
    return kept


def test_no_paragraph_of_the_chinese_edition_is_left_in_english(folders):
    kept = _kept_in_english()
    left = {}
    for path in pages_of(folders[CHINESE]):
        if not path.startswith("book/"):
            continue
        english = set(_paragraphs((folders[ENGLISH] / path).read_text(encoding="utf-8")))
        chinese = _paragraphs((folders[CHINESE] / path).read_text(encoding="utf-8"))
        untranslated = [p for p in chinese if p in english and p not in kept
                        and len(re.findall(r"[A-Za-z]{3,}", p)) >= 5 and not HAN.search(p)]
        if untranslated:
            left[path] = untranslated[:3]
        prose = "".join(chinese)
        han, latin = len(HAN.findall(prose)), len(re.findall(r"[A-Za-z]", prose))
        assert han > latin, f"{path}: {han} Chinese characters against {latin} Latin letters"
    assert not left, left


def test_the_chinese_edition_has_its_title_and_the_themes_labels_in_chinese(folders):
    page_html = (folders[CHINESE] / "book" / "02-soft-hard.html").read_text(encoding="utf-8")
    title = re.search(r"<title>(.*?)</title>", page_html, re.S).group(1)
    assert "软注意力与硬注意力" in title and "注意力机制：从第一性原理出发" in title, title
    assert "搜索" in page_html  # the theme's search button
    assert "本章内容" in page_html and "小结" in page_html


# What may stay Latin in the frame of a Chinese page: key names, the switcher's "English", the download
# menu's file types (a chapter title such as "7.2 走向 Transformer" has Chinese in it).
FRAME_LATIN = {"Ctrl", "English", "K", ".md", ".pdf", ".ipynb"}


def test_the_frame_of_every_chinese_page_speaks_chinese(folders):
    """Outside the article (navigation, header buttons, footer, search field), nothing a reader sees or
    hears is English: texts, tooltips (title, data-bs-title), names for screen readers (aria-label),
    placeholders."""
    from bs4 import BeautifulSoup, Comment, Declaration

    english = {}
    for path in pages_of(folders[CHINESE]):
        if path == "index.html":
            continue
        soup = BeautifulSoup((folders[CHINESE] / path).read_text(encoding="utf-8"), "html.parser")
        for node in soup(["script", "style", "noscript"]) + soup.select("article.bd-article, #jb-print-docs-body, head"):
            node.decompose()
        for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
            comment.extract()
        # Each text with what surrounds it: "用 torch.bmm 批量计算" is one title, with code in it.
        found = [(text.find_parent(["a", "p", "li", "button", "label", "h1", "h2", "h3", "h4"]) or text).get_text(" ").strip()
                 for text in soup.find_all(string=True) if not isinstance(text, Declaration)]
        found += [el[attr] for attr in ("title", "data-bs-title", "aria-label", "placeholder", "alt")
                  for el in soup.find_all(attrs={attr: True})]
        left = sorted({text for text in found if re.search(r"[A-Za-z]{3,}", text)
                       and not HAN.search(text) and text not in FRAME_LATIN})
        if left:
            english[path] = left
    assert not english, english


def test_figures_of_the_chinese_edition_are_drawn_in_chinese(folders):
    """Each figure of a Chinese page is a drawing of its own (not the English PNG), with Chinese alt text,
    in the same place as in the English page."""
    for path in pages_of(folders[CHINESE]):
        if not path.startswith("book/"):
            continue
        english = re.findall(r'<figure[^>]*>\s*<img alt="([^"]*)" src="([^"]+)"', (folders[ENGLISH] / path).read_text(encoding="utf-8"))
        chinese = re.findall(r'<figure[^>]*>\s*<img alt="([^"]*)" src="([^"]+)"', (folders[CHINESE] / path).read_text(encoding="utf-8"))
        assert len(chinese) == len(english), path
        for (alt_en, src_en), (alt_zh, src_zh) in zip(english, chinese):
            assert Path(src_zh).name != Path(src_en).name, f"{path}: the English drawing {src_en}"
            assert HAN.search(html_lib.unescape(alt_zh)) and alt_zh != alt_en, f"{path}: alt text {alt_zh[:60]}"
            assert (folders[CHINESE] / "book" / src_zh).resolve().is_file(), src_zh


# ---- The glossary, both ways -----------------------------------------------------------------------

def _entries(page_html: str) -> list[list[str]]:
    glossary = re.search(r'<dl class="simple glossary">(.*?)</dl>', page_html, re.S).group(1)
    entries = []
    for item in re.split(r"</dd>", glossary):
        terms = [html_lib.unescape(re.sub(r"<[^>]+>", "", t)).strip() for t in re.findall(r"<dt[^>]*>(.*?)<a class=\"headerlink\"", item, re.S)]
        if terms:
            entries.append(terms)
    return entries


def test_the_glossary_runs_both_ways(folders):
    import importlib.util

    extensions = Path(__file__).resolve().parents[1] / "book" / "_ext"
    sys.path.insert(0, str(extensions))  # editions.py imports its sibling reader_ux, as Sphinx loads them
    spec = importlib.util.spec_from_file_location("editions_ext", extensions / "editions.py")
    editions_ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(editions_ext)

    english_page = (folders[ENGLISH] / "book" / "glossary.html").read_text(encoding="utf-8")
    chinese_page = (folders[CHINESE] / "book" / "glossary.html").read_text(encoding="utf-8")
    english, chinese = _entries(english_page), _entries(chinese_page)
    assert len(english) == len(chinese) >= 100
    # English: the English term first, alphabetical; 中文: a Chinese term first, in pinyin order.
    assert all(not HAN.search(terms[0]) for terms in english)
    assert [t[0] for t in english] == sorted((t[0] for t in english), key=editions_ext.english_key)
    assert all(HAN.search(terms[0]) for terms in chinese)
    assert [t[0] for t in chinese] == sorted((t[0] for t in chinese), key=editions_ext.pinyin_key)
    assert {frozenset(t) for t in english} == {frozenset(t) for t in chinese}
    # Each ends with an index in the other order, whose links lead to the entries.
    for page_html, section, title in ((english_page, "index-by-chinese-term", "Index by Chinese term"),
                                      (chinese_page, "index-by-english-term", "英文术语索引")):
        index = re.search(rf'<section class="glossary-index" id="{section}">(.*?)</section>', page_html, re.S)
        assert index and title in index.group(1), section
        targets = set(re.findall(r'href="#([^"]+)"', index.group(1))) - {section}  # less its own heading's link
        ids = set(re.findall(r'<dt id="([^"]+)"', page_html))
        assert len(targets) >= 100 and targets <= ids, section


# ---- The widgets speak Chinese in the Chinese edition --------------------------------------------------

@pytest.mark.browser
def test_the_widgets_speak_the_editions_language(browser, built_html):
    with serve(built_html) as base:
        with reader(browser, base, "zh/book/04-three-stages.html", "desktop") as page:
            playground = page.locator(".attention-playground").first
            playground.wait_for()
            assert playground.get_attribute("lang") == "zh"
            assert "评分函数" in playground.inner_text()
            assert playground.locator("select option").all_inner_texts()[:2] == ["点积", "缩放点积"]
            playground.locator("input.ap-temperature").fill("-2")
            page.wait_for_function("document.querySelector('.ap-status').textContent.startsWith('硬注意力')")
        with reader(browser, base, "book/04-three-stages.html", "desktop") as page:
            playground = page.locator(".attention-playground").first
            playground.wait_for()
            assert "Score function" in playground.inner_text()
        with reader(browser, base, "zh/book/06-attention-decoder.html", "desktop") as page:
            explorer = page.locator(".alignment-explorer").first
            explorer.wait_for()
            assert "句子" in explorer.inner_text()
            assert explorer.locator("select option").all_inner_texts()[1] == "一个调换了语序的句子"
