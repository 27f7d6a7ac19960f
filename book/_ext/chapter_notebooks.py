"""Sphinx extension: every chapter as a Jupyter notebook (``.ipynb``) to download and run.

The chapters are MyST markdown notebooks (``book/*.md`` with a jupytext header). At the end of an HTML
build this writes each one, converted with jupytext, to ``<edition's output>/notebooks/<page>.ipynb``
(``_build/html/notebooks/`` and ``_build/html/zh/notebooks/``), served from the build like any other
file, and each chapter page gets a link to it under its title, "Download this chapter as a Jupyter
notebook (.ipynb)", in the page's language.

- **Without outputs.** The page beside the link shows every output already; the notebook is for running
  the code yourself (and changing it), so it holds what a reader runs: the cells, their tags, the
  kernel. Outputs would make the download several times larger (the figures are PNGs), and would be
  stale the moment the reader edits a cell.
- **In the edition's language.** In the Chinese edition a markdown cell's headings, paragraphs, list
  items, admonitions and captions are replaced by their translations from the page's catalog
  (``book/locale/zh_CN/LC_MESSAGES/<page>.po``, the messages the built page shows), each where its
  English stands in the MyST source; the code cells' comments, docstrings and printed labels are
  translated by ``code_translation.translate_code`` (``code.po``), which changes nothing the code
  computes. A message the catalog does not translate (or that is not in the source, such as a
  figure's alt text) stays as it is.
- The markdown keeps its MyST markup (``{term}``, ``{eq}``, ``:::{admonition}``): JupyterLab shows
  those roles and directives as written, the text and math read as they do on the page.

``python scripts/write_notebooks.py`` (``make lab``) writes the same notebooks without a book build.
"""

from __future__ import annotations

import functools
import hashlib
import posixpath
import re
from pathlib import Path

from docutils import nodes

from attention_course.i18n import LANGUAGES, language_of, translator

FOLDER = "notebooks"
_JUPYTEXT_HEADER = re.compile(r"\A---\s*\njupytext:", re.M)


def is_chapter(path: Path) -> bool:
    """Whether the page at ``path`` is a MyST markdown notebook (its code runs)."""
    try:
        return bool(_JUPYTEXT_HEADER.match(path.read_text(encoding="utf-8")))
    except OSError:
        return False


def notebook_name(docname: str) -> str:
    return posixpath.basename(docname) + ".ipynb"


# ---- The Chinese markdown ---------------------------------------------------------------------------

def page_catalog(srcdir: Path, language: str, docname: str) -> dict[str, str]:
    """{msgid: msgstr} of the page's own catalog (translated, not fuzzy); {} if it has none."""
    from attention_course.i18n import po_messages

    path = Path(srcdir) / "book" / "locale" / language / "LC_MESSAGES" / (docname + ".po")
    return po_messages(path) if path.is_file() else {}


# What may stand before a message on its line: indentation and markers (a quote's >, a heading's #s,
# a list's bullet or number, a directive's name, a field's name), or a table's | before a cell.
_LEAD = (r"(?P<lead>^[ \t]*(?:(?:>|#{1,6}|[-*+]|\d+[.)]|:{3,}\{[\w:-]+\}|`{3,}\{[\w:-]+\}|:[\w-]+:)[ \t]+)*"
         r"|(?<=\|)[ \t]*)")
# What may follow it: the end of the line, or a table's |.
_TAIL = r"(?=[ \t]*(?:\||$))"


@functools.lru_cache(maxsize=None)
def _message_pattern(msgid: str) -> re.Pattern:
    # The catalog joins a paragraph's lines with spaces; in the source a line break (and a list's
    # indentation, a quote's >) may stand between any two words.
    words = (re.escape(word) for word in msgid.split())
    return re.compile(_LEAD + r"\s+(?:>[ \t]*)*".join(words) + _TAIL, re.M)


def translate_markdown(source: str, catalog: dict[str, str]) -> tuple[str, int]:
    """``source`` (a markdown cell) with every message of ``catalog`` found in it replaced by its
    translation (longest first, so that a short message inside a longer one is not taken for it),
    each where the English stood: a message fills whole lines of the source, after its line's markers;
    and how many messages were replaced."""
    replaced = 0
    for msgid in sorted(catalog, key=len, reverse=True):
        words = msgid.split()
        if not words or msgid == catalog[msgid] or words[0] not in source:
            continue
        translation = catalog[msgid]
        source, count = _message_pattern(msgid).subn(lambda match: match["lead"] + translation, source)
        replaced += count
    return source, replaced


# ---- A chapter's notebook ---------------------------------------------------------------------------

