"""Checks of the assignment ``seq2seq-attention`` (chapters 5–6): an attention decoder, trained, and Luong's.

Six test cells, each judging one part. The first four are the warm-up: what chapter 6 prints, re-built.

- ``masked_softmax(scores (B, S), lengths (B,))``, called directly;
- ``AdditiveAttention``, built with given weights and called: a call of ``masked_softmax`` with the
  right scores (to rounding) and lengths gets the correct weights, so a bug in ``masked_softmax``
  costs only its own test;
- one step of ``AttentionDecoder``, built with given weights, whose ``attention`` is replaced by a
  stand-in that answers a call with exactly H_{i-1} (the previous hidden state), the encoder states
  and the lengths with the correct context and weights; any other query (H_i, say) goes to the
  student's own attention and the step comes out wrong. So this test judges the step itself, and a
  decoder that attends with H_i fails it and nothing else;
- ``translate(model, sentences) -> list[str]`` (phase ``open``: the student's model may use anything):
  with the notebook's trained ``model`` (an instance built from the notebook's ``AttentionDecoder``
  and ``AdditiveAttention``), the grader first rebuilds the model the task asks for from the notebook's
  classes, loads the trained model's weights into it, decodes the sentences itself, greedily, and needs an
  exact-match accuracy of at least :data:`ACCURACY_THRESHOLD` on the 200 validation pairs of the
  shipped corpus and on 200 new sentences drawn from the grammar with the course seed; ``translate``
  must then give those same translations. With a stand-in model of the grader's
  (``standin.Translator``, random weights), its output must be exactly that model's greedy decoding.
  So translations from anywhere but the student's own model earn nothing.

The last two are new work, the decoder of Luong, Pham and Manning (2015) that the book only names
(``new=True``: no line of their solutions is printed in the book, and their references live here, in no
module a chapter includes):

- ``GeneralAttention``, Luong's "general" score e_j = qᵀ W_a h_j, built with given weights and called,
  with the same stand-in for ``masked_softmax`` as ``AdditiveAttention``;
- one step of ``LuongDecoder``, built with given weights: the GRU step first (H_i from y_{i-1} and
  H_{i-1}), then attention with the *new* state H_i as the query, then the attentional state
  tanh(W_c [C_i; H_i]) that the output layer reads. Its ``attention`` is replaced by a stand-in that answers
  a call with H_i (to rounding), the encoder states and the lengths with the correct context and weights;
  any other query (H_{i-1}, say) goes to the student's own ``GeneralAttention`` and the step comes out
  wrong. So a bug in ``GeneralAttention`` or ``masked_softmax`` costs only their own points, and a
  decoder that attends before its step fails this test and nothing else.

The references are the course's own: ``attention.AdditiveScore``, ``attention.masked_softmax`` and
``seq2seq.AttentionDecoder.step`` (the notebook's decoder has the same layers, its ``attention`` being the
reference's ``score``), the grammar of ``corpus`` for the translations, ``standin.greedy``, and for Luong's
parts :func:`_general` and :func:`_luong_step_reference` below.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attention_course import attention
from attention_course.corpus import generate_pairs
from attention_course.grading import standin
from attention_course.grading.cases import Case, Check, NotebookName, StandIn, StandInTranslator
from attention_course.grading.checks._draw import describe, integer, normal
from attention_course.grading.exercise_data import SEQ2SEQ_MAX_CLAUSES, seq2seq_corpus
from attention_course.seq2seq import AttentionDecoder, EncoderOutput

ASSIGNMENT = "seq2seq-attention"
ACCURACY_THRESHOLD = 0.9
CONSISTENCY_THRESHOLD = 0.99  # share of translations that the model itself predicts, word by word
NEW_SENTENCES = 200
STAND_IN_SENTENCES = 60


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
    query, keys, lengths = case.args
    _, weights, context = _additive(query, keys, lengths, case.state["W_q.weight"], case.state["W_k.weight"],
                                    case.state["w_v.weight"])
    return context, weights


def _step_reference(case: Case):
    previous_tokens, previous_hidden, encoder_states, source_lengths = case.args
    decoder = AttentionDecoder(*case.construct.values()).to(previous_hidden.dtype)
    state = {name.replace("attention.", "score.", 1): tensor for name, tensor in case.state.items()}
    missing, unexpected = decoder.load_state_dict(state, strict=False)
    assert not unexpected and all(key.startswith("init_state.") for key in missing), (missing, unexpected)
    encoded = EncoderOutput(encoder_states, encoder_states[:, 0], source_lengths)  # ``final`` is not used by a step
    return decoder.step(previous_tokens, previous_hidden, encoded)


def _general(query, keys, lengths, W_a) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scores (B, S), weights (B, S), context (B, key_dim)) of Luong's general score qᵀ W_a h_j, W_a (query_dim, key_dim)."""
    with torch.no_grad():
        scores = torch.einsum("bq,qk,bsk->bs", query, W_a, keys)
    weights = _masked_softmax(scores, lengths)
    context = torch.bmm(weights.unsqueeze(1), keys).squeeze(1)
    return scores, weights, context


