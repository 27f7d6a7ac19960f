"""Chapter 4's figures: query, keys and values (the notes' fig. 8-2), the Source as <Key, Value>
pairs (the notes' fig. 8-3), the three stages with a worked example's numbers (the notes' fig. 8-4),
masked weights, and Nadaraya–Watson kernel regression as attention pooling.

Labels follow the book's notation (chapter 1): one query q, keys k_j and values v_j, j = 1 … S,
scores s_j and weights a_j. The notes write Query, Key_i, Value_i and T for the same things.

Every function returns the matplotlib figure it drew, its text in ``lang`` (English by default; see
:mod:`attention_course.figures.editions`). Call :func:`attention_course.plotting.use_course_style`
first, for the Chinese labels.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyBboxPatch, Rectangle

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
    vector_text,
)
from attention_course.figures.editions import in_every_language
from attention_course.i18n import translator


@in_every_language
def draw_attention_pooling(num_inputs: int = 4, lang: str = "en"):
    """The notes' fig. 8-2: the query (a volitional cue) meets the keys (non-volitional cues) in attention
    pooling, which biases the selection among the values (sensory inputs) paired with them. Returns the
    figure, its text in ``lang``."""
    tr = translator(lang)
    fig, ax = canvas(8.4, 5.1, (0, 12.2), (0, 7.4))
    spacing = 1.9
    xs = [5.0 + spacing * i for i in range(num_inputs)]
    pool_left, pool_right = xs[0] - 0.9, xs[-1] + 0.9

    # The sensory inputs: each is a pair, its value above its key, in one frame.
    for j, x in enumerate(xs, start=1):
        ax.add_patch(Rectangle((x - 0.8, 0.35), 1.6, 2.6, facecolor="none", edgecolor="#888888",
                               linestyle="--", linewidth=1.0))
        box(ax, x, 2.25, 1.3, 0.8, f"$v_{j}$", VALUE_COLOUR, fontsize=13)
        box(ax, x, 1.05, 1.3, 0.8, f"$k_{j}$", KEY_COLOUR, fontsize=13)
        arrow(ax, (x, 2.95), (x, 3.75))
    ax.text(0.2, 2.25, tr("Values 值\n= sensory inputs 感官输入"), va="center", fontsize=10.5)
    ax.text(0.2, 1.05, tr("Keys 键\n= non-volitional cues\n    非自主性提示"), va="center", fontsize=10.5)

    box(ax, (pool_left + pool_right) / 2, 4.3, pool_right - pool_left, 1.1,
         tr("Attention pooling 集中注意力"), POOL_COLOUR, fontsize=13)
    _, q_right, _, _ = box(ax, 1.6, 4.3, 2.7, 1.35, tr("Query 查询\n= volitional cue\n自主性提示"), QUERY_COLOUR,
                            fontsize=10.5)
    arrow(ax, (q_right, 4.3), (pool_left, 4.3))
    ax.text((q_right + pool_left) / 2, 4.15, tr("meets\nthe keys"), ha="center", va="top", fontsize=9)

    centre = (pool_left + pool_right) / 2
    arrow(ax, (centre, 4.85), (centre, 5.75))
    box(ax, centre, 6.35, 5.4, 1.05, tr("Output 输出: the values,\nweighted towards what the query seeks"),
         OUTPUT_COLOUR, fontsize=10.5)
    fig.tight_layout()
    return fig


@in_every_language
def draw_source_query(num_pairs: int = 4, lang: str = "en"):
    """The notes' fig. 8-3: the Source is a sequence of S <Key, Value> pairs (k_j, v_j); a query q from
    the Target is compared with every key, and the values, weighted by the results, add up to the
    attention value. Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    fig, ax = canvas(8.6, 4.7, (0, 14.2), (-0.5, 7.1))
    row_gap = 1.3
    ys = [5.6 - row_gap * r for r in range(num_pairs + 1)]  # one extra row for the dots before S
    labels = [str(j) for j in range(1, num_pairs)] + ["⋮", "S"]
    key_x, value_x, sum_x = 4.6, 6.9, 10.3

    ax.add_patch(FancyBboxPatch((3.2, ys[-1] - 0.65), 5.1, ys[0] - ys[-1] + 1.3,
                                boxstyle="round,pad=0.02,rounding_size=0.2", facecolor="#f5f5f5",
                                edgecolor="#888888", linewidth=1.0))
    ax.text(5.75, ys[0] + 0.85, tr("Source 源: ⟨Key, Value⟩ pairs, length S"), ha="center", fontsize=11)

    _, q_right, _, _ = box(ax, 1.25, ys[2], 2.2, 1.3, tr("Query 查询\n(from the\nTarget 目标)"), QUERY_COLOUR,
                            fontsize=10.5)
    _, sum_right, _, _ = box(ax, sum_x, ys[2], 0.9, 0.9, "Σ", POOL_COLOUR, fontsize=16)
    for y, label in zip(ys, labels):
        if label == "⋮":
            ax.text(key_x, y, "⋮", ha="center", va="center", fontsize=16)
            ax.text(value_x, y, "⋮", ha="center", va="center", fontsize=16)
            continue
        key_left, _, _, _ = box(ax, key_x, y, 1.7, 0.75, f"$k_{{{label}}}$", KEY_COLOUR, fontsize=12)
        _, value_right, _, _ = box(ax, value_x, y, 1.7, 0.75, f"$v_{{{label}}}$", VALUE_COLOUR, fontsize=12)
        ax.text((key_x + value_x) / 2, y, ",", ha="center", va="center", fontsize=12)
        ax.text(key_x - 1.05, y, "⟨", ha="center", va="center", fontsize=16)
        ax.text(value_x + 1.05, y, "⟩", ha="center", va="center", fontsize=16)
        arrow(ax, (q_right, ys[2]), (key_left - 0.28, y), colour="#999999", linestyle="--", linewidth=1.0)
        start, end = (value_right + 0.3, y), (sum_x - 0.5, ys[2] + 0.25 * (y - ys[2]) / row_gap)
        arrow(ax, start, end)
        # The weight's label sits a quarter of the way along its arrow, on the side away from it.
        at_x, at_y = start[0] + 0.25 * (end[0] - start[0]), start[1] + 0.25 * (end[1] - start[1])
        rising = end[1] > start[1]
        ax.text(at_x + (0.15 if rising else 0.05), at_y + (-0.1 if rising else 0.1), f"$\\times\\, a_{{{label}}}$",
                ha="left", va="top" if rising else "bottom", fontsize=11)
    ax.text(1.25, ys[2] - 0.95, tr("$q$ is compared\nwith every $k_j$:\nsimilarity → $a_j$"), ha="center", va="top",
            fontsize=9.5, color="#555555")
    arrow(ax, (sum_right, ys[2]), (sum_right + 0.7, ys[2]))
    box(ax, sum_right + 1.75, ys[2], 2.1, 1.1, tr("Attention\nvalue 注意力值"), OUTPUT_COLOUR, fontsize=10.5)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig


