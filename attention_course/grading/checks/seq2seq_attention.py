"""Checks of the assignment ``seq2seq-attention`` (chapters 5–6): an attention decoder, trained.

Four test cells:

- ``masked_softmax(scores (B, S), lengths (B,))``, called directly;
- ``AdditiveAttention``, through the notebook's ``additive_attention_with``: a call of ``masked_softmax``
  with the right scores and lengths gets the correct weights, so a bug in ``masked_softmax`` costs
  only its own test;
- one step of ``AttentionDecoder``, through ``decoder_step_with``: a call of the decoder's attention
  with exactly H_{i-1} (the previous hidden state), the encoder states and the lengths gets the correct
  context and weights; any other query (H_i, say) goes to the student's own attention and the step
  comes out wrong. So this test judges the step itself, and a decoder that attends with H_i fails it
  and nothing else;
- ``translate(sentences) -> list[str]`` after the notebook has trained its model: exact-match
  accuracy of at least :data:`ACCURACY_THRESHOLD` on the 200 validation pairs of the shipped corpus
  and on 200 new sentences drawn from the grammar at grading time (with a seed from the grading
  run's generator), none of them in the shipped file.

The references are the course's own: ``attention.AdditiveScore``, ``attention.masked_softmax`` and
``seq2seq.AttentionDecoder.step`` (the notebook's decoder has the same layers, its ``attention`` being the
reference's ``score``), and the grammar of ``corpus`` for the translations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attention_course import attention
from attention_course.corpus import generate_pairs
from attention_course.grading.cases import Case, Check
from attention_course.grading.checks._draw import describe, integer, normal
from attention_course.grading.exercise_data import SEQ2SEQ_MAX_CLAUSES, seq2seq_corpus
from attention_course.seq2seq import AttentionDecoder, EncoderOutput

ASSIGNMENT = "seq2seq-attention"
ACCURACY_THRESHOLD = 0.9
NEW_SENTENCES = 200


# ---------------------------------------------------------------------------------------------
# References.


def _masked_softmax(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, S), (B,) -> (B, S), through the course's (B, Q, K) masked_softmax."""
    return attention.masked_softmax(scores.unsqueeze(1), lengths).squeeze(1)


def _additive(query, keys, lengths, W_q, W_k, w_v) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scores (B, S), weights (B, S), context (B, key_dim)) of additive attention with these weights."""
    hidden_dim, query_dim = W_q.shape
    score = attention.AdditiveScore(query_dim, W_k.shape[1], hidden_dim).to(W_q.dtype)
    score.load_state_dict({"W_q.weight": W_q, "W_k.weight": W_k, "w_v.weight": w_v}, strict=True)
    with torch.no_grad():
        scores = score(query.unsqueeze(1), keys).squeeze(1)  # (B, S)
    weights = _masked_softmax(scores, lengths)
    context = torch.bmm(weights.unsqueeze(1), keys).squeeze(1)
    return scores, weights, context


def _masked_softmax_reference(case: Case):
    return _masked_softmax(*case.args)


def _additive_reference(case: Case):
    query, keys, lengths, W_q, W_k, w_v, _scores, _weights = case.args
    _, weights, context = _additive(query, keys, lengths, W_q, W_k, w_v)
    return context, weights


def _step_reference(case: Case):
    sizes, names, weights, previous_tokens, previous_hidden, encoder_states, source_lengths, _, _ = case.args
    vocab_size, embed_dim, hidden_dim, context_dim, attention_dim = sizes
    decoder = AttentionDecoder(vocab_size, embed_dim, hidden_dim, context_dim, attention_dim).to(weights[0].dtype)
    state = {name.replace("attention.", "score.", 1): tensor for name, tensor in zip(names, weights)}
    missing, unexpected = decoder.load_state_dict(state, strict=False)
    assert not unexpected and all(key.startswith("init_state.") for key in missing), (missing, unexpected)
    encoded = EncoderOutput(encoder_states, encoder_states[:, 0], source_lengths)  # ``final`` is not used by a step
    return decoder.step(previous_tokens, previous_hidden, encoded)


@dataclass(frozen=True)
class TranslationCase(Case):
    """A call of ``translate``, with the grammar's translations of its sentences (never sent to the sandbox)."""

    references: tuple[str, ...] = ()


def _translation_reference(case: Case):
    return case.references


