"""Sphinx extension: pages that a phone paints sooner and that keep its main thread freer.

What Lighthouse (bench/lighthouse_pages.py) found on the slowest chapters, and what this does about it,
at ``build-finished`` once the other extensions have written the pages (a high priority number):

- **One stylesheet per page.** The themes and extensions link ten or eleven stylesheets in a page's
  head, and nothing is painted before all of them have arrived; a browser fetches six at a time from one
  server, so on a phone's connection the rest wait a round trip more. They are joined, in their order,
  into one file, ``_static/course-styles-<hash>.css`` (``@import`` inlined, every ``url()`` rewritten for
  the new place), without the rules that no page of the edition can use: the theme's stylesheet is mostly
  Bootstrap, and nine tenths of it applies to nothing in the book. PurgeCSS (``web/purge-styles.js``)
  keeps a rule when every class, id, tag and attribute value it names occurs in a page or in a script of
  ``_static`` (scripts add classes such as ``show`` when a menu opens); the book's own stylesheets are
  joined whole. Pages that link the same stylesheets share one file. A file that no page names any longer is deleted.
- **The theme's scripts are not preloaded.** The theme asks for its two scripts with
  ``<link rel="preload">`` in the head, which makes them fetched first, with the stylesheets, though
  they run only once the page is parsed (``defer``); they are fetched in their turn.
- **The first paint has the reader's colours.** The theme's inline script in the head sets the page's
  theme to the one stored from an earlier visit, or to "auto" on a first one, which no rule of its
  stylesheet matches; its deferred script then sets "light" or "dark", and the browser styles the whole
  page again (54 ms of a 2-core machine's CPU on chapter 4, four times that on Lighthouse's phone; and a
  reader whose system is dark sees the page light first). The inline script resolves "auto" itself, as
  the theme's script will (``prefers-color-scheme``), so that script changes nothing.
- **The root's redirect is a page.** Sphinx's external TOC writes the build's ``index.html`` as a bare
  ``<meta http-equiv="Refresh">``: a browser that opens it asks the server for ``/favicon.ico``, outside a
  book served under a sub-path (a 404, an error in the console: Lighthouse's best practices 96). It is
  written again as a small HTML page in the edition's language, with its title, an empty icon
  (``data:``: nothing to fetch on a page that is left at once) and a link for a browser that does not
  follow the refresh.
- **Code is written with the spans that colour it, and no others.** Pygments puts every name, punctuation
  mark and run of spaces of a code block in a ``<span>`` (on chapter 4, 1,643 of its 2,706 spans), and
  the style gives these three the code block's own colour, in the light theme and the dark. They are
  written as plain text, once ``_static/pygments.css`` is checked to say so (a style that gives one of them
  a colour of its own keeps its spans), and the book's stylesheet has a block's ``<pre>`` take the block's
  colour (the theme gives ``pre`` its own, a shade off). On chapter 4 that is a fifth of the page's elements
  and about a sixth of the work of styling it.
- **The theme reads the layout once, not once per code block.** pydata-sphinx-theme makes every code
  block that scrolls a keyboard stop, at load: it sets a block's tab stop and then reads the next block's
  width, so the browser lays the page out again for every block (40 times on chapter 4). The copy in
  ``_static/scripts/`` reads every width first, then sets the stops (the same stops). If a theme release
  changes that code, the build warns (an error under ``-W``) instead of serving it unpatched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from html import escape
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

PURGER = Path(__file__).resolve().parents[2] / "web" / "purge-styles.js"
PREFIX = "course-styles-"
PRIORITY = 900  # after the extensions that write into the pages (book_math, editions, …: 500)

_LINK = re.compile(r"<link\b[^>]*>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([\w:-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?""")
# An @import (group 1: what it imports), or a url() (group 3: the URL).
_IMPORT_OR_URL = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)["']?\s*\)?\s*;|url\(\s*(["']?)([^"')]+)\2\s*\)""")
_CHARSET = re.compile(r"""@charset\s+["'][^"']*["']\s*;""", re.IGNORECASE)
# Folders of the build that hold no page of the edition (another edition's build has its own _static).
_NOT_PAGES = {"_static", "_sources", "_images", "_downloads", "jupyter_execute", "notebooks"}

# pydata-sphinx-theme 0.17's minified addTabStopsToScrollableElements: a write, then a read, per block.
THEME_SCRIPT = Path("_static") / "scripts" / "pydata-sphinx-theme.js"
TAB_STOPS_BEFORE = ".forEach(e=>{e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1})"
TAB_STOPS_AFTER = (".forEach((e,i,all)=>{i||(all.courseStops=Array.from(all,b=>b.scrollWidth>b.clientWidth"
                   "||b.scrollHeight>b.clientHeight?0:-1));e.tabIndex!==all.courseStops[i]&&(e.tabIndex=all.courseStops[i])})")


def attributes(tag: str) -> dict[str, str]:
    """The attributes of one start tag (names lower-cased; a bare attribute has the value "")."""
    inner = tag[1:].rstrip(">").rstrip("/")
    inner = inner.split(None, 1)[1] if " " in inner or "\n" in inner else ""
    found = {}
    for match in _ATTRIBUTE.finditer(inner):
        value = next((v for v in match.groups()[1:] if v is not None), "")
        found[match.group(1).lower()] = value
    return found


def _local_file(href: str, page: Path, root: Path) -> Path | None:
    """The file of the build that ``href`` (relative to ``page``) names, or None (another host, a data:
    URL, a root-absolute path, or nothing there)."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
        return None
    path = (page.parent / unquote(parts.path)).resolve()
    return path if path.is_file() and path.is_relative_to(root) else None