@in_every_language
def draw_three_stages(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    scores: torch.Tensor,
    weights: torch.Tensor,
    output: torch.Tensor,
    score_name: str = r"$F(q, k_j)$",
    lang: str = "en",
):
    """The notes' fig. 8-4, with the numbers of one worked example written in.

    query (d,), keys (S, d), values (S,) or (S, d_v), scores (S,), weights (S,), output () or (d_v,).
    Stage 1 scores the query against every key, stage 2 turns the scores into weights with softmax,
    stage 3 adds up the values, each times its weight. ``score_name`` labels the score boxes; its
    ``_j`` becomes each key's number (a formula: it is drawn as given). Returns the figure, its text
    in ``lang``.
    """
    tr = translator(lang)
    num_keys = keys.shape[0]
    if not scores.shape == weights.shape == (num_keys,) or values.shape[0] != num_keys:
        raise ValueError(f"keys (S, d), values (S, ...), scores (S,) and weights (S,) must share S, got "
                         f"{tuple(keys.shape)}, {tuple(values.shape)}, {tuple(scores.shape)}, {tuple(weights.shape)}")
    column = 3.4
    xs = [5.0 + column * i for i in range(num_keys)]
    width = xs[-1] + 2.0
    fig, ax = canvas(0.66 * width, 6.5, (0, width), (0.4, 11.3))

    # Shaded bands, one per stage, with the stage's name at the left.
    bands = [(7.05, 9.15, tr("Stage 1 第1阶段\nscore 相似度\n$s_j = F(q, k_j)$")),
             (4.85, 6.95, tr("Stage 2 第2阶段\nnormalise 归一化\n$a_j = \\mathrm{softmax}(s_j)$")),
             (0.5, 4.75, tr("Stage 3 第3阶段\nweighted sum 加权求和\n$\\Sigma_j\\, a_j v_j$"))]
    for bottom, top, label in bands:
        ax.add_patch(Rectangle((0.05, bottom), width - 0.1, top - bottom, facecolor="#f3f3f3", edgecolor="none"))
        ax.text(0.25, (bottom + top) / 2, label, va="center", fontsize=10)

    # Top: the query runs along a bus above the keys and drops into every score box.
    bus_y = 10.85
    _, q_right, _, _ = box(ax, 1.6, bus_y, 2.8, 0.75, f"$q$ = {vector_text(query)}", QUERY_COLOUR, fontsize=11.5)
    ax.plot([q_right, xs[-1] + 0.95], [bus_y, bus_y], color="#333333", linewidth=1.4)
    for i, x in enumerate(xs):
        box(ax, x - 0.4, 9.85, 2.0, 0.75, f"$k_{i + 1}$ = {vector_text(keys[i])}", KEY_COLOUR, fontsize=11)
        arrow(ax, (x - 0.4, 9.47), (x - 0.4, 8.72))
        arrow(ax, (x + 0.95, bus_y), (x + 0.95, 8.72))
        box(ax, x, 8.35, 2.6, 0.75, score_name.replace("_j", f"_{i + 1}"), POOL_COLOUR, fontsize=11)
        arrow(ax, (x, 7.97), (x, 7.62))
        ax.text(x, 7.35, f"$s_{i + 1}$ = {scores[i].item():.3f}", ha="center", va="center", fontsize=11.5)
        arrow(ax, (x, 7.1), (x, 6.6))
    left, right = xs[0] - 1.3, xs[-1] + 1.3
    box(ax, (left + right) / 2, 6.25, right - left, 0.7, "softmax: $a_j = e^{s_j}\\,/\\,\\Sigma_l\\, e^{s_l}$", POOL_COLOUR,
         fontsize=11.5)
    for i, x in enumerate(xs):
        arrow(ax, (x, 5.88), (x, 5.45))
        ax.text(x, 5.2, f"$a_{i + 1}$ = {weights[i].item():.4f}", ha="center", va="center", fontsize=11.5)
        # Stage 3: the weight and the value meet in a product.
        box(ax, x + 0.75, 4.0, 1.45, 0.7, f"$v_{i + 1}$ = {vector_text(values[i])}", VALUE_COLOUR, fontsize=11)
        arrow(ax, (x, 4.95), (x - 0.1, 3.0))
        arrow(ax, (x + 0.75, 3.64), (x + 0.3, 3.0))
        product = weights[i] * values[i]
        box(ax, x, 2.65, 3.15, 0.65, f"{weights[i].item():.4f} × {vector_text(values[i])} ≈ "
             f"{vector_text(product, decimals=3)}", "white", fontsize=10.5)
        arrow(ax, (x, 2.32), ((left + right) / 2 + 0.3 * (x - (left + right) / 2) / column, 1.45))
    centre = (left + right) / 2
    box(ax, centre, 1.1, 0.7, 0.7, "Σ", POOL_COLOUR, fontsize=15)
    arrow(ax, (centre + 0.36, 1.1), (centre + 1.2, 1.1))
    ax.text(centre + 1.3, 1.1,
            tr("Attention value 注意力值\n= {value}").format(value=vector_text(output, decimals=3)),
            va="center", fontsize=11.5, bbox=dict(boxstyle="round", facecolor=OUTPUT_COLOUR, edgecolor="#444444"))
    fig.tight_layout()
    return fig


