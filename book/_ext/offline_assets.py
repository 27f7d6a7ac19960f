"""Sphinx extension: the built book serves its own scripts and fonts, and requests nothing from another host.

When the builder starts it copies the third-party files the pages need (RequireJS and the Jupyter
widgets HTML manager for embedded widgets, MathJax for math, the AMD build of anywidget) from
``web/node_modules`` and the Python environment into the output's ``_static/offline/``, with their
licences; pages name them relative to themselves (``mathjax_path``, ``nb_ipywidgets_js`` in
``_config.yml``). They never pass through the book's root ``_static``, whose ``.js`` files Jupyter Book
adds to every page (a second anonymous ``define()`` breaks RequireJS). The copy is redone only when the
npm lockfile, anywidget or this file change.

At ``build-finished`` it reads every written HTML page and reports, as a Sphinx warning (an error under
``-W``), any script, stylesheet, image or frame that would be fetched from another host or from a
root-absolute path (which breaks under a sub-path or ``file://``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

OUTPUT_FOLDER = Path("_static") / "offline"

# (npm package, files or folders inside it, where they go under _static/vendor/)
NPM_FILES = [
    ("requirejs", ["require.js"], "."),
    ("@jupyter-widgets/html-manager", ["dist/embed-amd.js"], "html-manager"),
    ("mathjax", ["es5/tex-chtml.js", "es5/input", "es5/output", "es5/ui", "es5/a11y", "es5/adaptors"], "mathjax"),
]
# html-manager's stylesheet refers to its icon fonts by bare file name, resolved against the script's folder.
FONT_SUFFIXES = {".woff2", ".woff", ".ttf", ".eot", ".svg"}

WIDGETS_CONFIG_JS = """\
// Written by book/_ext/offline_assets.py. Loaded after require.js and before embed-amd.js:
// widget model modules resolve to files beside this one, never to a CDN. The base is taken
// from this script's own URL, so it holds under any sub-path and under file://.
(function () {
  var src = document.currentScript.src;
  var base = src.substring(0, src.lastIndexOf("/") + 1);
  window.require.config({
    paths: {
      anywidget: base + "anywidget/index",
      // The bundled @jupyter-widgets modules find their icon fonts beside their own URLs:
      // make those URLs point into the folder where the fonts are (longest prefix wins).
      "@jupyter-widgets": base + "html-manager",
      "@jupyter-widgets/html-manager/dist": base + "html-manager",
    },
  });
})();
"""


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
    anywidget_dir = Path(str(resources.files("anywidget")))
    anywidget_amd = anywidget_dir / "nbextension" / "index.js"
    stamp_text = hashlib.sha256(
        lockfile.read_bytes() + anywidget_amd.read_bytes() + Path(__file__).read_bytes()
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
        if package == "@jupyter-widgets/html-manager":
            for font in (package_dir / "dist").iterdir():
                if font.suffix in FONT_SUFFIXES:
                    _copy(font, vendor / target / font.name)
        licence = vendor / "LICENSES" / f"{package.replace('/', '__')}.txt"
        licence.parent.mkdir(exist_ok=True)
        licence.write_text(_licence_text(package_dir, meta), encoding="utf-8")

    _copy(anywidget_amd, vendor / "anywidget" / "index.js")
    (vendor / "LICENSES" / "anywidget.txt").write_text(
        "anywidget (AMD build shipped in the Python package) — licence: MIT\n", encoding="utf-8"
    )
    (vendor / "widgets-config.js").write_text(WIDGETS_CONFIG_JS, encoding="utf-8")
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


def build_finished(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for page in sorted(outdir.rglob("*.html")):
        if "_static" in page.relative_to(outdir).parts:
            continue
        for url in offending_urls(page.read_text(encoding="utf-8")):
            logger.warning(
                "offline_assets: %s fetches %s from outside the build",
                page.relative_to(outdir).as_posix(),
                url,
                type="offline_assets",
            )


def drop_thebe_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Remove sphinx-thebe's scripts from every page.

    Jupyter Book always loads sphinx-thebe, even with its launch button off (``launch_buttons.thebe: false``).
    Its scripts would fetch thebe from unpkg on demand, and its inline ``const THEBE_JS_URL`` is added once per
    read phase, so a rebuild declares it twice ("Identifier 'THEBE_JS_URL' has already been declared").
    """
    if app.config.html_context.get("offline_drop_thebe", True):
        context["script_files"] = [
            script for script in context.get("script_files", [])
            if "thebe" not in str(getattr(script, "filename", script) or "")
            and "THEBE_JS_URL" not in str(getattr(script, "attributes", {}).get("body", ""))
        ]


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", builder_inited)
    app.connect("html-page-context", drop_thebe_scripts)
    app.connect("build-finished", build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
