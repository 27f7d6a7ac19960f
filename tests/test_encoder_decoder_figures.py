"""Chapters 5 and 6's figures draw cleanly (no missing glyph, nothing on stderr, which would fail the
book build) and refuse inputs whose shapes do not fit together."""

from __future__ import annotations


import pytest

from fresh_python import run_python
import torch

from attention_course.corpus import Clause, render_pair
from attention_course.seq2seq import LengthBucket

DRAW_EVERY_FIGURE = """
    import io
    import torch
    from attention_course.corpus import Clause, ToyTranslationCorpus, render_pair
    from attention_course.figures import encoder_decoder as figures
    from attention_course.plotting import use_course_style
    from attention_course.seq2seq import LengthBucket, TrainingHistory

    use_course_style()
    notes = torch.tensor([[0.6, 0.2, 0.2], [0.2, 0.7, 0.1], [0.3, 0.2, 0.5]])
    encodings = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    pair = render_pair([Clause("Tom", "chase", "Jerry", "quickly", "in the kitchen", "yesterday"),
                        Clause("the cat", "see", "Spike", time="today")])
    buckets = [LengthBucket(3, 5, 10, 1.0), LengthBucket(6, 30, 20, 0.25)]
    history = TrainingHistory(steps=[1, 2], losses=[2.0, 1.0], accuracies=[0.0, 0.5], step_losses=[2.0, 1.0])
    corpus = ToyTranslationCorpus(num_pairs=50)
    drawn = [
        figures.draw_encoder_decoder(attention=False),
        figures.draw_encoder_decoder(attention=True),
        figures.draw_context_composition(encodings, notes[0], notes[0] @ encodings),
        figures.draw_rnn_encoder_decoder(),
        figures.draw_attention_distribution(step=3),
        figures.draw_alignment_score(),
        figures.draw_attention_matrices([notes, notes], figures.NOTES_SOURCE, figures.NOTES_TARGET, ["a", "b"]),
        figures.draw_alignment(pair.alignment_matrix(), pair),
        figures.draw_length_distribution(corpus.train_pairs),
        figures.draw_training_curves({"with attention": history, "without attention": history}),
        figures.draw_accuracy_by_length({"without attention": buckets}),
        figures.draw_length_experiment({"with attention": buckets, "without attention": buckets},
                                       {"with attention": buckets, "without attention": buckets}),
    ]
    for fig in drawn:
        fig.savefig(io.BytesIO(), format="png")  # renders every text, as the book does
    print(len(drawn))
"""


def test_every_figure_draws_without_a_word_on_stderr():
    # A fresh interpreter: use_course_style() changes process-wide state. Mathtext reports a glyph it
    # cannot draw (a Chinese word inside a label with $...$) through logging, so stderr is what the
    # book build would see.
    result = run_python(DRAW_EVERY_FIGURE, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.strip() == "12"


def test_an_attention_matrix_must_have_a_row_per_target_and_a_column_per_source_word():
    from attention_course.figures.encoder_decoder import draw_alignment, draw_attention_matrices

    with pytest.raises(ValueError, match=r"\(T, S\) = \(3, 3\)"):
        draw_attention_matrices([torch.zeros(3, 4)], ("Tom", "chase", "Jerry"), ("汤姆", "追逐", "杰瑞"), ["x"])
    pair = render_pair([Clause("Tom", "chase", "Jerry")])
    with pytest.raises(ValueError, match="weights must be"):
        draw_alignment(torch.zeros(3, 2), pair)


def test_the_context_composition_needs_one_weight_and_one_encoding_per_source_word():
    from attention_course.figures.encoder_decoder import draw_context_composition

    with pytest.raises(ValueError, match="for S = 3 words"):
        draw_context_composition(torch.zeros(3, 2), torch.zeros(2), torch.zeros(2))


def test_the_decoding_step_drawn_must_exist():
    from attention_course.figures.encoder_decoder import draw_attention_distribution

    with pytest.raises(ValueError, match="step must be between 1 and 3"):
        draw_attention_distribution(step=4)


def test_models_compared_by_length_must_share_their_buckets():
    from attention_course.figures.encoder_decoder import draw_length_experiment

    one = [LengthBucket(3, 5, 10, 1.0)]
    other = [LengthBucket(3, 6, 10, 1.0)]
    with pytest.raises(ValueError, match="same length buckets"):
        draw_length_experiment({"with attention": one, "without attention": other}, {"with attention": one})