@in_every_language
def draw_masked_weights(weights: torch.Tensor, valid_lens: torch.Tensor, titles: Sequence[str] | None = None,
                        lang: str = "en"):
    """Heatmaps of masked attention weights, one panel per sequence of the batch.

    weights (B, T, S), valid_lens (B,). Each cell shows its weight; the keys at or beyond a
    sequence's valid length (padding) are hatched, and their weights are 0. Returns the figure, its
    text in ``lang``: ``titles``, if given, are English messages of the catalog, translated too.
    """
    tr = translator(lang)
    batch, num_queries, num_keys = weights.shape
    fig, axes = plt.subplots(1, batch, figsize=(0.9 * num_keys * batch + 1.8, 0.65 * num_queries + 1.6),
                             squeeze=False)
    for b, ax in enumerate(axes[0]):
        image = ax.imshow(weights[b].numpy(), cmap="Blues", vmin=0, vmax=1)
        length = int(valid_lens[b])
        for i in range(num_queries):
            for j in range(num_keys):
                value = weights[b, i, j].item()
                ax.text(j, i, f"{value:.2f}" if value else "0", ha="center", va="center", fontsize=10,
                        color="white" if value > 0.6 else "black",
                        bbox=None if j < length else dict(boxstyle="round", facecolor="white", edgecolor="none"))
        if length < num_keys:
            ax.add_patch(Rectangle((length - 0.5, -0.5), num_keys - length, num_queries, facecolor="none",
                                   edgecolor="#c0392b", hatch="//", linewidth=0))
        ax.set_xticks(range(num_keys))
        ax.set_yticks(range(num_queries))
        ax.set_xlabel(tr("key position j (键)"))
        ax.set_ylabel(tr("query i (查询)"))
        ax.set_title(tr(titles[b]) if titles else
                     tr("sequence {index}: valid length {length}").format(index=b, length=length), fontsize=11)
    fig.colorbar(image, ax=axes[0].tolist(), fraction=0.03, pad=0.03, label=tr("weight 权重"))
    return fig


