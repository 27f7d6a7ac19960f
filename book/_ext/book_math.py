"""Sphinx extension: the book's math is drawn at build time, so that no page loads MathJax.

Sphinx writes each formula as TeX for MathJax to typeset in the reader's browser
(``<span class="math">\\(…\\)</span>``, ``<div class="math">\\[…\\]</div>``); MathJax's runtime is 1.1 MB,
and its formulas were keyboard stops. At ``build-finished`` this extension collects the formulas of
every page written in this build, has ``web/typeset-formulas.js`` (Node and the MathJax that
``make assets`` installs, the code that also typesets the grader's feedback pages, ``web/mathjax-svg.js``)
draw them all in one run as SVG, and writes each into its page in place of its TeX. Each keeps a copy of
itself in MathML (``<mjx-assistive-mml>``, visually hidden) that screen readers read; the drawing is
``aria-hidden``. That MathML is written inside a ``<noscript class="course-mml">``: while a page loads, a
browser that runs scripts reads it as text, neither styling it nor laying it out (on chapter 4, about a
quarter of the work of showing the page), and ``course-reader.js`` puts it in place, the formulas near the
screen first, the others a few at a time when the browser is idle. A browser without scripts shows it at
once.

The formulas draw their characters from the glyphs' paths, which each page carries once
(a hidden ``<svg id="course-math-glyphs">`` at its end), not once per formula. The TeX settings are those the runtime had (``mathjax3_config``), so the formulas look
the same.

Strict: a formula MathJax cannot typeset (a TeX error, an unknown command), Node missing, or TeX left in
a page afterwards is a Sphinx warning, an error under ``-W``: the build never ships raw TeX.

The stylesheet the drawings need (``_static/course-math.css``, 2.5 KB, from MathJax) is linked on every
page, and MathJax's scripts (``sphinx.ext.mathjax`` adds them to pages with math) are removed from all.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

WEB = Path(__file__).resolve().parents[2] / "web"
TYPESETTER = WEB / "typeset-formulas.js"
STYLESHEET = "course-math.css"

# A formula as Sphinx writes it for MathJax: the element, then its TeX between \( \) or \[ \].
MATH_ELEMENT = re.compile(r'<(span|div) class="math notranslate nohighlight"([^>]*)>(.*?)</\1>', re.S)
DELIMITED = re.compile(r"\\\((.*?)\\\)|\\\[(.*?)\\\]", re.S)


class TypesetError(Exception):
    """Node or MathJax could not run at all."""


def typeset_formulas(formulas: list[tuple[str, bool]], tex_settings: dict | None = None) -> dict:
    """Draw ``formulas`` ((TeX, display?) pairs) with one run of ``web/typeset-formulas.js``.

    Returns its answer: ``html`` (one ``<mjx-container>`` per formula), ``errors`` and ``stylesheet``."""
    node = shutil.which("node")
    if node is None:
        raise TypesetError("Node.js is not installed (the book's math is typeset with it: install nodejs)")
    if not (WEB / "node_modules" / "mathjax").is_dir():
        raise TypesetError("web/node_modules has no MathJax: run `make assets` (npm ci in web/)")
    request = {"tex": tex_settings or {}, "formulas": [{"tex": tex, "display": display} for tex, display in formulas]}
    run = subprocess.run([node, str(TYPESETTER)], input=json.dumps(request), capture_output=True, text=True,
                         encoding="utf-8", timeout=1800)
    if run.returncode not in (0, 1):
        raise TypesetError(f"web/typeset-formulas.js failed ({run.returncode}): {run.stderr.strip()[-2000:]}")
    return json.loads(run.stdout)


def formulas_of(page: str) -> list[tuple[str, bool]]:
    """The formulas of a written page that are still TeX, in order: (TeX, display?)."""
    found = []
    for element in MATH_ELEMENT.finditer(page):
        for formula in DELIMITED.finditer(element.group(3)):
            found.append(_formula(formula))
    return found


def _formula(match: re.Match) -> tuple[str, bool]:
    """(TeX, display?) of a DELIMITED match."""
    display = match.group(1) is None
    return html.unescape(match.group(2) if display else match.group(1)), display


GLYPH_USE = re.compile(r'xlink:href="#(MJX-TEX-[^"]+)"')
GLYPHS_ID = "course-math-glyphs"
_GLYPH_BLOCK = re.compile(rf'<svg id="{GLYPHS_ID}"[^>]*>.*?</svg>\n?', re.S)
_BODY_END = re.compile(r"</body>", re.I)


ASSISTIVE_MATHML = re.compile(r"<mjx-assistive-mml\b.*?</mjx-assistive-mml>", re.S)
MATHML_HOLDER = "course-mml"


def mathml_held(formula: str) -> str:
    """A drawn formula with its MathML in a ``<noscript>``, for the reader's script to put in place (left as it
    is in the odd formula whose text would end the ``<noscript>`` early)."""

    def held(mathml: re.Match) -> str:
        if "</noscript" in mathml.group(0).lower():
            return mathml.group(0)
        return f'<noscript class="{MATHML_HOLDER}">{mathml.group(0)}</noscript>'

    return ASSISTIVE_MATHML.sub(held, formula, count=1)


def drawn(page: str, drawing: dict[tuple[str, bool], str], glyphs: dict[str, str]) -> str:
    """``page`` with the TeX of each of its formulas replaced by its drawing (from ``drawing``), and the
    paths of the glyphs its formulas use (from ``glyphs``) once, in a hidden ``<svg>`` at its end."""

    def element(match: re.Match) -> str:
        inner = DELIMITED.sub(lambda formula: drawing[_formula(formula)], match.group(3))
        return f'<{match.group(1)} class="math notranslate nohighlight"{match.group(2)}>{inner}</{match.group(1)}>'

    page = _GLYPH_BLOCK.sub("", MATH_ELEMENT.sub(element, page))
    used = dict.fromkeys(GLYPH_USE.findall(page))
    if not used:
        return page
    block = (f'<svg id="{GLYPHS_ID}" style="display: none" aria-hidden="true" xmlns="http://www.w3.org/2000/svg">'
             f'<defs>{"".join(glyphs[name] for name in used)}</defs></svg>\n')
    end = _BODY_END.search(page)
    return page[:end.start()] + block + page[end.start():] if end else page + block


def raw_tex_left(page: str) -> list[str]:
    """The math elements of a page that still hold TeX (or nothing drawn)."""
    return [element.group(0)[:200] for element in MATH_ELEMENT.finditer(page)
            if DELIMITED.search(element.group(3)) or "<mjx-container" not in element.group(3)]


def _tex_settings(app: Sphinx) -> dict:
    return dict((app.config.mathjax3_config or {}).get("tex", {}))


def _stamp() -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in (
        WEB / "package-lock.json", WEB / "mathjax-svg.js", TYPESETTER, Path(__file__)))).hexdigest()


def write_stylesheet(app: Sphinx) -> None:
    """Write ``_static/course-math.css`` (MathJax's styles for its SVG output), unless it is up to date."""
    if app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / STYLESHEET
    stamp = f"/* {_stamp()} */\n"
    if target.is_file() and target.read_text(encoding="utf-8").startswith(stamp):
        return
    try:
        answer = typeset_formulas([], _tex_settings(app))
    except TypesetError as error:
        logger.warning("book_math: %s", error, type="book_math")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(stamp + "/* The styles of the book's formulas, drawn as SVG by MathJax (book/_ext/book_math.py). */\n"
                      + answer["stylesheet"], encoding="utf-8")


def drop_mathjax(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Remove MathJax's scripts (its runtime and its configuration) from every page."""
    context["script_files"] = [
        script for script in context.get("script_files", [])
        if "mathjax" not in str(getattr(script, "filename", script) or "").lower()
        and "window.MathJax" not in str(getattr(script, "attributes", {}).get("body", ""))
    ]


def typeset_pages(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    pages = {}
    for path in sorted(outdir.rglob("*.html")):
        if "_static" in path.relative_to(outdir).parts:
            continue
        text = path.read_text(encoding="utf-8")
        if formulas_of(text):
            pages[path] = text
    formulas = list(dict.fromkeys(formula for text in pages.values() for formula in formulas_of(text)))
    if formulas:
        try:
            answer = typeset_formulas(formulas, _tex_settings(app))
        except TypesetError as error:
            logger.warning("book_math: %s", error, type="book_math")
            return
        failed = {error["index"]: error["message"] for error in answer["errors"]}
        for index, message in failed.items():
            tex, display = formulas[index]
            where = sorted(path.relative_to(outdir).as_posix() for path, text in pages.items()
                           if (tex, display) in formulas_of(text))
            logger.warning("book_math: cannot typeset %r (%s) in %s", tex, message, ", ".join(where), type="book_math")
        if failed:
            return
        drawing = {formula: mathml_held(html) for formula, html in zip(formulas, answer["html"])}
        for path, text in pages.items():
            partial = path.with_name(path.name + ".partial")
            partial.write_text(drawn(text, drawing, answer["glyphs"]), encoding="utf-8")
            partial.replace(path)
    for path in sorted(outdir.rglob("*.html")):
        if "_static" in path.relative_to(outdir).parts:
            continue
        for element in raw_tex_left(path.read_text(encoding="utf-8")):
            logger.warning("book_math: %s still holds TeX: %s", path.relative_to(outdir).as_posix(), element,
                           type="book_math")
    logger.info("book_math: %d formula(s) typeset in %d page(s)", len(formulas), len(pages))


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", write_stylesheet)
    app.add_css_file(STYLESHEET, priority=400)
    # After sphinx.ext.mathjax has added MathJax to the page.
    app.connect("html-page-context", drop_mathjax, priority=900)
    app.connect("build-finished", typeset_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