def _general_reference(case: Case):
    query, keys, lengths = case.args
    _, weights, context = _general(query, keys, lengths, case.state["W_a.weight"])
    return context, weights


def _luong_hidden(previous_tokens, previous_hidden, state: dict) -> torch.Tensor:
    """H_i = GRUCell(embedding(y_{i-1}), H_{i-1}) with the case's weights."""
    with torch.no_grad():  # what nn.GRUCell's forward calls, without building a module (no draw from the global RNG)
        return torch.gru_cell(state["embedding.weight"][previous_tokens], previous_hidden, state["cell.weight_ih"],
                              state["cell.weight_hh"], state["cell.bias_ih"], state["cell.bias_hh"])


def _luong_step_reference(case: Case):
    """(logits (B, V), H_i (B, H), weights (B, S)) of one step of Luong's decoder (without input feeding)."""
    previous_tokens, previous_hidden, encoder_states, source_lengths = case.args
    state = case.state
    hidden = _luong_hidden(previous_tokens, previous_hidden, state)
    _, weights, context = _general(hidden, encoder_states, source_lengths, state["attention.W_a.weight"])
    attentional = torch.tanh(torch.cat([context, hidden], dim=-1) @ state["W_c.weight"].T)
    logits = attentional @ state["output.weight"].T + state["output.bias"]
    return logits, hidden, weights


@dataclass(frozen=True)
class TranslationCase(Case):
    """A call of ``translate``, with the translations it must give (never sent to the sandbox): the grammar's,
    for the notebook's model, or the stand-in model's greedy decoding, for the grader's."""

    references: tuple[str, ...] = ()


def _translation_reference(case: Case):
    return case.references


def _words(text: str) -> str:
    return " ".join(text.split())


