"""Load built pages in real headless Chromium with every request outside the build blocked, and say what went wrong.

Used by the offline tests (and by benchmarks that need the same browser). The build is served over
HTTP on 127.0.0.1 under a sub-path, so that a root-absolute URL shows up as a failure too.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
import http.server
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from playwright.sync_api import Error as PlaywrightError

from repo_scripts import script

# The handler a reader's server should match (scripts/serve_book.py): gzip copies written by the build,
# sent to browsers that accept them, and caching headers.
BookHandler = script("serve_book").BookHandler

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SUB_PATH = "/course/"
# The readers' screens: below the themes' 992 px breakpoint the sidebars open as dialogs.
DEVICES = {"phone": (390, 844), "tablet": (820, 1180), "desktop": (1366, 900)}
NARROW = {"phone", "tablet"}
SCHEMES = ("light", "dark")


@dataclass
class PageReport:
    url: str
    blocked: list[str] = field(default_factory=list)  # requests that tried to leave the build
    failed: list[str] = field(default_factory=list)  # requests inside the build that failed or gave >= 400
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    math_elements: int = 0
    math_rendered: int = 0
    math_errors: int = 0
    formula_problems: list[str] = field(default_factory=list)  # FORMULA_PROBLEMS on a phone, toggles opened (visit)
    final_url: str = ""  # where the page ended up (the root index redirects)
    files: dict[str, int] = field(default_factory=dict)  # the build's files it loaded (visit): path in the build, size on disk
    # the same files as the server sent them (visit): path in the build, [bytes sent, Content-Encoding or ""]
    sent: dict[str, list] = field(default_factory=dict)
    widths: dict[str, list[int]] = field(default_factory=dict)  # device: [scrollWidth, clientWidth] of the page (visit)

    @property
    def problems(self) -> list[str]:
        return (
            [f"blocked outside request: {u}" for u in self.blocked]
            + [f"failed request: {u}" for u in self.failed]
            + [f"console error: {m}" for m in self.console_errors]
            + [f"page error: {m}" for m in self.page_errors]
            + ([f"math: {self.math_rendered} of {self.math_elements} rendered, {self.math_errors} errors"]
               if self.math_rendered < self.math_elements or self.math_errors else [])
        )


class _QuietHandler(BookHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def translate_path(self, path):
        # Serve the build only under SUB_PATH; anything else (a root-absolute URL) is a 404.
        if not path.startswith(SUB_PATH):
            return str(Path(self.directory) / "__outside_the_sub_path__")
        return super().translate_path("/" + path[len(SUB_PATH):])


@contextlib.contextmanager
def serve(html_dir: Path):
    """Serve ``html_dir`` at http://127.0.0.1:PORT/course/ for the duration of the block, as
    scripts/serve_book.py serves a book (compressed, with caching headers); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{SUB_PATH}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium():
    """A headless Debian Chromium driven by Playwright (Playwright's own browser download fails here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _inside(url: str, base: str) -> bool:
    if url.startswith(("data:", "blob:", "about:")):
        return True
    if base.startswith("file:"):
        return url.startswith("file:")
    return url.startswith(base)


def block_outside(page, inside) -> list[str]:
    """Let ``page`` load only the URLs ``inside(url)`` accepts; the returned list fills with the others it tried."""
    blocked: list[str] = []

    def route(route_):
        if inside(route_.request.url):
            route_.continue_()
        else:
            blocked.append(route_.request.url)
            route_.abort("blockedbyclient")

    page.route("**/*", route)
    return blocked


# The page is set up: the theme has applied the colour scheme, and the book's script has run.
SET_UP = ("document.documentElement.dataset.theme === 'light'",
          "document.querySelector('.primary-toggle[aria-controls]') !== null")
# Every widget the page shows is drawn, or says it could not be (book/_ext/widget_host.js).
WIDGETS_DRAWN = "[...document.querySelectorAll('.course-widget')].every((el) => el.childElementCount > 0)"
WIDTHS = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


def _watch(page, report: PageReport, base: str) -> None:
    """Record in ``report`` every problem ``page`` meets from its first request: outside requests (blocked),
    failed requests and answers >= 400, console errors and page errors."""
    report.blocked = block_outside(page, lambda request_url: _inside(request_url, base))
    page.on("console", lambda msg: report.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: report.page_errors.append(str(exc)))
    page.on(
        "requestfailed",
        lambda req: report.failed.append(f"{req.url} ({req.failure})") if _inside(req.url, base) else None,
    )
    page.on("response", lambda resp: report.failed.append(f"{resp.url} (HTTP {resp.status})") if resp.status >= 400 else None)


# course-reader.js measures the formulas near the screen at once and the others when the browser is idle;
# <html data-course-formulas="measured"> says that every one has been, since the last change of room.
FORMULAS_MEASURED = "document.documentElement.dataset.courseFormulas === 'measured'"
# It also puts each formula's MathML (held as text while the page loads) in place; then <html
# data-course-mathml="placed">. A page without course-reader.js (the feedback pages) has neither.
MATHML_PLACED = ("!document.querySelector('noscript.course-mml') "
                 "&& ['placed', undefined].includes(document.documentElement.dataset.courseMathml)")


def wait_for_math(page) -> None:
    """Wait until the page's fonts are in, after which its formulas (drawn at build time, book/_ext/book_math.py)
    have their final place, and the book's script has marked the wide ones (course-reader.js). Call it again
    after opening parts of the page: they give formulas room they had not. Their MathML is in place too."""
    page.wait_for_function("document.fonts.status === 'loaded'")
    page.wait_for_function(MATHML_PLACED)
    page.evaluate(NEXT_FRAME)
    page.wait_for_function(FORMULAS_MEASURED)


def _count_math(page, report: PageReport) -> None:
    report.math_elements = page.evaluate("document.querySelectorAll('.math').length")
    report.math_rendered = page.evaluate("document.querySelectorAll('.math mjx-container svg').length")
    report.math_errors = page.evaluate("document.querySelectorAll('mjx-merror, [data-mml-node=merror]').length")


# What is wrong with the formulas of the page's article as a reader sees it now: a formula (its
# drawing) that reaches beyond the screen's edges, unless a box that scrolls sideways holds it, which
# must then be on the screen, really scroll, be a keyboard stop and be named; a formula, or anything
# inside one, that is a keyboard stop though it does not scroll; MathJax's runtime on the page.
FORMULA_PROBLEMS = r"""() => {
  const problems = [];
  const name = (el) => (el.closest('.math') || el).textContent.trim().slice(0, 40);
  // The nearest box around the drawing that cuts it (it reaches past the box's edge): [box, overflow-x].
  const cutBy = (drawing, r) => {
    for (let up = drawing.parentElement; up; up = up.parentElement) {
      const overflow = getComputedStyle(up).overflowX;
      if (overflow === 'visible') continue;
      const b = up.getBoundingClientRect();
      if (r.left < b.left - 1 || r.right > b.right + 1) return [up, overflow];
    }
    return [null, null];
  };
  for (const drawing of document.querySelectorAll('article .math svg[role]')) {
    const svg = drawing.getBoundingClientRect();
    if (svg.width === 0 || !drawing.checkVisibility()) continue;  // in a part of the page that is closed
    // What is drawn: the <svg>'s box, and its content, which may reach past it (a shrunk <svg>).
    const ink = drawing.querySelector('g').getBoundingClientRect();
    const r = {left: Math.min(svg.left, ink.left), right: Math.max(svg.right, ink.right)};
    const [box, overflow] = cutBy(drawing, r);
    if (box) {
      const b = box.getBoundingClientRect();
      if (overflow === 'hidden' || overflow === 'clip' || box.scrollWidth <= box.clientWidth + 1)
        problems.push(`cut by a box that does not scroll: ${name(drawing)}`);
      else if (b.left < -1 || b.right > innerWidth + 1) problems.push(`its scrolling box is off the screen: ${name(drawing)}`);
      else if (box.closest('.math') && !(box.tabIndex === 0 && box.getAttribute('aria-label')))
        problems.push(`scrolls but is no named keyboard stop: ${name(drawing)}`);
    } else if (r.left < -1 || r.right > innerWidth + 1) {
      problems.push(`beyond the screen's edge (${Math.round(r.left)}..${Math.round(r.right)} of ${innerWidth}): ${name(drawing)}`);
    }
  }
  // A formula is no keyboard stop (an equation's number links to it: that link is one), unless its box scrolls.
  for (const el of document.querySelectorAll('article .math, article .math *')) {
    if (el.tabIndex < 0 || el.matches('a.headerlink') || !el.checkVisibility()) continue;
    const scrolls = el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible';
    if (!scrolls) problems.push(`a keyboard stop that does not scroll: ${name(el)}`);
  }
  if (window.MathJax || document.querySelector('script[src*="mathjax" i]')) problems.push('MathJax is loaded');
  return problems;
}"""
# The element that has the keyboard's focus: what kind of control it is, whether it is (in) a formula and
# whether that formula's box scrolls, and whether a focus ring shows (an outline or a box shadow).
FOCUSED = r"""() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const cs = getComputedStyle(el);
  const visible = (color) => color && !/^(transparent|rgba\(.*,\s*0\))$/.test(color);
  const ring = (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 1 && visible(cs.outlineColor))
    || (cs.boxShadow !== 'none' && cs.boxShadow !== '');
  const math = el.closest('.math');
  const kinds = {menu: '.primary-toggle', download: '.dropdown-toggle', toggle: '.toggle-button',
                 theme: '.theme-switch-button', widget: '.course-widget *', formula: '.math, .math *'};
  return {
    kind: Object.keys(kinds).find((kind) => el.matches(kinds[kind])) || el.tagName.toLowerCase(),
    what: el.outerHTML.slice(0, 120),
    scrolls: Boolean(math) && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible'
      && Boolean(el.getAttribute('aria-label')),
    ring,
  };
}"""


def tab_through(page, limit: int = 600) -> list[dict]:
    """Every keyboard stop of the page, in Tab order from its top, as ``FOCUSED`` describes it."""
    page.evaluate("document.activeElement && document.activeElement.blur()")
    stops, seen = [], set()
    for _ in range(limit):
        page.keyboard.press("Tab")
        stop = page.evaluate(FOCUSED)
        key = page.evaluate("() => { const el = document.activeElement; if (!el.dataset.tabStop) el.dataset.tabStop = String(Math.random()); return el.dataset.tabStop; }")
        if stop is None or key in seen:  # back at the top
            break
        seen.add(key)
        stops.append(stop)
    return stops


# Open every "Click to show" part of the page (sphinx-togglebutton), as a reader who reads it all does.
OPEN_TOGGLES = """() => { for (const b of document.querySelectorAll('main button.toggle-button')) {
  if (b.getAttribute('aria-expanded') !== 'true') b.click(); }
  for (const d of document.querySelectorAll('main details')) d.open = true; }"""


def _each_once(report: PageReport) -> PageReport:
    # Console messages about blocked requests repeat the blocked list; keep each problem once.
    report.console_errors = [m for m in report.console_errors if "ERR_BLOCKED_BY_CLIENT" not in m]
    return report


def audit_page(browser, url: str, base: str, settle_ms: int = 300) -> PageReport:
    """Open ``url`` in a fresh context where only URLs under ``base`` may load; report every problem seen
    once its math is typeset and its widgets are drawn."""
    report = PageReport(url)
    context = browser.new_context()
    page = context.new_page()
    _watch(page, report, base)

    page.goto(url, wait_until="load")
    for attempt in range(5):
        try:
            wait_for_math(page)
            page.wait_for_function(WIDGETS_DRAWN, timeout=15000)
            page.wait_for_timeout(settle_ms)  # errors that come late have had settle_ms to come
            _count_math(page, report)
            break
        except PlaywrightError as error:
            # The book's root index.html redirects (meta refresh) to its first page: audit where it lands.
            if "context was destroyed" not in str(error) or attempt == 4:
                raise
            if page.url == url:  # the redirect has not committed yet (a busy machine): wait for it to land
                page.wait_for_url(lambda landed: landed != url, timeout=30000)
            page.wait_for_load_state("load")
    report.final_url = page.url
    context.close()
    return _each_once(report)


def click_where_it_is(page, locator) -> None:
    """Click as a reader does, where the element is on screen: Playwright's own click first scrolls an
    element of a sticky header "into view", which moves the page the reader is reading."""
    box = locator.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def measure_width(page, report: PageReport, device: str) -> None:
    """Record the page's width against the screen's on ``device``: the widest seen, if measured again."""
    sizes = page.evaluate(WIDTHS)
    if sizes[0] > report.widths.get(device, [0, 0])[0]:
        report.widths[device] = sizes


def visit(browser, base: str, path: str, folder: Path, settle_ms: int = 300) -> PageReport:
    """Open ``path`` once as a reader on a phone (390×844, touch, light) does, in a fresh context where only
    URLs under ``base`` may load, and record all that the page tests need from that one load:

    - every problem, as ``audit_page`` does, with the math rendered and every widget drawn;
    - ``formula_problems``: what is wrong with its formulas on the phone (``FORMULA_PROBLEMS``), with every
      "Click to show" part opened (the page's width is measured again then);
    - ``files``: every file of the build (served from ``folder``) it loaded until the network was quiet, with
      its size on disk (0: not in the build), counted from the page's first request, none from a cache;
      ``sent``: the same files as the server sent them (bytes and Content-Encoding);
    - ``widths``: its width against the screen's on the phone, and then with the same page turned into a
      tablet's screen (820×1180, a reader who turns a tablet; the layout is measured afresh).

    Something that keeps the page from getting ready is a problem of the page, not an error of the visit.
    """
    report = PageReport(base + path)
    context = browser.new_context(viewport=dict(zip(("width", "height"), DEVICES["phone"])), color_scheme="light",
                                  has_touch=True, is_mobile=False)
    page = context.new_page()
    _watch(page, report, base)
    prefix = urlsplit(base).path
    files: dict[str, int] = {}

    def count(request):
        url = urlsplit(request.url)
        if url.path.startswith(prefix):
            file = folder / unquote(url.path[len(prefix):])
            files[file.relative_to(folder).as_posix()] = file.stat().st_size if file.is_file() else 0

    page.on("requestfinished", count)
    sent: dict[str, list] = {}

    def answered(response):
        url = urlsplit(response.url)
        if url.path.startswith(prefix) and response.status == 200:
            headers = response.headers
            sent[unquote(url.path[len(prefix):])] = [int(headers.get("content-length", -1)),
                                                     headers.get("content-encoding", "")]

    page.on("response", answered)
    try:
        page.goto(report.url, wait_until="load")
        for condition in SET_UP:
            page.wait_for_function(condition)
        wait_for_math(page)
        measure_width(page, report, "phone")  # where a page that math widens is widest
        ready = time.monotonic()
        page.wait_for_function(WIDGETS_DRAWN, timeout=15000)
        page.wait_for_load_state("networkidle")
        report.files = dict(files)
        report.sent = {path: sent[path] for path in files if path in sent}
        late = settle_ms / 1000 - (time.monotonic() - ready)  # errors that come late have had settle_ms to come
        if late > 0:
            page.wait_for_timeout(late * 1000)
        _count_math(page, report)
        measure_width(page, report, "phone")
        page.evaluate(OPEN_TOGGLES)
        wait_for_math(page)
        report.formula_problems = page.evaluate(FORMULA_PROBLEMS)
        measure_width(page, report, "phone")
        page.set_viewport_size(dict(zip(("width", "height"), DEVICES["tablet"])))
        page.evaluate(NEXT_FRAME)
        measure_width(page, report, "tablet")
    except PlaywrightError as error:
        report.files = report.files or dict(files)
        report.page_errors.append(f"the page did not get ready: {str(error).splitlines()[0]}")
    report.final_url = page.url
    # What the page met until now: what closing it cuts short is no problem of the page.
    seen = list(report.blocked), list(report.failed), list(report.console_errors), list(report.page_errors)
    context.close()
    report.blocked, report.failed, report.console_errors, report.page_errors = seen
    return _each_once(report)


def editions(html_dir: Path) -> dict[str, Path]:
    """The editions of a build, {Sphinx language: its HTML folder}: English in ``html_dir`` itself, the
    others in their folders below it (``course_editions`` in _config.yml), those that were built."""
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "_config.yml").read_text(encoding="utf-8"))
    listed = config["sphinx"]["config"]["course_editions"]
    found = {language: html_dir / settings["path"] if settings["path"] else html_dir for language, settings in listed.items()}
    return {language: folder for language, folder in found.items() if (folder / "index.html").is_file()}


def pages_of(html_dir: Path) -> list[str]:
    """Every HTML page of one edition of a build, as paths relative to its folder (the vendored scripts'
    folder and the other editions' folders excluded)."""
    others = {folder.name for folder in editions(html_dir).values() if folder != html_dir}
    return sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if "_static" not in p.relative_to(html_dir).parts and p.relative_to(html_dir).parts[0] not in others
    )


def host_of(url: str) -> str:
    return urlsplit(url).netloc


def build_fixture_book(folder: Path, title: str, pages: dict[str, Path]) -> Path:
    """Build, with `make book`, a throwaway book whose chapters are the fixture ``pages`` ({stem: page}, each as
    book/<stem>.md); return its HTML folder."""
    root = Path(__file__).resolve().parents[1]
    (folder / "book").mkdir(parents=True)
    shutil.copy2(root / "_config.yml", folder / "_config.yml")
    shutil.copytree(root / "book" / "_ext", folder / "book" / "_ext")
    for stem, page in pages.items():
        shutil.copy2(page, folder / "book" / f"{stem}.md")
    (folder / "book" / "index.md").write_text(f"# {title}\n")
    chapters = "".join(f"  - file: book/{stem}\n" for stem in pages)
    (folder / "_toc.yml").write_text(f"format: jb-book\nroot: book/index\nchapters:\n{chapters}")
    (folder / "web").symlink_to(root / "web")
    result = subprocess.run(["make", "--no-print-directory", "-C", str(root), "book", f"BOOK={folder}"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return folder / "_build" / "html"


# The widget tests' pages, in one throwaway book: book/widgets.html (an anywidget counter),
# book/alignment.html (alignment explorers), book/a11y.html (chapter 4's playground and an explorer).
WIDGET_PAGES = {"widgets": "widget-page.md", "alignment": "alignment-page.md", "a11y": "a11y-widgets.md"}


def shared_widget_book(shared: Path) -> Path:
    """The book of ``WIDGET_PAGES``, built once in the folder ``shared`` by whichever test process needs it
    first, while the others wait for it (a file lock); return its HTML folder."""
    import fcntl

    fixtures = Path(__file__).resolve().parent / "fixtures"
    folder = shared / "widget-book"
    with open(shared / "widget-book.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        html = folder / "_build" / "html"
        if not (html / "index.html").is_file():  # not built, or a build that failed: build it (again)
            shutil.rmtree(folder, ignore_errors=True)
            build_fixture_book(folder, "Widget test book", {stem: fixtures / page for stem, page in WIDGET_PAGES.items()})
        return html


@contextlib.contextmanager
def reader(browser, base: str, path: str, device: str = "phone", scheme: str = "light", touch: bool | None = None,
           on_request_finished=None):
    """A page as a reader on ``device`` with ``scheme`` sees it; on leaving, nothing may have failed.
    ``on_request_finished(request)``, if given, hears every request of the page from its first."""
    width, height = DEVICES[device]
    touch = device in NARROW if touch is None else touch
    context = browser.new_context(
        viewport={"width": width, "height": height}, color_scheme=scheme, has_touch=touch, is_mobile=False
    )
    page = context.new_page()
    problems: list[str] = []
    blocked = block_outside(page, lambda url: _inside(url, base))
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    # A request cut short because the reader moved on (net::ERR_ABORTED: the favicon of a page left at
    # once) is no missing file; a missing one fails with its own error, or answers 404.
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} ({r.failure})")
            if _inside(r.url, base) and "ERR_ABORTED" not in (r.failure or "") else None)
    if on_request_finished is not None:
        page.on("requestfinished", on_request_finished)
    page.goto(base + path, wait_until="load")
    # The theme applies the colour scheme, and our script has set up the page, once both have run.
    page.wait_for_function(f"document.documentElement.dataset.theme === '{scheme}'")
    page.wait_for_function("document.querySelector('.primary-toggle[aria-controls]') !== null")
    try:
        yield page
    finally:
        context.close()
    assert blocked == [], blocked
    assert problems == [], problems
