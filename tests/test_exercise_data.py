"""Data files shipped with the assignments: exactly what the code that writes them writes, and small."""

from __future__ import annotations

import json
from pathlib import Path

from attention_course.corpus import CLAUSE_JOINER, MANNERS, NOUNS, PLACE_MARKER, PLACES, TIMES, VERBS
from attention_course.grading.exercise_data import (
    SEQ2SEQ_CORPUS_FILE,
    SEQ2SEQ_TRAIN_PAIRS,
    SEQ2SEQ_VALIDATION_PAIRS,
    seq2seq_corpus_text,
    write_seq2seq_corpus,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "solutions" / "seq2seq-attention" / SEQ2SEQ_CORPUS_FILE


def test_the_shipped_corpus_is_what_write_seq2seq_corpus_writes(tmp_path):
    written = write_seq2seq_corpus(tmp_path / SEQ2SEQ_CORPUS_FILE)
    assert SHIPPED.read_bytes() == written.read_bytes(), (
        "solutions/seq2seq-attention/toy_corpus.json is stale: regenerate it with "
        "attention_course.grading.exercise_data.write_seq2seq_corpus")


def test_the_shipped_corpus_is_small_and_json():
    assert SHIPPED.stat().st_size < 300_000
    assert json.loads(SHIPPED.read_text(encoding="utf-8")) == json.loads(seq2seq_corpus_text())


def test_the_corpus_holds_every_word_of_the_grammar_and_no_sentence_twice():
    corpus = json.loads(SHIPPED.read_text(encoding="utf-8"))
    assert (len(corpus["train"]), len(corpus["validation"])) == (SEQ2SEQ_TRAIN_PAIRS, SEQ2SEQ_VALIDATION_PAIRS)
    sources = [english for english, _ in corpus["train"] + corpus["validation"]]
    assert len(set(sources)) == len(sources)
    english = {word for phrase in [*NOUNS, *VERBS, *MANNERS, *PLACES, *TIMES, CLAUSE_JOINER[0]] for word in phrase.split()}
    chinese = {*NOUNS.values(), *VERBS.values(), *MANNERS.values(), *PLACES.values(), *TIMES.values(),
               CLAUSE_JOINER[1], PLACE_MARKER}
    # New sentences at grading time use any word of the grammar: the vocabularies must know them all.
    assert set(corpus["source_vocab"][4:]) == english
    assert set(corpus["target_vocab"][4:]) == chinese
    assert corpus["source_vocab"][:4] == corpus["target_vocab"][:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
