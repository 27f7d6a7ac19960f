"""Chapters 9–12's figures: positions, the Transformer's layers, the language model's costs, and the
Transformers' length test.

Every function returns the matplotlib figure it drew, its text in ``lang`` (English by default; see
:mod:`attention_course.figures.editions`); the sentences' words are data, drawn as given. Call
:func:`attention_course.plotting.use_course_style` first, for the Chinese labels.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from attention_course.figures.beyond import weight_patterns
from attention_course.figures.diagrams import (
    KEY_COLOUR, OUTPUT_COLOUR, POOL_COLOUR, QUERY_COLOUR, VALUE_COLOUR, arrow, box, canvas, chinese_beside_math,
)
from attention_course.figures.editions import in_every_language
from attention_course.i18n import N_, translator

SCHEME_COLOURS = {"none": "#7f7f7f", "sinusoidal": "#1f77b4", "learned": "#2ca02c", "rope": "#d62728",
                  "alibi": "#9467bd", "attention": "#e08a1e"}
# The names the chapters pass in, drawn in the figure's language (listed here for the catalog); "attention"
# is chapter 6's recurrent model, beside the Transformers in chapters 10 and 12.
SCHEME_NAMES = {"none": N_("no positions"), "sinusoidal": N_("sinusoidal"), "learned": N_("learned"),
                "rope": N_("rotary (RoPE)"), "alibi": N_("ALiBi"), "attention": N_("GRU with attention (ch. 6)")}
# A line labelled with a scheme's name is drawn in the scheme's colour.
_COLOUR_OF = {**SCHEME_COLOURS, **{name: SCHEME_COLOURS[key] for key, name in SCHEME_NAMES.items()}}
# The other English text the chapters pass in: panel titles, curve labels and axis titles.
PASSED_IN = (N_("without a cache"), N_("with a key/value cache"), N_("full attention"), N_("tiled attention"),
             N_("sinusoidal: $PE_j \\cdot PE_{j+k}$"), N_("RoPE: score of $q$ at $i$, $k$ at $i + k$"), N_("offset"),
             N_("from position {start}"), N_("training loss"), N_("training step"), N_("nats per token"),
             N_("position of the generated token"), N_("milliseconds per token"), N_("sequence length $S$"),
             N_("MiB at the peak"), N_("word position in the reference"), N_("accuracy, teacher forced"))


@in_every_language
def draw_position_encodings(encoding: torch.Tensor, lang: str = "en"):
    """The sinusoidal positional encodings (S, d) as a heatmap: one row per position, one column per feature."""
    tr = translator(lang)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    image = ax.imshow(encoding.T.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, origin="lower")
    ax.set_xlabel(tr("position $j$"))
    ax.set_ylabel(tr("feature"))
    fig.colorbar(image, ax=ax, label=tr("value"))
    chinese_beside_math(fig)
    fig.tight_layout()
    return fig


@in_every_language
def draw_offset_curves(panels: Mapping[str, Mapping[int, tuple[Sequence[int], Sequence[float]]]],
                       xlabel: str = "offset", curve_label: str = "from position {start}", lang: str = "en"):
    """One panel per ``{title: {start: (offsets, values)}}``, the curves of a panel (one per starting position)
    drawn over each other, so that curves that depend on the offset only lie on one line; each curve is labelled
    ``curve_label`` with its ``{start}``. Titles, ``xlabel`` and ``curve_label`` are English, drawn in ``lang``."""
    tr = translator(lang)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (title, curves) in zip(axes[0], panels.items()):
        styles = ["-", "--", ":", "-."]
        for k, (start, (offsets, values)) in enumerate(curves.items()):
            ax.plot(list(offsets), list(values), styles[k % 4], linewidth=2.2 - 0.4 * k,
                    label=tr(curve_label).format(start=start))
        ax.set_title(tr(title), fontsize=11)
        ax.set_xlabel(tr(xlabel))
        ax.legend(frameon=False, fontsize=9)
    chinese_beside_math(fig)
    fig.tight_layout()
    return fig


@in_every_language
def draw_rotations(vector: Sequence[float], thetas: Sequence[float], positions: Sequence[int], lang: str = "en"):
    """RoPE on one pair of features: the pair ``vector`` (2,) turned by j θ for each position j, one panel per θ
    (a fast pair and a slow one)."""
    tr = translator(lang)
    fig, axes = plt.subplots(1, len(thetas), figsize=(3.6 * len(thetas), 3.6), squeeze=False)
    x0, y0 = vector
    colours = plt.get_cmap("viridis")(torch.linspace(0, 0.9, len(positions)).numpy())
    for ax, theta in zip(axes[0], thetas):
        for colour, j in zip(colours, positions):
            angle = torch.tensor(j * theta)
            x = float(x0 * angle.cos() - y0 * angle.sin())
            y = float(x0 * angle.sin() + y0 * angle.cos())
            ax.annotate("", xy=(x, y), xytext=(0, 0), arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=1.6))
            ax.text(1.12 * x, 1.12 * y, f"$j={j}$", ha="center", va="center", fontsize=8.5, color=colour)
        limit = 1.35 * float(torch.tensor(vector).norm())
        ax.set_xlim(-limit, limit)
        ax.set_ylim(-limit, limit)
        ax.set_aspect("equal")
        ax.axhline(0, color="#cccccc", linewidth=0.8)
        ax.axvline(0, color="#cccccc", linewidth=0.8)
        ax.set_title(tr("θ = {theta} per position").format(theta=f"{theta:.2g}"), fontsize=10.5)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig


@in_every_language
def draw_alibi_biases(bias: torch.Tensor, slopes: torch.Tensor, lang: str = "en"):
    """ALiBi's bias (n_h, T, S), one heatmap per head, titled with its slope; causal positions only (j ≤ i)."""
    tr = translator(lang)
    heads = bias.shape[0]
    fig, axes = plt.subplots(1, heads, figsize=(2.6 * heads + 0.8, 3.0), squeeze=False)
    shown = bias.masked_fill(torch.ones(bias.shape[1:], dtype=torch.bool).triu(diagonal=1), float("nan"))
    cmap = plt.get_cmap("Reds_r").copy()
    cmap.set_bad("#eeeeee")
    image = None
    for head, ax in enumerate(axes[0]):
        image = ax.imshow(shown[head].numpy(), cmap=cmap, vmin=float(bias.min()), vmax=0)
        ax.set_title(tr("head {number}: $m$ = {slope}").format(number=head + 1, slope=f"{float(slopes[head]):.3g}"),
                     fontsize=10)
        ax.set_xlabel(tr("key position $j$"), fontsize=9)
        if head == 0:
            ax.set_ylabel(tr("query position $i$"), fontsize=9)
    chinese_beside_math(fig)
    fig.tight_layout(rect=(0, 0, 0.92, 1))
    fig.colorbar(image, cax=fig.add_axes((0.93, 0.2, 0.015, 0.6)), label=tr("bias"))
    return fig


def _layer_column(ax, x, norm_first, tr):
    """One Transformer encoder layer drawn bottom to top at ``x``, from y = 1.2: each sublayer with its residual
    path into a sum ⊕ and its LayerNorm, after the sum (post-LN) or on the sublayer's input (pre-LN).
    Returns the top of the drawing."""
    y = 1.2
    arrow(ax, (x, y), (x, y + 0.5))
    y += 0.5
    for name, colour in ((tr("Self-attention"), QUERY_COLOUR), (tr("Feed-forward"), VALUE_COLOUR)):
        # bottom to top: [LayerNorm], sublayer, ⊕, [LayerNorm]; the residual path leaves at y and joins at ⊕
        parts = ([(tr("LayerNorm"), POOL_COLOUR, 0.6)] if norm_first else []) + [(name, colour, 0.75)]
        level = y + 0.1
        for label, fill, height in parts:
            box(ax, x, level + height / 2, 2.6, height, label, fill, fontsize=9.5 if fill == POOL_COLOUR else 10)
            arrow(ax, (x, level + height), (x, level + height + 0.3))
            level += height + 0.3
        sum_y = level + 0.15
        ax.text(x, sum_y, "⊕", ha="center", va="center", fontsize=15)
        ax.plot([x, x - 1.6, x - 1.6], [y + 0.05, y + 0.05, sum_y], color="#555555", linewidth=1.2)
        arrow(ax, (x - 1.6, sum_y), (x - 0.2, sum_y), colour="#555555", linewidth=1.2)
        arrow(ax, (x, sum_y + 0.15), (x, sum_y + 0.45))
        y = sum_y + 0.45
        if not norm_first:
            box(ax, x, y + 0.3, 2.6, 0.6, tr("LayerNorm"), POOL_COLOUR, fontsize=9.5)
            arrow(ax, (x, y + 0.6), (x, y + 0.9))
            y += 0.9
    return y


@in_every_language
def draw_layer_norms(lang: str = "en"):
    """A Transformer encoder layer drawn two ways: post-LN (Vaswani et al.) and pre-LN (Xiong et al.)."""
    tr = translator(lang)
    fig, ax = canvas(7.6, 6.4, (0, 10), (0, 7.9))
    for x, title, norm_first in ((2.6, tr("post-LN"), False), (7.4, tr("pre-LN"), True)):
        top = _layer_column(ax, x, norm_first, tr)
        ax.text(x, 0.2, title, ha="center", va="bottom", fontsize=11)
        ax.text(x, 0.8, "$x$", ha="center", fontsize=12)
        ax.text(x, top + 0.05, tr("to the next layer"), ha="center", va="bottom", fontsize=9.5)
    chinese_beside_math(fig)
    fig.tight_layout()
    return fig