def _translation_verdict(got, expected: tuple[str, ...], case: Case, extra: tuple = ()) -> str:
    """With the grader's model: exactly its greedy decoding. With the notebook's model: the grader's own
    greedy decoding of that model (done before translate runs) must be at least ACCURACY_THRESHOLD right,
    and translate must give what it gave."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(text, str) for text in got):
        return f"translate should return a list of strings (one translation per sentence), got {type(got).__name__}"
    if len(got) != len(expected):
        return f"translate should return one translation per sentence: {len(expected)} sentences in, {len(got)} out"
    sentences = case.args[1]
    if isinstance(case.args[0], StandInTranslator):
        right = [_words(text) == reference for text, reference in zip(got, expected)]
        if all(right):
            return ""
        miss = right.index(False)
        return (f"with a model of the grader's (random weights), {len(right) - sum(right)} of {len(right)} translations "
                f"are not its greedy decoding: e.g. '{sentences[miss]}' should give '{expected[miss]}', got "
                f"'{got[miss]}'. Decode the model you are given: feed back its argmax at each step, stop at EOS "
                "or after 2 S + 2 steps")
    if len(extra) != 4 or extra[0] != "decoded" or len(extra[1]) != len(expected):
        return ("the grader could not rebuild and decode model: build it as section 4 says (Encoder and "
                "AttentionDecoder with those sizes, in a Seq2Seq)")
    _, decoded, own_decoder, own_attention = extra
    if not own_decoder or not own_attention:
        return ("model.decoder must be your AttentionDecoder, with your AdditiveAttention as its attention: "
                "the translations must come from your own model")
    words = seq2seq_corpus().target_vocab.tokens
    model_says = [" ".join(words[i] if 0 <= i < len(words) else "<?>" for i in row) for row in decoded]
    right = [text == reference for text, reference in zip(model_says, expected)]
    accuracy = sum(right) / len(right)
    if accuracy < ACCURACY_THRESHOLD:
        miss = right.index(False)
        return (f"exact-match accuracy of your trained model {accuracy:.3f} ({sum(right)} of {len(right)} sentences, "
                f"decoded greedily by the grader), below the {ACCURACY_THRESHOLD:g} needed; e.g. '{sentences[miss]}' "
                f"should be '{expected[miss]}', the model gives '{model_says[miss]}'")
    agree = [_words(text) == says for text, says in zip(got, model_says)]
    if sum(agree) < CONSISTENCY_THRESHOLD * len(agree):
        miss = agree.index(False)
        return (f"translate's output is not the greedy decoding of model in {len(agree) - sum(agree)} of {len(agree)} "
                f"sentences: e.g. '{sentences[miss]}' -> the model gives '{model_says[miss]}', translate returned "
                f"'{got[miss]}'. translate must decode the model it is given")
    return ""


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
    hidden_dim, query_dim = W_q.shape
    stand_in = StandIn("global", "masked_softmax", ("scores", "lengths"), (),
                       (("close", scores, 1e-4, 1e-5), ("equal", lengths)), weights)
    return Case("test-additive-attention", label, "AdditiveAttention", (query, keys, lengths),
                construct={"query_dim": query_dim, "key_dim": W_k.shape[1], "hidden_dim": hidden_dim},
                state={"W_q.weight": W_q, "W_k.weight": W_k, "w_v.weight": w_v}, stand_ins=(stand_in,), hidden=hidden)


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
    weights = {name: normal(g, *shapes[name], dtype=dtype, scale=0.7) for name in STEP_WEIGHT_NAMES}
    previous_tokens = torch.randint(0, vocab_size, (batch,), generator=g)
    previous_hidden = normal(g, batch, hidden_dim, dtype=dtype)
    lengths = _lengths(g, batch, size)
    states = _with_garbage(g, normal(g, batch, size, context_dim, dtype=dtype), lengths)
    _, correct_weights, correct_context = _additive(previous_hidden, states, lengths, weights["attention.W_q.weight"],
                                                    weights["attention.W_k.weight"], weights["attention.w_v.weight"])
    label = (f"{label}: {str(dtype).removeprefix('torch.')}, B={batch}, S={size}, lengths {lengths.tolist()}, "
             f"vocab_size={vocab_size}, embed_dim={embed_dim}, hidden_dim={hidden_dim}, context_dim={context_dim}, "
             f"attention_dim={attention_dim}")
    stand_in = StandIn("attribute", "attention", ("query", "keys", "lengths"), (),
                       (("equal", previous_hidden), ("equal", states), ("equal", lengths)),
                       (correct_context, correct_weights))
    construct = {"vocab_size": vocab_size, "embed_dim": embed_dim, "hidden_dim": hidden_dim,
                 "context_dim": context_dim, "attention_dim": attention_dim}
    return Case("test-decoder-step", label, "AttentionDecoder", (previous_tokens, previous_hidden, states, lengths),
                construct=construct, state=weights, stand_ins=(stand_in,), hidden=hidden)


def decoder_step_cases(g: torch.Generator) -> list[Case]:
    cases = [_step_case(g, torch.float32, "one step with the notebook's sizes", hidden=False, sizes=(7, 3, 4, 5, 6))]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        cases.append(_step_case(g, dtype, "one step with random sizes and weights"))
    return cases


def _general_case(label: str, query, keys, lengths, W_a, hidden: bool = True) -> Case:
    scores, weights, _ = _general(query, keys, lengths, W_a)
    stand_in = StandIn("global", "masked_softmax", ("scores", "lengths"), (),
                       (("close", scores, 1e-4, 1e-5), ("equal", lengths)), weights)
    return Case("test-general-attention", label, "GeneralAttention", (query, keys, lengths),
                construct={"query_dim": W_a.shape[0], "key_dim": W_a.shape[1]}, state={"W_a.weight": W_a},
                stand_ins=(stand_in,), hidden=hidden)


def general_attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _general_case("the notebook's example: queries (1, 2) and (0, 0), keys (1, 0), (0, 1), (1, 1) and padding "
                      "(5, 5), lengths 3 and 2, W_a = [[1, 0], [0.5, 0.5]]",
                      torch.tensor([[1.0, 2.0], [0.0, 0.0]]),
                      torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [5.0, 5.0]]]).repeat(2, 1, 1),
                      torch.tensor([3, 2]), torch.tensor([[1.0, 0.0], [0.5, 0.5]]), hidden=False),
    ]
    # Query and key sizes differ in most cases, so that W_a applied on the wrong side cannot go unnoticed.
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64, torch.float64):
        batch, size = integer(g, 1, 4), integer(g, 1, 7)
        query_dim, key_dim = integer(g, 1, 6), integer(g, 1, 6)
        lengths = _lengths(g, batch, size)
        query = normal(g, batch, query_dim, dtype=dtype)
        keys = _with_garbage(g, normal(g, batch, size, key_dim, dtype=dtype), lengths)
        W_a = normal(g, query_dim, key_dim, dtype=dtype, scale=0.7)
        label = (f"{describe(query, 'query')}, {describe(keys, 'keys')} with garbage beyond lengths {lengths.tolist()}, "
                 f"W_a of shape {tuple(W_a.shape)}")
        cases.append(_general_case(label, query, keys, lengths, W_a))
    return cases


LUONG_WEIGHT_NAMES = ("embedding.weight", "cell.weight_ih", "cell.weight_hh", "cell.bias_ih", "cell.bias_hh",
                      "attention.W_a.weight", "W_c.weight", "output.weight", "output.bias")


def _luong_case(g: torch.Generator, dtype, label: str, hidden: bool = True, sizes: tuple[int, ...] | None = None) -> Case:
    vocab_size, embed_dim, hidden_dim, context_dim = sizes or (
        integer(g, 4, 12), integer(g, 1, 6), integer(g, 1, 6), integer(g, 1, 6))
    batch, size = integer(g, 1, 4), integer(g, 1, 7)
    shapes = {
        "embedding.weight": (vocab_size, embed_dim),
        "cell.weight_ih": (3 * hidden_dim, embed_dim),
        "cell.weight_hh": (3 * hidden_dim, hidden_dim),
        "cell.bias_ih": (3 * hidden_dim,),
        "cell.bias_hh": (3 * hidden_dim,),
        "attention.W_a.weight": (hidden_dim, context_dim),
        "W_c.weight": (hidden_dim, context_dim + hidden_dim),
        "output.weight": (vocab_size, hidden_dim),
        "output.bias": (vocab_size,),
    }
    weights = {name: normal(g, *shapes[name], dtype=dtype, scale=0.7) for name in LUONG_WEIGHT_NAMES}
    previous_tokens = torch.randint(0, vocab_size, (batch,), generator=g)
    previous_hidden = normal(g, batch, hidden_dim, dtype=dtype)
    lengths = _lengths(g, batch, size)
    states = _with_garbage(g, normal(g, batch, size, context_dim, dtype=dtype), lengths)
    new_hidden = _luong_hidden(previous_tokens, previous_hidden, weights)
    _, correct_weights, correct_context = _general(new_hidden, states, lengths, weights["attention.W_a.weight"])
    label = (f"{label}: {str(dtype).removeprefix('torch.')}, B={batch}, S={size}, lengths {lengths.tolist()}, "
             f"vocab_size={vocab_size}, embed_dim={embed_dim}, hidden_dim={hidden_dim}, context_dim={context_dim}")
    # The query must be H_i, which the student's own GRU cell computes: equal to rounding, not bit for bit.
    stand_in = StandIn("attribute", "attention", ("query", "keys", "lengths"), (),
                       (("close", new_hidden, 1e-4, 1e-5), ("equal", states), ("equal", lengths)),
                       (correct_context, correct_weights))
    construct = {"vocab_size": vocab_size, "embed_dim": embed_dim, "hidden_dim": hidden_dim, "context_dim": context_dim}
    return Case("test-luong-step", label, "LuongDecoder", (previous_tokens, previous_hidden, states, lengths),
                construct=construct, state=weights, stand_ins=(stand_in,), hidden=hidden)


def luong_step_cases(g: torch.Generator) -> list[Case]:
    cases = [_luong_case(g, torch.float32, "one step with the notebook's sizes", hidden=False, sizes=(7, 3, 4, 5))]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        cases.append(_luong_case(g, dtype, "one step with random sizes and weights"))
    return cases


def _known_sources() -> set[str]:
    corpus = seq2seq_corpus()
    return {pair.source_text for pair in corpus.train_pairs + corpus.held_out_pairs}


def _greedy_translations(seed: int, sentences: list[str]) -> tuple[str, ...]:
    """What the grader's stand-in model translates ``sentences`` to, decoded greedily as the task says."""
    corpus = seq2seq_corpus()
    source_ids = {word: i for i, word in enumerate(corpus.source_vocab.tokens)}
    encoded = [[source_ids.get(word, 3) for word in sentence.split()] for sentence in sentences]
    lengths = torch.tensor([len(ids) for ids in encoded])
    source = torch.zeros(len(encoded), int(lengths.max()), dtype=torch.long)
    for row, ids in enumerate(encoded):
        source[row, : len(ids)] = torch.tensor(ids)
    model = standin.Translator(seed, len(corpus.source_vocab.tokens), len(corpus.target_vocab.tokens))
    words = corpus.target_vocab.tokens
    return tuple(" ".join(words[i] for i in row) for row in standin.greedy(model, source, lengths))


