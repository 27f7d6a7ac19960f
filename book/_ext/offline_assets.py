"""Sphinx extension: the built book serves its own scripts and fonts, and requests nothing from another host.

When the builder starts it copies the files the pages need into the output's ``_static/offline/``: the
book's own widget host (``widget_host.js`` beside this file), which runs the anywidget front ends
embedded in a page, and the licences of the npm packages whose output the pages carry (MathJax draws the
book's formulas at build time: ``book_math.py``; no page loads MathJax). Pages name the host relative to
themselves (``nb_ipywidgets_js`` in ``_config.yml``), and only pages with a widget load it. The copy is redone only when the npm lockfile, the host or this file
change.

Why not the Jupyter widgets HTML manager: with RequireJS it weighed 3.6 MB on every widget page, plus
icon fonts, to run two anywidget modules that need only ``get``/``set``/``on``/``save_changes``. The host
is 5 KB. So that no page silently shows an empty box, ``build-finished`` refuses (a Sphinx warning, an
error under ``-W``) any embedded widget that is not an anywidget.

At ``build-finished`` it also reads every written HTML page and reports, as a Sphinx warning, any
script, stylesheet, image or frame that would be fetched from another host or from a root-absolute path
(which breaks under a sub-path or ``file://``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

OUTPUT_FOLDER = Path("_static") / "offline"

# (npm package, files or folders inside it, where they go under _static/offline/): each with its licence.
# MathJax's SVG drawings are in the pages (book_math.py), its scripts are not.
NPM_FILES = [
    ("mathjax", [], "mathjax"),
]
WIDGET_HOST = Path(__file__).with_name("widget_host.js")
# The widget models a page may embed: anywidgets (with their layout, which the host ignores).
HOSTED_MODELS = {("anywidget", "AnyModel"), ("@jupyter-widgets/base", "LayoutModel")}


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def _licence_text(package_dir: Path, meta: dict) -> str:
    header = f"{meta['name']} {meta['version']} — licence: {meta.get('license', 'see package')}\n\n"
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE"):
        if (package_dir / name).is_file():
            return header + (package_dir / name).read_text(encoding="utf-8")
    return header + "(the package ships no licence file; its package.json names the licence above)\n"


def _stage(root: Path, vendor: Path) -> None:
    """Copy the vendored files from the project at ``root`` into the folder ``vendor``, unless they are there already."""
    node_modules = root / "web" / "node_modules"
    lockfile = root / "web" / "package-lock.json"
    if not node_modules.is_dir():
        raise ExtensionError(
            "offline_assets: web/node_modules is missing. Run `make assets` (npm ci in web/) "
            "before building the book, or build with `make book`, which does it for you."
        )
    stamp_text = hashlib.sha256(
        lockfile.read_bytes() + WIDGET_HOST.read_bytes() + Path(__file__).read_bytes()
    ).hexdigest()

    stamp = vendor / ".stamp"
    if stamp.is_file() and stamp.read_text() == stamp_text:
        return
    shutil.rmtree(vendor, ignore_errors=True)
    vendor.mkdir(parents=True)

    for package, items, target in NPM_FILES:
        package_dir = node_modules / package
        meta = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
        for item in items:
            src = package_dir / item
            if not src.exists():
                raise ExtensionError(f"offline_assets: {package} has no {item}; is web/node_modules up to date?")
            _copy(src, vendor / target / src.name)
        licence = vendor / "LICENSES" / f"{package.replace('/', '__')}.txt"
        licence.parent.mkdir(exist_ok=True)
        licence.write_text(_licence_text(package_dir, meta), encoding="utf-8")

    _copy(WIDGET_HOST, vendor / "widget-host.js")
    stamp.write_text(stamp_text)


def builder_inited(app: Sphinx) -> None:
    if app.builder.format == "html":
        _stage(Path(app.confdir), Path(app.outdir) / OUTPUT_FOLDER)


class _ResourceCollector(HTMLParser):
    """Collect the URLs a page makes the browser fetch by itself (not the links a reader may follow)."""

    FETCHING_LINK_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut icon", "manifest", "prefetch"}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in {"script", "img", "iframe", "audio", "video", "source", "embed"} and attrs.get("src"):
            self.urls.append((tag, attrs["src"]))
        elif tag == "link" and attrs.get("href"):
            rels = set((attrs.get("rel") or "").lower().split())
            if rels & self.FETCHING_LINK_RELS or (attrs.get("rel") or "").lower() in self.FETCHING_LINK_RELS:
                self.urls.append((tag, attrs["href"]))
        elif tag == "object" and attrs.get("data"):
            self.urls.append((tag, attrs["data"]))
        for key, value in attrs.items():
            if key.startswith("data-jupyter-widgets-cdn") and value:
                self.urls.append((f"{tag}[{key}]", value))


_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


def offending_urls(html: str) -> list[str]:
    """The fetched URLs of a page that leave the build: another host, or a root-absolute path."""
    collector = _ResourceCollector()
    collector.feed(html)
    bad = []
    for tag, url in collector.urls:
        if url.startswith("data:"):
            continue
        if _REMOTE.match(url) or url.startswith("/"):
            bad.append(f"<{tag}> {url}")
    return bad


_WIDGET_STATE = re.compile(r'<script type="application/vnd\.jupyter\.widget-state\+json">(.*?)</script>', re.S)


def unhosted_widgets(html: str) -> list[str]:
    """The embedded widget models of a page that the book's widget host cannot show (not anywidgets)."""
    unhosted = []
    for block in _WIDGET_STATE.findall(html):
        for model_id, entry in json.loads(block).get("state", {}).items():
            kind = (entry.get("model_module"), entry.get("model_name"))
            if kind not in HOSTED_MODELS:
                unhosted.append(f"{kind[1]} from {kind[0]} ({model_id})")
    return unhosted


def build_finished(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for page in sorted(outdir.rglob("*.html")):
        if "_static" in page.relative_to(outdir).parts:
            continue
        html = page.read_text(encoding="utf-8")
        for url in offending_urls(html):
            logger.warning(
                "offline_assets: %s fetches %s from outside the build",
                page.relative_to(outdir).as_posix(),
                url,
                type="offline_assets",
            )
        for widget in unhosted_widgets(html):
            logger.warning(
                "offline_assets: %s embeds a %s widget, which the book's widget host cannot show "
                "(book/_ext/widget_host.js runs anywidgets only)",
                page.relative_to(outdir).as_posix(),
                widget,
                type="offline_assets",
            )


def _drop_scripts(context: dict, in_file: str, in_body: str) -> None:
    """Remove from the page's scripts those whose file name contains ``in_file`` (in any case) and the
    inline ones whose text contains ``in_body``."""
    context["script_files"] = [
        script for script in context.get("script_files", [])
        if in_file not in str(getattr(script, "filename", script) or "").lower()
        and in_body not in str(getattr(script, "attributes", {}).get("body", ""))
    ]


def drop_thebe_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Remove sphinx-thebe's scripts from every page.

    Jupyter Book always loads sphinx-thebe, even with its launch button off (``launch_buttons.thebe: false``).
    Its scripts would fetch thebe from unpkg on demand, and its inline ``const THEBE_JS_URL`` is added once per
    read phase, so a rebuild declares it twice ("Identifier 'THEBE_JS_URL' has already been declared").
    """
    if app.config.html_context.get("offline_drop_thebe", True):
        _drop_scripts(context, "thebe", "THEBE_JS_URL")


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", builder_inited)
    app.connect("html-page-context", drop_thebe_scripts)
    app.connect("build-finished", build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