def _accuracy(got, expected: tuple[str, ...], case: Case) -> str:
    """Exact match, sentence by sentence (runs of spaces count as one): at least ACCURACY_THRESHOLD."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(text, str) for text in got):
        return f"translate should return a list of strings (one translation per sentence), got {type(got).__name__}"
    if len(got) != len(expected):
        return f"translate should return one translation per sentence: {len(expected)} sentences in, {len(got)} out"
    right = [" ".join(text.split()) == reference for text, reference in zip(got, expected)]
    accuracy = sum(right) / len(right)
    if accuracy >= ACCURACY_THRESHOLD:
        return ""
    sentences = case.args[0]
    miss = right.index(False)
    return (f"exact-match accuracy {accuracy:.3f} ({sum(right)} of {len(right)} sentences), below the "
            f"{ACCURACY_THRESHOLD:g} needed; e.g. '{sentences[miss]}' should be '{expected[miss]}', "
            f"got '{got[miss]}'")


# ---------------------------------------------------------------------------------------------
# Inputs.


def _lengths(g: torch.Generator, batch: int, size: int) -> torch.Tensor:
    """Lengths in [1, size]; the first one below size when size > 1, so that something is masked."""
    lengths = torch.randint(1, size + 1, (batch,), generator=g)
    if size > 1:
        lengths[0] = integer(g, 1, size - 1)
    return lengths


def masked_softmax_cases(g: torch.Generator) -> list[Case]:
    cases = [
        Case("test-masked-softmax", "scores [[1, 2, 3, 4], [1, 2, 3, 4]] with lengths [2, 3]", "masked_softmax",
             (torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]), torch.tensor([2, 3])), hidden=False),
        Case("test-masked-softmax", "float64 scores [[1e4, 0, -1e4]] with lengths [3]", "masked_softmax",
             (torch.tensor([[1e4, 0.0, -1e4]], dtype=torch.float64), torch.tensor([3])), hidden=False),
    ]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        batch, size = integer(g, 1, 5), integer(g, 2, 9)
        scores = normal(g, batch, size, dtype=dtype, scale=2.0)
        lengths = _lengths(g, batch, size)
        cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, lengths {lengths.tolist()}",
                          "masked_softmax", (scores, lengths)))
    # Masked weights exactly 0 (atol=0), even where a padded score is the largest of its row.
    scores = normal(g, 3, 6, dtype=torch.float64)
    scores[:, 4:] = 50.0
    lengths = torch.tensor([1, 4, 3])
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, lengths [1, 4, 3], padded scores of 50: "
                      "masked weights exactly 0", "masked_softmax", (scores, lengths), atol=0.0))
    scores = normal(g, 4, 5, dtype=torch.float32, scale=1e4)
    lengths = _lengths(g, 4, 5)
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')} of size about 1e4, lengths {lengths.tolist()}",
                      "masked_softmax", (scores, lengths)))
    scores = normal(g, 2, 4, dtype=torch.float64, scale=3.0)
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, lengths [4, 4] (nothing masked)",
                      "masked_softmax", (scores, torch.tensor([4, 4]))))
    scores = normal(g, 3, 1, dtype=torch.float32)
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')} (one position), lengths [1, 1, 1]",
                      "masked_softmax", (scores, torch.tensor([1, 1, 1]))))
    return cases


def _with_garbage(g: torch.Generator, states: torch.Tensor, lengths: torch.Tensor, scale: float = 3.0) -> torch.Tensor:
    """States whose padding (beyond each length) holds large random values: masking must keep them out."""
    states = states.clone()
    for row, length in enumerate(lengths.tolist()):
        states[row, length:] = normal(g, states.shape[1] - length, states.shape[2], dtype=states.dtype, scale=scale)
    return states


def _additive_case(label: str, query, keys, lengths, W_q, W_k, w_v, hidden: bool = True) -> Case:
    scores, weights, _ = _additive(query, keys, lengths, W_q, W_k, w_v)
    return Case("test-additive-attention", label, "additive_attention_with",
                (query, keys, lengths, W_q, W_k, w_v, scores, weights), hidden=hidden)


def additive_attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _additive_case("the notebook's example: query (1, 2), keys (1, 0), (0, 1), (1, 1) and padding (5, 5), "
                       "length 3, W_q = W_k = I/2, w_v = (1, 1)",
                       torch.tensor([[1.0, 2.0]]), torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [5.0, 5.0]]]),
                       torch.tensor([3]), 0.5 * torch.eye(2), 0.5 * torch.eye(2), torch.ones(1, 2), hidden=False),
    ]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64, torch.float64):
        batch, size = integer(g, 1, 4), integer(g, 1, 7)
        query_dim, key_dim, hidden_dim = integer(g, 1, 6), integer(g, 1, 6), integer(g, 1, 8)
        lengths = _lengths(g, batch, size)
        query = normal(g, batch, query_dim, dtype=dtype)
        keys = _with_garbage(g, normal(g, batch, size, key_dim, dtype=dtype), lengths)
        W_q = normal(g, hidden_dim, query_dim, dtype=dtype, scale=0.7)
        W_k = normal(g, hidden_dim, key_dim, dtype=dtype, scale=0.7)
        w_v = normal(g, 1, hidden_dim, dtype=dtype)
        label = (f"{describe(query, 'query')}, {describe(keys, 'keys')} with garbage beyond lengths {lengths.tolist()}, "
                 f"hidden_dim={hidden_dim}")
        cases.append(_additive_case(label, query, keys, lengths, W_q, W_k, w_v))
    return cases


STEP_WEIGHT_NAMES = ("embedding.weight", "attention.W_q.weight", "attention.W_k.weight", "attention.w_v.weight",
                     "cell.weight_ih", "cell.weight_hh", "cell.bias_ih", "cell.bias_hh", "output.weight", "output.bias")


def _step_case(g: torch.Generator, dtype, label: str, hidden: bool = True, sizes: tuple[int, ...] | None = None) -> Case:
    vocab_size, embed_dim, hidden_dim, context_dim, attention_dim = sizes or (
        integer(g, 4, 12), integer(g, 1, 6), integer(g, 1, 6), integer(g, 1, 6), integer(g, 1, 6))
    batch, size = integer(g, 1, 4), integer(g, 1, 7)
    shapes = {
        "embedding.weight": (vocab_size, embed_dim),
        "attention.W_q.weight": (attention_dim, hidden_dim),
        "attention.W_k.weight": (attention_dim, context_dim),
        "attention.w_v.weight": (1, attention_dim),
        "cell.weight_ih": (3 * hidden_dim, embed_dim + context_dim),
        "cell.weight_hh": (3 * hidden_dim, hidden_dim),
        "cell.bias_ih": (3 * hidden_dim,),
        "cell.bias_hh": (3 * hidden_dim,),
        "output.weight": (vocab_size, hidden_dim + context_dim + embed_dim),
        "output.bias": (vocab_size,),
    }
    weights = [normal(g, *shapes[name], dtype=dtype, scale=0.7) for name in STEP_WEIGHT_NAMES]
    previous_tokens = torch.randint(0, vocab_size, (batch,), generator=g)
    previous_hidden = normal(g, batch, hidden_dim, dtype=dtype)
    lengths = _lengths(g, batch, size)
    states = _with_garbage(g, normal(g, batch, size, context_dim, dtype=dtype), lengths)
    _, correct_weights, correct_context = _additive(previous_hidden, states, lengths, *weights[1:4])
    sizes = [vocab_size, embed_dim, hidden_dim, context_dim, attention_dim]
    label = (f"{label}: {str(dtype).removeprefix('torch.')}, B={batch}, S={size}, lengths {lengths.tolist()}, "
             f"vocab_size={vocab_size}, embed_dim={embed_dim}, hidden_dim={hidden_dim}, context_dim={context_dim}, "
             f"attention_dim={attention_dim}")
    return Case("test-decoder-step", label, "decoder_step_with",
                (sizes, list(STEP_WEIGHT_NAMES), weights, previous_tokens, previous_hidden, states, lengths,
                 correct_context, correct_weights), hidden=hidden)


def decoder_step_cases(g: torch.Generator) -> list[Case]:
    cases = [_step_case(g, torch.float32, "one step with the notebook's sizes", hidden=False, sizes=(7, 3, 4, 5, 6))]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        cases.append(_step_case(g, dtype, "one step with random sizes and weights"))
    return cases


def _known_sources() -> set[str]:
    corpus = seq2seq_corpus()
    return {pair.source_text for pair in corpus.train_pairs + corpus.held_out_pairs}


def translate_cases(g: torch.Generator) -> list[Case]:
    validation = seq2seq_corpus().held_out_pairs
    seed = integer(g, 0, 2**31 - 1)
    known = _known_sources()
    new = [pair for pair in generate_pairs(2 * NEW_SENTENCES, seed=seed, max_clauses=SEQ2SEQ_MAX_CLAUSES)
           if pair.source_text not in known][:NEW_SENTENCES]
    return [
        TranslationCase("test-translate", f"the {len(validation)} validation pairs of toy_corpus.json", "translate",
                        ([pair.source_text for pair in validation],), hidden=False,
                        references=tuple(pair.target_text for pair in validation)),
        TranslationCase("test-translate", f"{len(new)} new sentences from the grammar (seed {seed})", "translate",
                        ([pair.source_text for pair in new],), references=tuple(pair.target_text for pair in new)),
    ]


CHECKS = [
    Check("test-masked-softmax", 2, "masked_softmax gives a softmax over each sentence's real positions and "
          "exactly 0 beyond its length", masked_softmax_cases, _masked_softmax_reference),
    Check("test-additive-attention", 3, "AdditiveAttention scores w_v^T tanh(W_q q + W_k h_j), masks beyond each "
          "length, and returns the weighted sum of the keys with the weights", additive_attention_cases,
          _additive_reference),
    Check("test-decoder-step", 4, "one decoder step attends with H_{i-1} (the previous hidden state), feeds "
          "[embedding; C_i] to the GRU cell and reads the logits from [H_i; C_i; embedding]",
          decoder_step_cases, _step_reference),
    Check("test-translate", 6, f"translate, with the trained model, gets at least {ACCURACY_THRESHOLD:.0%} of "
          "sentences exactly right", translate_cases, _translation_reference, compare=_accuracy),
]
