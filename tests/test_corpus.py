"""The toy English→Chinese corpus: deterministic, true to the notes' example, reordered where the grammar says."""

from __future__ import annotations

import pytest
import torch

from attention_course.corpus import (
    CLAUSE_JOINER,
    MANNERS,
    NOTES_EXAMPLE,
    NOUNS,
    PLACE_MARKER,
    PLACES,
    TIMES,
    VERBS,
    Clause,
    SentencePair,
    ToyTranslationCorpus,
    Vocab,
    generate_pairs,
    render_pair,
)

# English phrase → Chinese word for every phrase a target token can translate.
LEXICON = {
    **NOUNS, **VERBS, **MANNERS, **TIMES, CLAUSE_JOINER[0]: CLAUSE_JOINER[1],
    **{place.split(" ", 1)[1]: word for place, word in PLACES.items()},
    **{place.split(" ", 1)[0]: PLACE_MARKER for place in PLACES},
}


@pytest.fixture(scope="module")
def corpus() -> ToyTranslationCorpus:
    return ToyTranslationCorpus(num_pairs=600, seed=0)


def clauses_of(tokens: tuple[str, ...], joiner: str) -> list[list[str]]:
    clauses, current = [], []
    for token in tokens:
        if token == joiner:
            clauses.append(current)
            current = []
        else:
            current.append(token)
    return clauses + [current]


# --- determinism -------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_corpus_and_vocabularies():
    first, second = ToyTranslationCorpus(300, seed=7), ToyTranslationCorpus(300, seed=7)
    assert first.train_pairs == second.train_pairs
    assert first.held_out_pairs == second.held_out_pairs
    assert first.source_vocab.tokens == second.source_vocab.tokens
    assert first.target_vocab.tokens == second.target_vocab.tokens


def test_a_different_seed_gives_a_different_corpus():
    assert generate_pairs(300, seed=0) != generate_pairs(300, seed=1)


def test_generating_does_not_touch_the_global_random_state():
    import random

    random.seed(123)
    torch.manual_seed(123)
    expected = (random.random(), torch.rand(1).item())
    random.seed(123)
    torch.manual_seed(123)
    ToyTranslationCorpus(200, seed=5)
    assert (random.random(), torch.rand(1).item()) == expected


# --- the grammar -------------------------------------------------------------------------------


def test_the_notes_example_is_rendered_exactly():
    pair = render_pair([Clause("Tom", "chase", "Jerry")])
    assert (pair.source_text, pair.target_text) == NOTES_EXAMPLE == ("Tom chase Jerry", "汤姆 追逐 杰瑞")
    assert pair.alignment == ((0,), (1,), (2,))
    assert not pair.reordered


def test_time_and_place_move_before_the_verb_in_chinese():
    pair = render_pair([Clause("Tom", "chase", "Jerry", place="in the kitchen", time="yesterday")])
    assert pair.source_text == "Tom chase Jerry in the kitchen yesterday"
    assert pair.target_text == "汤姆 昨天 在 厨房 追逐 杰瑞"
    assert pair.reordered


def test_a_manner_adverb_also_moves_before_the_verb():
    pair = render_pair([Clause("the cat", "see", "the dog", manner="quietly", place="at home", time="every day")])
    assert pair.source_text == "the cat see the dog quietly at home every day"
    assert pair.target_text == "猫 每天 在 家里 悄悄地 看见 狗"


def test_clauses_are_joined_by_and_and_by_erqie():
    pair = render_pair([Clause("Tom", "chase", "Jerry"), Clause("Spike", "help", "Tyke")])
    assert pair.source_text == "Tom chase Jerry and Spike help Tyke"
    assert pair.target_text == "汤姆 追逐 杰瑞 而且 斯派克 帮助 泰克"


def test_generated_clauses_put_time_and_place_after_the_object_in_english_and_before_the_verb_in_chinese(corpus):
    checked = 0
    for pair in corpus.train_pairs:
        for english, chinese in zip(clauses_of(pair.source, "and"), clauses_of(pair.target, "而且")):
            time_words = [word for word in chinese if word in TIMES.values()]
            if not time_words or PLACE_MARKER not in chinese:
                continue
            verb = next(word for word in chinese if word in VERBS.values())
            # Chinese: S time 在 place [manner] V O
            time_position, place_position = chinese.index(time_words[0]), chinese.index(PLACE_MARKER)
            assert time_position < place_position < chinese.index(verb) == len(chinese) - 2
            # English: S V O [manner] place time, the time phrase last
            english_verb = next(word for word in english if word in VERBS)
            preposition = next(word for word in english if word in ("in", "at"))
            assert english.index(english_verb) < english.index(preposition)
            assert " ".join(english).endswith(next(t for t, w in TIMES.items() if w == time_words[0]))
            checked += 1
    assert checked > 20


