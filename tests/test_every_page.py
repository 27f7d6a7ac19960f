"""Every page of both editions in headless Chromium: it works offline, weighs what the budget allows, never
scrolls sideways, and switches to its twin in the other edition and back; Chinese text is marked as such.

The build is served over HTTP under a sub-path with every request outside it blocked (browser_audit). Each
page is loaded, at most, twice, and every check below reads what those loads recorded:

- on a phone (390×844, touch), in a fresh context, its edition served on its own (browser_audit.visit):
  every problem (an outside request, a failed request, a console or page error, math not rendered), every
  file it loads until the network is quiet, with its size, and its width; what is wrong with its formulas
  (browser_audit.FORMULA_PROBLEMS: one beyond the screen's edge, a box that does not scroll or is no
  named keyboard stop, a formula that is a keyboard stop) with every "Click to show" part opened; then on
  a tablet's screen (820×1180), its width again;
- on a desktop (1366×900), in one tab for the whole book (``walk_on_a_desktop``): each English page, then
  its Chinese twin through the reader's click on 中文, then back through the click on English; the
  problems met on the way, the width of both pages, what is wrong with their formulas (as on the phone),
  where each click landed, and on the English pages
  with Chinese in them (``CHINESE_READ``), the Chinese text a screen reader would read outside lang="zh".

The page-weight budget (bench/lighthouse_pages.py records the same bytes, and Lighthouse's scores):

- any page: at most 3 MB, as a phone's browser loads it on a first visit (its files' sizes on disk, what a
  reader downloads uncompressed);
- the book's own frame (theme, fonts, scripts: what a page with no math, widget or search loads): at most
  1 MB; no page loads MathJax (the formulas are drawn into the pages at build time, book/_ext/book_math.py),
  the widget host only on pages with a widget, the search scripts, index and excerpt texts only on the
  search page;
- never Font Awesome's 1.4 MB script (the theme's stylesheet draws the icons from the web font);
- served as a reader's server should (scripts/serve_book.py), every text file arrives gzipped.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from playwright.sync_api import Error as PlaywrightError

from repo_scripts import script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
import reader_ux  # noqa: E402

from browser_audit import (DEVICES, FORMULA_PROBLEMS, OPEN_TOGGLES, SET_UP, PageReport, _inside, audit_page,  # noqa: E402
                           block_outside, click_where_it_is, editions, measure_width, pages_of, serve, visit,
                           wait_for_math)

pytestmark = pytest.mark.browser
serve_book = script("serve_book")

ENGLISH, CHINESE = "en", "zh_CN"
KB = 1000
ANY_PAGE = 3000 * KB
FRAME = 1000 * KB
# The brands' icons the theme's stylesheet names (GitHub, GitLab), which are not in the solid font at all.
NOT_SOLID = {0xF09B, 0xF296}
SEARCH_ONLY = ("searchtools.js", "language_data.js", "searchindex.js", "course-search-texts.js", "course-search.js")


@dataclass
class Walk:
    """What a reader on a desktop met going through the book in one tab, from each English page to its
    Chinese twin and back. Pages are named as served from the build's root (zh/… for the Chinese ones)."""

    pages: list[str]  # the English pages walked from
    problems: dict[str, list[str]] = field(default_factory=dict)  # page: what failed while it was open
    widths: dict[str, list[int]] = field(default_factory=dict)  # page: [scrollWidth, clientWidth]
    formulas: dict[str, list[str]] = field(default_factory=dict)  # page: FORMULA_PROBLEMS, toggles opened
    # page of CHINESE_READ: (Chinese texts of its main column not inside lang="zh…", how many elements are lang="zh")
    chinese: dict[str, tuple[list[str], int]] = field(default_factory=dict)
    switches: dict[str, str] = field(default_factory=dict)  # page: what went wrong switching from it


# English pages with Chinese text in them, where every piece of it that a screen reader reads in the main
# column sits inside lang="zh", except in code, math and the widgets (which mark their own).
CHINESE_READ = ("book/glossary.html", "book/01-overview.html", "book/02-soft-hard.html", "book/06-attention-decoder.html")
CHINESE_UNMARKED = r"""() => {
  const han = /[\u3400-\u4dbf\u4e00-\u9fff]/;
  const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  const missed = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!han.test(node.data)) continue;
    const el = node.parentElement;
    if (!el.checkVisibility()) continue;  // not shown (the print-only title): not read either
    if (el.closest('pre, code, script, style, mjx-container, .math, .course-widget, .cell_output')) continue;
    const lang = el.closest('[lang]');
    if (!lang || !lang.getAttribute('lang').startsWith('zh')) missed.push(node.data.trim().slice(0, 30));
  }
  return [missed, document.querySelectorAll("main [lang='zh']").length];
}"""


