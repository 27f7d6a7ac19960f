"""Local attention, self-attention, positions, timing and receptive fields (chapter 7)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention_course.attention import attention, dot_score, masked_softmax, scaled_dot_score
from attention_course.attention_variants import (
    LayerTiming,
    LocalAttentionDecoder,
    PositionPredictor,
    SelfAttention,
    build_local_model,
    causal_valid_lens,
    local_attention,
    receptive_field,
    sinusoidal_positions,
    time_recurrent_and_self_attention,
    window_mask,
)
from attention_course.corpus import Clause, ToyTranslationCorpus, render_pair
from attention_course.seq2seq import build_model, train, translate


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


# --- local attention -----------------------------------------------------------------------------


def test_window_mask_keeps_the_keys_within_half_width_of_the_centre():
    mask = window_mask(torch.tensor([[3.0, 0.0, 2.5]]), num_keys=7, half_width=2)
    assert mask.shape == (1, 3, 7)
    assert mask[0, 0].tolist() == [False, True, True, True, True, True, False]  # 1 … 5: 2D + 1 keys
    assert mask[0, 1].tolist() == [True, True, True, False, False, False, False]  # cut at the start
    assert mask[0, 2].tolist() == [False, True, True, True, True, False, False]  # 0.5 … 4.5


def test_local_attention_without_gaussian_is_a_softmax_over_the_window(generator):
    queries = torch.randn(2, 3, 4, generator=generator)
    keys = torch.randn(2, 9, 4, generator=generator)
    values = torch.randn(2, 9, 5, generator=generator)
    positions = torch.tensor([[0.0, 4.0, 8.0], [2.0, 6.0, 3.0]])
    output, weights = local_attention(queries, keys, values, positions, half_width=2, gaussian=False)
    assert output.shape == (2, 3, 5) and weights.shape == (2, 3, 9)
    inside = window_mask(positions, 9, 2)
    assert torch.all(weights[~inside] == 0), "keys outside the window must get weight exactly 0"
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3))
    # The same as masked softmax over the window's scores, computed independently.
    scores = scaled_dot_score(queries, keys).masked_fill(~inside, -math.inf)
    torch.testing.assert_close(weights, torch.exp(scores - scores.logsumexp(-1, keepdim=True)))
    torch.testing.assert_close(output, weights @ values)


def test_local_attention_gaussian_matches_hand_computed_numbers():
    keys = torch.zeros(1, 7, 2)  # all scores equal: the softmax over the 5 keys in the window gives 0.2 each
    values = torch.arange(7.0).reshape(1, 7, 1)
    _, weights = local_attention(torch.zeros(1, 1, 2), keys, values, torch.tensor([[3.0]]), half_width=2)
    # sigma = D / 2 = 1: factors exp(-k^2 / 2) for offsets k = 0, ±1, ±2.
    expected = 0.2 * torch.tensor([0, math.exp(-2), math.exp(-0.5), 1, math.exp(-0.5), math.exp(-2), 0])
    torch.testing.assert_close(weights[0, 0], expected)
    assert weights.sum() < 1


def test_local_attention_respects_valid_lengths_and_a_window_beyond_the_end_gives_zeros(generator):
    queries = torch.randn(2, 2, 3, generator=generator)
    keys = torch.randn(2, 6, 3, generator=generator)
    values = torch.randn(2, 6, 3, generator=generator)
    positions = torch.tensor([[1.0, 5.0], [1.0, 5.0]])
    valid_lens = torch.tensor([6, 2])
    output, weights = local_attention(queries, keys, values, positions, 1, dot_score, valid_lens, gaussian=False)
    assert torch.all(weights[1, :, 2:] == 0)
    assert torch.all(weights[1, 1] == 0) and torch.all(output[1, 1] == 0), "window 4…6 holds no valid key"
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(2))


def test_local_attention_with_a_window_covering_everything_is_global_attention(generator):
    queries = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64)
    keys = torch.randn(2, 5, 4, generator=generator, dtype=torch.float64)
    values = torch.randn(2, 5, 2, generator=generator, dtype=torch.float64)
    positions = torch.full((2, 3), 2.0, dtype=torch.float64)
    local, local_weights = local_attention(queries, keys, values, positions, half_width=10, gaussian=False)
    full, full_weights = attention(queries, keys, values, scaled_dot_score)
    torch.testing.assert_close(local, full)
    torch.testing.assert_close(local_weights, full_weights)


def test_local_attention_does_not_modify_its_inputs_and_rejects_bad_arguments(generator):
    queries, keys = torch.randn(1, 2, 3, generator=generator), torch.randn(1, 4, 3, generator=generator)
    positions = torch.tensor([[1.0, 2.0]])
    copies = [t.clone() for t in (queries, keys, positions)]
    local_attention(queries, keys, keys, positions, 1.5)
    for before, after in zip(copies, (queries, keys, positions)):
        assert torch.equal(before, after)
    with pytest.raises(ValueError, match="half_width"):
        local_attention(queries, keys, keys, positions, 0)
    with pytest.raises(ValueError, match="positions"):
        local_attention(queries, keys, keys, torch.tensor([1.0, 2.0]), 1)


def test_position_predictor_stays_inside_each_sentence_and_is_differentiable(generator):
    predictor = PositionPredictor(query_dim=4, hidden_dim=8)
    queries = 5 * torch.randn(3, 6, 4, generator=generator)
    lengths = torch.tensor([1, 4, 10])
    positions = predictor(queries, lengths)
    assert positions.shape == (3, 6)
    assert torch.all(positions >= 0) and torch.all(positions <= (lengths - 1)[:, None])
    assert torch.all(positions[0] == 0), "a one-word sentence has only position 0"
    positions.sum().backward()
    assert predictor.W_p.weight.grad is not None and predictor.W_p.weight.grad.abs().sum() > 0


def test_local_attention_gradient_reaches_the_predicted_position(generator):
    """Through the Gaussian, the loss can move the window: that is how local-p learns p_i unsupervised."""
    positions = torch.tensor([[2.3]], requires_grad=True)
    keys = torch.randn(1, 6, 3, generator=generator)
    output, _ = local_attention(torch.randn(1, 1, 3, generator=generator), keys, keys, positions, 2)
    output.sum().backward()
    assert positions.grad is not None and positions.grad.abs().item() > 0


# --- the local-attention decoder -------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_clause_corpus() -> ToyTranslationCorpus:
    return ToyTranslationCorpus(num_pairs=300, seed=0, max_clauses=1)


def test_local_model_weights_are_zero_outside_a_window_of_at_most_2d_plus_1_words(one_clause_corpus):
    model = build_local_model(one_clause_corpus, half_width=1.5, embed_dim=8, hidden_dim=16, attention_dim=8)
    assert isinstance(model.decoder, LocalAttentionDecoder) and model.has_attention
    batch = one_clause_corpus.collate(one_clause_corpus.held_out_pairs[:8])
    with torch.no_grad():
        logits, weights = model(batch)
    assert weights.shape == (8, batch.target_input.shape[1], batch.source.shape[1])
    assert torch.all((weights > 0).sum(-1) <= 4), "half-width 1.5 covers at most 4 words"
    for row, length in enumerate(batch.source_lengths.tolist()):
        assert torch.all(weights[row, :, length:] == 0)


def test_local_model_is_deterministic_and_leaves_the_global_random_state_alone(one_clause_corpus):
    state = torch.random.get_rng_state()
    first = build_local_model(one_clause_corpus, seed=3)
    second = build_local_model(one_clause_corpus, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)


def test_local_model_learns_to_translate_with_reordering(one_clause_corpus):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = build_local_model(one_clause_corpus, embed_dim=16, hidden_dim=32, attention_dim=16)
        train(model, one_clause_corpus, steps=200, batch_size=32, lr=1e-2, log_every=1000)
    finally:
        torch.set_num_threads(before)
    text, weights = translate(model, one_clause_corpus, "Tom chase Jerry in the kitchen yesterday")
    assert text == "汤姆 昨天 在 厨房 追逐 杰瑞"
    assert weights.shape == (6, 7)


# --- self-attention ------------------------------------------------------------------------------


def test_causal_valid_lens_allow_position_i_to_see_positions_up_to_i():
    assert causal_valid_lens(4, batch_size=2).tolist() == [[1, 2, 3, 4]] * 2
    assert causal_valid_lens(4, torch.tensor([4, 2])).tolist() == [[1, 2, 3, 4], [1, 2, 2, 2]]
    with pytest.raises(ValueError):
        causal_valid_lens(4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_self_attention_matches_pytorch_with_padding_and_causal_masks(generator, dtype):
    layer = SelfAttention(d_model=6, d_k=4, d_v=3).to(dtype)
    x = torch.randn(2, 5, 6, generator=generator, dtype=dtype)
    valid_lens = torch.tensor([5, 3])
    q, k, v = layer.W_q(x), layer.W_k(x), layer.W_v(x)
    with torch.no_grad():
        plain, weights = layer(x)
        assert plain.shape == (2, 5, 3) and weights.shape == (2, 5, 5)
        torch.testing.assert_close(plain, F.scaled_dot_product_attention(q, k, v))

        causal, causal_weights = layer(x, causal=True)
        torch.testing.assert_close(causal, F.scaled_dot_product_attention(q, k, v, is_causal=True))
        assert torch.all(causal_weights.triu(diagonal=1) == 0)

        padded, padded_weights = layer(x, valid_lens)
        allowed = torch.arange(5) < valid_lens[:, None, None]  # (B, 1, S)
        torch.testing.assert_close(padded, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))
        assert torch.all(padded_weights[1, :, 3:] == 0)

        both, _ = layer(x, valid_lens, causal=True)
        allowed_both = allowed & torch.ones(5, 5, dtype=torch.bool).tril()
        torch.testing.assert_close(both[1, :3], F.scaled_dot_product_attention(q, k, v, attn_mask=allowed_both)[1, :3])


def test_self_attention_without_positions_ignores_word_order(generator):
    """Permuting the input permutes the output the same way: attention alone sees a set, not a sequence."""
    layer = SelfAttention(8, 8)
    x = torch.randn(1, 6, 8, generator=generator)
    order = torch.tensor([3, 0, 5, 1, 4, 2])
    with torch.no_grad():
        output, _ = layer(x)
        permuted, _ = layer(x[:, order])
        torch.testing.assert_close(permuted, output[:, order])
        positions = sinusoidal_positions(6, 8)
        with_positions, _ = layer(x + positions)
        permuted_with_positions, _ = layer(x[:, order] + positions)
    assert not torch.allclose(permuted_with_positions, with_positions[:, order], atol=1e-4)


def test_sinusoidal_positions_alternate_sine_and_cosine():
    encoding = sinusoidal_positions(50, 16)
    assert encoding.shape == (50, 16)
    torch.testing.assert_close(encoding[0], torch.tensor([0.0, 1.0] * 8))
    t, k = 7, 3
    angle = t / 10000 ** (2 * k / 16)
    torch.testing.assert_close(encoding[t, 2 * k], torch.tensor(math.sin(angle)))
    torch.testing.assert_close(encoding[t, 2 * k + 1], torch.tensor(math.cos(angle)))
    assert sinusoidal_positions(5, 7).shape == (5, 7)
    assert len({tuple(row.tolist()) for row in encoding}) == 50, "every position gets its own code"


def test_self_attention_rejects_a_wrong_feature_size():
    with pytest.raises(ValueError, match="d_model=4"):
        SelfAttention(4, 4)(torch.zeros(1, 3, 5))


# --- why RNNs are slow, and how far each layer sees -----------------------------------------------


def test_timing_returns_positive_times_for_every_length_and_restores_threads():
    before = torch.get_num_threads()
    state = torch.random.get_rng_state()
    timings = time_recurrent_and_self_attention([4, 8], batch_size=2, dim=8, repeats=2)
    assert [t.length for t in timings] == [4, 8]
    assert all(isinstance(t, LayerTiming) and t.gru_seconds > 0 and t.self_attention_seconds > 0 for t in timings)
    assert timings[0].ratio == timings[0].gru_seconds / timings[0].self_attention_seconds
    assert torch.get_num_threads() == before
    assert torch.equal(torch.random.get_rng_state(), state)


def test_receptive_fields_of_a_gru_a_convolution_and_self_attention():
    torch.manual_seed(0)
    gru = nn.GRU(4, 4, batch_first=True)
    conv = nn.Conv1d(4, 4, kernel_size=3, padding=1)
    layer = SelfAttention(4, 4)
    gru_field = receptive_field(lambda x: gru(x)[0], length=9, dim=4, position=4)
    conv_field = receptive_field(lambda x: conv(x.transpose(1, 2)).transpose(1, 2), length=9, dim=4, position=4)
    attention_field = receptive_field(lambda x: layer(x)[0], length=9, dim=4, position=4)
    assert gru_field.tolist() == [True] * 5 + [False] * 4  # everything read so far
    assert conv_field.tolist() == [False] * 3 + [True] * 3 + [False] * 3  # a window of 3
    assert attention_field.tolist() == [True] * 9  # everything, in one layer
    with pytest.raises(ValueError):
        receptive_field(lambda x: x, length=3, dim=2, position=3)


def test_masked_softmax_is_what_the_self_attention_weights_are(generator):
    layer = SelfAttention(3, 3)
    x = torch.randn(1, 4, 3, generator=generator)
    with torch.no_grad():
        _, weights = layer(x, causal=True)
        scores = scaled_dot_score(layer.W_q(x), layer.W_k(x))
    torch.testing.assert_close(weights, masked_softmax(scores, causal_valid_lens(4, batch_size=1)))
