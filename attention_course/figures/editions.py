"""One execution, a figure for each edition: how a chapter's figure reaches the book in both languages.

The book is built twice from one run of its chapters (the Chinese edition reuses the English build's
execution cache), yet each edition must show its figures in its own language. So a chapter's figure
cell draws every language at once:

1. Each figure function takes ``lang`` and draws its text in that language
   (:func:`attention_course.i18n.translator`). Decorated with :func:`in_every_language`, a call
   without ``lang`` returns the English figure, as always, and — where the course style installed the
   formatter below in an IPython kernel — draws a twin in every other language and keeps it on the
   figure, closed (so that the inline backend shows only the English one).
2. When the inline backend displays the English figure, the formatter that
   :func:`register_ipython_formatter` installs adds to the same output a mime type of the course's
   own, :data:`FIGURE_EDITIONS_MIME`: ``{"zh": {"png": <base64 PNG>, "untranslated": [...]}}``, drawn
   exactly as the backend draws the English PNG, with the labels that had no translation. JupyterLab
   ignores it and shows the PNG.
3. When MyST-NB renders the output, :class:`MystNbFigureEditions` (a MyST-NB mime renderer, registered
   as an entry point in ``pyproject.toml``) turns that mime type into the image of the edition being
   built, and into nothing in the English edition, where the PNG is chosen as before. A drawing with
   untranslated labels is a warning, so the Chinese build (``-W``) fails and names them. The cell's
   caption and alt text are the chapter's, translated by Sphinx like the rest of the page.
"""

from __future__ import annotations

import base64
import functools
from typing import Any, Callable

from attention_course.i18n import LANGUAGES, collecting_untranslated, language_of

__all__ = ["FIGURE_EDITIONS_MIME", "MystNbFigureEditions", "in_every_language", "register_ipython_formatter"]

FIGURE_EDITIONS_MIME = "application/vnd.attention-course.figure-editions+json"
# What the English figure carries for the formatter: a method that returns its drawings in the other
# languages. IPython's formatters call a print method of the object itself; a printer registered for
# matplotlib's Figure type would not last, since the inline backend removes every formatter's Figure
# printer when it starts.
PRINT_METHOD = "_repr_attention_course_editions_"

_formatter_installed = False


def in_every_language(draw: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``draw(..., lang="en") -> Figure`` so that the book gets the figure in every language.

    ``draw(..., lang="zh")`` draws that language only. ``draw(...)`` without ``lang`` draws English and,
    once :func:`register_ipython_formatter` has run in this kernel (``use_course_style()`` runs it),
    a closed twin in each other language that the English figure's display carries along.
    """

    @functools.wraps(draw)
    def drawn(*args, lang: str | None = None, **kwargs):
        if lang is not None:
            return draw(*args, lang=language_of(lang), **kwargs)
        figure = draw(*args, lang=LANGUAGES[0], **kwargs)
        if _formatter_installed:
            import matplotlib.pyplot as plt

            twins = {}
            for other in LANGUAGES[1:]:
                with collecting_untranslated() as missed:
                    twin = draw(*args, lang=other, **kwargs)
                plt.close(twin)  # drawn, kept, but not shown on its own by the inline backend
                twins[other] = (twin, missed)
            setattr(figure, PRINT_METHOD, functools.partial(_drawings, twins))
        return figure

    return drawn


def _png_base64(figure) -> str:
    """The figure as the inline backend draws it (its print_figure settings), base64-encoded."""
    from IPython.core.pylabtools import print_figure
    from matplotlib_inline.backend_inline import InlineBackend

    kwargs = dict(InlineBackend.instance().print_figure_kwargs)
    return base64.b64encode(print_figure(figure, "png", **kwargs)).decode("ascii")


def _drawings(twins: dict) -> dict[str, dict]:
    return {lang: {"png": _png_base64(twin), "untranslated": list(missed)} for lang, (twin, missed) in twins.items()}


def figure_editions(figure) -> dict[str, dict] | None:
    """{lang: {"png": base64 PNG, "untranslated": [labels]}} of the figure's twins, or None for a figure
    drawn in one language only (what the formatter adds to the figure's output)."""
    method = getattr(figure, PRINT_METHOD, None)
    return method() if method is not None else None


def register_ipython_formatter() -> bool:
    """In an IPython kernel, add the course's figure-editions formatter (once); False outside IPython."""
    global _formatter_installed
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    formatters = shell.display_formatter.formatters
    if FIGURE_EDITIONS_MIME not in formatters:
        from IPython.core.formatters import BaseFormatter
        from traitlets import ObjectName, Unicode

        class EditionsFormatter(BaseFormatter):
            """The figure's twins in the other languages, as {lang: {"png", "untranslated"}}: the
            figure's own print method (set by in_every_language) makes them."""

            format_type = Unicode(FIGURE_EDITIONS_MIME)
            print_method = ObjectName(PRINT_METHOD)
            _return_type = dict

        formatters[FIGURE_EDITIONS_MIME] = EditionsFormatter(parent=shell.display_formatter)
    # The display formatter lists the mime types it produces once, when it starts: add this one.
    active = shell.display_formatter.active_types
    if FIGURE_EDITIONS_MIME not in active:
        active.append(FIGURE_EDITIONS_MIME)
    _formatter_installed = True
    return True


class MystNbFigureEditions:
    """MyST-NB mime renderer: the figure-editions output becomes the image of the edition being built.

    In the English edition it renders nothing (the output's ``image/png`` is chosen instead); in an
    edition whose language has a twin it renders that PNG exactly as MyST-NB renders any PNG (the
    cell's image options, alt text included, and its figure and caption around it). An edition whose
    language has no twin is an error: that figure would silently stay English.
    """

    # Before image/png (50 in MyST-NB's HTML priority list), so that a non-English edition picks it.
    mime_priority_overrides = [("html", FIGURE_EDITIONS_MIME, 45)]

    @staticmethod
    def handle_mime(renderer, data, inline: bool):
        if data.mime_type != FIGURE_EDITIONS_MIME:
            return None
        from myst_nb.core.render import MimeData

        env = getattr(renderer.renderer, "sphinx_env", None)
        lang = language_of(env.config.language if env is not None else None)
        if lang == LANGUAGES[0]:
            return []
        editions = data.content if isinstance(data.content, dict) else {}
        if lang not in editions:
            raise ValueError(
                f"a figure in cell {data.cell_index} has no {lang} drawing (it has {sorted(editions)}): "
                "its figure function must draw every language (attention_course.figures.editions)"
            )
        drawing = editions[lang]
        if drawing.get("untranslated"):
            renderer.logger.warning(
                f"the {lang} drawing of this figure has labels without a translation: "
                f"{drawing['untranslated']} (translate them in attention_course/locale; `make catalogs`)",
                subtype="figure_untranslated", line=data.line,
            )
        png = MimeData(
            "image/png", drawing["png"], cell_metadata=data.cell_metadata, output_metadata={},
            cell_index=data.cell_index, output_index=data.output_index, line=data.line,
        )
        return renderer.render_image_inline(png) if inline else renderer.render_image(png)
