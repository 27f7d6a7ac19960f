"""Data files that ship with an assignment, written by code so that anyone can regenerate them.

Inside the grading sandbox (and on a student's machine) the course package is not importable, so an
assignment that needs the toy corpus gets it as a file next to its notebook. The file in
``solutions/<assignment>/`` is what :func:`write_seq2seq_corpus` writes; a test checks that they agree.

Regenerate with::

    python -c "from attention_course.grading.exercise_data import write_seq2seq_corpus as w; \
w('solutions/seq2seq-attention/toy_corpus.json')"
    python -c "from attention_course.grading.exercise_data import write_experiments_corpus as w; \
w('solutions/attention-experiments/experiment_corpus.json')"
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from attention_course.corpus import ToyTranslationCorpus, generate_pairs

SEQ2SEQ_CORPUS_FILE = "toy_corpus.json"
SEQ2SEQ_SEED = 0
SEQ2SEQ_TRAIN_PAIRS = 1600
SEQ2SEQ_VALIDATION_PAIRS = 200
# One or two clauses (3 to 23 English words): enough reordering to learn an alignment, and short
# enough that the attention model trains to >= 98 % within seconds inside the grader's time limit.
SEQ2SEQ_MAX_CLAUSES = 2


@lru_cache(maxsize=4)
def seq2seq_corpus(seed: int = SEQ2SEQ_SEED) -> ToyTranslationCorpus:
    """The corpus of the assignment ``seq2seq-attention``: 1600 training and 200 validation pairs."""
    total = SEQ2SEQ_TRAIN_PAIRS + SEQ2SEQ_VALIDATION_PAIRS
    return ToyTranslationCorpus(num_pairs=total, seed=seed, min_clauses=1, max_clauses=SEQ2SEQ_MAX_CLAUSES,
                                held_out_fraction=SEQ2SEQ_VALIDATION_PAIRS / total)


def seq2seq_corpus_text(seed: int = SEQ2SEQ_SEED) -> str:
    """The file's text: JSON with one sentence pair per line, so that a diff of it reads as sentences."""
    corpus = seq2seq_corpus(seed)

    def dumps(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    def pairs(split: str) -> str:
        return ",\n".join(f"  {dumps([pair.source_text, pair.target_text])}" for pair in corpus.split(split))

    header = {
        "about": (f"The toy English-Chinese corpus of the course (seed {seed}, sentences of 1 to "
                  f"{SEQ2SEQ_MAX_CLAUSES} clauses): [English, Chinese] pairs, words separated by spaces. "
                  "Vocabulary lists map ids to words; ids 0-3 are <pad> <bos> <eos> <unk>."),
        "seed": seed,
        "source_vocab": corpus.source_vocab.tokens,
        "target_vocab": corpus.target_vocab.tokens,
    }
    head = ",\n".join(f"{dumps(key)}: {dumps(value)}" for key, value in header.items())
    return "{\n" + head + ',\n"train": [\n' + pairs("train") + '\n],\n"validation": [\n' + pairs("held_out") + "\n]\n}\n"


def write_seq2seq_corpus(path: Path | str, seed: int = SEQ2SEQ_SEED) -> Path:
    """Write the corpus file of ``seq2seq-attention`` to ``path`` (UTF-8); return the path."""
    path = Path(path)
    path.write_text(seq2seq_corpus_text(seed), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# attention-experiments: the seq2seq corpus (same training pairs, same vocabularies), plus two test sets
# with their true word alignments: sentences of the training lengths that are in neither split, and
# sentences LONGER than any training sentence (3 or 4 clauses).

EXPERIMENTS_CORPUS_FILE = "experiment_corpus.json"
EXPERIMENTS_TEST_PAIRS = 150
EXPERIMENTS_LONG_PAIRS = 60
EXPERIMENTS_TEST_SEED = 1
EXPERIMENTS_LONG_SEED = 2


@lru_cache(maxsize=2)
def experiments_sets(seed: int = SEQ2SEQ_SEED) -> dict:
    """{"test": pairs of 1-2 clauses new to the corpus, "long": pairs of 3-4 clauses longer than every
    training sentence}, each a list of SentencePair (with its alignment)."""
    corpus = seq2seq_corpus(seed)
    known = {pair.source for pair in corpus.train_pairs + corpus.held_out_pairs}
    longest = max(len(pair.source) for pair in corpus.train_pairs)
    test = [pair for pair in generate_pairs(4 * EXPERIMENTS_TEST_PAIRS, seed=EXPERIMENTS_TEST_SEED,
                                            max_clauses=SEQ2SEQ_MAX_CLAUSES) if pair.source not in known]
    long = [pair for pair in generate_pairs(4 * EXPERIMENTS_LONG_PAIRS, seed=EXPERIMENTS_LONG_SEED, min_clauses=3,
                                            max_clauses=4) if len(pair.source) > longest]
    return {"test": test[:EXPERIMENTS_TEST_PAIRS], "long": long[:EXPERIMENTS_LONG_PAIRS]}


def experiments_corpus_text(seed: int = SEQ2SEQ_SEED) -> str:
    """The file's text: the seq2seq corpus's header and splits, then "test" and "long" as
    [English, Chinese, alignment] triples (alignment[i]: the English positions Chinese word i translates)."""
    corpus, sets = seq2seq_corpus(seed), experiments_sets(seed)

    def dumps(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    def pairs(items, aligned: bool) -> str:
        return ",\n".join(
            f"  {dumps([pair.source_text, pair.target_text, [list(p) for p in pair.alignment]] if aligned else [pair.source_text, pair.target_text])}"
            for pair in items)

    longest = max(len(pair.source) for pair in corpus.train_pairs)
    header = {
        "about": (f"The toy English-Chinese corpus of the course (seed {seed}): 'train' and 'validation' hold sentences "
                  f"of 1 to {SEQ2SEQ_MAX_CLAUSES} clauses (at most {longest} English words); 'test' holds new sentences "
                  "of the same lengths and 'long' sentences of 3 or 4 clauses, longer than every training sentence, "
                  "both as [English, Chinese, alignment]: alignment[i] lists the positions of the English words that "
                  "Chinese word i translates. Ids 0-3 of both vocabularies are <pad> <bos> <eos> <unk>."),
        "seed": seed,
        "longest_training_sentence": longest,
        "source_vocab": corpus.source_vocab.tokens,
        "target_vocab": corpus.target_vocab.tokens,
    }
    head = ",\n".join(f"{dumps(key)}: {dumps(value)}" for key, value in header.items())
    return ("{\n" + head + ',\n"train": [\n' + pairs(corpus.train_pairs, False) + '\n],\n"validation": [\n'
            + pairs(corpus.held_out_pairs, False) + '\n],\n"test": [\n' + pairs(sets["test"], True)
            + '\n],\n"long": [\n' + pairs(sets["long"], True) + "\n]\n}\n")


def write_experiments_corpus(path: Path | str, seed: int = SEQ2SEQ_SEED) -> Path:
    """Write the corpus file of ``attention-experiments`` to ``path`` (UTF-8); return the path."""
    path = Path(path)
    path.write_text(experiments_corpus_text(seed), encoding="utf-8")
    return path
