"""Chapter 1's figure: a scene, where attention falls in it, and what is taken in."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle

from attention_course.figures.editions import in_every_language
from attention_course.i18n import translator


@in_every_language
def draw_glimpse(scene: torch.Tensor, weights: torch.Tensor, seen: torch.Tensor, lang: str = "en"):
    """Three panels: the scene (rows, cols, 3); the attention weights (rows, cols) over it; the
    scene with unattended patches faded, beside the weighted colour ``seen`` (3,) and the plain average.
    Returns the matplotlib figure, its text in ``lang``."""
    tr = translator(lang)
    rows, cols, _ = scene.shape
    plain_average = scene.reshape(-1, 3).mean(dim=0)
    # Fade towards white the less attention a patch gets (square root: small weights stay visible).
    emphasis = (weights / weights.max()).sqrt().unsqueeze(-1)
    faded = emphasis * scene + (1 - emphasis) * torch.ones_like(scene)

    fig, axes = plt.subplots(1, 4, figsize=(12, 3.1), gridspec_kw={"width_ratios": [4, 4, 4, 1.6]})
    axes[0].imshow(scene.numpy())
    axes[0].set_title(tr("Scene 场景"))
    heat = axes[1].imshow(weights.numpy(), cmap="magma", vmin=0)
    axes[1].set_title(tr("Attention weights 注意力权重"))
    fig.colorbar(heat, ax=axes[1], fraction=0.046, pad=0.04)
    axes[2].imshow(faded.numpy())
    axes[2].set_title(tr("Focus: the rest suppressed 聚焦"))
    for ax in axes[:3]:
        ax.axis("off")

    swatch = axes[3]
    swatch.add_patch(Rectangle((0, 0.55), 1, 0.4, color=seen.clamp(0, 1).tolist()))
    swatch.add_patch(Rectangle((0, 0.0), 1, 0.4, color=plain_average.clamp(0, 1).tolist()))
    swatch.text(0.5, 0.97, tr("attended\n加权"), ha="center", va="bottom", fontsize=9)
    swatch.text(0.5, 0.42, tr("plain mean\n平均"), ha="center", va="bottom", fontsize=9)
    swatch.set_xlim(0, 1)
    swatch.set_ylim(0, 1.25)
    swatch.axis("off")
    fig.tight_layout()
    return fig
