"""Chapter 2's figures: soft/hard × global/local on one sentence, temperature as the dial from soft
to hard attention, and soft against hard attention learning the same retrieval task."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from attention_course.figures.editions import in_every_language
from attention_course.i18n import translator
from attention_course.retrieval import TrainingHistory

SOFT_COLOUR = "#1f77b4"
HARD_COLOUR = "#d62728"


@in_every_language
def draw_temperature_dial(
    temperatures: torch.Tensor,
    entropies: torch.Tensor,
    snapshots: Sequence[tuple[float, torch.Tensor]],
    lang: str = "en",
):
    """Left: the entropy of the attention weights (n,) against the temperatures (n,), on a log axis,
    between its limits log S (uniform weights over S keys) and 0 (one-hot). Right: one bar chart of
    the weights (S,) for each ``(temperature, weights)`` in ``snapshots``, marked on the curve.
    Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    num_keys = snapshots[0][1].numel()
    fig = plt.figure(figsize=(10, 3.7), layout="constrained")
    grid = fig.add_gridspec(1, 1 + len(snapshots), width_ratios=[2.4] + [1] * len(snapshots))

    curve = fig.add_subplot(grid[0])
    curve.plot(temperatures.numpy(), entropies.numpy(), color=SOFT_COLOUR, lw=2)
    curve.set_xscale("log")
    upper = math.log(num_keys)
    curve.axhline(upper, color="grey", ls="--", lw=1)
    curve.axhline(0.0, color="grey", ls="--", lw=1)
    # Each limit is labelled at the end of the axis where the curve is far from it.
    curve.text(temperatures.min().item(), upper - 0.05,
               tr("log {keys} ≈ {limit}: uniform weights").format(keys=num_keys, limit=f"{upper:.2f}"),
               va="top", ha="left", fontsize=9, color="dimgrey")
    curve.text(temperatures.max().item(), 0.05, tr("0: one-hot weights"), va="bottom", ha="right",
               fontsize=9, color="dimgrey")
    for temperature, weights in snapshots:
        entropy = -torch.special.xlogy(weights, weights).sum().item()
        curve.plot([temperature], [entropy], "o", color="black", ms=5)
        # Keep each label off the curve: above-left near 0, right on the slope, below near log K.
        if entropy < 0.2:
            offset, align = (-6, 6), "right"
        elif entropy < upper - 0.2:
            offset, align = (7, -4), "left"
        else:
            offset, align = (4, -16), "left"
        curve.annotate(f"τ = {temperature:g}", (temperature, entropy), textcoords="offset points",
                       xytext=offset, ha=align, fontsize=9)
    curve.set_xlabel(tr("temperature τ 温度 (log scale)"))
    curve.set_ylabel(tr("entropy of the weights 熵 (nats)"))
    curve.set_title(tr("Entropy against temperature"))
    curve.set_ylim(-0.1, upper + 0.15)

    positions = list(range(1, num_keys + 1))
    for column, (temperature, weights) in enumerate(snapshots, start=1):
        ax = fig.add_subplot(grid[column])
        ax.bar(positions, weights.numpy(), color=SOFT_COLOUR)
        ax.set_ylim(0, 1.05)
        ax.set_xticks(positions)
        ax.set_title(tr("weights at τ = {temperature}").format(temperature=f"{temperature:g}"), fontsize=10)
        ax.set_xlabel(tr("key j"))
        if column == 1:
            ax.set_ylabel(tr("weight of key j 权重"))
        else:
            ax.set_yticklabels([])
    return fig


