"""Building blocks of the course's diagrams: one colour per role, boxes, arrows, a blank canvas.

Chapter 4's figures introduced them; the encoder–decoder figures of chapters 5 and 6 reuse them,
so a query is the same orange and a key the same blue everywhere in the book. The helpers draw the
text they are given, already in the figure's language; :func:`chinese_beside_math` lets a translated
label put Chinese and math on one line.
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text

# One colour per role, the same in every diagram of the book.
QUERY_COLOUR = "#f4c28a"  # orange: the query, what we look for
KEY_COLOUR = "#a9cbe8"  # blue: the keys, what the query is compared with
VALUE_COLOUR = "#b9deb0"  # green: the values, what is taken in
POOL_COLOUR = "#e6d5ef"  # purple: where the weights are made and applied
OUTPUT_COLOUR = "#f2b8b5"  # red: the result


def box(ax, x, y, width, height, text, colour, fontsize=11, **text_kwargs):
    """A rounded box centred on (x, y) with ``text`` in it; returns (left, right, bottom, top)."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2), width, height,
            boxstyle="round,pad=0.02,rounding_size=0.12", facecolor=colour, edgecolor="#444444", linewidth=1.2,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **text_kwargs)
    return x - width / 2, x + width / 2, y - height / 2, y + height / 2


def arrow(ax, start, end, colour="#333333", style="-|>", linestyle="-", linewidth=1.4):
    ax.annotate(
        "", xy=end, xytext=start,
        arrowprops=dict(arrowstyle=style, color=colour, linestyle=linestyle, linewidth=linewidth,
                        shrinkA=0, shrinkB=0, mutation_scale=14),
    )


def canvas(width, height, xlim, ylim):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def vector_text(v: torch.Tensor, decimals: int | None = None) -> str:
    """(1, 2) for a vector, 10 for a single number: short enough to check by hand.

    With ``decimals``, every number is written with that many digits after the point."""
    form = "g" if decimals is None else f".{decimals}f"
    numbers = [f"{x:{form}}" for x in torch.as_tensor(v).reshape(-1).tolist()]
    return numbers[0] if len(numbers) == 1 else "(" + ", ".join(numbers) + ")"


# Chinese characters, and CJK and full-width punctuation; a formula between unescaped dollars.
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
_MATH = re.compile(r"(?<!\\)\$(?:[^$\\]|\\.)+?\$")


def chinese_beside_math(fig) -> None:
    """Let every text of ``fig`` that has Chinese and ``$...$`` on one line draw both.

    Matplotlib draws a line with math in it wholly with mathtext, whose "default" font (for the
    words between the formulas) is the first font of the text's family: DejaVu Sans in the course's
    style, which has no Chinese, so "权重 $a_j$" would fail (a missing glyph). Such a text (only a
    translation has one; the English labels keep Chinese and math on separate lines) gets the
    course's CJK font first in its family: the formulas keep mathtext's own fonts, and the Chinese
    around them is drawn. Every other text is left as it is. Call it once every text is on the
    figure and before anything measures them (``fig.tight_layout()`` does).
    """
    family = None
    for text in fig.findobj(Text):
        if not any(_HAN.search(line) and _MATH.search(line) for line in text.get_text().split("\n")):
            continue
        if family is None:
            from matplotlib import font_manager

            from attention_course.plotting import cjk_font_file

            path = str(cjk_font_file())
            name = font_manager.FontProperties(fname=path).get_name()
            if not any(font.name == name for font in font_manager.fontManager.ttflist):
                font_manager.fontManager.addfont(path)  # use_course_style() has not registered it
            family = [name, "DejaVu Sans"]
        text.set_fontfamily(family)
