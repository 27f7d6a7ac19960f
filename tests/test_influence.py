"""Alignment or influence: occlusion and gradient × input for a seq2seq model (chapter 7)."""

from __future__ import annotations

import pytest
import torch

from attention_course.corpus import ToyTranslationCorpus, Vocab
from attention_course.influence import (
    Agreement,
    alignment_agreement,
    gradient_influence,
    occlusion_influence,
    sentence_batch,
    target_log_probs,
)
from attention_course.seq2seq import build_model, train, translate


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus() -> ToyTranslationCorpus:
    return ToyTranslationCorpus(num_pairs=300, seed=0, max_clauses=1)


@pytest.fixture(scope="module")
def untrained(corpus):
    return build_model(corpus, embed_dim=8, hidden_dim=16, attention_dim=8, seed=0)


@pytest.fixture(scope="module")
def untrained_both_ways(corpus):
    """Bahdanau's encoder: a second GRU reads each sentence from its end (chapter 7 compares the two)."""
    return build_model(corpus, embed_dim=8, hidden_dim=8, attention_dim=8, seed=0, bidirectional=True)


@pytest.fixture(scope="module")
def trained(corpus):
    model = build_model(corpus, embed_dim=16, hidden_dim=32, attention_dim=16, seed=0)
    train(model, corpus, steps=150, batch_size=32, lr=1e-2, log_every=1000)
    return model


def test_sentence_batch_holds_one_pair_with_eos_at_the_end(corpus):
    batch = sentence_batch(corpus, "Tom chase Jerry", "汤姆 追逐 杰瑞")
    assert batch.source.shape == (1, 3) and batch.target_output.shape == (1, 4)
    assert batch.target_output[0, -1] == Vocab.eos_id
    with pytest.raises(ValueError):
        sentence_batch(corpus, "Tom chase Jerry", " ")


def test_target_log_probs_are_the_log_softmax_of_the_right_words_and_zero_at_padding(corpus, untrained):
    batch = corpus.collate(corpus.held_out_pairs[:5])
    with torch.no_grad():
        log_probs, weights = target_log_probs(untrained, batch)
        logits, expected_weights = untrained(batch)
    assert log_probs.shape == batch.target_output.shape
    torch.testing.assert_close(weights, expected_weights)
    b, i = 0, 1
    expected = logits[b, i].log_softmax(-1)[batch.target_output[b, i]]
    torch.testing.assert_close(log_probs[b, i], expected)
    assert torch.all(log_probs[batch.target_output == Vocab.pad_id] == 0)
    assert torch.all(log_probs[batch.target_output != Vocab.pad_id] < 0)


def test_occlusion_is_the_drop_in_log_probability_when_one_word_becomes_unk(corpus, untrained):
    batch = sentence_batch(corpus, "Tom chase Jerry in the kitchen", "汤姆 在 厨房 追逐 杰瑞")
    influence = occlusion_influence(untrained, batch)
    assert influence.shape == (1, 6, 6)
    occluded = batch.source.clone()
    occluded[0, 2] = Vocab.unk_id
    with torch.no_grad():
        base, _ = target_log_probs(untrained, batch)
        changed, _ = target_log_probs(untrained, batch, occluded)
    torch.testing.assert_close(influence[0, :, 2], (base - changed)[0])


def test_occlusion_ignores_padding_and_does_not_change_the_model(corpus, untrained):
    batch = corpus.collate(sorted(corpus.held_out_pairs, key=lambda p: len(p.source))[:4])
    untrained.train()
    before = [p.clone() for p in untrained.parameters()]
    influence = occlusion_influence(untrained, batch)
    assert untrained.training, "the model's mode is restored"
    for length, row in zip(batch.source_lengths.tolist(), influence):
        assert torch.all(row[:, length:] == 0)
    assert torch.all(influence[batch.target_output == Vocab.pad_id] == 0)
    for a, b in zip(before, untrained.parameters()):
        assert torch.equal(a, b)
    untrained.eval()


@pytest.mark.parametrize("encoder", ["one direction", "both directions"])
def test_a_batch_gives_each_sentence_what_it_gets_alone(corpus, untrained, untrained_both_ways, encoder):
    # With a bidirectional encoder the backward GRU starts at each sentence's own last word: the
    # padding of a shorter sentence must not leak into its states, or into its influences.
    model = untrained if encoder == "one direction" else untrained_both_ways
    pairs = sorted(corpus.held_out_pairs, key=lambda p: len(p.source))[::20][:3]
    assert len({len(p.source) for p in pairs}) > 1, "sentences of different lengths, so some are padded"
    together = corpus.collate(pairs)
    for measure in (occlusion_influence, gradient_influence):
        batched = measure(model, together)
        for row, pair in enumerate(pairs):
            alone = measure(model, corpus.collate([pair]))[0]
            target_len, source_len = alone.shape
            torch.testing.assert_close(batched[row, :target_len, :source_len], alone, atol=1e-5, rtol=1e-4)
            assert torch.all(batched[row, :, source_len:] == 0) and torch.all(batched[row, target_len:] == 0)


def test_gradient_times_input_matches_a_hand_computed_gradient(corpus, untrained):
    batch = sentence_batch(corpus, "Tom chase Jerry", "汤姆 追逐 杰瑞")
    influence = gradient_influence(untrained, batch)
    assert influence.shape == (1, 4, 3)
    # The same quantity without hooks: differentiate through an embedding tensor we hold ourselves.
    embedding = untrained.encoder.embedding(batch.source).detach().requires_grad_(True)
    original = untrained.encoder.embedding.forward
    untrained.encoder.embedding.forward = lambda ids: embedding
    try:
        log_probs, _ = target_log_probs(untrained, batch)
        (gradient,) = torch.autograd.grad(log_probs[0, 1], embedding)
    finally:
        untrained.encoder.embedding.forward = original
    torch.testing.assert_close(influence[0, 1], (gradient * embedding).sum(-1)[0].detach())
    assert all(p.grad is None for p in untrained.parameters()), "no parameter gradients are left behind"


def test_a_trained_models_occlusion_points_at_the_translated_word(corpus, trained):
    text, _ = translate(trained, corpus, "Tom chase Jerry in the kitchen yesterday")
    assert text == "汤姆 昨天 在 厨房 追逐 杰瑞"
    influence = occlusion_influence(trained, sentence_batch(corpus, "Tom chase Jerry in the kitchen yesterday", text))[0]
    source = "Tom chase Jerry in the kitchen yesterday".split()
    strongest = [source[j] for j in influence[:-1].argmax(-1).tolist()]  # <eos> left out
    assert strongest[0] == "Tom" and strongest[1] == "yesterday" and strongest[4] == "chase"


def test_alignment_agreement_scores_three_readings(corpus, trained):
    agreement = alignment_agreement(trained, corpus, corpus.held_out_pairs[:30])
    assert isinstance(agreement, Agreement)
    assert agreement.words == sum(len(p.target) for p in corpus.held_out_pairs[:30])
    for rate in (agreement.attention, agreement.occlusion, agreement.gradient, agreement.attention_and_occlusion):
        assert 0 <= rate <= 1
    assert agreement.occlusion > 0.7, "a trained model's influence follows the true alignment"
