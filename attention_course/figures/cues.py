"""Chapter 3's figures: the playroom of fig. 8-1, where a child's attention falls in it, and how it moves over time."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Circle, Ellipse, FancyBboxPatch, Polygon, Rectangle

from attention_course.cues import FLOOR_DEPTH, FLOOR_WIDTH, ToyScene
from attention_course.figures.editions import in_every_language
from attention_course.i18n import LANGUAGES, translator

FLOOR_COLOUR = (0.96, 0.93, 0.86)
HALO_COLOUR = (1.0, 0.78, 0.0)
GAZE_COLOUR = (0.85, 0.25, 0.1)


def _draw_car(ax, x, y, r, colour):
    ax.add_patch(FancyBboxPatch((x - r, y - 0.3 * r), 2 * r, 0.65 * r, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=colour, edgecolor="black", linewidth=0.8, zorder=3))
    ax.add_patch(Polygon([(x - 0.55 * r, y + 0.35 * r), (x - 0.3 * r, y + 0.8 * r), (x + 0.35 * r, y + 0.8 * r),
                          (x + 0.6 * r, y + 0.35 * r)], closed=True, facecolor=colour, edgecolor="black",
                         linewidth=0.8, zorder=3))
    ax.add_patch(Polygon([(x - 0.4 * r, y + 0.38 * r), (x - 0.25 * r, y + 0.68 * r), (x + 0.3 * r, y + 0.68 * r),
                          (x + 0.45 * r, y + 0.38 * r)], closed=True, facecolor=(0.8, 0.9, 1.0), zorder=4))
    for dx in (-0.55 * r, 0.55 * r):
        ax.add_patch(Circle((x + dx, y - 0.35 * r), 0.25 * r, facecolor="black", zorder=4))
        ax.add_patch(Circle((x + dx, y - 0.35 * r), 0.1 * r, facecolor="0.7", zorder=5))


def _draw_ball(ax, x, y, r, colour):
    ax.add_patch(Circle((x, y), r, facecolor=colour, edgecolor="black", linewidth=0.8, zorder=3))
    ax.add_patch(Ellipse((x, y), 2 * r, 0.5 * r, facecolor="white", edgecolor="none", alpha=0.8, zorder=4))


def _draw_block(ax, x, y, r, colour, letter):
    ax.add_patch(Rectangle((x - 0.8 * r, y - 0.8 * r), 1.6 * r, 1.6 * r, facecolor=colour, edgecolor="black",
                           linewidth=0.8, zorder=3))
    ax.text(x, y, letter, ha="center", va="center", fontsize=11, color=(0.45, 0.3, 0.15), zorder=4)


def _draw_animal(ax, x, y, r, colour, name, velocity):
    facing = 1.0 if velocity[0] >= 0 else -1.0  # the head leads the way
    for dx in (-0.55, -0.25, 0.25, 0.55):
        ax.plot([x + dx * r, x + dx * r], [y - 0.2 * r, y - 0.75 * r], color="black", linewidth=1.5, zorder=2)
    ax.add_patch(Ellipse((x, y), 1.6 * r, 0.85 * r, facecolor=colour, edgecolor="black", linewidth=0.8, zorder=3))
    hx, hy = x + facing * 0.8 * r, y + 0.45 * r
    if name == "rabbit":
        ears = [Ellipse((hx + d * r, hy + 0.55 * r), 0.18 * r, 0.7 * r, facecolor=colour, edgecolor="black",
                        linewidth=0.8, zorder=3) for d in (-0.1, 0.12)]
    elif name == "cat":
        ears = [Polygon([(hx + d * r, hy + 0.15 * r), (hx + (d + 0.12) * r, hy + 0.55 * r),
                         (hx + (d + 0.24) * r, hy + 0.15 * r)], closed=True, facecolor=colour, edgecolor="black",
                        linewidth=0.8, zorder=3) for d in (-0.3, 0.06)]
    else:  # a dog's ears flop down beside its head
        ears = [Ellipse((hx + d * r, hy - 0.05 * r), 0.2 * r, 0.45 * r, facecolor=(0.55, 0.3, 0.1), zorder=5)
                for d in (-0.3, 0.3)]
    for ear in ears:
        ax.add_patch(ear)
    ax.add_patch(Circle((hx, hy), 0.38 * r, facecolor=colour, edgecolor="black", linewidth=0.8, zorder=4))
    ax.add_patch(Circle((hx + facing * 0.15 * r, hy + 0.08 * r), 0.06 * r, facecolor="black", zorder=6))
    # Motion lines trail behind a moving toy, and an arrow shows where it is heading.
    speed = float(torch.as_tensor(velocity).norm())
    if speed > 0:
        for dy in (-0.25, 0.0, 0.25):
            ax.plot([x - facing * 1.05 * r, x - facing * 1.45 * r], [y + dy * r, y + dy * r], color="0.35",
                    linewidth=1.0, zorder=2)
        ax.annotate("", xy=(x + velocity[0] * 0.9, y + velocity[1] * 0.9), xytext=(x, y),
                    arrowprops=dict(arrowstyle="->", color="0.25", linewidth=1.0), zorder=6)


def _toy_name(scene: ToyScene, i: int, lang: str, short: bool = False, lines: str = " ") -> str:
    """Toy i's name, which the scene holds in both languages: in English the English name with the
    Chinese beside it (the first word of it if ``short``: "block A 积木"), in Chinese the Chinese."""
    if lang != LANGUAGES[0]:
        return scene.names_zh[i]
    chinese = scene.names_zh[i].split()[0] if short else scene.names_zh[i]
    return f"{scene.names[i]}{lines}{chinese}"


def _draw_child(ax, x, y, tr):
    ax.add_patch(Circle((x, y), 0.42, facecolor=(1.0, 0.85, 0.7), edgecolor="black", linewidth=0.8, zorder=7))
    ax.add_patch(Polygon([(x - 0.42, y + 0.1), (x, y + 0.5), (x + 0.42, y + 0.1)], closed=True,
                         facecolor=(0.35, 0.2, 0.1), zorder=8))
    for dx in (-0.15, 0.15):
        ax.add_patch(Circle((x + dx, y + 0.02), 0.05, facecolor="black", zorder=8))
    ax.text(x + 0.6, y - 0.05, tr("child 小朋友"), ha="left", va="center", fontsize=9)


def draw_toy_scene(ax, scene: ToyScene, weights: torch.Tensor | None = None, title: str | None = None,
                   lang: str = "en") -> None:
    """Draw ``scene`` on ``ax``: the floor, every toy, the child at the front, its text in ``lang``
    (``title`` is drawn as given).

    With ``weights`` (N,) (attention over the toys, summing to 1), each toy gets a halo and a line of
    gaze from the child, both as strong as its weight relative to the largest.
    """
    ax.add_patch(Rectangle((0, 0), FLOOR_WIDTH, FLOOR_DEPTH, facecolor=FLOOR_COLOUR, edgecolor="0.6", zorder=0))
    cx, cy = scene.child.tolist()
    if weights is not None:
        relative = (weights / weights.max()).tolist()
        for (x, y), r, w in zip(scene.positions.tolist(), scene.sizes.tolist(), relative):
            ax.add_patch(Circle((x, y), 1.7 * r, facecolor=HALO_COLOUR, alpha=0.75 * w, edgecolor="none", zorder=1))
            ax.plot([cx, x], [cy + 0.4, y], color=GAZE_COLOUR, alpha=0.15 + 0.75 * w, linewidth=0.3 + 4.5 * w,
                    zorder=1.5, solid_capstyle="round")
    for i, kind in enumerate(scene.kinds):
        x, y = scene.positions[i].tolist()
        r = float(scene.sizes[i])
        colour = tuple(scene.colours[i].tolist())
        if kind == "car":
            _draw_car(ax, x, y, r, colour)
        elif kind == "ball":
            _draw_ball(ax, x, y, r, colour)
        elif kind == "block":
            _draw_block(ax, x, y, r, colour, scene.names[i].split()[-1])
        else:
            _draw_animal(ax, x, y, r, colour, scene.names[i], scene.velocities[i].tolist())
        ax.text(x, y - 1.05 * r, _toy_name(scene, i, lang, short=True), ha="center", va="top",
                fontsize=8, zorder=9,
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", alpha=0.7, edgecolor="none"))
    _draw_child(ax, cx, cy, translator(lang))
    ax.set_xlim(-0.2, FLOOR_WIDTH + 0.2)
    ax.set_ylim(cy - 0.6, FLOOR_DEPTH + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)


def _draw_weight_bars(ax, scene: ToyScene, weights: torch.Tensor, lang: str) -> None:
    positions = range(len(scene))
    ax.bar(positions, weights.tolist(), color=[tuple(c) for c in scene.colours.tolist()], edgecolor="black",
           linewidth=0.6)
    for i, w in enumerate(weights.tolist()):
        ax.text(i, w + 0.02, f"{w:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(positions))
    ax.set_xticklabels([_toy_name(scene, i, lang, lines="\n") for i in positions], fontsize=8)
    ax.set_ylim(0, 1.08)
    tr = translator(lang)
    ax.set_ylabel(tr("attention weight\n注意力权重"))


@in_every_language
def draw_two_cues(scene: ToyScene, salience_weights: torch.Tensor, interest_weights: torch.Tensor,
                  lang: str = "en"):
    """Fig. 8-1 redrawn: the same toys under non-volitional cues (left) and a volitional cue (right).

    salience_weights, interest_weights: (N,) each, summing to 1. Each side shows the scene with its
    weights as halos and gaze lines, and the weights as bars. Returns the matplotlib figure, its
    text in ``lang`` (the toys named in the English edition in both languages).
    """
    tr = translator(lang)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.0), gridspec_kw={"height_ratios": [3.0, 1.45]})
    titles = (
        tr("Non-volitional cues 非自主性提示\nwhat stands out: colour, motion, visibility"),
        tr("Volitional cue 自主性提示\nwhat the child wants: the toy car"),
    )
    for column, (weights, title) in enumerate(zip((salience_weights, interest_weights), titles)):
        draw_toy_scene(axes[0, column], scene, weights, title, lang=lang)
        _draw_weight_bars(axes[1, column], scene, weights, lang)
    fig.tight_layout(h_pad=0.3, w_pad=1.0)
    return fig


@in_every_language
def draw_attention_over_time(scene: ToyScene, times: torch.Tensor, weights: torch.Tensor, lang: str = "en"):
    """The weight on each toy as time passes: times (T,) in seconds, weights (T, N). The car and
    the animals get a line each; the other toys share one. Returns the matplotlib figure, its text
    in ``lang``."""
    tr = translator(lang)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    others = torch.zeros(len(times))
    # Animals can share a weight exactly; a line style each keeps every line visible.
    animal_styles = iter(["-", "--", "-."])
    for i, kind in enumerate(scene.kinds):
        label = _toy_name(scene, i, lang)
        colour = tuple(scene.colours[i].tolist())
        if kind == "car":
            ax.plot(times, weights[:, i], color=colour, linewidth=3, label=label, zorder=3)
        elif kind == "animal":
            ax.plot(times, weights[:, i], color=colour, linewidth=2, label=label, linestyle=next(animal_styles))
        else:
            others = others + weights[:, i]
    ax.plot(times, others, color="0.5", linestyle="--", linewidth=1.5,
            label=tr("ball and blocks 皮球和积木 (together)"))
    # Mark the moment the car first holds more weight than any other toy.
    car = scene.index("car")
    rivals = torch.cat([weights[:, :car], weights[:, car + 1:]], dim=1).amax(dim=1)  # (T,)
    ahead = (weights[:, car] > rivals).nonzero()
    if len(ahead) > 0:
        t_switch = float(times[ahead[0, 0]])
        ax.axvline(t_switch, color="0.3", linestyle=":", linewidth=1)
        ax.text(t_switch + 0.5, 0.95,
                tr("the car leads from t = {time} s\n从此小汽车领先").format(time=f"{t_switch:.0f}"),
                ha="left", va="top", fontsize=9)
    ax.set_xlabel(tr("time (s) 时间 (秒)"))
    ax.set_ylabel(tr("attention weight 注意力权重"))
    ax.set_ylim(0, 1)
    ax.set_xlim(float(times[0]), float(times[-1]))
    ax.set_title(tr("From salience to interest: the child's attention over time\n注意力随时间的变化"))
    ax.legend(loc="center right", fontsize=9, frameon=False)
    fig.tight_layout()
    return fig