def stylesheet_links(html: str, page: Path, root: Path) -> list[tuple[str, Path]] | None:
    """The head's ``<link rel="stylesheet">`` tags, in order, each with its file; None where one of them
    cannot be joined with the others (another host, a ``media`` other than all or screen, a missing file)."""
    head = html[: html.find("</head>")] if "</head>" in html else ""
    links = []
    for match in _LINK.finditer(head):
        attrs = attributes(match.group(0))
        if "stylesheet" not in attrs.get("rel", "").lower().split():
            continue
        if attrs.get("media", "all").strip().lower() not in ("all", "screen", ""):
            return None
        path = _local_file(attrs.get("href", ""), page, root)
        if path is None:
            return None
        links.append((match.group(0), path))
    return links


def joined_stylesheet(path: Path, into: Path, seen: frozenset[Path] = frozenset()) -> str:
    """``path``'s CSS as it reads from the folder ``into``: ``@import``s of local files inlined (in place,
    as the browser applies them), every relative ``url()`` rewritten, ``@charset`` dropped."""
    text = _CHARSET.sub("", path.read_text(encoding="utf-8"))

    def inline(match: re.Match) -> str:
        target = (path.parent / unquote(urlsplit(match.group(1)).path)).resolve()
        if urlsplit(match.group(1)).scheme or not target.is_file() or target in seen:
            return match.group(0)
        return joined_stylesheet(target, into, seen | {path})

    def rewrite_url(match: re.Match) -> str:
        url = match.group(3).strip()
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or url.startswith(("/", "#")) or not parts.path:
            return match.group(0)
        target = (path.parent / unquote(parts.path)).resolve()
        moved = os.path.relpath(target, into).replace(os.sep, "/")
        return f'url("{moved}{"?" + parts.query if parts.query else ""}{"#" + parts.fragment if parts.fragment else ""}")'

    # One pass, so that an inlined file's url()s, already rewritten, are not rewritten again.
    return _IMPORT_OR_URL.sub(lambda m: inline(m) if m.group(1) is not None else rewrite_url(m), text)


def edition_pages(root: Path) -> list[Path]:
    """The HTML pages of the edition built into ``root`` (not those of another edition built inside it)."""
    pages = []
    for current, folders, files in os.walk(root):
        here = Path(current)
        folders[:] = sorted(f for f in folders if f not in _NOT_PAGES and not (here / f / "_static").is_dir())
        pages += [here / f for f in sorted(files) if f.endswith(".html")]
    return pages


