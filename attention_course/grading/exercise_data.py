"""Data files that ship with an assignment, written by code so that anyone can regenerate them.

Inside the grading sandbox (and on a student's machine) the course package is not importable, so an
assignment that needs the toy corpus gets it as a file next to its notebook. The file in
``solutions/<assignment>/`` is what :func:`write_seq2seq_corpus` writes; a test checks that they agree.

Regenerate with::

    python -c "from attention_course.grading.exercise_data import write_seq2seq_corpus as w; \
w('solutions/seq2seq-attention/toy_corpus.json')"
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from attention_course.corpus import ToyTranslationCorpus

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