def _edges(centres: torch.Tensor) -> torch.Tensor:
    """Cell edges (n + 1,) around sorted centres (n,): midpoints inside, half a gap beyond each end."""
    if centres.numel() == 1:
        return torch.stack([centres[0] - 0.5, centres[0] + 0.5])
    middle = (centres[1:] + centres[:-1]) / 2
    first = centres[:1] - (middle[:1] - centres[:1])
    last = centres[-1:] + (centres[-1:] - middle[-1:])
    return torch.cat([first, middle, last])


@in_every_language
def draw_kernel_regression(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_query: torch.Tensor,
    prediction: torch.Tensor,
    truth: torch.Tensor,
    weights: torch.Tensor,
    lang: str = "en",
):
    """Nadaraya–Watson regression as attention pooling: two panels.

    Left: the training data (S,), the true curve and the prediction at the query points (T,), with
    the plain average for comparison. Right: the weight matrix (T, S), queries down, keys across.
    Returns the figure, its text in ``lang``.
    """
    tr = translator(lang)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.0), gridspec_kw={"width_ratios": [1.25, 1]})
    left.plot(x_query.numpy(), truth.numpy(), color="#444444", linewidth=1.5, label=tr("truth 真实函数"))
    left.plot(x_query.numpy(), prediction.numpy(), color="#c0392b", linewidth=2.2,
              label=tr("attention pooling 集中注意力"))
    left.axhline(y_train.mean().item(), color="#7f8c8d", linestyle="--", linewidth=1.3,
                 label=tr("plain average 平均"))
    left.scatter(x_train.numpy(), y_train.numpy(), s=16, color="#2e86c1", alpha=0.75,
                 label=tr("training pairs $(x_j, y_j)$"))
    left.set_xlabel(tr("x (query 查询, keys 键)"))
    left.set_ylabel(tr("y (values 值)"))
    low = min(y_train.min().item(), truth.min().item(), prediction.min().item())
    high = max(y_train.max().item(), truth.max().item(), prediction.max().item())
    left.set_ylim(low - 0.3, high + 0.35 * (high - low))  # headroom for the legend
    left.legend(fontsize=9, loc="upper right", ncol=2, columnspacing=1.0)
    left.set_title(tr("Nadaraya–Watson regression"), fontsize=11)

    # Cells as wide as the gaps between neighbouring points, so each column sits at its own x_j.
    image = right.pcolormesh(_edges(x_train).numpy(), _edges(x_query).numpy(), weights.numpy(), cmap="Reds",
                             vmin=0, shading="flat")
    right.invert_yaxis()
    right.set_xlabel(tr("training input (key 键)"))
    right.set_ylabel(tr("query x (查询)"))
    right.set_title(tr("attention weights 注意力权重"), fontsize=11)
    fig.colorbar(image, ax=right, fraction=0.05, pad=0.03)
    chinese_beside_math(fig)  # before the layout measures the texts
    fig.tight_layout()
    return fig
