"""The weight of every page of the built book, as a phone's browser loads it, against the book's budget.

Each page is opened in headless Chromium at 390×844 and every file it loads from the build is counted at
its size on disk (what a reader downloads uncompressed, on a first visit), in both editions. The budget:

- any page: at most 3 MB;
- the book's own frame (theme, fonts, scripts: what a page with no math, widget or search loads): at most
  1 MB; MathJax (about 1.1 MB) only on pages with math, the widget host only on pages with a widget, the
  search scripts, index and excerpt texts only on the search page;
- never Font Awesome's 1.4 MB script (the theme's stylesheet draws the icons from the web font).

bench/lighthouse_pages.py records the same bytes (and Lighthouse's scores) for every page.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from browser_audit import editions, pages_of, reader, serve

pytestmark = pytest.mark.browser

KB = 1000
ANY_PAGE = 3000 * KB
FRAME = 1000 * KB
SEARCH_ONLY = ("searchtools.js", "language_data.js", "searchindex.js", "course-search-texts.js", "course-search.js")


@pytest.fixture(scope="module", params=["en", "zh_CN"])
def edition_html(request, built_html) -> Path:
    """The HTML folder of one edition."""
    return editions(built_html)[request.param]


@pytest.fixture(scope="module")
def loads(browser, edition_html) -> dict[str, dict[str, int]]:
    """For every page of an edition: the build's files it loaded, with their sizes on disk."""
    built_html = edition_html
    found = {}
    with serve(built_html) as base:
        prefix = urlsplit(base).path
        for path in pages_of(built_html):
            if path == "index.html":  # redirects to book/index.html, which is weighed itself
                continue
            files: dict[str, int] = {}

            def count(request, files=files):
                url = urlsplit(request.url)
                if url.path.startswith(prefix):
                    file = built_html / unquote(url.path[len(prefix):])
                    files[file.relative_to(built_html).as_posix()] = file.stat().st_size if file.is_file() else 0

            # A fresh context: counted from the page's first request, every file, none from a cache.
            with reader(browser, base, path, "phone", on_request_finished=count) as page:
                page.wait_for_load_state("networkidle")
            found[path] = files
    return found


def test_no_page_weighs_more_than_the_budget(loads):
    heavy = {page: sum(files.values()) for page, files in loads.items() if sum(files.values()) > ANY_PAGE}
    assert heavy == {}, f"pages over {ANY_PAGE // KB} KB: {heavy}"


def test_what_a_page_loads_beyond_the_frame_it_needs(loads, edition_html):
    for page, files in loads.items():
        html = (edition_html / page).read_text(encoding="utf-8")
        names = {Path(name).name for name in files}
        assert "fontawesome.js" not in names, page
        has_math = 'class="math' in html
        assert any(name.startswith("_static/offline/mathjax/") for name in files) == has_math, page
        assert ("widget-host.js" in names) == ("application/vnd.jupyter.widget-view+json" in html), page
        for name in SEARCH_ONLY:
            assert (name in names) == (page == "search.html"), f"{page} and {name}"
        if not has_math and page != "search.html" and "widget-host.js" not in names:
            frame = sum(files.values())
            assert frame <= FRAME, f"{page}: the frame weighs {frame // KB} KB"


def test_the_pages_were_weighed(loads):
    assert len(loads) >= 20
    missing = {page: [name for name, size in files.items() if size == 0] for page, files in loads.items()}
    assert not any(missing.values()), f"files loaded that are not in the build: {missing}"