def test_every_target_token_translates_the_source_tokens_it_is_aligned_to(corpus):
    for pair in corpus.train_pairs + corpus.held_out_pairs:
        assert len(pair.alignment) == len(pair.target)
        for target_word, positions in zip(pair.target, pair.alignment):
            assert LEXICON[" ".join(pair.source[position] for position in positions)] == target_word
        # every source token is translated exactly once
        aligned_positions = sorted(position for positions in pair.alignment for position in positions)
        assert aligned_positions == list(range(len(pair.source)))


def test_the_alignment_matrix_has_rows_summing_to_one_and_shows_the_reordering():
    pair = render_pair([Clause("Tom", "chase", "Jerry", place="in the kitchen", time="yesterday")])
    matrix = pair.alignment_matrix()  # (T, S)
    assert matrix.shape == (len(pair.target), len(pair.source)) == (6, 7)
    assert torch.allclose(matrix.sum(dim=1), torch.ones(6))
    # 昨天 (target 1) looks at "yesterday", the last source token; 追逐 (target 4) at "chase" (source 1)
    assert matrix[1].argmax() == 6 and matrix[4].argmax() == 1
    assert torch.equal(matrix[3], torch.tensor([0, 0, 0, 0, 0.5, 0.5, 0]))  # 厨房 ← the kitchen


def test_render_pair_rejects_words_outside_the_lexicon():
    with pytest.raises(ValueError, match="unknown verb 'chases'"):
        render_pair([Clause("Tom", "chases", "Jerry")])
    with pytest.raises(ValueError, match="at least one clause"):
        render_pair([])


# --- lengths -----------------------------------------------------------------------------------


def test_long_sentences_exist_when_asked_for_and_short_ones_when_not():
    long_lengths = [len(pair.source) for pair in generate_pairs(500, seed=0, min_clauses=3, max_clauses=4)]
    assert max(long_lengths) >= 30 and min(long_lengths) >= 3 * 3 + 2
    short_lengths = [len(pair.source) for pair in generate_pairs(500, seed=0, max_clauses=1)]
    assert min(short_lengths) == 3 and max(short_lengths) <= 11


def test_the_default_corpus_spans_short_to_long_sentences(corpus):
    lengths = {len(pair.source) for pair in corpus.train_pairs}
    assert min(lengths) <= 4 and max(lengths) >= 25


# --- vocabularies ------------------------------------------------------------------------------


def test_special_tokens_have_fixed_ids(corpus):
    for vocab in (corpus.source_vocab, corpus.target_vocab):
        assert vocab.tokens[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
        assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)


def test_sentences_round_trip_through_the_vocabularies(corpus):
    for pair in corpus.train_pairs:
        assert corpus.source_vocab.decode(corpus.source_vocab.encode(pair.source_text)) == pair.source_text
        target_ids = corpus.target_vocab.encode(pair.target, add_bos=True, add_eos=True)
        assert corpus.target_vocab.decode(target_ids) == pair.target_text


def test_unknown_words_become_unk(corpus):
    ids = corpus.source_vocab.encode("Tom chase Garfield")
    assert ids[2] == Vocab.unk_id and ids[:2] != [Vocab.unk_id] * 2
    assert corpus.source_vocab.decode(ids) == "Tom chase <unk>"


def test_decoding_stops_at_eos_and_drops_padding():
    vocab = Vocab(["汤姆", "追逐", "杰瑞"])
    ids = [Vocab.bos_id] + vocab.encode("汤姆 追逐") + [Vocab.eos_id] + vocab.encode("杰瑞") + [Vocab.pad_id]
    assert vocab.decode(torch.tensor(ids)) == "汤姆 追逐"
    assert vocab.decode(ids, keep_special=True) == "<bos> 汤姆 追逐 <eos> 杰瑞 <pad>"


