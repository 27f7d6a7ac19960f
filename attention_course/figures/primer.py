"""The primer's figures: how far padding moves a GRU's final state, and teacher forcing against free
running, drawn as two rows of decoder steps.

Every function returns the matplotlib figure it drew, its text in ``lang`` (English by default; see
:mod:`attention_course.figures.editions`). Call :func:`attention_course.plotting.use_course_style`
first, for the Chinese labels.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt

from attention_course.figures.diagrams import OUTPUT_COLOUR, POOL_COLOUR, VALUE_COLOUR, arrow, box, canvas
from attention_course.figures.editions import in_every_language
from attention_course.i18n import translator

RIGHT_COLOUR = VALUE_COLOUR  # green: a word that matches the reference
WRONG_COLOUR = OUTPUT_COLOUR  # red: a word that does not
FED_BACK_COLOUR = "#f4c28a"  # orange: the model's own output, read as the next input


@in_every_language
def draw_padding_drift(pad_counts: Sequence[int], unpacked: Sequence[float], packed: Sequence[float],
                       lang: str = "en"):
    """How far the final state moves from the unpadded sentence's final state, per number of padding
    tokens after it: ``unpacked`` for a GRU that reads the padding, ``packed`` for one given a packed
    sequence. All three sequences have the same length. Returns the figure, its text in ``lang``."""
    tr = translator(lang)
    if not len(pad_counts) == len(unpacked) == len(packed):
        raise ValueError(f"pad_counts, unpacked and packed must have the same length, got "
                         f"{len(pad_counts)}, {len(unpacked)} and {len(packed)}")
    fig, ax = plt.subplots(figsize=(6.4, 3.3))
    ax.plot(pad_counts, unpacked, marker="o", linewidth=1.6, color="#c0392b", label=tr("padded, not packed"))
    ax.plot(pad_counts, packed, marker="s", linewidth=1.6, color="#2e86c1", label=tr("packed"))
    ax.set_xlabel(tr("padding tokens after the sentence 填充"))
    ax.set_ylabel(tr("distance of the final state\nfrom the true one"))
    ax.set_xticks(list(pad_counts))
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


def _decoder_row(ax, y: float, inputs, outputs, reference, fed_back: bool, title: str, tr) -> None:
    """One row: a GRU step per target position, its input below, its output above; ``title`` is drawn
    as given, the row's own labels through ``tr``."""
    xs = [3.2 + 2.6 * i for i in range(len(outputs))]
    ax.text(0.15, y + 2.25, title, fontsize=11.5, va="center")
    for i, x in enumerate(xs):
        box(ax, x, y, 1.7, 0.8, f"$H_{i + 1}$", POOL_COLOUR, fontsize=12)
        if i:
            arrow(ax, (xs[i - 1] + 0.85, y), (x - 0.85, y))
        # The input of step i: the reference word (teacher forcing) or the model's previous output.
        own = fed_back and i > 0
        box(ax, x, y - 1.35, 1.5, 0.65, inputs[i], FED_BACK_COLOUR if own else "white", fontsize=11)
        arrow(ax, (x, y - 1.02), (x, y - 0.4))
        right = outputs[i] == reference[i]
        box(ax, x, y + 1.35, 1.5, 0.65, outputs[i] + (" ✓" if right else " ✗"),
            RIGHT_COLOUR if right else WRONG_COLOUR, fontsize=11)
        arrow(ax, (x, y + 0.4), (x, y + 1.02))
        if own:
            # The previous output travels down to become this step's input.
            ax.annotate("", xy=(x - 0.75, y - 1.2), xytext=(xs[i - 1] + 0.75, y + 1.2),
                        arrowprops=dict(arrowstyle="-|>", color="#b9770e", linestyle="--", linewidth=1.3,
                                        connectionstyle="arc3,rad=-0.25", mutation_scale=12))
    ax.text(xs[0] - 1.05, y - 1.35, tr("input"), ha="right", va="center", fontsize=9.5, color="#555555")
    ax.text(xs[0] - 1.05, y + 1.35, tr("output"), ha="right", va="center", fontsize=9.5, color="#555555")


@in_every_language
def draw_teacher_forcing(
    reference: Sequence[str] = ("汤姆", "追逐", "杰瑞", "<eos>"),
    forced_outputs: Sequence[str] = ("汤姆", "杰瑞", "杰瑞", "<eos>"),
    free_outputs: Sequence[str] = ("汤姆", "杰瑞", "追逐", "汤姆"),
    lang: str = "en",
):
    """Two rows of decoder steps writing ``reference``. Top, teacher forcing: every step reads the
    reference's previous word, so a wrong output (``forced_outputs``) costs only its own step. Bottom,
    free running: every step reads the model's own previous output (``free_outputs``), so one mistake
    changes every later input. The words are data, drawn as given. Returns the figure, its text in
    ``lang``."""
    tr = translator(lang)
    if not len(reference) == len(forced_outputs) == len(free_outputs):
        raise ValueError("reference, forced_outputs and free_outputs must have the same length")
    width = 3.2 + 2.6 * len(reference)
    fig, ax = canvas(0.78 * width, 6.8, (0, width), (-0.2, 9.9))
    forced_inputs = ["<bos>"] + list(reference[:-1])
    free_inputs = ["<bos>"] + list(free_outputs[:-1])
    _decoder_row(ax, 7.0, forced_inputs, forced_outputs, reference, fed_back=False,
                 title=tr("Teacher forcing 强制教学 (training): the input is the reference's previous word"), tr=tr)
    _decoder_row(ax, 1.75, free_inputs, free_outputs, reference, fed_back=True,
                 title=tr("Free running (generation): the input is the model's own previous output"), tr=tr)
    fig.tight_layout()
    return fig
