"""Sphinx extension: the book for every reader and device — navigation that opens, phone-sized pages,
figures to enlarge, Chinese text marked as Chinese, a favicon.

- ``reader_static/course-reader.js`` (every page):
  - The ☰ ("Site navigation") and "On this page" buttons work on phones, tablets and desktops.
    With sphinx-book-theme 1.3 on pydata-sphinx-theme 0.17 they do nothing: both themes bind their
    handlers to the *first* ``.primary-toggle`` of the page, a hidden navbar button, not to the one
    the reader sees (pydata-sphinx-theme#2451). The script handles clicks on every toggle itself: on
    a wide screen (≥ 992 px) ☰ hides or shows the sidebar; on a narrow one each button opens its
    sidebar as a modal dialog that Escape, a tap outside or its Close button dismisses, after which
    focus returns to the button.
  - Formulas wider than the column (display ones, and inline ones, then put on a line of their own)
    scroll sideways inside their own box, with a shadow at the edge that has more, and only such a box
    can be focused (and scrolled from the keyboard); the formulas themselves are no keyboard stops.
  - Every control shows a focus ring when the keyboard reaches it.
  - Every figure of the text can be enlarged: the image is a link to itself, and a tap opens it at its
    full resolution in a dialog (scrollable on a phone), so that its labels are as large as when it was
    drawn (the course draws at 100 dpi with 8-10 pt text: 11-14 px).
  - The theme's search buttons, which show "Search Ctrl + K", are named so too (label in name).
- ``reader_static/course-reader.css`` (every page): the styles of the above, and inline code that wraps
  instead of pushing the page sideways.
- Text in Chinese is marked ``lang="zh"`` in the English edition (in the Chinese one the page is) (a screen reader reads it in Chinese; the browser picks a
  Chinese font): every run of Chinese characters in the prose, headings, captions and tables becomes a
  ``<span lang="zh">``. Code, math and raw output are left as they are.
- Images in a page's text load lazily, decode asynchronously and carry their width and height
  (``lazy_images``): a phone fetches only the figures near where the reader is, and nothing moves as
  they arrive.
- ``lighter_head``: no sphinx-design or sphinx-thebe files where a page uses neither; script files load
  without holding up the first paint (``defer``), except on the search page.
- ``icon_font``: the theme's icon font cut down to the icons the book shows (153 KB to a few).
- ``html_favicon``: ``reader_static/favicon.svg``, unless the book sets its own.
- ``templates/layout.html``: the theme's page without Font Awesome's 1.4 MB script (the theme's
  stylesheet draws the icons from the web font) and, except on the search page, without the search
  scripts and index (see ``course_search.py``). The script's tag carries a digest that only the theme's
  ``webpack-macros.html`` knows; if it cannot be found there (another theme release), the build warns.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util import logging

logger = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("reader_static")
TEMPLATES = Path(__file__).with_name("templates")
_FONTAWESOME_TAG = re.compile(r"""<script defer src="\{\{ pathto\('_static/scripts/fontawesome\.js', 1\) \}\}\?digest=([0-9a-f]+)"></script>""")

# Chinese characters and the CJK and full-width punctuation that belongs to Chinese sentences.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_PUNCTUATION = "\u3000-\u303f\uff00-\uffef\u2018\u2019\u201c\u201d\u2026\u00b7"
_CJK_RUN = re.compile(f"[{HAN}][{HAN}{CJK_PUNCTUATION}]*(?:[ 0-9]*[{HAN}{CJK_PUNCTUATION}]+)*")
_LEADING_PUNCTUATION = re.compile(f"[{CJK_PUNCTUATION}]+$")

# Text inside these is never marked: code, math and raw HTML keep their own markup.
UNMARKED = (nodes.FixedTextElement, nodes.literal, nodes.math, nodes.math_block, nodes.raw)


class chinese(nodes.inline):
    """A run of Chinese text (written as ``<span lang="zh">`` in HTML, as plain text elsewhere)."""


def visit_chinese_html(translator, node: chinese) -> None:
    translator.body.append(translator.starttag(node, "span", "", lang="zh"))


def depart_chinese_html(translator, node: chinese) -> None:
    translator.body.append("</span>")


def split_chinese(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into pieces, each with whether it is Chinese; the pieces join back into ``text``."""
    pieces, at = [], 0
    for match in _CJK_RUN.finditer(text):
        start = match.start()
        # Opening CJK punctuation just before the run (「, （) belongs to it.
        lead = _LEADING_PUNCTUATION.search(text, at, start)
        if lead:
            start = lead.start()
        if start > at:
            pieces.append((text[at:start], False))
        pieces.append((text[start:match.end()], True))
        at = match.end()
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def _inside_unmarked(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, UNMARKED + (chinese,)):
            return True
        parent = parent.parent
    return False


