"""Feedback pages work offline: their math typeset to SVG in the page (shown with JavaScript off), or
MathJax 3 inlined in place of nbgrader's CDN loader where that cannot run (checked in headless Chromium
with every request off the file system blocked); the page for an ungradable submission; the summary line."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from traitlets.config import Config

from attention_course.grading import feedback_pages
from attention_course.grading.feedback import AWAITING_FEEDBACK
from attention_course.grading.feedback_pages import count_line, offline_math, problem_page
from browser_audit import block_outside, chromium

MARKDOWN = "$\\alpha^2$ and $$\\sum_i x_i$$"
INLINED = 'id="attention-course-mathjax"'


def nbgrader_feedback_page(markdown: str = MARKDOWN) -> str:
    """A page rendered as `nbgrader generate_feedback` renders one (its template, its configuration)."""
    import nbgrader

    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    config = Config()
    config.HTMLExporter.template_name = "feedback"
    config.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
    config.HTMLExporter.extra_template_paths = [
        str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    exporter = HTMLExporter(config=config)
    exporter.register_preprocessor(CSSHTMLHeaderPreprocessor(enabled=True), enabled=True)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    resources = {"nbgrader": {"notebook": "soft-hard", "score": 3.0, "max_score": 5.0, "late_penalty": 0}}
    page, _ = exporter.from_notebook_node(notebook, resources=resources)
    return page


@pytest.fixture(scope="module")
def nbgrader_page() -> str:
    return nbgrader_feedback_page()


@pytest.fixture(scope="module")
def offline_page(nbgrader_page) -> str:
    return offline_math(nbgrader_page)


class _Scripts(HTMLParser):
    """The <script> elements as a browser's parser splits them: (attributes, text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._open = dict(attrs)
            self.scripts.append((self._open, ""))

    def handle_data(self, data):
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._open = None


def scripts_of(page: str) -> list[tuple[dict[str, str | None], str]]:
    parser = _Scripts()
    parser.feed(page)
    parser.close()
    return parser.scripts


def head_of(page: str) -> str:
    return page[: re.search(r"</head\s*>", page, re.IGNORECASE).start()]


# --- offline_math --------------------------------------------------------------------------------------

def test_nbgrader_pages_load_mathjax_2_from_a_cdn(nbgrader_page):
    # What offline_math exists to replace; if nbgrader stops doing this, these tests must be revisited.
    sources = [attrs.get("src") or "" for attrs, _ in scripts_of(nbgrader_page)]
    assert any("cdnjs.cloudflare.com" in src and "mathjax" in src.lower() for src in sources)
    assert "MathJax.Hub.Config" in nbgrader_page


def test_remote_mathjax_and_its_version_2_config_are_gone(offline_page):
    scripts = scripts_of(offline_page)
    sources = [attrs["src"] for attrs, _ in scripts if attrs.get("src")]
    assert not [src for src in sources if re.match(r"(?:[a-z]+:)?//", src, re.IGNORECASE)], sources
    assert "cdnjs" not in offline_page
    assert "MathJax.Hub.Config" not in offline_page
    assert "text/x-mathjax-config" not in offline_page


def test_mathjax_3_is_inlined_once_in_the_head_after_its_config(offline_page):
    bundle = feedback_pages.mathjax_script().read_text(encoding="utf-8")
    scripts = scripts_of(offline_page)
    inlined = [text for attrs, text in scripts if attrs.get("id") == "attention-course-mathjax"]
    assert inlined == [bundle]  # the browser's parser sees the whole bundle in one element
    head = head_of(offline_page)
    assert offline_page.count(INLINED) == 1 and INLINED in head
    config = head.index('id="attention-course-mathjax-config"')
    assert config < head.index(INLINED)
    [configured] = [text for attrs, text in scripts if attrs.get("id") == "attention-course-mathjax-config"]
    settings = json.loads(configured.strip().removeprefix("window.MathJax = ").removesuffix(";"))
    assert settings["tex"]["inlineMath"] == [["$", "$"], ["\\(", "\\)"]]  # Jupyter's delimiters
    assert MARKDOWN.replace("\\", "") in offline_page.replace("\\", "")  # the math itself is untouched


def test_offline_math_is_idempotent(offline_page):
    assert offline_math(offline_page) == offline_page


