"""Matplotlib set-up shared by every figure of the course: a real CJK font, and no silent tofu.

The course's figures carry Chinese labels (汤姆 追逐 杰瑞). Matplotlib's default font has no CJK
glyphs; left alone it draws empty boxes and only warns. :func:`use_course_style` registers a CJK
font (WenQuanYi Micro Hei, Debian's ``fonts-wqy-microhei``, or the file named by the environment
variable ``ATTENTION_COURSE_CJK_FONT``) and turns matplotlib's "missing glyph" warning into an
error, so a figure with a character no font can draw fails the book build instead of shipping boxes.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import matplotlib
from matplotlib import font_manager

FONT_ENV_VAR = "ATTENTION_COURSE_CJK_FONT"

# Where Debian, Fedora and Homebrew put WenQuanYi Micro Hei, the font the course is tested with.
KNOWN_CJK_FONT_FILES = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/wqy-microhei/wqy-microhei.ttc",
    "/usr/share/fonts/wqy-microhei-fonts/wqy-microhei.ttc",
    "/opt/homebrew/share/fonts/wqy-microhei.ttc",
)

# matplotlib (3.6+) warns "Glyph 27748 (\N{CJK UNIFIED IDEOGRAPH-6C64}) missing from font(s) DejaVu Sans."
MISSING_GLYPH_MESSAGE = r"Glyph \d+ .*missing from (current )?font"


class MissingGlyphError(RuntimeError):
    """A figure asked for a character that no configured font can draw."""


class _RaiseOnMissingGlyph(logging.Filter):
    # In a label with math ($...$) mathtext draws every character with its own fonts and only *logs*
    # "Font 'default' does not have a glyph for '\u6743' [U+6743], substituting with a dummy symbol."
    # A logger's own filters run outside logging's error handling, so raising here reaches the caller.
    def filter(self, record: logging.LogRecord) -> bool:
        if "does not have a glyph" in record.getMessage():
            raise MissingGlyphError(record.getMessage() + " Keep Chinese text outside $...$ in labels.")
        return True


class CJKFontNotFound(RuntimeError):
    """No CJK font is available to draw the course's Chinese labels."""


def cjk_font_file() -> Path:
    """The font file the course draws Chinese with; raises :class:`CJKFontNotFound` if there is none."""
    override = os.environ.get(FONT_ENV_VAR)
    if override:
        path = Path(override)
        if not path.is_file():
            raise CJKFontNotFound(f"{FONT_ENV_VAR}={override} does not name a font file.")
        return path
    for candidate in KNOWN_CJK_FONT_FILES:
        if Path(candidate).is_file():
            return Path(candidate)
    raise CJKFontNotFound(
        "No CJK font found for the figures' Chinese labels. Install WenQuanYi Micro Hei "
        "(Debian/Ubuntu: `sudo apt-get install fonts-wqy-microhei`) or point "
        f"{FONT_ENV_VAR} at any .ttf/.ttc/.otf font that covers Chinese."
    )


def use_course_style() -> str:
    """Configure matplotlib for the course's figures and return the CJK font's family name.

    Latin text keeps DejaVu Sans; characters it lacks fall back to the CJK font. A glyph that
    neither font has raises (in this process, from now on): ``UserWarning`` as an error for plain
    text, :class:`MissingGlyphError` for text inside mathtext. In an IPython kernel it also installs the
    formatter that shows each figure in every edition's language (``attention_course.figures.editions``).
    """
    path = cjk_font_file()
    font_manager.fontManager.addfont(str(path))
    family = font_manager.FontProperties(fname=str(path)).get_name()
    matplotlib.rcParams.update(
        {
            # A list of families (not the generic "sans-serif") makes matplotlib fall back glyph by glyph.
            "font.family": ["DejaVu Sans", family],
            "axes.unicode_minus": True,
            "figure.dpi": 100,
            "savefig.dpi": 150,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    warnings.filterwarnings("error", message=MISSING_GLYPH_MESSAGE, category=UserWarning)
    mathtext_log = logging.getLogger("matplotlib.mathtext")
    if not any(isinstance(f, _RaiseOnMissingGlyph) for f in mathtext_log.filters):
        mathtext_log.addFilter(_RaiseOnMissingGlyph())
    # In a kernel (a chapter being built), a figure's display carries its drawings in every language.
    from attention_course.figures.editions import register_ipython_formatter

    register_ipython_formatter()
    return family
