"""Shared fixtures. Browser tests never skip: `make test` installs Chromium, and CI must exercise them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILT_HTML = ROOT / "_build" / "html"


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small models train fastest on one thread, and far slower on two when other work shares the cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium (browser_audit.chromium), one per test module."""
    from browser_audit import chromium

    with chromium() as browser:
        yield browser


@pytest.fixture(scope="session")
def built_html() -> Path:
    """The book as `make book` built it. The tests read it; they never rebuild the real book."""
    index = BUILT_HTML / "index.html"
    if not index.is_file():
        pytest.fail("The book is not built: run `make test` (it builds the book first) or `make book`.")
    return BUILT_HTML


@pytest.fixture(scope="session")
def widget_book(tmp_path_factory) -> Path:
    """The throwaway book of the widget tests' pages (browser_audit.WIDGET_PAGES), built once for the whole
    run: pytest-xdist's workers share it, in the folder above their own temporary folders."""
    from browser_audit import shared_widget_book

    shared = tmp_path_factory.getbasetemp()
    return shared_widget_book(shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared)


def pytest_sessionfinish(session, exitstatus):
    # Under CI a skipped test is a test that did not run: count it as a failure.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if os.environ.get("CI") == "true" and skipped and exitstatus == 0:
        reporter.write_line(f"CI=true: {len(skipped)} test(s) skipped, and a skip is a failure in CI.", red=True)
        session.exitstatus = 1