def test_a_page_without_a_mathjax_loader_still_gets_mathjax_once():
    page = "<!DOCTYPE html>\n<html><head><title>t</title></head><body><p>$x$</p></body></html>"
    once = offline_math(page)
    assert once.count(INLINED) == 1 and INLINED in head_of(once)
    assert offline_math(once) == once


def test_a_page_without_a_head_gets_mathjax_after_its_doctype():
    once = offline_math("<!DOCTYPE html>\n<p>$x$</p>")
    assert once.startswith("<!DOCTYPE html>")
    assert once.index(INLINED) < once.index("<p>$x$</p>")
    assert offline_math(once) == once


def test_only_mathjax_scripts_are_removed():
    page = ('<html><head><script src="https://example.org/app.js"></script>'
            '<script src="//cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js" async></script>'
            "<script>var keep = 1;</script></head><body></body></html>")
    result = offline_math(page)
    assert [attrs.get("src") for attrs, _ in scripts_of(result) if attrs.get("src")] == ["https://example.org/app.js"]
    assert "var keep = 1;" in result


def test_script_end_tags_in_the_bundle_cannot_end_its_element(tmp_path, monkeypatch):
    bundle = tmp_path / "tex-svg.js"
    bundle.write_text('var a = "</script><script>alert(1)</SCRIPT >"; /* <!-- <script> */ var b = 2;\n')
    monkeypatch.setattr(feedback_pages, "MATHJAX_BUNDLE", bundle)
    page = offline_math("<html><head></head><body></body></html>")
    inlined = [text for attrs, text in scripts_of(page) if attrs.get("id") == "attention-course-mathjax"]
    assert len(inlined) == 1 and inlined[0].rstrip().endswith("var b = 2;")
    assert not re.search(r"<\/?script", inlined[0], re.IGNORECASE)
    assert len(scripts_of(page)) == 2  # the config and the bundle, nothing split off


def test_a_missing_bundle_says_to_run_make_book(tmp_path, monkeypatch):
    monkeypatch.setattr(feedback_pages, "MATHJAX_BUNDLE", tmp_path / "absent" / "tex-svg.js")
    with pytest.raises(FileNotFoundError, match="make book"):
        offline_math("<html><head></head><body></body></html>")


@pytest.mark.browser
def test_math_renders_offline_in_chromium(offline_page, tmp_path):
    page_file = tmp_path / "soft-hard.html"
    page_file.write_text(offline_page, encoding="utf-8")
    errors: list[str] = []
    with chromium() as browser:
        context = browser.new_context()
        page = context.new_page()
        outside = block_outside(page, lambda url: url.startswith("file://"))
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_file.as_uri(), wait_until="load")
        page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=15000)
        page.evaluate("MathJax.startup.promise")
        rendered = page.evaluate("document.querySelectorAll('mjx-container svg').length")
        containers = page.evaluate("document.querySelectorAll('mjx-container').length")
        display = page.evaluate("document.querySelectorAll('mjx-container[display=\"true\"]').length")
        math_errors = page.evaluate("document.querySelectorAll('mjx-merror').length")
        context.close()
    assert containers == rendered == 2  # $\alpha^2$ inline, $$\sum_i x_i$$ displayed
    assert display == 1
    assert math_errors == 0
    assert outside == []
    assert errors == []


# --- typeset: the math drawn into the page, no script ---------------------------------------------------

@pytest.fixture(scope="module")
def typeset_page(tmp_path_factory) -> Path:
    page = tmp_path_factory.mktemp("typeset") / "soft-hard.html"
    page.write_text(nbgrader_feedback_page(MARKDOWN + "\n\n`$not math$` and \\boldsymbol{w}: $\\boldsymbol{w}$"),
                    encoding="utf-8")
    assert feedback_pages.typeset([page]) == []
    return page


def test_typeset_draws_the_math_as_svg_and_loads_no_mathjax(typeset_page):
    html = typeset_page.read_text(encoding="utf-8")
    assert html.count("<mjx-container") == 3 and "<svg" in html  # $\alpha^2$, $$\sum_i x_i$$, $\boldsymbol{w}$
    assert "$\\alpha^2$" not in html and "$not math$" in html  # code is left alone
    assert not any("mathjax" in (attrs.get("src") or "").lower() or "MathJax" in text
                   for attrs, text in scripts_of(html))
    assert "cdnjs" not in html and INLINED not in html
    assert len(html.encode()) < 400_000  # a page, not a page plus a 2 MB script