def mark_chinese(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    # In the Chinese edition the whole page is lang="zh-CN" already.
    if app.builder.format != "html" or (app.config.language or "en").startswith("zh"):
        return
    for text in list(doctree.findall(nodes.Text)):
        if not _CJK_RUN.search(text) or _inside_unmarked(text):
            continue
        replacement = []
        for piece, is_chinese in split_chinese(str(text)):
            replacement.append(chinese(piece, nodes.Text(piece)) if is_chinese else nodes.Text(piece))
        text.parent.replace(text, replacement)


def files_hash(*roots: Path) -> str:
    """A digest of the files ``roots`` are or hold (names and contents), for a config value that changes
    with them: Sphinx copies static files, and writes pages, only when it writes pages."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file():
                digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def add_defaults(app: Sphinx, config: Config) -> None:
    # Sphinx copies static files only when it writes pages; a config value that changes with them makes
    # it write every page when only the script or the stylesheet changed.
    # This file too: what it does to a page (lazy images, deferred scripts, the icon font) changes with it.
    config.reader_ux_static_hash = files_hash(STATIC, TEMPLATES, Path(__file__))
    config.html_static_path = list(config.html_static_path) + [str(STATIC)]
    if not config.html_favicon:
        config.html_favicon = str(STATIC / "favicon.svg")
    config.templates_path = [str(TEMPLATES)] + list(config.templates_path)


def fontawesome_digest(app: Sphinx) -> None:
    """Find the digest of the theme's Font Awesome script tag, which templates/layout.html removes."""
    app.reader_ux_fontawesome_digest = None
    if app.builder.format != "html":
        return
    for theme_dir in app.builder.theme.get_theme_dirs():
        macros = Path(theme_dir) / "static" / "webpack-macros.html"
        if macros.is_file():
            found = _FONTAWESOME_TAG.search(macros.read_text(encoding="utf-8"))
            if found:
                app.reader_ux_fontawesome_digest = found.group(1)
                return
    logger.warning(
        "reader_ux: the theme's Font Awesome script tag was not found, so every page loads its 1.4 MB "
        "(see book/_ext/templates/layout.html)",
        type="reader_ux",
    )


# The theme's icons that the book's pages show (tests/test_every_page.py checks that every icon a page uses
# is in the subset): the navbar's, the sidebars', the download and full-screen buttons', the theme's own.
ICONS = ["bars", "magnifying-glass", "chevron-down", "chevron-right", "chevron-up", "list", "sun", "moon",
         "circle-half-stroke", "expand", "compress", "arrow-up", "file", "file-pdf", "file-code", "download",
         "outdent", "indent", "angle-right", "angle-left", "angle-down", "xmark", "copy", "check", "print",
         "house", "link"]
ICON_SUBSET = "course-icons.woff"
ICON_CSS = "course-icons.css"
_ICON_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+:before,?)+)\{content:"\\(f[0-9a-f]{3})"\}')
_ICON_LITERAL = re.compile(r'content:\s*"(?:\\(f[0-9a-f]{3}) ?|([\ue000-\uf8ff]))"')
_ICON_VARIABLE = re.compile(r'--pst-icon-[a-z-]+:\s*"(?:\\(f[0-9a-f]{3}) ?|([\ue000-\uf8ff]))"')


