"""Chapter 2's figure of the two distinctions (soft/hard × global/local) draws what it is given."""

from __future__ import annotations

import warnings

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch

from attention_course.attention import hard_attention, softmax
from attention_course.figures.soft_hard import draw_two_distinctions
from attention_course.plotting import use_course_style

WORDS = "Tom chase Jerry quickly in the kitchen yesterday".split()


@pytest.fixture
def figure():
    scores = torch.tensor([0.3, 2.0, 1.0, 0.2, -0.5, -1.0, 0.4, 2.3])
    window = (torch.arange(len(WORDS)) - 1).abs() <= 1
    masked = scores.masked_fill(~window, float("-inf"))
    cells = {
        ("soft", "global"): softmax(scores),
        ("hard", "global"): hard_attention(scores, torch.eye(len(WORDS)))[1],
        ("soft", "local"): softmax(masked),
        ("hard", "local"): hard_attention(masked, torch.eye(len(WORDS)))[1],
    }
    # The course style changes rcParams and warning filters; keep both to this test.
    with matplotlib.rc_context(), warnings.catch_warnings():
        use_course_style()
        warnings.simplefilter("error")  # a missing glyph or any other warning fails the test
        fig = draw_two_distinctions(WORDS, cells, window)
        fig.canvas.draw()
    yield fig, cells, window
    plt.close(fig)


def test_each_panel_is_one_cell_of_the_table_with_bars_equal_to_its_weights(figure):
    fig, cells, _ = figure
    axes = fig.axes
    assert len(axes) == 4
    for ax, key in zip(axes, [("soft", "global"), ("soft", "local"), ("hard", "global"), ("hard", "local")]):
        assert ax.get_title().endswith(f"{key[0]} + {key[1]}")
        heights = [bar.get_height() for bar in ax.patches if bar.get_width() < 1]  # the bars, not the shading
        torch.testing.assert_close(torch.tensor(heights, dtype=torch.float32), cells[key].float())
    for ax in axes[2:]:  # the bottom row names the words for both rows
        assert [label.get_text() for label in ax.get_xticklabels()] == WORDS


def test_only_the_local_panels_mark_the_keys_outside_the_window_as_not_eligible(figure):
    fig, _, window = figure
    outside = int((~window).sum())
    for ax in fig.axes:
        marked = sum("not" in text.get_text() and "eligible" in text.get_text() for text in ax.texts)
        assert marked == (outside if ax.get_title().endswith("local") else 0)