# The model the task asks for (section 4 of the notebook): the grader rebuilds it from the notebook's classes
# and loads the trained model's weights into it.
EMBED_DIM, HIDDEN_DIM = 32, 64


def _model_recipe(corpus) -> tuple:
    return (("Encoder", (len(corpus.source_vocab.tokens), EMBED_DIM, HIDDEN_DIM)),
            ("AttentionDecoder", (len(corpus.target_vocab.tokens), EMBED_DIM, HIDDEN_DIM, HIDDEN_DIM, HIDDEN_DIM)),
            "Seq2Seq")


def translate_cases(g: torch.Generator) -> list[Case]:
    corpus = seq2seq_corpus()
    validation = corpus.held_out_pairs
    seed = integer(g, 0, 2**31 - 1)
    known = _known_sources()
    new = [pair for pair in generate_pairs(2 * NEW_SENTENCES, seed=seed, max_clauses=SEQ2SEQ_MAX_CLAUSES)
           if pair.source_text not in known][:NEW_SENTENCES]
    vocabularies = (tuple(corpus.source_vocab.tokens), tuple(corpus.target_vocab.tokens), _model_recipe(corpus))
    model_seed = integer(g, 0, 2**31 - 1)
    stand_in_sentences = [pair.source_text for pair in new[:STAND_IN_SENTENCES]]
    translator = StandInTranslator(model_seed, len(vocabularies[0]), len(vocabularies[1]))
    return [
        TranslationCase("test-translate", f"model, the {len(validation)} validation pairs of toy_corpus.json", "translate",
                        (NotebookName("model"), [pair.source_text for pair in validation]), hidden=False,
                        consistency=vocabularies, references=tuple(pair.target_text for pair in validation)),
        TranslationCase("test-translate", f"model, {len(new)} new sentences from the grammar (seed {seed})", "translate",
                        (NotebookName("model"), [pair.source_text for pair in new]), consistency=vocabularies,
                        references=tuple(pair.target_text for pair in new)),
        TranslationCase("test-translate", f"a model of the grader's with random weights (seed {model_seed}), "
                        f"{len(stand_in_sentences)} sentences", "translate", (translator, stand_in_sentences),
                        references=_greedy_translations(model_seed, stand_in_sentences)),
    ]


