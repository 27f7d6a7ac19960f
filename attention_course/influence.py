"""Alignment or influence? Measuring how much each source word influences each output word (chapter 7).

An attention decoder's weights a_ij say where output step i *looks* (the alignment reading). How
much source word x_j actually *influences* output word y_i is a different question, answered here
in two ways, for a trained ``seq2seq.Seq2Seq`` and a fixed target sentence (teacher forcing):

- ``occlusion_influence``: the drop in log p(y_i | x, y_<i) when x_j is replaced by ``<unk>``
  (one extra forward pass per source position);
- ``gradient_influence``: gradient × input, the gradient of log p(y_i | x, y_<i) with respect to
  x_j's embedding, dotted with that embedding (one backward pass per output step): the first-order
  estimate of what removing the embedding (setting it to 0) would cost.

``alignment_agreement`` scores the arg-max of each reading against the corpus's true word alignment.

Shapes: B sentences, S source tokens, T target steps (the Chinese words and then ``<eos>``).
Nothing here trains or changes the model; gradients are taken with respect to the embeddings only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from attention_course.corpus import Batch, SentencePair, ToyTranslationCorpus, Vocab
from attention_course.seq2seq import Seq2Seq

__all__ = [
    "sentence_batch",
    "target_log_probs",
    "occlusion_influence",
    "gradient_influence",
    "Agreement",
    "alignment_agreement",
]


def sentence_batch(corpus: ToyTranslationCorpus, source: str, target: str) -> Batch:
    """A batch of one pair: an English ``source`` and a Chinese ``target`` (words separated by spaces).

    The target is usually the model's own translation (``seq2seq.translate``), so that the influence
    measures explain what the model actually wrote. The pair's ``alignment`` is left empty.
    """
    source_words, target_words = tuple(source.split()), tuple(target.split())
    if not source_words or not target_words:
        raise ValueError(f"need a source and a target sentence, got {source!r} and {target!r}")
    return corpus.collate([SentencePair(source_words, target_words, alignment=())])


def _target_mask(batch: Batch) -> torch.Tensor:
    """(B, T) bool: the target steps that exist (the words and ``<eos>``, not the padding)."""
    return batch.target_output != Vocab.pad_id


def target_log_probs(model: Seq2Seq, batch: Batch, source: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(y_i | x, y_<i) of every target step under teacher forcing, and the attention weights.

    ``source`` (B, S) replaces ``batch.source`` if given (same lengths). Returns (log_probs (B, T),
    0 at padded steps; weights (B, T, S)). Gradients flow if the caller allows them.
    """
    encoded = model.encoder(batch.source if source is None else source, batch.source_lengths)
    logits, weights = model.decoder(batch.target_input, encoded)  # (B, T, V), (B, T, S)
    log_probs = logits.log_softmax(-1).gather(-1, batch.target_output.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return log_probs * _target_mask(batch), weights


@torch.no_grad()
def occlusion_influence(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """I_ij = log p(y_i | x, y_<i) - log p(y_i | x with x_j -> <unk>, y_<i).

    Returns (B, T, S). Positive: the word helped produce y_i; near 0: y_i did
    not need it. Exactly 0 for padded source positions and padded target steps.
    """
    was_training = model.training
    model.eval()
    try:
        base, _ = target_log_probs(model, batch)  # (B, T)
        lengths = batch.source_lengths[:, None]  # (B, 1)
        real = torch.arange(batch.source.shape[1]) < lengths  # (B, S)
        influence = torch.zeros(*base.shape, real.shape[1])  # (B, T, S)
        for j in range(batch.source.shape[1]):
            occluded = batch.source.clone()
            occluded[real[:, j], j] = Vocab.unk_id  # only where x_j exists
            log_probs, _ = target_log_probs(model, batch, occluded)  # (B, T)
            influence[:, :, j] = (base - log_probs) * real[:, j, None]
        return influence
    finally:
        model.train(was_training)


def gradient_influence(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """Gradient × input: G_ij = (∂ log p(y_i | x, y_<i) / ∂e_j) · e_j for x_j's embedding e_j, (B, T, S).

    To first order, log p(y_i) - log p(y_i with e_j set to 0) ≈ G_ij, a cheap linear stand-in for
    ``occlusion_influence``. Exactly 0 for padded source positions and padded target steps.
    """
    was_training = model.training
    model.eval()
    captured: list[torch.Tensor] = []

    def keep_embeddings(module, inputs, output):  # the encoder's embedding output, (B, S, E)
        output.retain_grad()
        captured.append(output)

    handle = model.encoder.embedding.register_forward_hook(keep_embeddings)
    try:
        with torch.enable_grad():
            log_probs, _ = target_log_probs(model, batch)  # (B, T)
            embeddings = captured[0]  # (B, S, E)
            rows = []
            for i in range(log_probs.shape[1]):
                # Sentences do not interact, so the gradient of the batch's sum is each sentence's own.
                (gradient,) = torch.autograd.grad(log_probs[:, i].sum(), embeddings, retain_graph=True)
                rows.append((gradient * embeddings).sum(-1).detach())  # (B, S)
        influence = torch.stack(rows, 1)  # (B, T, S)
        real = torch.arange(batch.source.shape[1]) < batch.source_lengths[:, None]  # (B, S)
        return influence * real[:, None, :] * _target_mask(batch)[:, :, None]
    finally:
        handle.remove()
        model.train(was_training)


@dataclass(frozen=True)
class Agreement:
    """How often the arg-max of each reading lands on a source word that the output word really translates.

    Counted over ``words`` target words (``<eos>`` excluded). ``attention_and_occlusion`` is how often the
    two arg-maxes are the same source position.
    """

    words: int
    attention: float
    occlusion: float
    gradient: float
    attention_and_occlusion: float


def alignment_agreement(model: Seq2Seq, corpus: ToyTranslationCorpus, pairs: Sequence[SentencePair]) -> Agreement:
    """Score attention, occlusion and gradient × input as alignment models against ``pairs``' true alignments.

    Teacher forcing with the reference translations. For target word i, a reading is right if its
    arg-max over the source positions is one of ``pair.alignment[i]`` (e.g. 猫 ← the or cat).
    """
    batch = corpus.collate(list(pairs))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            _, attention = target_log_probs(model, batch)  # (B, T, S)
    finally:
        model.train(was_training)
    readings = {
        "attention": attention,
        "occlusion": occlusion_influence(model, batch),
        "gradient": gradient_influence(model, batch),
    }
    hits = {name: 0 for name in readings}
    same = words = 0
    for b, pair in enumerate(pairs):
        length = len(pair.source)
        for i, aligned in enumerate(pair.alignment):
            words += 1
            best = {name: int(reading[b, i, :length].argmax()) for name, reading in readings.items()}
            for name, position in best.items():
                hits[name] += position in aligned
            same += best["attention"] == best["occlusion"]
    return Agreement(words, *(hits[name] / words for name in readings), same / words)
