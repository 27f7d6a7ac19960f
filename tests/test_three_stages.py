"""Chapter 4's figures draw cleanly: no missing glyph, nothing on stderr (which would fail the book build)."""

from __future__ import annotations


import pytest

from fresh_python import run_python
import torch

DRAW_EVERY_FIGURE = """
    import io
    import matplotlib.pyplot as plt
    import torch
    from attention_course.attention import attention, dot_score, masked_softmax
    from attention_course.figures import three_stages as figures
    from attention_course.kernel_regression import make_regression_data, nadaraya_watson, target_function
    from attention_course.plotting import use_course_style

    use_course_style()
    query = torch.tensor([[[1.0, 2.0]]])
    keys = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    values = torch.tensor([[[10.0], [20.0], [30.0]]])
    output, weights = attention(query, keys, values, dot_score)
    scores = torch.tensor([[[1.0, 2.0, 3.0, 4.0]] * 2] * 2)
    lengths = torch.tensor([2, 3])
    x, y = make_regression_data(n=20)
    x_query = torch.linspace(0, 5, 11)
    prediction, kernel_weights = nadaraya_watson(x_query, x, y)
    drawn = [
        figures.draw_attention_pooling(),
        figures.draw_source_query(),
        figures.draw_three_stages(query[0, 0], keys[0], values[0], dot_score(query, keys)[0, 0],
                                  weights[0, 0], output[0, 0], score_name=r"$q \\cdot k_j$"),
        figures.draw_masked_weights(masked_softmax(scores, lengths), lengths),
        figures.draw_kernel_regression(x, y, x_query, prediction, target_function(x_query), kernel_weights),
    ]
    for fig in drawn:
        fig.savefig(io.BytesIO(), format="png")  # renders every text, as the book does
    print(len(drawn))
"""


def test_every_figure_draws_without_a_word_on_stderr():
    # A fresh interpreter: use_course_style() changes process-wide state. Mathtext reports a glyph
    # it cannot draw through logging, not warnings, so stderr is what the book build would see.
    result = run_python(DRAW_EVERY_FIGURE, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.strip() == "5"


def test_the_three_stages_figure_rejects_mismatched_shapes():
    from attention_course.figures.three_stages import draw_three_stages

    with pytest.raises(ValueError, match="must share S"):
        draw_three_stages(torch.zeros(2), torch.zeros(3, 2), torch.zeros(3, 1), torch.zeros(4),
                          torch.zeros(3), torch.zeros(1))


def test_the_three_stages_figure_numbers_each_score_and_uses_the_books_notation():
    from attention_course.figures.three_stages import draw_three_stages
    from attention_course.plotting import use_course_style

    use_course_style()  # the figure's Chinese labels in the CJK font; a missing glyph fails, never a box
    query = torch.tensor([1.0, 2.0])
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    values = torch.tensor([[10.0], [20.0], [30.0]])
    scores = keys @ query
    weights = torch.softmax(scores, dim=0)
    fig = draw_three_stages(query, keys, values, scores, weights, weights @ values,
                            score_name=r"$q \cdot k_j$")
    texts = [text.get_text() for text in fig.axes[0].texts]
    # One score box per key, each with that key's number in place of j.
    assert [t for t in texts if t.startswith("$q \\cdot")] == [r"$q \cdot k_1$", r"$q \cdot k_2$", r"$q \cdot k_3$"]
    assert any(t.startswith("$k_3$ = ") for t in texts) and any(t.startswith("$v_2$ = ") for t in texts)
    # The notes' capital letters for single vectors (Q, K_i, V_i) are gone from the picture.
    assert not any(marker in t for t in texts for marker in ("$Q$", "K_", "V_"))
    assert "$s_1$ = 1.000" in texts and "$s_3$ = 3.000" in texts
