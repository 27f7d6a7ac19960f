"""The primer's figures: they draw cleanly (nothing on stderr, which would fail the book build), and
the teacher-forcing picture shows what it claims: reference words as inputs in the top row, the
model's own previous outputs in the bottom row."""

from __future__ import annotations

import pytest

from fresh_python import run_python

DRAW_EVERY_FIGURE = """
    import io
    from attention_course.figures.primer import draw_padding_drift, draw_teacher_forcing
    from attention_course.plotting import use_course_style

    use_course_style()
    drawn = [draw_padding_drift([0, 1, 2], [0.0, 0.2, 0.3], [0.0, 0.0, 0.0]), draw_teacher_forcing()]
    for fig in drawn:
        fig.savefig(io.BytesIO(), format="png")  # renders every text, as the book does
    print(len(drawn))
"""


def test_every_primer_figure_draws_without_a_word_on_stderr():
    # A fresh interpreter: use_course_style() changes process-wide state, and a missing glyph is
    # reported through logging, so stderr is what the book build would see.
    result = run_python(DRAW_EVERY_FIGURE, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.strip() == "2"


def _row_texts(fig, low: float, high: float) -> list[str]:
    """The texts drawn between heights low and high, left to right."""
    texts = [t for t in fig.axes[0].texts if low < t.get_position()[1] < high]
    return [t.get_text() for t in sorted(texts, key=lambda t: t.get_position()[0])]


def test_teacher_forcing_reads_the_reference_and_free_running_reads_its_own_outputs():
    from attention_course.figures.primer import draw_teacher_forcing
    from attention_course.plotting import use_course_style

    use_course_style()  # the figure's row titles are in Chinese
    reference = ("A", "B", "C")
    fig = draw_teacher_forcing(reference, forced_outputs=("A", "C", "C"), free_outputs=("A", "C", "A"))
    texts = [t.get_text() for t in fig.axes[0].texts]
    # Top row (teacher forcing): inputs <bos>, A, B, whatever the model wrote at step 2.
    assert _row_texts(fig, 5.4, 5.9) == ["input", "<bos>", "A", "B"]
    # Bottom row (free running): inputs <bos>, then the model's own outputs A and C.
    assert _row_texts(fig, 0.15, 0.65) == ["input", "<bos>", "A", "C"]
    # Every output is marked right or wrong against the reference, position by position.
    assert texts.count("A ✓") == 2 and texts.count("C ✗") == 2 and texts.count("C ✓") == 1
    assert texts.count("A ✗") == 1


@pytest.mark.parametrize("lengths", [((0, 1), (0.0,), (0.0, 0.0)), ((0,), (0.0,), (0.0, 0.0))])
def test_the_padding_figure_rejects_series_of_different_lengths(lengths):
    from attention_course.figures.primer import draw_padding_drift

    with pytest.raises(ValueError, match="same length"):
        draw_padding_drift(*lengths)
