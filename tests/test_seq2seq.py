"""The encoder–decoders of chapters 5 and 6: shapes, masking, the H_{i-1} query, padding, determinism, decoding."""

from __future__ import annotations

import pytest
import torch

from attention_course.attention import masked_softmax
from attention_course.corpus import Clause, ToyTranslationCorpus, Vocab, render_pair
from attention_course.seq2seq import (
    AttentionDecoder,
    Encoder,
    PlainDecoder,
    Seq2Seq,
    accuracy_by_length,
    bleu_by_length,
    build_model,
    evaluate,
    train,
    translate,
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus() -> ToyTranslationCorpus:
    return ToyTranslationCorpus(num_pairs=200, seed=0)


@pytest.fixture(scope="module")
def one_clause_corpus() -> ToyTranslationCorpus:
    return ToyTranslationCorpus(num_pairs=300, seed=0, max_clauses=1)


@pytest.fixture(scope="module")
def trained(one_clause_corpus) -> Seq2Seq:
    """An attention model trained for about 2 s on one-clause sentences: enough to translate the notes' example."""
    model = build_model(one_clause_corpus, embed_dim=16, hidden_dim=32, attention_dim=16, seed=0)
    train(model, one_clause_corpus, steps=150, batch_size=32, lr=1e-2, log_every=1000)
    return model


@pytest.fixture
def batch(corpus):
    """Six held-out pairs of different lengths, so that most rows are padded."""
    pairs = sorted(corpus.held_out_pairs, key=lambda pair: len(pair.source))
    chosen = [pairs[0], pairs[-1], pairs[len(pairs) // 2], pairs[1], pairs[-2], pairs[len(pairs) // 3]]
    return corpus.collate(chosen)


def models(corpus):
    return [build_model(corpus, attention=True, seed=1), build_model(corpus, attention=False, seed=1)]


# --- shapes and masking -------------------------------------------------------------------------


def test_encoder_returns_every_state_and_the_final_one_at_each_sentences_last_token(corpus, batch):
    model = build_model(corpus, hidden_dim=24)
    with torch.no_grad():
        encoded = model.encoder(batch.source, batch.source_lengths)
    batch_size, source_len = batch.source.shape
    assert encoded.states.shape == (batch_size, source_len, 24)
    assert encoded.final.shape == (batch_size, 24)
    for row, length in enumerate(batch.source_lengths.tolist()):
        torch.testing.assert_close(encoded.final[row], encoded.states[row, length - 1])
        assert torch.all(encoded.states[row, length:] == 0), "states beyond a sentence's end must be 0"


@pytest.mark.parametrize("attention", [True, False])
def test_teacher_forced_forward_gives_logits_for_every_target_position(corpus, batch, attention):
    model = build_model(corpus, attention=attention)
    logits, weights = model(batch)
    batch_size, target_len = batch.target_input.shape
    assert logits.shape == (batch_size, target_len, len(corpus.target_vocab))
    if attention:
        assert weights.shape == (batch_size, target_len, batch.source.shape[1])
    else:
        assert weights is None


def test_attention_weights_sum_to_one_over_the_sentence_and_are_exactly_zero_beyond_it(corpus, batch):
    model = build_model(corpus)
    with torch.no_grad():
        _, weights = model(batch)  # (B, T, S)
    for row, length in enumerate(batch.source_lengths.tolist()):
        torch.testing.assert_close(weights[row, :, :length].sum(-1), torch.ones(weights.shape[1]))
        assert torch.all(weights[row, :, length:] == 0)


# --- the query is H_{i-1} ------------------------------------------------------------------------


def test_the_first_steps_weights_come_from_the_initial_state_alone(corpus, batch):
    model = build_model(corpus)
    with torch.no_grad():
        _, weights = model(batch)
        encoded = model.encoder(batch.source, batch.source_lengths)
        h0 = model.decoder.initial_state(encoded)  # H_0
        expected = masked_softmax(model.decoder.score(h0.unsqueeze(1), encoded.states), batch.source_lengths)
    torch.testing.assert_close(weights[:, 0], expected[:, 0])


def test_a_steps_weights_do_not_depend_on_the_word_it_reads(corpus, batch):
    """a_i is computed from H_{i-1}; y_{i-1} only enters H_i. A decoder that scored with H_i would fail this."""
    model = build_model(corpus)
    decoder: AttentionDecoder = model.decoder
    with torch.no_grad():
        encoded = model.encoder(batch.source, batch.source_lengths)
        previous_hidden = torch.randn(batch.source.shape[0], decoder.cell.hidden_size,
                                      generator=torch.Generator().manual_seed(0))
        words = [torch.full((batch.source.shape[0],), token) for token in (Vocab.bos_id, 5, 9)]
        steps = [decoder.step(word, previous_hidden, encoded) for word in words]
    for logits, hidden, weights in steps[1:]:
        torch.testing.assert_close(weights, steps[0][2], rtol=0, atol=0)
        assert not torch.allclose(hidden, steps[0][1]), "the word read must still change H_i"


def test_changing_a_teacher_forced_word_changes_only_the_later_weights(corpus, batch):
    model = build_model(corpus)
    changed_input = batch.target_input.clone()
    changed_input[:, 1] = (changed_input[:, 1] + 1) % len(corpus.target_vocab)  # y_1, read at step 2
    with torch.no_grad():
        _, weights = model(batch)
        encoded = model.encoder(batch.source, batch.source_lengths)
        _, changed = model.decoder(changed_input, encoded)
    torch.testing.assert_close(changed[:, :2], weights[:, :2], rtol=0, atol=0)  # a_1 and a_2: before y_1 matters
    assert not torch.allclose(changed[:, 2], weights[:, 2])  # a_3 is scored with H_2, which has read y_1


# --- padding, consistency ------------------------------------------------------------------------


@pytest.mark.parametrize("attention", [True, False])
def test_padding_does_not_change_a_sentences_result(corpus, attention):
    model = build_model(corpus, attention=attention)
    short = render_pair([Clause("Tom", "chase", "Jerry")])
    long = render_pair([Clause("the cat", "see", "the dog", "quickly", "in the garden", "yesterday")] * 3)
    alone, together = corpus.collate([short]), corpus.collate([short, long])
    with torch.no_grad():
        logits_alone, weights_alone = model(alone)
        logits_together, weights_together = model(together)
        tokens_alone, _ = model.greedy_decode(alone.source, alone.source_lengths, max_len=8)
        tokens_together, _ = model.greedy_decode(together.source, together.source_lengths, max_len=8)
    target_len, source_len = alone.target_input.shape[1], alone.source.shape[1]
    torch.testing.assert_close(logits_together[0, :target_len], logits_alone[0], rtol=1e-5, atol=1e-5)
    if attention:
        torch.testing.assert_close(weights_together[0, :target_len, :source_len], weights_alone[0], rtol=1e-5, atol=1e-6)
    assert tokens_together[0].tolist()[: tokens_alone.shape[1]] == tokens_alone[0].tolist()


@pytest.mark.parametrize("attention", [True, False])
def test_step_by_step_decoding_computes_what_teacher_forcing_computes(corpus, batch, attention):
    model = build_model(corpus, attention=attention)
    with torch.no_grad():
        logits, _ = model(batch)
        encoded = model.encoder(batch.source, batch.source_lengths)
        hidden = model.decoder.initial_state(encoded)
        for i in range(batch.target_input.shape[1]):
            step_logits, hidden, _ = model.decoder.step(batch.target_input[:, i], hidden, encoded)
            torch.testing.assert_close(step_logits, logits[:, i], rtol=1e-5, atol=1e-5)


# --- greedy decoding -----------------------------------------------------------------------------


def rig_output(model: Seq2Seq, token_id: int) -> None:
    """Make the decoder always predict ``token_id``."""
    with torch.no_grad():
        model.decoder.output.weight.zero_()
        model.decoder.output.bias.zero_()
        model.decoder.output.bias[token_id] = 10.0


@pytest.mark.parametrize("attention", [True, False])
def test_greedy_decoding_stops_once_every_row_has_produced_eos(corpus, batch, attention):
    model = build_model(corpus, attention=attention)
    rig_output(model, Vocab.eos_id)
    tokens, weights = model.greedy_decode(batch.source, batch.source_lengths, max_len=20)
    assert tokens.tolist() == [[Vocab.eos_id]] * batch.source.shape[0]
    assert (weights is None) != attention and (weights is None or weights.shape == (len(tokens), 1, batch.source.shape[1]))
    rig_output(model, 5)  # never <eos>: decoding runs to max_len
    tokens, _ = model.greedy_decode(batch.source, batch.source_lengths, max_len=7)
    assert tokens.shape == (batch.source.shape[0], 7)


def test_greedy_rows_end_with_one_eos_then_padding(trained, one_clause_corpus):
    batch = one_clause_corpus.collate(one_clause_corpus.held_out_pairs[:20])
    tokens, weights = trained.greedy_decode(batch.source, batch.source_lengths, max_len=30)
    assert tokens.shape[1] < 30, "decoding should stop when every row has produced <eos>, not run to max_len"
    for row, row_weights in zip(tokens.tolist(), weights):
        end = row.index(Vocab.eos_id)
        assert all(token == Vocab.pad_id for token in row[end + 1:])
        assert torch.all(row_weights[end + 1:] == 0)
    assert any(row[-1] == Vocab.eos_id for row in tokens.tolist()), "the longest row ends exactly at its <eos>"


# --- translate ------------------------------------------------------------------------------------


def test_translate_renders_the_notes_example_with_one_row_of_weights_per_word(trained, one_clause_corpus):
    text, weights = translate(trained, one_clause_corpus, "Tom chase Jerry")
    assert text == "汤姆 追逐 杰瑞"
    assert weights.shape == (3, 3)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))


@pytest.mark.parametrize("sentence", ["", "   ", "\n\t"])
def test_translate_rejects_an_empty_sentence(trained, one_clause_corpus, sentence):
    with pytest.raises(ValueError, match="empty"):
        translate(trained, one_clause_corpus, sentence)


def test_translate_reads_unknown_words_as_unk(trained, one_clause_corpus):
    assert "Godzilla" not in one_clause_corpus.source_vocab
    text, weights = translate(trained, one_clause_corpus, "Tom chase Godzilla")
    expected_text, expected_weights = translate(trained, one_clause_corpus, f"Tom chase {Vocab.UNK}")
    assert text == expected_text
    torch.testing.assert_close(weights, expected_weights)
    assert weights.shape[1] == 3


def test_translate_without_attention_returns_no_weights(corpus):
    text, weights = translate(build_model(corpus, attention=False), corpus, "Tom chase Jerry")
    assert isinstance(text, str) and weights is None


# --- training and evaluation ------------------------------------------------------------------------


@pytest.mark.parametrize("attention", [True, False])
def test_the_same_seed_gives_the_same_loss_history(corpus, attention):
    histories = [
        train(build_model(corpus, attention=attention, seed=3), corpus, steps=4, batch_size=32, seed=5, log_every=100)
        for _ in range(2)
    ]
    assert histories[0].step_losses == histories[1].step_losses
    other = train(build_model(corpus, attention=attention, seed=3), corpus, steps=4, batch_size=32, seed=6, log_every=100)
    assert other.step_losses != histories[0].step_losses, "another seed shuffles the batches differently"


def test_training_leaves_the_global_random_state_and_thread_count_alone(corpus):
    threads = torch.get_num_threads()
    state = torch.get_rng_state()
    train(build_model(corpus, attention=False), corpus, steps=2, batch_size=32, log_every=100, num_threads=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.get_num_threads() == threads


def test_a_short_training_run_lowers_the_loss_and_writes_nothing(corpus, capfd):
    logged = []
    model = build_model(corpus, embed_dim=16, hidden_dim=32, attention_dim=16)
    history = train(model, corpus, steps=30, batch_size=32, lr=1e-2, log_every=15, on_log=logged.append)
    first, last = history.step_losses[:5], history.step_losses[-5:]
    assert sum(last) / 5 < 0.75 * sum(first) / 5  # measured: about 0.53 for three seeds
    assert history.steps == [15, 30] and [point.step for point in logged] == [15, 30]
    assert len(history.accuracies) == len(history.seconds) == 2 and history.stopped_by == "steps"
    assert capfd.readouterr() == ("", ""), "training must print nothing: the book build fails on stderr"


def test_training_by_epochs_sees_every_training_pair_once_per_epoch(corpus):
    history = train(build_model(corpus, attention=False), corpus, epochs=2, batch_size=64, log_every=100)
    batches_per_epoch = -(-len(corpus.train_pairs) // 64)
    assert len(history.step_losses) == 2 * batches_per_epoch
    assert history.stopped_by == "epochs" and history.steps == [2 * batches_per_epoch]


def test_scores_by_length_cover_the_held_out_set_and_agree_with_exact_match(trained, one_clause_corpus, capfd):
    held_out = one_clause_corpus.held_out_pairs
    accuracy = evaluate(trained, one_clause_corpus)
    by_length = accuracy_by_length(trained, one_clause_corpus, edges=(5, 8))
    bleu = bleu_by_length(trained, one_clause_corpus, edges=(5, 8))
    assert [b.sentences for b in by_length] == [b.sentences for b in bleu]
    assert sum(b.sentences for b in by_length) == len(held_out)
    assert [(b.min_length, b.max_length) for b in by_length] == [(b.min_length, b.max_length) for b in bleu]
    assert by_length[0].max_length <= 5 < by_length[1].min_length <= by_length[1].max_length <= 8 < by_length[2].min_length
    assert sum(b.score * b.sentences for b in by_length) / len(held_out) == pytest.approx(accuracy)
    for exact, b in zip(by_length, bleu):
        assert 0 <= b.score <= 100 + 1e-9  # sacrebleu can round to 100.00000000000004
        if exact.score == 1.0:
            assert b.score == pytest.approx(100.0)
    assert capfd.readouterr().err == ""


# --- the bidirectional encoder (Bahdanau et al. 2015) ----------------------------------------------


def test_the_default_model_is_the_one_directional_encoder_built_by_hand(corpus):
    """The graded exercises build Encoder(V, 32, 64) and AttentionDecoder(V, 32, 64, 64, 64) after
    torch.manual_seed; the option must not change a single default weight."""
    for attention in (True, False):
        model = build_model(corpus, attention=attention, seed=4)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(4)
            encoder = Encoder(len(corpus.source_vocab), 32, 64)
            sizes = (len(corpus.target_vocab), 32, 64, 64)
            decoder = AttentionDecoder(*sizes, 64) if attention else PlainDecoder(*sizes)
        by_hand = Seq2Seq(encoder, decoder).state_dict()
        assert list(model.state_dict()) == list(by_hand)
        assert all(torch.equal(value, by_hand[name]) for name, value in model.state_dict().items())
        assert not model.encoder.bidirectional and model.encoder.state_dim == 64


def test_bidirectional_states_are_both_directions_and_the_code_is_the_backward_state_at_x1(corpus, batch):
    model = build_model(corpus, hidden_dim=24, bidirectional=True)
    with torch.no_grad():
        encoded = model.encoder(batch.source, batch.source_lengths)
        _, weights = model(batch)
    batch_size, source_len = batch.source.shape
    assert encoded.states.shape == (batch_size, source_len, 48)  # h_j = [→h_j; ←h_j]
    assert encoded.final.shape == (batch_size, 24)
    assert weights.shape == (batch_size, batch.target_input.shape[1], source_len)
    for row, length in enumerate(batch.source_lengths.tolist()):
        torch.testing.assert_close(encoded.final[row], encoded.states[row, 0, 24:])  # ←h_1
        assert torch.all(encoded.states[row, length:] == 0), "states beyond a sentence's end must be 0"
        torch.testing.assert_close(weights[row, :, :length].sum(-1), torch.ones(weights.shape[1]))


def test_a_bidirectional_model_needs_the_attention_decoder(corpus):
    with pytest.raises(ValueError, match="attention"):
        build_model(corpus, attention=False, bidirectional=True)


def test_bidirectional_padding_does_not_change_a_sentences_result(corpus):
    model = build_model(corpus, bidirectional=True)
    short = render_pair([Clause("Tom", "chase", "Jerry")])
    long = render_pair([Clause("the cat", "see", "the dog", "quickly", "in the garden", "yesterday")] * 3)
    alone, together = corpus.collate([short]), corpus.collate([long, short])
    with torch.no_grad():
        encoded_alone = model.encoder(alone.source, alone.source_lengths)
        encoded_together = model.encoder(together.source, together.source_lengths)
        logits_alone, weights_alone = model(alone)
        logits_together, weights_together = model(together)
    source_len, target_len = alone.source.shape[1], alone.target_input.shape[1]
    torch.testing.assert_close(encoded_together.states[1, :source_len], encoded_alone.states[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(encoded_together.final[1], encoded_alone.final[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logits_together[1, :target_len], logits_alone[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights_together[1, :target_len, :source_len], weights_alone[0], rtol=1e-5, atol=1e-6)


def test_only_the_bidirectional_h1_has_read_the_last_word(corpus):
    """h_1 = [→h_1; ←h_1]: the backward half has read the sentence from its end, so the last word
    reaches it; a one-directional h_1 has read x_1 alone."""
    sentences = [render_pair([Clause("Tom", "chase", "Jerry")]), render_pair([Clause("Tom", "chase", "Spike")])]
    batch = corpus.collate(sentences)
    for bidirectional in (True, False):
        model = build_model(corpus, bidirectional=bidirectional)
        with torch.no_grad():
            states = model.encoder(batch.source, batch.source_lengths).states  # (2, S, d_h or 2·d_h)
        changed = not torch.allclose(states[0, 0], states[1, 0])
        assert changed == bidirectional
        if bidirectional:
            torch.testing.assert_close(states[0, 0, :64], states[1, 0, :64])  # →h_1 has still read x_1 alone


def test_a_bidirectional_model_trains(corpus):
    model = build_model(corpus, embed_dim=16, hidden_dim=32, attention_dim=16, bidirectional=True)
    history = train(model, corpus, steps=30, batch_size=32, lr=1e-2, log_every=100)
    first, last = history.step_losses[:5], history.step_losses[-5:]
    assert sum(last) / 5 < 0.75 * sum(first) / 5
    again = train(build_model(corpus, embed_dim=16, hidden_dim=32, attention_dim=16, bidirectional=True), corpus,
                  steps=30, batch_size=32, lr=1e-2, log_every=100)
    assert again.step_losses == history.step_losses
