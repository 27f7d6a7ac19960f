"""Chapter 8's figures: multi-head attention as a diagram (Vaswani et al.'s fig. 2, right), how the
features are cut into heads, and one heatmap of weights per head.

Labels follow the book's notation (chapter 1): n_h heads, d features, d / n_h features per head,
T queries and S keys.

Every function returns the matplotlib figure it drew, its text in ``lang`` (English by default; see
:mod:`attention_course.figures.editions`); the sentences' words are data, drawn as given. Call
:func:`attention_course.plotting.use_course_style` first, for the Chinese labels.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle

from attention_course.figures.beyond import weight_patterns
from attention_course.figures.diagrams import (
    KEY_COLOUR,
    OUTPUT_COLOUR,
    POOL_COLOUR,
    QUERY_COLOUR,
    VALUE_COLOUR,
    arrow,
    box,
    canvas,
    chinese_beside_math,
)
from attention_course.figures.editions import in_every_language
from attention_course.i18n import N_, translator

HEAD_COLOURS = ("#f4c28a", "#a9cbe8", "#b9deb0", "#e6d5ef", "#f2b8b5", "#d9d3a0", "#c7c7c7", "#9fd8d1")

# The English text that chapter 8 passes in, which the figures translate when they draw (listed here
# for the catalog): the models' names of ``draw_training_losses({"1 head": ..., "2 heads": ...})``.
LOSS_NAMES = (N_("1 head"), N_("2 heads"))


@in_every_language
def draw_multi_head(num_heads: int = 3, lang: str = "en"):
    """Q, K and V, each projected n_h times (one projection per head), n_h scaled dot-product attentions
    side by side, their outputs concatenated and projected by W_o. Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    fig, ax = canvas(8.4, 6.2, (0, 12.6), (0, 9.4))
    inputs = {"Q": (2.6, QUERY_COLOUR), "K": (6.3, KEY_COLOUR), "V": (10.0, VALUE_COLOUR)}
    offset = 0.28  # the heads are drawn as a stack of cards, one behind the other
    for name, (x, colour) in inputs.items():
        box(ax, x, 0.7, 1.2, 0.8, f"${name}$", colour, fontsize=14)
        arrow(ax, (x, 1.1), (x, 1.95))
        for head in reversed(range(num_heads)):
            box(ax, x + head * offset, 2.5 + head * offset, 2.3, 0.9,
                tr("Linear {weights}").format(weights=f"$W_{name.lower()}^{{({head + 1})}}$") if head == 0 else "",
                colour, fontsize=11)
        arrow(ax, (x, 2.95), (6.3 - 1.2 + (x - 6.3) * 0.3, 4.15))
    for head in reversed(range(num_heads)):
        box(ax, 6.3 + head * offset, 4.75 + head * offset, 6.2, 1.05,
            tr("Scaled dot-product attention 缩放点积注意力") if head == 0 else "", POOL_COLOUR, fontsize=11)
    label_x, label_y = 6.3 + 3.1 + num_heads * offset + 0.15, 4.75 + (num_heads - 1) * offset
    ax.text(label_x, label_y + 0.25, f"× $n_h$ = {num_heads}", va="center", fontsize=10.5)
    ax.text(label_x, label_y - 0.25, tr("heads 头"), va="center", fontsize=10.5)  # Chinese outside $...$
    arrow(ax, (6.3, 5.3), (6.3, 6.05))
    box(ax, 6.3, 6.5, 3.4, 0.8, tr("Concat 拼接"), OUTPUT_COLOUR, fontsize=12)
    arrow(ax, (6.3, 6.9), (6.3, 7.45))
    box(ax, 6.3, 7.85, 3.4, 0.8, tr("Linear {weights}").format(weights="$W_o$"), OUTPUT_COLOUR, fontsize=12)
    arrow(ax, (6.3, 8.25), (6.3, 8.95))
    ax.text(6.3, 9.05, tr("output: $(B, T, d)$"), ha="center", va="bottom", fontsize=10)
    ax.text(0.1, 3.9, tr("each head: its own\nprojections into\n$d / n_h$ features"), fontsize=9.5, va="center")
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


@in_every_language
def draw_split_heads(length: int = 4, d_model: int = 6, num_heads: int = 3, lang: str = "en"):
    """A (S, d) matrix of projected queries, its columns cut into n_h blocks of d / n_h: block r
    is head r's queries, (S, d / n_h). ``split_heads`` makes the blocks a new axis, (n_h, S, d / n_h).
    ``d_model`` is d. Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    d_head = d_model // num_heads
    fig, ax = canvas(8.4, 3.6, (-1.2, d_model + 2.2 + num_heads * (d_head + 0.8)), (-1.6, length + 1.3))
    for j in range(d_model):
        for i in range(length):
            ax.add_patch(Rectangle((j, length - 1 - i), 1, 1, facecolor=HEAD_COLOURS[j // d_head],
                                   edgecolor="white", linewidth=1.5))
    ax.text(d_model / 2, length + 0.35, "$x W_q$: $(S, d)$", ha="center", fontsize=10.5)
    ax.text(-0.3, length / 2, tr("S positions"), rotation=90, ha="right", va="center", fontsize=10)
    for head in range(num_heads):
        ax.text(head * d_head + d_head / 2, -0.45, tr("head {number}").format(number=head + 1), ha="center", va="top",
                fontsize=9.5)
    start = d_model + 1.6
    arrow(ax, (d_model + 0.3, length / 2), (start - 0.3, length / 2))
    ax.text((d_model + start) / 2, length / 2 + 0.3, tr("split"), ha="center", fontsize=9.5)
    for head in range(num_heads):
        left = start + head * (d_head + 0.8)
        for j in range(d_head):
            for i in range(length):
                ax.add_patch(Rectangle((left + j, length - 1 - i), 1, 1, facecolor=HEAD_COLOURS[head],
                                       edgecolor="white", linewidth=1.5))
        ax.text(left + d_head / 2, -0.45, tr("head {number}\n$(S, d/n_h)$").format(number=head + 1), ha="center",
                va="top", fontsize=9.5)
    ax.text(start + num_heads * (d_head + 0.8) / 2 - 0.4, length + 0.35, "$(n_h, S, d/n_h)$", ha="center", fontsize=10.5)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


@in_every_language
def draw_heads(weights: torch.Tensor, words: Sequence[str], titles: Sequence[str] | None = None, columns: int = 2,
               lang: str = "en"):
    """One heatmap per head: ``weights`` (n_h, T, S), row i is what position i attends to. Weights that are
    exactly 0 (masked) are grey. Returns the figure, its text in ``lang`` (``titles``, English, translated too)."""
    tr = translator(lang)
    titles = ([tr(title) for title in titles] if titles else
              [tr("head {number}").format(number=head + 1) for head in range(weights.shape[0])])
    panels = [(title, (head_weights, list(words), list(words))) for title, head_weights in zip(titles, weights)]
    return weight_patterns(panels, min(columns, len(panels)), tr)


@in_every_language
def draw_training_losses(losses: dict[str, Sequence[float]], lang: str = "en"):
    """The training loss per step of each model, ``{label: losses}``, the labels English (``LOSS_NAMES``)
    and drawn in ``lang`` with the rest of the figure's text."""
    tr = translator(lang)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for label, values in losses.items():
        ax.plot(range(1, len(values) + 1), values, label=tr(label), linewidth=1.4)
    ax.set_xlabel(tr("training step"))
    ax.set_ylabel(tr("loss (previous + next word)"))
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig
