"""Chapter 7's figures: attention read as alignment vs as influence, the weight patterns of global,
hard, local and self-attention on one sentence, how far a GRU, a convolution and self-attention see
in one layer, and how a GRU and a self-attention layer slow down as sequences grow.

Every function returns the matplotlib figure it drew, its text in ``lang`` (English by default; see
:mod:`attention_course.figures.editions`); the sentences' words are data, drawn as given. Call
:func:`attention_course.plotting.use_course_style` first, for the Chinese labels.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Patch, Rectangle

from attention_course.attention_variants import LayerTiming
from attention_course.figures.editions import in_every_language
from attention_course.i18n import N_, translator

ATTENTION_COLOUR = "#3b75af"  # blue, as the weights' colour map
RECURRENT_COLOUR = "#c8553d"  # red
EXACT_ZERO_COLOUR = "#d9d9d9"  # grey: a weight that is exactly 0

# The English text that chapter 7 passes in, which the figures translate when they draw (listed here
# for the catalog): the panel titles of ``draw_weight_patterns({title: (weights, rows, columns)})``.
PATTERN_TITLES = (
    N_("global, soft 全局注意力\noutput word × source word"),
    N_("hard 硬注意力\none source word per output word"),
    N_("local-p, D = 2 局部注意力\na learned window per output word"),
    N_("self-attention 自注意力\nsource word × source word"),
)


def _heatmap(ax, matrix: torch.Tensor, rows: Sequence[str], columns: Sequence[str], cmap: str, vmax: float,
             annotate: bool = True, decimals: int = 2, fontsize: float = 9):
    """Draw ``matrix`` (len(rows), len(columns)) with labelled axes; returns the image."""
    values = matrix.detach().float()
    image = ax.imshow(values.numpy(), cmap=cmap, vmin=0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(columns)), columns, rotation=40, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(len(rows)), rows)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if annotate:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                value = values[i, j].item()
                shown = f"{value:.{decimals}f}"
                if float(shown) == 0:
                    continue  # leave empty what rounds to 0, so the pattern stands out
                dark = value > 0.55 * vmax
                ax.text(j, i, shown, ha="center", va="center", fontsize=fontsize,
                        color="white" if dark else "#222222")
    return image


def _frame(ax, i, j, inset, **style):
    ax.add_patch(Rectangle((j - 0.5 + inset, i - 0.5 + inset), 1 - 2 * inset, 1 - 2 * inset, fill=False, **style))


TRUTH_STYLE = dict(edgecolor="#111111", linewidth=1.6, linestyle=(0, (3, 2)))
TOP_STYLE = dict(edgecolor="#f0a202", linewidth=2.4)


@in_every_language
def draw_alignment_vs_influence(
    source: Sequence[str],
    target: Sequence[str],
    attention: torch.Tensor,
    influence: torch.Tensor,
    truth: torch.Tensor,
    lang: str = "en",
):
    """Attention a_ij beside occlusion influence I_ij for one sentence, both (T, S), with the true alignment marked.

    ``source`` S English words, ``target`` T Chinese words, ``truth`` (T, S) nonzero where output word i
    translates source word j (``SentencePair.alignment_matrix``). Negative influences are drawn as 0.
    Dashed black frames: the true alignment; orange frames: each row's largest entry, the source word
    that reading pairs with the output word. Returns the figure, its text in ``lang``.
    """
    tr = translator(lang)
    fig, axes = plt.subplots(1, 2, figsize=(8.6, 4.6), sharey=True)
    panels = [
        (axes[0], tr("attention aᵢⱼ: where step i looks\n注意力权重（对齐模型）"), attention, "Blues", 1.0, 2),
        (axes[1], tr("drop in log p(yᵢ) when xⱼ → <unk>\n遮挡后的影响（影响模型）"), influence.clamp_min(0), "Reds",
         max(1e-6, float(influence.max())), 1),
    ]
    for ax, title, matrix, cmap, vmax, decimals in panels:
        _heatmap(ax, matrix, target, source, cmap, vmax, decimals=decimals, fontsize=8)
        for i, j in truth.nonzero().tolist():
            _frame(ax, i, j, 0.03, **TRUTH_STYLE)
        for i, j in enumerate(matrix.argmax(-1).tolist()):
            _frame(ax, i, j, 0.13, **TOP_STYLE)
        ax.set_title(title, fontsize=10.5)
        ax.set_xlabel(tr("source word xⱼ 源词"))
    axes[0].set_ylabel(tr("output word yᵢ 目标词"))
    handles = [
        Patch(facecolor="none", label=tr("true alignment 真实对齐"), **TRUTH_STYLE),
        Patch(facecolor="none", label=tr("largest in the row 每行最大值"), **TOP_STYLE),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=2, frameon=False, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


@in_every_language
def draw_weight_patterns(panels: Mapping[str, tuple[torch.Tensor, Sequence[str], Sequence[str]]], columns: int = 2,
                         lang: str = "en"):
    """One heatmap per kind of attention: ``{title: (weights (rows, columns), row labels, column labels)}``.

    Laid out ``columns`` to a row; all panels share the colour scale 0 … 1, so sharp, spread and
    cut-off weights compare at a glance. Weights that are exactly 0 (masked, outside a window, not
    picked) are drawn grey, to tell them from weights that are merely small. Returns the figure, its
    text in ``lang``: the titles are English (``PATTERN_TITLES``), translated too; the row and column
    labels are words of the sentences, drawn as given.
    """
    tr = translator(lang)
    return weight_patterns([(tr(title), panel) for title, panel in panels.items()], columns, tr)


def weight_patterns(panels: Sequence[tuple[str, tuple[torch.Tensor, Sequence[str], Sequence[str]]]], columns: int,
                    tr) -> plt.Figure:
    """:func:`draw_weight_patterns` for ``[(title, (weights, row labels, column labels)), ...]``, the titles
    drawn as given (already in the figure's language) and the figure's own text through ``tr``."""
    count = len(panels)
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.0 * columns + 0.8, 3.8 * rows + 0.5), squeeze=False)
    axes = axes.flatten()
    cmap = plt.get_cmap("Blues").copy()
    cmap.set_bad(EXACT_ZERO_COLOUR)
    image = None
    for ax, (title, (weights, row_labels, column_labels)) in zip(axes, panels):
        values = weights.detach().float()
        image = _heatmap(ax, values.masked_fill(values == 0, float("nan")), row_labels, column_labels,
                         cmap, 1.0, annotate=False)
        ax.set_title(title, fontsize=11)
    for ax in axes[count:]:
        ax.axis("off")
    fig.tight_layout(rect=(0, 0.05, 0.9, 1))
    colorbar_axis = fig.add_axes((0.92, 0.3, 0.018, 0.45))
    fig.colorbar(image, cax=colorbar_axis, label=tr("weight 权重"))
    fig.legend(handles=[Patch(facecolor=EXACT_ZERO_COLOUR, edgecolor="#999999", label=tr("exactly 0 恰好为零"))],
               loc="lower center", frameon=False, fontsize=10)
    return fig


def _subscript(number: int) -> str:
    return str(number).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _tokens_row(ax, xs, y, labels, colour, size=0.34):
    for x, label in zip(xs, labels):
        ax.add_patch(plt.Circle((x, y), size, facecolor=colour, edgecolor="#333333", linewidth=1.0, zorder=3))
        ax.text(x, y, label, ha="center", va="center", fontsize=11, zorder=4)


def _link(ax, start, end, highlight, arrow=False):
    colour, width, alpha = ("#c8553d", 1.8, 1.0) if highlight else ("#888888", 0.8, 0.45)
    ax.annotate("", xy=end, xytext=start, zorder=2,
                arrowprops=dict(arrowstyle="-|>" if arrow else "-", color=colour, linewidth=width, alpha=alpha,
                                shrinkA=12, shrinkB=12, mutation_scale=10))


@in_every_language
def draw_layer_connections(length: int = 6, focus: int = 3, kernel_size: int = 3, lang: str = "en"):
    """How one layer turns inputs x₁ … x_S into outputs: a GRU, a convolution, self-attention (top to bottom).

    The links into output ``focus`` (0-based) are drawn in red: a GRU reaches every earlier input only
    through a chain of sequential steps; a convolution reaches a window of ``kernel_size`` inputs, all
    positions at once; self-attention reaches every input, all positions at once. Returns the
    figure, its text in ``lang``.
    """
    tr = translator(lang)
    fig, axes = plt.subplots(3, 1, figsize=(7.2, 7.4))
    xs = list(range(length))
    half = kernel_size // 2
    titles = [
        tr("RNN (GRU): {length} steps, one after another  循环神经网络：无法并行").format(length=length),
        tr("CNN (kernel {size}): all at once, a local window  卷积神经网络：可并行，只看窗口").format(
            size=kernel_size),
        tr("self-attention: all at once, every position  自注意力：可并行，看全部"),
    ]
    for kind, (ax, title) in enumerate(zip(axes, titles)):
        ax.set_xlim(-0.8, length - 0.2)
        ax.set_ylim(-0.55, 2.55)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=11)
        _tokens_row(ax, xs, 0, [f"x{_subscript(i + 1)}" for i in xs], "#b9deb0")
        _tokens_row(ax, xs, 2, [f"h{_subscript(i + 1)}" for i in xs], "#a9cbe8")
        for i in xs:
            if kind == 0:
                _link(ax, (i, 0), (i, 2), highlight=i <= focus, arrow=True)
                if i > 0:
                    _link(ax, (i - 1, 2), (i, 2), highlight=i <= focus, arrow=True)
            else:
                sources = range(max(0, i - half), min(length, i + half + 1)) if kind == 1 else xs
                for j in sources:
                    _link(ax, (j, 0), (i, 2), highlight=i == focus)
    fig.tight_layout()
    return fig


@in_every_language
def draw_layer_timings(timings: Sequence[LayerTiming], lang: str = "en"):
    """Milliseconds per forward pass against sequence length S (both axes logarithmic), GRU vs self-attention.
    Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    lengths = [t.length for t in timings]
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    ax.plot(lengths, [1e3 * t.gru_seconds for t in timings], "o-", color=RECURRENT_COLOUR,
            label=tr("GRU: S steps in sequence 循环网络"))
    ax.plot(lengths, [1e3 * t.self_attention_seconds for t in timings], "s-", color=ATTENTION_COLOUR,
            label=tr("one self-attention layer 自注意力"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel(tr("sequence length S 序列长度"))
    ax.set_ylabel(tr("milliseconds per forward pass 毫秒"))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig
