"""Building blocks of the course's diagrams: one colour per role, boxes, arrows, a blank canvas.

Chapter 4's figures introduced them; the encoder–decoder figures of chapters 5 and 6 reuse them,
so a query is the same orange and a key the same blue everywhere in the book.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyBboxPatch

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