def walk_on_a_desktop(browser, built_html: Path, chinese: str) -> Walk:
    """On every English page (the root's redirect left out) a reader on a desktop clicks 中文 and lands on
    the same page in Chinese, then clicks English and is back where they started, in one browser tab.
    Nothing may fail on the way (as ``browser_audit.reader`` holds it); both pages' widths are measured
    (a twin the click does not reach is opened to be measured), and the Chinese text of the pages of
    ``CHINESE_READ`` read as a screen reader finds it (``CHINESE_UNMARKED``)."""
    walk = Walk([path for path in pages_of(built_html) if path != "index.html"])
    width, height = DEVICES["desktop"]
    with serve(built_html) as base:
        context = browser.new_context(viewport={"width": width, "height": height}, color_scheme="light",
                                      has_touch=False, is_mobile=False)
        page = context.new_page()

        def problem(text: str, path: str | None = None) -> None:
            """A problem of ``path``, by default of the page the tab shows when it happens."""
            if path is None:
                url = page.url
                path = url[len(base):] if url.startswith(base) else url
            walk.problems.setdefault(path, []).append(text)

        # Every request outside the build is blocked, and is a problem of the page that made it.
        block_outside(page, lambda url: _inside(url, base) or problem(f"blocked outside request: {url}"))
        page.on("console", lambda m: problem(f"console: {m.text}") if m.type == "error" and "ERR_BLOCKED_BY_CLIENT" not in m.text else None)
        page.on("pageerror", lambda e: problem(f"page error: {e}"))
        page.on("response", lambda r: problem(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        # A request cut short because the reader moved on (net::ERR_ABORTED) is no missing file.
        page.on("requestfailed", lambda r: problem(f"failed: {r.url} ({r.failure})")
                if _inside(r.url, base) and "ERR_ABORTED" not in (r.failure or "") else None)

        def measure(path: str) -> None:
            try:
                page.wait_for_load_state("load")
                for condition in SET_UP:
                    page.wait_for_function(condition)
                wait_for_math(page)
                report = PageReport(path)
                measure_width(page, report, "desktop")
                page.evaluate(OPEN_TOGGLES)
                wait_for_math(page)
                walk.formulas[path] = page.evaluate(FORMULA_PROBLEMS)
                measure_width(page, report, "desktop")
                walk.widths[path] = report.widths["desktop"]
                if path in CHINESE_READ:
                    walk.chinese[path] = tuple(page.evaluate(CHINESE_UNMARKED))
            except PlaywrightError as error:
                problem(f"the page did not get ready: {str(error).splitlines()[0]}", path)

        def switch(path: str, target: str, lang: str) -> bool:
            """Click the other edition on ``path``: did the reader land on ``target``, in ``lang``?"""
            try:
                with page.expect_navigation(wait_until="domcontentloaded"):
                    click_where_it_is(page, page.locator("a.course-edition:not([aria-current])"))
            except PlaywrightError as error:
                walk.switches[path] = f"no switch: {str(error).splitlines()[0]}"
                return False
            landed = urlsplit(page.url).path
            if landed != urlsplit(urljoin(base, target)).path:
                walk.switches[path] = f"switched to {landed}, not {target}"
            elif (shown := page.evaluate("document.documentElement.lang")) != lang:
                walk.switches[path] = f"{landed} is in {shown!r}, not {lang!r}"
            return path not in walk.switches

        for path in walk.pages:
            twin = chinese + path
            try:
                page.goto(base + path, wait_until="load")
                measure(path)
                if not switch(path, twin, "zh-CN"):
                    page.goto(base + twin, wait_until="load")
                measure(twin)
                switch(twin, path, "en")
            except PlaywrightError as error:  # a page that would not open
                problem(f"could not be opened: {str(error).splitlines()[0]}", path)
        context.close()
    return walk


class Crawl:
    """The loads above, each done once for the module, when a test first needs it."""

    def __init__(self, browser, built_html: Path):
        self.browser, self.built_html = browser, built_html
        self.folders = editions(built_html)
        self.chinese = self.folders[CHINESE].relative_to(built_html).as_posix() + "/"  # as served from the root
        self._phone: dict[str, dict[str, PageReport]] = {}
        self._walk: Walk | None = None

    def on_a_phone(self, language: str) -> dict[str, PageReport]:
        """Every page of an edition, as ``browser_audit.visit`` found it (the root, which redirects, by
        ``audit_page``), keyed by its path in the edition."""
        if language not in self._phone:
            folder = self.folders[language]
            with serve(folder) as base:
                self._phone[language] = {
                    path: audit_page(self.browser, base + path, base) if path == "index.html"
                    else visit(self.browser, base, path, folder)
                    for path in pages_of(folder)
                }
        return self._phone[language]

    def on_a_desktop(self) -> Walk:
        if self._walk is None:
            self._walk = walk_on_a_desktop(self.browser, self.built_html, self.chinese)
        return self._walk

    def weighed(self, language: str) -> dict[str, dict[str, int]]:
        """For every page of an edition (the root's redirect left out): the build's files it loaded, with
        their sizes on disk. Nothing may have failed on the way (a page that fails is no page weighed)."""
        visits = {path: report for path, report in self.on_a_phone(language).items() if path != "index.html"}
        failing = {path: report.problems for path, report in visits.items() if report.problems}
        assert not failing, f"pages that did not load cleanly on a phone: {failing}"
        return {path: report.files for path, report in visits.items()}


@pytest.fixture(scope="module")
def crawl(browser, built_html) -> Crawl:
    return Crawl(browser, built_html)


# ---- Offline: every page loads, math renders, nothing fails ------------------------------------------

@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_every_page_loads_offline_without_errors(crawl, language):
    problems = {r.url: r.problems for r in crawl.on_a_phone(language).values() if r.problems}
    assert not problems, problems
    # And on a desktop, where the English pages and their Chinese twins were opened too.
    walk = crawl.on_a_desktop()
    mine = {path: found for path, found in walk.problems.items() if path.startswith("zh/") == (language == CHINESE)}
    assert not mine, f"on a desktop: {mine}"


def test_math_renders_offline(crawl):
    report = crawl.on_a_phone(ENGLISH)["book/01-overview.html"]
    assert report.math_elements >= 2  # the overview has inline and display math
    assert report.math_rendered == report.math_elements
    assert report.math_errors == 0
    assert not report.problems


# ---- Formulas: drawn at build time, readable on a phone and a desktop, no keyboard stops ---------------

MATH_ELEMENT = re.compile(r'<(span|div) class="math notranslate nohighlight"[^>]*>(.*?)</\1>', re.S)


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_every_formula_is_drawn_at_build_time_for_eyes_and_screen_readers(crawl, language):
    folder = crawl.folders[language]
    formulas = 0
    for path in pages_of(folder):
        html = (folder / path).read_text(encoding="utf-8")
        scripts = re.findall(r"<script\b[^>]*>", html) + re.findall(r"<script\b[^>]*>([^<]*)</script>", html)
        assert not [s for s in scripts if "mathjax" in s.lower()], path  # no MathJax, its config neither
        for element in MATH_ELEMENT.finditer(html):
            formulas += 1
            inner = element.group(2)
            assert "\\(" not in inner and "\\[" not in inner, (path, inner[:200])  # no TeX left
            # drawn (hidden from screen readers), and said in MathML (hidden from eyes), which waits as text
            # for the reader's script (test_page_speed.py: put in place; without scripts, shown at once)
            assert re.search(r'<svg [^>]*aria-hidden="true"', inner), (path, inner[:200])
            assert '<noscript class="course-mml"><mjx-assistive-mml' in inner and "<math" in inner, (path, inner[:200])
    assert formulas > 1000, formulas  # the book's ~2000 formulas an edition


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_every_formula_fits_a_phone_or_scrolls_in_its_box_and_none_is_a_keyboard_stop(crawl, language):
    visits = {path: report for path, report in crawl.on_a_phone(language).items() if path != "index.html"}
    problems = {path: report.formula_problems for path, report in visits.items() if report.formula_problems}
    assert problems == {}
    assert sum(report.math_rendered for report in visits.values()) > 1000  # the formulas were there to check


def test_every_formula_fits_a_desktop_or_scrolls_in_its_box(crawl):
    walk = crawl.on_a_desktop()
    assert len(walk.formulas) >= 2 * len(walk.pages)
    problems = {path: found for path, found in walk.formulas.items() if found}
    assert problems == {}


def test_a_clipped_formula_and_a_formula_that_is_a_stop_are_caught(built_html, browser, tmp_path):
    # The formula checks must be able to fail: on a copy of chapter 4 whose formula boxes do not scroll
    # and whose first formula is a keyboard stop, as MathJax's runtime made it.
    copy = tmp_path / "html"
    shutil.copytree(built_html, copy, ignore=shutil.ignore_patterns("zh"))
    page = copy / "book" / "04-three-stages.html"
    html = page.read_text(encoding="utf-8")
    html = html.replace("</head>", "<style>main .math { overflow: visible !important; display: inline !important }</style></head>", 1)
    html = html.replace('<span class="math notranslate nohighlight">', '<span class="math notranslate nohighlight" tabindex="0">', 1)
    page.write_text(html, encoding="utf-8")
    with serve(copy) as base:
        report = visit(browser, base, "book/04-three-stages.html", copy)
    assert any("beyond the screen's edge" in problem for problem in report.formula_problems), report.formula_problems
    assert any("keyboard stop that does not scroll" in problem for problem in report.formula_problems)


def test_the_root_page_leads_to_the_book(crawl):
    report = crawl.on_a_phone(ENGLISH)["index.html"]
    assert report.final_url == report.url.removesuffix("index.html") + "book/index.html"
    assert not report.problems


# ---- Page weight -----------------------------------------------------------------------------------

@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_no_page_weighs_more_than_the_budget(crawl, language):
    loads = crawl.weighed(language)
    heavy = {page: sum(files.values()) for page, files in loads.items() if sum(files.values()) > ANY_PAGE}
    assert heavy == {}, f"pages over {ANY_PAGE // KB} KB: {heavy}"


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_what_a_page_loads_beyond_the_frame_it_needs(crawl, language):
    folder = crawl.folders[language]
    for page, files in crawl.weighed(language).items():
        html = (folder / page).read_text(encoding="utf-8")
        names = {Path(name).name for name in files}
        assert "fontawesome.js" not in names, page
        has_math = 'class="math' in html
        assert not any("mathjax" in name.lower() for name in files), page
        # One stylesheet (book/_ext/page_speed.py joins the themes' and the book's), with the formulas' styles.
        sheets = [name for name in files if name.endswith(".css")]
        assert len(sheets) == 1 and Path(sheets[0]).name.startswith("course-styles-"), (page, sheets)
        assert "/* _static/course-math.css */" in (folder / sheets[0]).read_text(encoding="utf-8"), page
        assert ("widget-host.js" in names) == ("application/vnd.jupyter.widget-view+json" in html), page
        for name in SEARCH_ONLY:
            assert (name in names) == (page == "search.html"), f"{page} and {name}"
        if not has_math and page != "search.html" and "widget-host.js" not in names:
            frame = sum(files.values())
            assert frame <= FRAME, f"{page}: the frame weighs {frame // KB} KB"


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_the_pages_were_weighed(crawl, language):
    loads = crawl.weighed(language)
    assert len(loads) >= 20
    missing = {page: [name for name, size in files.items() if size == 0] for page, files in loads.items()}
    assert not any(missing.values()), f"files loaded that are not in the build: {missing}"


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_pages_arrive_compressed(crawl, language):
    """As a reader's server sends the book (scripts/serve_book.py, which serve() uses): every text file a page
    loads (the page, its stylesheets, scripts, search texts) that is worth compressing comes gzipped, from the
    copy the build wrote beside it, and what a phone downloads on a first visit is well under its size on disk."""
    gzip_worthy = serve_book.COMPRESSED_SUFFIXES
    for page, report in crawl.on_a_phone(language).items():
        if page == "index.html":
            continue
        plain = [name for name, size in report.files.items()
                 if Path(name).suffix in gzip_worthy and size >= serve_book.SMALLEST
                 and report.sent.get(name, [0, ""])[1] != "gzip"]
        assert plain == [], f"{page} loads these uncompressed: {plain}"
        sent = sum(size for size, _ in report.sent.values())
        on_disk = sum(report.files.values())
        assert set(report.sent) == set(report.files), page
        assert sent < 0.6 * on_disk, f"{page}: {sent // KB} KB sent for {on_disk // KB} KB on disk"


@pytest.mark.parametrize("language", [ENGLISH, CHINESE])
def test_pages_load_only_the_icons_they_show(crawl, language):
    """The theme's icons come from the book's cut-down icon font (a few KB), which has every icon a page
    shows: no page fetches Font Awesome's whole solid font (153 KB)."""
    from fontTools.ttLib import TTFont

    folder = crawl.folders[language]
    static = folder / "_static"  # each edition has its own
    drawn = set(TTFont(static / "course-icons.woff").getBestCmap())
    theme_css = (static / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    for page, files in crawl.weighed(language).items():
        assert not any(name.endswith("fa-solid-900.woff2") for name in files), page
        assert any(name.endswith("_static/course-icons.woff") for name in files), page
        html = (folder / page).read_text(encoding="utf-8")
        shown = reader_ux.icon_codepoints(theme_css, sorted(set(re.findall(r"\bfa-([a-z0-9-]+)", html))))
        assert shown - drawn <= NOT_SOLID, f"{page} shows icons the cut-down font lacks: {sorted(map(hex, shown - drawn))}"


# ---- No page scrolls sideways ----------------------------------------------------------------------

@pytest.mark.parametrize("device", sorted(DEVICES))
def test_no_page_scrolls_sideways(crawl, device):
    """On no screen is a page of either edition wider than the screen, once its math is typeset (it can
    widen the page); nothing may fail on the pages measured."""
    if device == "desktop":
        walk = crawl.on_a_desktop()
        measured = {path: walk.widths.get(path) for path in walk.pages + [crawl.chinese + p for p in walk.pages]}
        failing = walk.problems
    else:  # the root redirects to book/index.html, which is measured itself
        visits = {f"{language}: {path}": report for language in (ENGLISH, CHINESE)
                  for path, report in crawl.on_a_phone(language).items() if path != "index.html"}
        measured = {page: report.widths.get(device) for page, report in visits.items()}
        failing = {page: report.problems for page, report in visits.items() if report.problems}
    wide = {page: sizes for page, sizes in measured.items() if sizes and sizes[0] > sizes[1]}
    assert wide == {}, f"pages wider than the screen (page: [scrollWidth, clientWidth]): {wide}"
    assert not failing, failing  # a page that did not get ready says so here
    assert all(measured.values()), f"pages not measured: {[page for page, sizes in measured.items() if not sizes]}"


def test_a_page_wider_than_the_screen_is_caught(built_html, browser, tmp_path):
    # The measurement must be able to fail: widen a copy of a built page past a tablet's screen.
    copy = tmp_path / "html"
    shutil.copytree(built_html, copy, ignore=shutil.ignore_patterns("zh"))
    page = copy / "book" / "01-overview.html"
    html = page.read_text(encoding="utf-8")
    page.write_text(html.replace("</body>", '<div style="position: absolute; left: 0; width: 1000px; height: 1px"></div></body>', 1),
                    encoding="utf-8")
    with serve(copy) as base:
        report = visit(browser, base, "book/01-overview.html", copy)
    assert not report.problems, report.problems
    assert report.widths["phone"][0] >= 1000 > report.widths["phone"][1]
    assert report.widths["tablet"][0] >= 1000 > report.widths["tablet"][1] > report.widths["phone"][1]


# ---- Chinese text is marked as Chinese ----------------------------------------------------------------

def test_chinese_text_is_marked_as_chinese(crawl):
    # Every piece of Chinese text a screen reader reads on these pages sits inside lang="zh", except in
    # code, math and the widgets (which mark their own).
    walk = crawl.on_a_desktop()
    for path in CHINESE_READ:
        assert path in walk.chinese and path not in walk.problems, (path, walk.problems.get(path))
        unmarked, marked = walk.chinese[path]
        assert unmarked == [], (path, unmarked)
        assert marked > 0, path
    assert crawl.built_html.joinpath("book/glossary.html").read_text(encoding="utf-8").count('<span lang="zh">') > 50


# ---- Each page switches to its twin -----------------------------------------------------------------

def test_every_page_switches_to_its_twin_and_back_in_the_browser(crawl):
    """On every page a reader clicks 中文 and lands on the same page in Chinese, then clicks English and
    is back where they started: every page of both editions switched once, in one browser tab, with
    nothing failing on the way."""
    walk = crawl.on_a_desktop()
    assert len(walk.pages) >= 20 and "book/01-overview.html" in walk.pages
    assert walk.switches == {}, walk.switches
    assert walk.problems == {}, walk.problems