def test_every_page_of_a_batch_gets_the_stylesheet_its_math_needs(tmp_path):
    # (MathJax's SVG output made its stylesheet once: the first page of a batch had it, the others not,
    # and their formulas lost their sizes and colours)
    pages = [tmp_path / f"student-{n}.html" for n in range(3)]
    for page in pages:
        page.write_text(nbgrader_feedback_page(MARKDOWN), encoding="utf-8")
    assert feedback_pages.typeset(pages) == []
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert html.count('id="MJX-SVG-styles"') == 1 and "<mjx-container" in html, page.name


def test_typeset_without_node_leaves_the_pages_for_inlining(tmp_path, monkeypatch):
    page = tmp_path / "p.html"
    page.write_text(nbgrader_feedback_page(), encoding="utf-8")
    monkeypatch.setattr(feedback_pages.shutil, "which", lambda name: None)
    assert feedback_pages.typeset([page]) == [page]
    assert "cdnjs" not in page.read_text(encoding="utf-8")  # the remote loader is gone either way


@pytest.mark.browser
def test_typeset_math_shows_with_javascript_off(typeset_page):
    with chromium() as browser:
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        outside = block_outside(page, lambda url: url.startswith("file://"))
        page.goto(typeset_page.as_uri(), wait_until="load")
        drawn = page.locator("mjx-container svg")
        sizes = [drawn.nth(i).bounding_box()["width"] for i in range(drawn.count())]
        context.close()
    assert len(sizes) == 3 and all(width > 5 for width in sizes)  # drawn, with a width, without any script
    assert outside == []


# --- problem_page --------------------------------------------------------------------------------------

HOSTILE = '<script>alert("x")</script>'


@pytest.fixture(scope="module")
def problem() -> str:
    return problem_page(
        "soft-hard",
        "Zoë Ångström",
        [f"no notebook named soft-hard.ipynb; got {HOSTILE}", "the file is not a notebook & can't be read"],
        ["李雷.ipynb", f"{HOSTILE}.ipynb", "notes.txt"],
    )


def test_problem_page_escapes_what_students_provided(problem):
    assert "<script" not in problem
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;.ipynb" in problem
    assert "got &lt;script&gt;" in problem
    assert "not a notebook &amp; can&#x27;t be read" in problem
    assert "李雷.ipynb" in problem and "Zoë Ångström" in problem


def test_problem_page_says_what_happened_and_what_to_do(problem):
    assert "Score: 0 points" in problem
    assert "could not be graded" in problem
    assert "File &gt; Download" in problem
    assert "<code>soft-hard.ipynb</code>" in problem
    assert "<code>attention-course check soft-hard.ipynb</code>" in problem
    assert "instructor" in problem
    assert "notes.txt" in problem


def test_problem_page_is_a_standalone_accessible_page(problem):
    assert problem.startswith("<!DOCTYPE html>")
    assert '<html lang="en">' in problem
    assert '<meta charset="utf-8">' in problem
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in problem
    assert re.search(r"<title>soft-hard: [^<]+</title>", problem)
    assert "prefers-color-scheme: dark" in problem
    assert not re.search(r"\b(?:src|href)\s*=|url\(|@import|https?:", problem)  # nothing to fetch


def test_problem_page_escapes_the_assignment_and_handles_empty_lists():
    page = problem_page("a&b<i>", "s", [], [])
    assert "<i>" not in page and "a&amp;b&lt;i&gt;.ipynb" in page
    assert "No files." in page and "<li></li>" not in page


# --- count_line ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("written", "skipped", "line"), [
    (28, {"never graded": 1, "no submission": 1},
     "feedback written for 28 students; skipped 2 students: never graded: 1, no submission: 1"),
    (30, {}, "feedback written for 30 students"),
    (30, {"never graded": 0}, "feedback written for 30 students"),
    (1, {"no submission": 3, "never graded": 0}, "feedback written for 1 student; skipped 3 students: no submission: 3"),
    (0, {"no submission": 2}, "feedback written for 0 students; skipped 2 students: no submission: 2"),
    # two students whose written answers await: the count is of students, not of answers
    (3, {AWAITING_FEEDBACK: 2}, f"feedback written for 3 students; skipped 2 students: {AWAITING_FEEDBACK}: 2"),
])
def test_count_line(written, skipped, line):
    assert count_line(written, skipped) == line
