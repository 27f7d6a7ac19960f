"""Embedded widgets work in the static book with no kernel and no network.

A throwaway book's widget page (tests/fixtures/widget-page.md: an anywidget counter, run by the book's
widget host), built with `make book` (conftest's ``widget_book``, shared with the other widget tests), is
driven in headless Chromium with every request outside the build blocked, over HTTP under a sub-path and
from file://.
"""

from __future__ import annotations

import pytest

from browser_audit import audit_page, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _drive(browser, url: str) -> str:
    """Click the counter; return what the page then shows."""
    page = browser.new_page()
    page.goto(url)
    page.click("button.counter")
    page.wait_for_function("document.querySelector('button.counter').textContent === 'count is 1'")
    counter = page.inner_text("button.counter")
    page.close()
    return counter


def test_widgets_load_offline_without_errors(widget_book, browser):
    with serve(widget_book) as base:
        report = audit_page(browser, base + "book/widgets.html", base)
    assert not report.problems, report.problems


def test_widgets_respond_without_a_kernel(widget_book, browser):
    with serve(widget_book) as base:
        assert _drive(browser, base + "book/widgets.html") == "count is 1"


def test_widgets_work_from_the_file_system(widget_book, browser):
    page = widget_book / "book" / "widgets.html"
    report = audit_page(browser, page.as_uri(), widget_book.as_uri())
    assert not report.problems, report.problems
    assert _drive(browser, page.as_uri()) == "count is 1"