CHECKS = [
    Check("test-masked-softmax", 1, "masked_softmax gives a softmax over each sentence's real positions and "
          "exactly 0 beyond its length", masked_softmax_cases, _masked_softmax_reference,
          hints=(
              ("with lengths [2, 3]",
               "fill the padded scores with -inf"),
              ("[[1e4, 0, -1e4]] with lengths [3]",
               "subtract the largest score before exp"),
          )),
    Check("test-additive-attention", 2, "AdditiveAttention scores w_v^T tanh(W_q q + W_k h_j), masks beyond each "
          "length, and returns the weighted sum of the keys with the weights", additive_attention_cases,
          _additive_reference,
          hints=(
              ("the notebook's example: query (1, 2)",
               "your scores are not w_v^T tanh(W_q q + W_k h_j) for every position (shape (B, S)), or lengths did "
               "not reach masked_softmax"),
          )),
    Check("test-decoder-step", 2, "one decoder step attends with H_{i-1} (the previous hidden state), feeds "
          "[embedding; C_i] to the GRU cell and reads the logits from [H_i; C_i; embedding]",
          decoder_step_cases, _step_reference,
          hints=(
              ("one step with the notebook's sizes",
               "step i attends with H_{i-1}, the state before the step"),
              ("one step with the notebook's sizes",
               "the new state H_i: self.cell(cat([embedded, context]), previous_hidden)"),
              ("one step with the notebook's sizes",
               "the logits: self.output(cat([hidden, context, embedded]))"),
          )),
    Check("test-translate", 4, f"translate decodes the model it is given greedily, and with your trained model gets "
          f"at least {ACCURACY_THRESHOLD:.0%} of sentences exactly right", translate_cases, _translation_reference,
          compare=_translation_verdict, phase="open",
          hints=(
              ("the 200 validation pairs",
               "if train stopped far below 98 %, look again at sections 1 to 3; if it reached 98 %, look at "
               "translate"),
          )),
    # New work (Luong et al. 2015): the book names this decoder but prints none of it.
    Check("test-general-attention", 4, "GeneralAttention scores q^T W_a h_j (Luong's general score), masks beyond "
          "each length, and returns the weighted sum of the keys with the weights", general_attention_cases,
          _general_reference, new=True, solution_cells=("GeneralAttention",),
          hints=(
              ("W_a = [[1, 0], [0.5, 0.5]]",
               "your scores are not q^T W_a h_j for every position (shape (B, S)): check which side W_a multiplies "
               "(q^T W_a h_j, not (W_a q)^T h_j), or lengths did not reach masked_softmax"),
          )),
    Check("test-luong-step", 6, "one step of LuongDecoder runs the GRU cell on the embedding first, attends with the "
          "new state H_i, and reads the logits from the attentional state tanh(W_c [C_i; H_i])",
          luong_step_cases, _luong_step_reference, new=True, solution_cells=("LuongDecoder",),
          hints=(
              ("one step with the notebook's sizes",
               "Luong's decoder runs the GRU step first and then attends with the state it has just computed"),
              ("one step with the notebook's sizes",
               "the logits: self.output of the attentional state tanh(self.W_c(cat([context, hidden]))), context "
               "first; the output layer reads nothing else"),
              ("one step with the notebook's sizes",
               "H_i = self.cell(embedding of y_{i-1}, previous_hidden), the GRU's new state (not the attentional "
               "state tanh(W_c [C_i; H_i]))"),
          )),
]
