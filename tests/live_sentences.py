"""What the live explorers' agreement tests share (tests/test_live_model.py, chapter 6's model;
tests/test_live_transformer.py, chapter 10's): the 200 sentences the models never trained on, and PyTorch
on one thread while it computes the reference."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from attention_course.corpus import ToyTranslationCorpus, generate_pairs


def unseen_sentences(corpus: ToyTranslationCorpus) -> list[list[str]]:
    """100 held-out sentences, and 100 of four and five clauses (the training corpus has one to three), drawn
    from the corpus's own generator; none of them a training sentence."""
    trained = {pair.source for pair in corpus.train_pairs}
    held_out = [pair.source for pair in corpus.held_out_pairs[:100]]
    longer = [pair.source for pair in generate_pairs(100, seed=12345, min_clauses=4, max_clauses=5)]
    chosen = [list(s) for s in held_out + longer if s not in trained]
    assert len(chosen) == 200 and max(map(len, longer)) > max(len(p.source) for p in corpus.train_pairs)
    return chosen


@contextmanager
def one_thread():
    """PyTorch on one thread for the block: many small operations; on a busy 2-core machine more threads only
    wait on each other."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