def icon_codepoints(theme_css: str, names: list[str]) -> set[int]:
    """The code points of Font Awesome's solid font that the theme's stylesheet (``theme_css``) draws itself
    (its ``--pst-icon-*`` variables, its ``content:`` glyphs) and those of the icon classes ``names``."""
    classes = {}
    for rule in _ICON_RULE.finditer(theme_css):
        for selector in rule.group(1).split(","):
            if selector:
                classes[selector.removeprefix(".fa-").removesuffix(":before")] = int(rule.group(2), 16)
    theme_css_without_classes = _ICON_RULE.sub("", theme_css)
    points = {int(m.group(1), 16) if m.group(1) else ord(m.group(2))
              for pattern in (_ICON_LITERAL, _ICON_VARIABLE) for m in pattern.finditer(theme_css_without_classes)}
    return points | {classes[name] for name in names if name in classes}


def icon_font(app: Sphinx) -> None:
    """The theme's icon font, cut down to the icons the book shows: 153 KB of Font Awesome's solid font that
    every page fetched before its icons showed become a few KB (``_static/course-icons.woff``). The
    subset is declared after the theme's own face, for its code points only (``unicode-range``), so an
    icon outside it still comes, from the whole font, as before."""
    app.reader_ux_icon_points = set()
    if app.builder.format != "html":
        return
    static = None
    for theme_dir in app.builder.theme.get_theme_dirs():
        if (Path(theme_dir) / "static" / "styles" / "pydata-sphinx-theme.css").is_file():
            static = Path(theme_dir) / "static"
    if static is None:
        return
    font = static / "vendor" / "fontawesome" / "webfonts" / "fa-solid-900.ttf"
    points = icon_codepoints((static / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8"), ICONS)
    for theme_dir in app.builder.theme.get_theme_dirs():
        book_css = Path(theme_dir) / "static" / "styles" / "sphinx-book-theme.css"
        if book_css.is_file():
            points |= icon_codepoints(book_css.read_text(encoding="utf-8"), [])
    app.reader_ux_icon_points = points
    out = Path(app.outdir) / "_static"
    out.mkdir(parents=True, exist_ok=True)
    ranges = ",".join(f"U+{point:X}" for point in sorted(points))
    stamp = hashlib.sha256(font.read_bytes() + ranges.encode()).hexdigest()[:16]
    css = (f"/* Font Awesome's solid font (SIL OFL 1.1), cut down to the icons the book shows (reader_ux.icon_font). {stamp} */\n"
           f'@font-face{{font-display:block;font-family:"Font Awesome 6 Free";font-style:normal;font-weight:900;'
           f'src:url({ICON_SUBSET}?{stamp}) format("woff");unicode-range:{ranges}}}\n')
    if (out / ICON_CSS).is_file() and (out / ICON_CSS).read_text(encoding="utf-8") == css and (out / ICON_SUBSET).is_file():
        return
    from fontTools import subset

    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]
    options.name_IDs = ["*"]  # the licence and copyright notices stay in the font
    options.notdef_outline = True
    face = subset.load_font(str(font), options)
    cutter = subset.Subsetter(options)
    cutter.populate(unicodes=points)
    cutter.subset(face)
    subset.save_font(face, str(out / ICON_SUBSET), options)
    (out / ICON_CSS).write_text(css, encoding="utf-8")


def page_context(app: Sphinx, pagename, templatename, context, doctree) -> None:
    if app.reader_ux_fontawesome_digest:
        context["reader_ux_fontawesome_digest"] = app.reader_ux_fontawesome_digest
    if "body" in context and app.builder.format == "html":
        context["body"] = lazy_images(context["body"], image_sizes(app))


def lighter_head(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """No stylesheet or script of a component the page does not use (sphinx-design, thebe); and every script
    file a page loads in its head runs once the page is parsed (``defer``), in the same order, instead of
    holding up the first paint while each is fetched: they all wait for the document to be ready anyway
    (Sphinx's, the themes', the copy button's, the toggles', the tabs', the widget host). The search page
    keeps its scripts as they are (its index calls the search script as it loads)."""
    from sphinx.builders.html._assets import _JavaScript

    # sphinx-design's stylesheet (56 KB) and tab script, which Jupyter Book adds to every page, where the
    # page uses none of its components; sphinx-thebe's stylesheet, whose scripts offline_assets drops.
    if not re.search(r'class="[^"]*\bsd-', context.get("body", "")):
        context["css_files"] = [css for css in context.get("css_files", [])
                                if Path(str(getattr(css, "filename", css))).name != "sphinx-design.min.css"]
        context["script_files"] = [js for js in context.get("script_files", [])
                                   if Path(str(getattr(js, "filename", js) or "")).name != "design-tabs.js"]
    context["css_files"] = [css for css in context.get("css_files", [])
                            if Path(str(getattr(css, "filename", css))).name != "sphinx-thebe.css"]
    if context.get("course_search_page", pagename == "search"):
        return
    scripts = []
    for script in context.get("script_files", []):
        attributes = dict(getattr(script, "attributes", {}))
        if (isinstance(script, _JavaScript) and script.filename and not attributes.get("body")
                and not {"defer", "async", "type"} & set(attributes)):
            script = _JavaScript(script.filename, priority=script.priority, defer="defer", **attributes)
        scripts.append(script)
    context["script_files"] = scripts


_IMG = re.compile(r'<img\b((?:[^>"]|"[^"]*")*?)\s*/?>')
_SRC = re.compile(r'\ssrc="([^"]+)"')


def image_sizes(app: Sphinx) -> dict[str, tuple[int, int]]:
    """{file name in the build's _images: (width, height) in pixels} for the images of the pages written."""
    from sphinx.util.images import get_image_size

    sizes = {}
    for source, name in app.builder.images.items():
        size = get_image_size(str(Path(app.srcdir) / source))
        if size:
            sizes[name] = size
    return sizes


def lazy_images(body: str, sizes: dict[str, tuple[int, int]]) -> str:
    """Every image of a page's text is fetched when the reader scrolls near it (``loading="lazy"``), decoded
    off the main thread, and has its ``width`` and ``height`` (course-reader.css scales it with
    ``height: auto``), so that the page keeps its place while images arrive."""
    def one(match: re.Match) -> str:
        attributes = match.group(1)
        extra = ""
        if "loading=" not in attributes:
            extra += ' loading="lazy"'
        if "decoding=" not in attributes:
            extra += ' decoding="async"'
        src = _SRC.search(attributes)
        size = sizes.get(Path(src.group(1)).name) if src else None
        if size and "width=" not in attributes and "height=" not in attributes and "style=" not in attributes:
            extra += f' width="{size[0]}" height="{size[1]}"'
        return f"<img{attributes}{extra} />"

    return _IMG.sub(one, body)


def setup(app: Sphinx) -> dict:
    app.add_config_value("reader_ux_static_hash", "", "html", [str])
    app.add_node(chinese, html=(visit_chinese_html, depart_chinese_html))
    app.connect("config-inited", add_defaults)
    app.connect("builder-inited", fontawesome_digest)
    app.connect("builder-inited", icon_font)
    app.connect("html-page-context", page_context)
    # After every extension that adds or drops scripts (offline_assets: 900).
    app.connect("html-page-context", lighter_head, priority=950)
    app.add_css_file("course-reader.css")
    # After the theme's stylesheet, whose face for the same font it overrides where it has the icon.
    app.add_css_file(ICON_CSS)
    app.add_js_file("course-reader.js", loading_method="defer")
    # After glossary_links (priority 500), so that linked terms are marked too.
    app.connect("doctree-resolved", mark_chinese, priority=600)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