def chapter_notebook(path: Path, language: str = "en", srcdir: Path | None = None, docname: str | None = None):
    """The chapter at ``path`` as an nbformat notebook without outputs, in ``language`` ("en" or a
    catalog language such as "zh_CN"; ``srcdir`` is the book's root, ``docname`` the page's name)."""
    import jupytext

    notebook = jupytext.read(path, fmt="md:myst")
    # Only the kernel and the language: no jupytext pairing, so the notebook stands on its own.
    notebook.metadata = {
        "kernelspec": notebook.metadata.get("kernelspec", {"display_name": "Python 3", "language": "python",
                                                           "name": "python3"}),
        "language_info": {"name": "python"},
    }
    for index, cell in enumerate(notebook.cells):
        # the same ids in every build and edition (jupytext draws them at random)
        cell.id = hashlib.sha256(f"{Path(path).stem}:{index}".encode()).hexdigest()[:8]
        cell.metadata.pop("lines_to_next_cell", None)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    if language_of(language) == LANGUAGES[0]:
        return notebook
    from code_translation import catalog_path, read_catalog, translate_code

    srcdir = Path(srcdir) if srcdir is not None else Path(path).resolve().parents[1]
    docname = docname or Path(path).resolve().relative_to(srcdir).with_suffix("").as_posix()
    prose = page_catalog(srcdir, language, docname)
    code = read_catalog(catalog_path(srcdir, language))
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source, _ = translate_markdown(cell.source, prose)
        elif cell.cell_type == "code":
            cell.source = translate_code(cell.source, code).code
            # a figure's caption and alt text (MyST-NB's cell metadata), as the page shows them
            for key, field in (("figure", "caption"), ("image", "alt")):
                options = cell.metadata.get("mystnb", {}).get(key, {})
                text = options.get(field)
                if isinstance(text, str) and prose.get(" ".join(text.split())):
                    options[field] = prose[" ".join(text.split())]
    notebook.metadata["language_info"]["natural_language"] = language
    return notebook


def notebook_bytes(notebook) -> bytes:
    import nbformat

    return (nbformat.writes(notebook) + "\n").encode("utf-8")


def write_notebooks(srcdir: Path, docnames: list[str], language: str, out: Path) -> list[Path]:
    """Write the notebook of every chapter among ``docnames`` into ``out``; the paths written (a file
    whose bytes would not change is left alone)."""
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for docname in docnames:
        source = Path(srcdir) / (docname + ".md")
        if not is_chapter(source):
            continue
        target = out / notebook_name(docname)
        data = notebook_bytes(chapter_notebook(source, language, srcdir, docname))
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
        written.append(target)
    return written


# ---- Sphinx -----------------------------------------------------------------------------------------

class notebook_link(nodes.General, nodes.Element):
    """The link to the chapter's notebook (HTML only)."""


def visit_notebook_link_html(translator_, node: notebook_link) -> None:
    from html import escape

    translator_.body.append(
        f'<p class="chapter-notebook"><a class="reference download chapter-notebook-link" '
        f'href="{escape(node["href"])}" download="{escape(node["filename"])}" type="application/x-ipynb+json">'
        f'<i class="fa-solid fa-download" aria-hidden="true"></i> {escape(node["label"])}</a></p>\n')
    raise nodes.SkipNode


def skip(translator_, node) -> None:
    raise nodes.SkipNode


def _chapters(app) -> list[str]:
    return sorted(d for d in app.env.found_docs if is_chapter(Path(app.srcdir) / (d + ".md")))


def add_link(app, doctree: nodes.document, docname: str) -> None:
    if app.builder.format != "html" or not is_chapter(Path(app.srcdir) / (docname + ".md")):
        return
    title = next(iter(doctree.findall(nodes.title)), None)
    if title is None:
        return
    tr = translator(language_of(app.config.language), "book", strict=True)
    page = app.builder.get_target_uri(docname)
    href = posixpath.relpath(posixpath.join(FOLDER, notebook_name(docname)), posixpath.dirname(page) or ".")
    title.parent.insert(title.parent.index(title) + 1, notebook_link(
        href=href, filename=notebook_name(docname), label=tr("Download this chapter as a Jupyter notebook (.ipynb)")))


def write_all(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    write_notebooks(Path(app.srcdir), _chapters(app), app.config.language or "en", Path(app.outdir) / FOLDER)


def setup(app) -> dict:
    app.add_node(notebook_link, html=(visit_notebook_link_html, None), latex=(skip, None), text=(skip, None),
                 man=(skip, None), texinfo=(skip, None))
    app.connect("doctree-resolved", add_link)
    app.connect("build-finished", write_all)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