@in_every_language
def draw_encoder_decoder_transformer(num_layers: int = 2, lang: str = "en"):
    """The encoder–decoder Transformer: embeddings and positions, N encoder layers, N decoder layers whose
    cross-attention reads the encoder's output, and the output layer (after Vaswani et al.'s fig. 1)."""
    tr = translator(lang)
    fig, ax = canvas(8.2, 7.4, (0, 11), (0, 10))
    for x, side, source in ((2.8, "encoder", True), (8.2, "decoder", False)):
        box(ax, x, 0.7, 3.6, 0.7, tr("English words $x_1 … x_S$") if source else tr("Chinese words so far $y_0 … y_{i-1}$"),
            "#eeeeee", fontsize=9.5)
        arrow(ax, (x, 1.05), (x, 1.5))
        box(ax, x, 1.95, 3.6, 0.8, tr("embedding × √d + positions"), POOL_COLOUR, fontsize=9.5)
        arrow(ax, (x, 2.35), (x, 2.85))
        height = 3.2 if source else 4.4
        box(ax, x, 2.85 + height / 2, 3.8, height, "", KEY_COLOUR if source else QUERY_COLOUR)
        layers = [tr("Self-attention"), tr("Feed-forward")] if source else [
            tr("Causal self-attention"), tr("Cross-attention"), tr("Feed-forward")]
        for k, name in enumerate(layers):
            box(ax, x, 3.45 + 1.2 * k, 3.0, 0.75, name, "#ffffff", fontsize=9.5)
        ax.text(x + 2.05, 2.85 + height / 2, tr("× {n}").format(n=num_layers), va="center", fontsize=11)
        arrow(ax, (x, 2.85 + height), (x, 2.85 + height + 0.45))
        if source:
            memory_y = 2.85 + height + 0.75
            box(ax, x, memory_y, 3.0, 0.6, tr("encoder output (keys, values)"), "#ffffff", fontsize=9)
            arrow(ax, (x + 1.5, memory_y), (8.2 - 1.5, 4.65), colour="#444444")
        else:
            box(ax, x, 2.85 + height + 0.8, 3.0, 0.7, tr("Linear + softmax"), OUTPUT_COLOUR, fontsize=9.5)
            arrow(ax, (x, 2.85 + height + 1.15), (x, 2.85 + height + 1.55))
            ax.text(x, 2.85 + height + 1.65, tr("next word $y_i$"), ha="center", va="bottom", fontsize=10)
    chinese_beside_math(fig)
    fig.tight_layout()
    return fig


@in_every_language
def draw_cross_heads(weights: torch.Tensor, rows: Sequence[str], columns: Sequence[str], lang: str = "en"):
    """One heatmap per head of ``weights`` (n_h, T, S): row i is what target position i reads of the source."""
    tr = translator(lang)
    panels = [(tr("head {number}").format(number=head + 1), (head_weights, list(rows), list(columns)))
              for head, head_weights in enumerate(weights)]
    return weight_patterns(panels, min(2, len(panels)), tr)


@in_every_language
def draw_lines(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], xlabel: str, ylabel: str,
               logx: bool = False, logy: bool = False, mark_x: float | None = None, lang: str = "en"):
    """Lines ``{label: (xs, ys)}`` on one set of axes; labels and axis titles English, drawn in ``lang``.
    ``mark_x``: a dashed vertical line there (e.g. the longest length seen in training)."""
    tr = translator(lang)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    markers = ["o", "s", "^", "D", "v"]
    for k, (label, (xs, ys)) in enumerate(curves.items()):
        ax.plot(list(xs), list(ys), marker=markers[k % 5], markersize=4, linewidth=1.5, label=tr(label),
                color=_COLOUR_OF.get(label))
    ax.set_xlabel(tr(xlabel))
    ax.set_ylabel(tr(ylabel))
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    if mark_x is not None:
        ax.axvline(mark_x, color="black", linestyle="--", linewidth=1)
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    chinese_beside_math(fig)
    fig.tight_layout()
    return fig


__all__ = [
    "draw_position_encodings", "draw_offset_curves", "draw_rotations", "draw_alibi_biases", "draw_layer_norms",
    "draw_encoder_decoder_transformer", "draw_cross_heads", "draw_lines", "SCHEME_NAMES",
]