def purge(stylesheets: dict[str, str], content: list[Path]) -> dict[str, str]:
    """Each stylesheet without the rules that nothing in ``content`` can use (web/purge-styles.js)."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("page_speed needs Node.js (scripts/system-packages.sh npm)")
    request = {"stylesheets": stylesheets, "content": [str(p) for p in content]}
    run = subprocess.run([node, str(PURGER)], input=json.dumps(request), capture_output=True, text=True,
                         cwd=PURGER.parent, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"web/purge-styles.js failed: {run.stderr[-2000:]}")
    return {name: answer["css"] for name, answer in json.loads(run.stdout).items()}


def _ours(path: Path) -> bool:
    """The book's own stylesheets (course-reader.css, course-math.css, course-icons.css): every rule of
    them is meant, some for states no page has until a reader acts (PurgeCSS would also drop the focus
    rings' ``:is(...):focus-visible``); they are joined whole."""
    return path.name.startswith("course-")


def join_stylesheets(root: Path) -> dict[str, int]:
    """Give every page of the edition in ``root`` one stylesheet; return {file name: pages that link it}."""
    static = root / "_static"
    pages = edition_pages(root)
    plans: dict[Path, list[tuple[str, Path]]] = {}
    for page in pages:
        links = stylesheet_links(page.read_text(encoding="utf-8"), page, root)
        if not links or (len(links) == 1 and links[0][1].name.startswith(PREFIX)):
            continue  # nothing to join, or joined already (a page this build did not write again)
        plans[page] = links
    groups = sorted({tuple(path for _, path in links) for links in plans.values()})
    if groups:
        parts = {path: joined_stylesheet(path, static) for group in groups for path in group}
        content = pages + sorted(p for p in static.rglob("*.js") if not p.name.startswith("live-model-"))
        theirs = {path.relative_to(root).as_posix(): css for path, css in parts.items() if not _ours(path)}
        kept = purge(theirs, content) if theirs else {}
        files = {}
        for group in groups:
            css = "\n".join(f"/* {p.relative_to(root).as_posix()} */\n" + kept.get(p.relative_to(root).as_posix(), parts[p])
                            for p in group)
            name = f"{PREFIX}{hashlib.sha256(css.encode()).hexdigest()[:16]}.css"
            if not (static / name).is_file() or (static / name).read_text(encoding="utf-8") != css:
                (static / name).write_text(css, encoding="utf-8")
            files[group] = static / name
        for page, links in plans.items():
            html = page.read_text(encoding="utf-8")
            href = os.path.relpath(files[tuple(p for _, p in links)], page.parent).replace(os.sep, "/")
            first, *rest = [tag for tag, _ in links]
            html = html.replace(first, f'<link rel="stylesheet" href="{href}" />', 1)
            for tag in rest:
                html = html.replace(tag, "", 1)
            page.write_text(html, encoding="utf-8")
    # The files pages name now; any other joined stylesheet is left from an earlier build.
    named: dict[str, int] = {}
    for page in pages:
        for match in re.finditer(re.escape(PREFIX) + r"[0-9a-f]{16}\.css", page.read_text(encoding="utf-8")):
            named[match.group(0)] = named.get(match.group(0), 0) + 1
    for old in static.glob(f"{PREFIX}*.css"):
        if old.name not in named:
            old.unlink()
    return named


# Pygments' classes for a name, a punctuation mark and a run of spaces: those a style usually leaves in the
# block's own colour.
PLAIN_TOKENS = ("n", "p", "w")
_CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_CODE_BLOCK = re.compile(r'(<div class="highlight"><pre>)(.*?)(</pre>)', re.S)


def _declarations(body: str) -> dict[str, str]:
    pairs = (part.split(":", 1) for part in body.split(";") if ":" in part)
    return {name.strip().lower(): value.strip().lower() for name, value in pairs}


def plain_tokens(stylesheets: list[str], candidates: tuple[str, ...] = PLAIN_TOKENS) -> list[str]:
    """The classes among ``candidates`` that every rule of ``stylesheets`` (CSS texts) naming them gives
    only the colour its scope gives a code block (``SCOPE .highlight .n { color: X }`` with ``SCOPE
    .highlight { … color: X }``): their spans can be plain text in a ``<pre>`` that takes the block's colour."""
    rules = [(selector.strip(), _declarations(body)) for css in stylesheets
             for selector, body in _CSS_RULE.findall(_CSS_COMMENT.sub("", css))]
    block_colour = {}
    for selector, declarations in rules:
        for one in selector.split(","):
            scope = re.fullmatch(r"(.*?)\s*\.highlight", one.strip())
            if scope and "color" in declarations:
                block_colour[scope.group(1)] = declarations["color"]
    plain = []
    for token in candidates:
        # The rules that can reach a pygments span of this class (its only class): those whose subject
        # names the class and no other (``.sig-param.n`` is Sphinx's, for a signature's parameters).
        naming = [(one.strip(), declarations) for selector, declarations in rules for one in selector.split(",")
                  if re.search(rf"\.{token}(?![\w-])", one)
                  and not re.search(r"\.[\w-]+", re.sub(rf"\.{token}(?![\w-])", "", re.split(r"[\s>+~]+", one.strip())[-1]))]
        scopes = [(re.fullmatch(rf"(.*?)\s*\.highlight \.{token}", one), declarations) for one, declarations in naming]
        if naming and all(scope and block_colour.get(scope.group(1)) is not None
                          and declarations == {"color": block_colour[scope.group(1)]} for scope, declarations in scopes):
            plain.append(token)
    return plain


def unwrap_plain_tokens(html: str, tokens: list[str]) -> str:
    """``html`` with the spans of ``tokens`` inside its code blocks written as their text."""
    if not tokens:
        return html
    span = re.compile(r'<span class="(?:%s)">([^<]*)</span>' % "|".join(map(re.escape, tokens)))
    return _CODE_BLOCK.sub(lambda block: block.group(1) + span.sub(r"\1", block.group(2)) + block.group(3), html)


def plain_code(root: Path) -> tuple[list[str], int]:
    """Unwrap the plain tokens' spans in every page of ``root``; returns (those tokens, pages changed)."""
    static = root / "_static"
    sheets = [path.read_text(encoding="utf-8") for path in sorted(static.rglob("*.css"))
              if not path.name.startswith(PREFIX)] if static.is_dir() else []
    tokens = plain_tokens(sheets)
    changed = 0
    for page in edition_pages(root):
        html = page.read_text(encoding="utf-8")
        lighter = unwrap_plain_tokens(html, tokens)
        if lighter != html:
            page.write_text(lighter, encoding="utf-8")
            changed += 1
    return tokens, changed


def drop_script_preloads(root: Path) -> int:
    """Remove ``<link rel="preload" as="script">`` from every page's head; return how many pages had one."""
    changed = 0
    for page in edition_pages(root):
        html = page.read_text(encoding="utf-8")
        end = html.find("</head>")
        if end < 0:
            continue
        head = html[:end]
        lighter = _LINK.sub(lambda m: "" if _is_script_preload(m.group(0)) else m.group(0), head)
        if lighter != head:
            page.write_text(lighter + html[end:], encoding="utf-8")
            changed += 1
    return changed


def _is_script_preload(tag: str) -> bool:
    attrs = attributes(tag)
    return attrs.get("rel", "").lower() == "preload" and attrs.get("as", "").lower() == "script"


# pydata-sphinx-theme 0.17's layout.html, with the book's default mode ("auto", html_context in _config.yml).
THEME_IN_HEAD_BEFORE = 'document.documentElement.dataset.theme = localStorage.getItem("theme") || "auto";'
THEME_IN_HEAD_AFTER = ('document.documentElement.dataset.theme = document.documentElement.dataset.mode === "auto" ? '
                       '(matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light") : '
                       'document.documentElement.dataset.mode;')


def resolve_theme_in_head(root: Path) -> list[str]:
    """Make every page's head set the theme the theme's script will set; return the pages (relative to
    ``root``) whose head sets a theme in a way this does not know (they are left as they are)."""
    unknown = []
    for page in edition_pages(root):
        html = page.read_text(encoding="utf-8")
        if THEME_IN_HEAD_BEFORE in html:
            page.write_text(html.replace(THEME_IN_HEAD_BEFORE, THEME_IN_HEAD_AFTER, 1), encoding="utf-8")
        elif "dataset.theme" in html[: html.find("</head>")] and THEME_IN_HEAD_AFTER not in html:
            unknown.append(page.relative_to(root).as_posix())
    return unknown


_BARE_REDIRECT = re.compile(r'\s*<meta http-equiv="Refresh" content="0; url=([^"]+)" />\s*')


def complete_root_redirect(root: Path, language: str, title: str, icon: str = "data:,") -> bool:
    """Rewrite ``root``/index.html, if it is a bare meta refresh, as a small page: {language} lang,
    ``icon`` as its icon, ``title``. Returns whether it did."""
    index = root / "index.html"
    if not index.is_file():
        return False
    match = _BARE_REDIRECT.fullmatch(index.read_text(encoding="utf-8"))
    if match is None:
        return False
    target, name = escape(match.group(1)), escape(title)
    index.write_text(
        f'<!DOCTYPE html>\n<html lang="{escape(language.replace("_", "-"))}">\n<head>\n<meta charset="utf-8" />\n'
        f'<meta http-equiv="Refresh" content="0; url={target}" />\n<title>{name}</title>\n'
        f'<link rel="icon" href="{escape(icon)}" />\n</head>\n'
        f'<body><p><a href="{target}">{name}</a></p></body>\n</html>\n', encoding="utf-8")
    return True


def patch_theme_script(root: Path) -> str:
    """Make the theme's tab-stop pass read every block's size before it sets any stop: "patched",
    "patched already", or "" where the script is not there; warns where its code is not what we patch."""
    script = root / THEME_SCRIPT
    if not script.is_file():
        return ""
    text = script.read_text(encoding="utf-8")
    if TAB_STOPS_AFTER in text:
        return "patched already"
    if text.count(TAB_STOPS_BEFORE) != 1:
        logger.warning("page_speed: %s does not hold the tab-stop code this extension patches (a new "
                       "pydata-sphinx-theme release?); see book/_ext/page_speed.py", script, type="page_speed")
        return ""
    script.write_text(text.replace(TAB_STOPS_BEFORE, TAB_STOPS_AFTER), encoding="utf-8")
    return "patched"


def build_finished(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.outdir).resolve()
    patch_theme_script(root)
    unknown = resolve_theme_in_head(root)
    if unknown:
        logger.warning("page_speed: the theme's script in the head of %s is not the one this extension "
                       "knows (a new pydata-sphinx-theme release?); see book/_ext/page_speed.py",
                       ", ".join(unknown[:3]), type="page_speed")
    drop_script_preloads(root)
    tokens, changed = plain_code(root)
    logger.info("page_speed: the spans of %s written as plain text in %d page(s)", ", ".join(tokens) or "no token",
                changed)
    complete_root_redirect(root, app.config.language or "en", app.config.html_title or app.config.project)
    try:
        named = join_stylesheets(root)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        logger.warning("page_speed: the pages' stylesheets could not be joined: %s", error, type="page_speed")
        return
    logger.info("page_speed: %d pages, %d joined stylesheet(s)", sum(named.values()), len(named))


def rewrite_pages_when_changed(app: Sphinx, config) -> None:
    # A page this build does not write keeps the stylesheet it was given; a config value that changes with
    # this file and the purger makes Sphinx write every page again when either changes.
    from reader_ux import files_hash

    config.page_speed_hash = files_hash(Path(__file__), PURGER)


def setup(app: Sphinx) -> dict:
    app.add_config_value("page_speed_hash", "", "html", [str])
    app.connect("config-inited", rewrite_pages_when_changed)
    app.connect("build-finished", build_finished, priority=PRIORITY)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
