"""The built book works offline: in headless Chromium with every request outside the build blocked, a page
loads from the file system too, and the audit catches a page that reaches outside the build.

That every page of both editions loads, renders its math, fails nothing and keeps the console free of
errors is checked in tests/test_every_page.py, from one load of each page shared with the other checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from browser_audit import audit_page, editions, host_of, pages_of, serve, visit

pytestmark = pytest.mark.browser

CDN_SCRIPT = "https://cdn.jsdelivr.net/npm/jquery@3.7.1/dist/jquery.min.js"


def test_the_build_has_the_pages_of_the_table_of_contents_in_both_editions(built_html):
    built = editions(built_html)
    assert set(built) == {"en", "zh_CN"}
    english = pages_of(built["en"])
    assert "index.html" in english and "book/01-overview.html" in english
    assert not any(page.startswith("zh/") for page in english)
    assert pages_of(built["zh_CN"]) == english


def test_pages_work_from_the_file_system(built_html, browser):
    # Opened straight from disk (file://), relative asset paths must still resolve.
    page = built_html / "book" / "01-overview.html"
    report = audit_page(browser, page.as_uri(), built_html.as_uri())
    assert not report.problems, report.problems
    assert report.math_rendered == report.math_elements > 0


def test_the_executed_outputs_and_the_figure_are_on_the_page(built_html):
    html = (built_html / "book" / "01-overview.html").read_text(encoding="utf-8")
    assert "weights sum to 1.0000" in html  # the PyTorch cell ran at build time
    images = list((built_html / "_images").glob("*.png"))
    assert images and "_images/" in html


def test_a_page_that_pulls_a_script_from_a_cdn_is_caught(built_html, browser, tmp_path):
    # The audit must be able to fail: inject a CDN script into a copy of a built page.
    copy = tmp_path / "html"
    shutil.copytree(built_html, copy)
    page = copy / "book" / "01-overview.html"
    html = page.read_text(encoding="utf-8")
    page.write_text(html.replace("</head>", f'<script src="{CDN_SCRIPT}"></script></head>', 1), encoding="utf-8")
    with serve(copy) as base:
        report = visit(browser, base, "book/01-overview.html", copy)  # as tests/test_every_page.py opens every page
    assert CDN_SCRIPT in report.blocked
    assert any(host_of(CDN_SCRIPT) in problem for problem in report.problems)


def test_a_root_absolute_asset_path_is_caught(built_html, browser, tmp_path):
    # Root-absolute paths break under a sub-path; the audit serves the book under one to catch them.
    copy = tmp_path / "html"
    shutil.copytree(built_html, copy)
    page = copy / "book" / "01-overview.html"
    html = page.read_text(encoding="utf-8")
    page.write_text(html.replace("</head>", '<script src="/_static/offline/widget-host.js"></script></head>', 1))
    with serve(copy) as base:
        report = visit(browser, base, "book/01-overview.html", copy)
    assert any("/_static/offline/widget-host.js" in problem for problem in report.problems)