def test_encoding_an_empty_sentence_is_a_clear_error(corpus):
    for empty in ("", "   ", []):
        with pytest.raises(ValueError, match="empty sentence"):
            corpus.source_vocab.encode(empty)


def test_decoding_an_id_outside_the_vocabulary_is_an_error(corpus):
    with pytest.raises(ValueError, match="outside this vocabulary"):
        corpus.target_vocab.decode([len(corpus.target_vocab)])


# --- the corpus: splits and batches ------------------------------------------------------------


def test_train_and_held_out_are_disjoint_and_cover_the_corpus(corpus):
    train = {pair.source for pair in corpus.train_pairs}
    held_out = {pair.source for pair in corpus.held_out_pairs}
    assert not train & held_out
    assert not {pair.target for pair in corpus.train_pairs} & {pair.target for pair in corpus.held_out_pairs}
    assert len(train) + len(held_out) == 600
    assert len(held_out) == 120  # the default held_out_fraction, 0.2
    assert corpus.split("held_out") is corpus.held_out_pairs


def test_batches_are_padded_with_the_right_lengths(corpus):
    batch = next(corpus.batches("train", batch_size=16))
    B, S = batch.source.shape
    T = batch.target_input.shape[1]
    assert B == 16 and batch.target_output.shape == (B, T)
    assert batch.source.dtype == batch.target_input.dtype == torch.long
    assert batch.source_lengths.shape == batch.target_lengths.shape == (B,)
    assert S == batch.source_lengths.max() and T == batch.target_lengths.max()
    for row, pair in enumerate(batch.pairs):
        source_length, target_length = int(batch.source_lengths[row]), int(batch.target_lengths[row])
        assert source_length == len(pair.source) and target_length == len(pair.target) + 1
        assert corpus.source_vocab.decode(batch.source[row]) == pair.source_text
        assert (batch.source[row, source_length:] == Vocab.pad_id).all()
        assert batch.target_input[row, 0] == Vocab.bos_id
        assert batch.target_output[row, target_length - 1] == Vocab.eos_id
        # the decoder reads at step t what it should have predicted at step t - 1 (teacher forcing)
        assert torch.equal(batch.target_input[row, 1:target_length], batch.target_output[row, : target_length - 1])
        assert (batch.target_input[row, target_length:] == Vocab.pad_id).all()
        assert (batch.target_output[row, target_length:] == Vocab.pad_id).all()


def test_batches_cover_the_split_once_and_shuffle_repeatably(corpus):
    batches = list(corpus.batches("held_out", batch_size=50))
    assert [len(batch.pairs) for batch in batches] == [50, 50, 20]
    assert [pair for batch in batches for pair in batch.pairs] == corpus.held_out_pairs
    assert len(list(corpus.batches("held_out", batch_size=50, drop_last=True))) == 2

    def order(seed):
        return [pair for batch in corpus.batches("train", 64, shuffle_seed=seed) for pair in batch.pairs]

    assert order(3) == order(3) != order(4)
    assert sorted(order(3), key=str) == sorted(corpus.train_pairs, key=str)


def test_any_pair_can_be_batched_including_the_notes_example(corpus):
    batch = corpus.collate([render_pair([Clause("Tom", "chase", "Jerry")])])
    assert batch.source.shape == (1, 3)
    assert corpus.target_vocab.decode(batch.target_output[0]) == "汤姆 追逐 杰瑞"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ToyTranslationCorpus(0), "num_pairs"),
        (lambda: ToyTranslationCorpus(-5), "num_pairs"),
        (lambda: generate_pairs(0), "num_pairs must be positive"),
        (lambda: ToyTranslationCorpus(10, held_out_fraction=1.0), "held_out_fraction"),
        (lambda: ToyTranslationCorpus(10, max_clauses=0), "max_clauses"),
        (lambda: ToyTranslationCorpus(10).split("test"), "unknown split 'test'"),
        (lambda: next(ToyTranslationCorpus(10).batches("train", batch_size=0)), "batch_size"),
        (lambda: generate_pairs(10**6, max_clauses=1), "distinct sentences"),
        (lambda: ToyTranslationCorpus(10).collate([]), "zero pairs"),
    ],
)
def test_bad_input_is_a_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_pair_prints_as_english_arrow_chinese():
    assert str(SentencePair(("Tom",), ("汤姆",), ((0,),))) == "Tom → 汤姆"