@in_every_language
def draw_two_distinctions(
    words: Sequence[str],
    cells: Mapping[tuple[str, str], torch.Tensor],
    window: torch.Tensor,
    lang: str = "en",
):
    """Soft/hard (rows) × global/local (columns): one bar chart of weights over ``words`` per cell.

    ``cells[(kind, reach)]``, kind "soft" or "hard" and reach "global" or "local", holds the
    weights (S,) over the S ``words``; ``window`` (S,) bool marks the keys eligible for local
    attention, which are shaded in the local column. Keys outside the window are labelled "not
    eligible" there. The words are data, drawn as given. Returns the figure, its text in ``lang``.
    """
    tr = translator(lang)
    positions = list(range(len(words)))
    fig, axes = plt.subplots(2, 2, figsize=(10, 5.6), sharex=True, sharey=True, layout="constrained")
    inside = [j for j in positions if bool(window[j])]
    # Each cell's title; the top row's adds its column's heading above it, the left column's
    # y-label names its row.
    cell_titles = {("soft", "global"): tr("soft + global"), ("soft", "local"): tr("soft + local"),
                   ("hard", "global"): tr("hard + global"), ("hard", "local"): tr("hard + local")}
    column_titles = {"global": tr("global 全局: every key eligible\nsoft + global"),
                     "local": tr("local 局部: only a window is eligible\nsoft + local")}
    row_labels = {"soft": tr("soft 软注意力\nweight aⱼ"), "hard": tr("hard 硬注意力\nweight aⱼ")}
    not_eligible = tr("not\neligible")
    for row, kind in enumerate(("soft", "hard")):
        for column, reach in enumerate(("global", "local")):
            ax = axes[row][column]
            weights = cells[(kind, reach)].detach().float()
            colour = SOFT_COLOUR if kind == "soft" else HARD_COLOUR
            if reach == "local":
                ax.axvspan(inside[0] - 0.5, inside[-1] + 0.5, color="#f2e6c9", zorder=0)
                for j in positions:
                    if not bool(window[j]):
                        ax.text(j, 0.03, not_eligible, ha="center", va="bottom", fontsize=7, color="dimgrey")
            ax.bar(positions, weights.numpy(), color=colour, zorder=2)
            for j, weight in enumerate(weights.tolist()):
                if weight > 0.005:
                    ax.text(j, weight + 0.02, f"{weight:.2f}", ha="center", va="bottom", fontsize=8)
            ax.set_ylim(0, 1.15)
            ax.set_title(cell_titles[(kind, reach)], fontsize=11)
            ax.set_xticks(positions, words, rotation=30, ha="right", rotation_mode="anchor")
            if column == 0:
                ax.set_ylabel(row_labels[kind], fontsize=9)
            if row == 0:
                ax.set_title(column_titles[reach], fontsize=10)
    return fig


def running_mean(series: Sequence[float], window: int) -> torch.Tensor:
    """The mean of the last ``window`` entries (fewer at the start) at each step: (len(series),)."""
    values = torch.tensor(series, dtype=torch.float64)
    totals = torch.cat([torch.zeros(1, dtype=torch.float64), values.cumsum(0)])
    ends = torch.arange(1, len(values) + 1)
    starts = (ends - window).clamp_min(0)
    return (totals[ends] - totals[starts]) / (ends - starts)


@in_every_language
def draw_learning_curves(histories: Sequence[TrainingHistory], window: int = 10, lang: str = "en"):
    """Two panels over the training steps, one line per history: the training loss (log scale),
    averaged over the last ``window`` batches, and the held-out retrieval accuracy. Returns the
    figure, its text in ``lang``."""
    tr = translator(lang)
    colours = {"soft": SOFT_COLOUR, "hard": HARD_COLOUR}
    labels = {"soft": tr("soft attention 软注意力 (backprop)"),
              "hard": tr("hard attention 硬注意力 (REINFORCE)")}
    fig, (loss_ax, accuracy_ax) = plt.subplots(1, 2, figsize=(10, 3.7), layout="constrained")
    for history in histories:
        steps = range(1, len(history.loss) + 1)
        style = dict(color=colours.get(history.method), label=labels.get(history.method, history.method))
        # A running mean: single batches of the hard learner are noisy, and can have a loss of 0.
        loss_ax.plot(steps, running_mean(history.loss, window).numpy(), lw=2, **style)
        accuracy_ax.plot(steps, history.accuracy, lw=2, **style)
    loss_ax.set_yscale("log")
    loss_ax.set_xlabel(tr("training step"))
    loss_ax.set_ylabel(tr("training loss ‖output − target value‖²"))
    loss_ax.set_title(tr("Training loss (mean of the last {window} batches)").format(window=window))
    accuracy_ax.set_ylim(0, 1.02)
    accuracy_ax.set_xlabel(tr("training step"))
    accuracy_ax.set_ylabel(tr("held-out accuracy"))
    accuracy_ax.set_title(tr("How often the top-scoring key is the target"))
    accuracy_ax.legend(loc="lower right")
    return fig
