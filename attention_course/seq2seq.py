"""Encoder–decoder translation on the toy corpus, without attention (chapter 5) and with it (chapter 6).

The encoder reads the English ids x_1 … x_S into hidden states h_1 … h_S and one code C (its last
state). Two decoders write the Chinese words y_1, y_2, … one at a time:

- ``PlainDecoder``, the notes' "distracted model" (分心模型): every step sees the same C,
  y_i = f(C, y_1 … y_{i-1}). C is fed at every step, as in Cho et al. (2014).
- ``AttentionDecoder``, the notes' form of Bahdanau et al. (2015): step i compares the decoder's
  *previous* hidden state H_{i-1} with every h_j, a_ij = softmax_j F(h_j, H_{i-1}), and reads its own
  context C_i = Σ_j a_ij h_j.

``Seq2Seq`` joins an encoder and a decoder; ``build_model`` makes one for a corpus; ``train``,
``evaluate``, ``accuracy_by_length``, ``bleu_by_length`` and ``translate`` are what the chapters run.

Shapes (the course's notation, chapter 1): B batch, S source tokens, T target steps, E embedding size,
d_h hidden size (2·d_h for a bidirectional encoder's states), vocab the target vocabulary's size.
H_i is a decoder *state*, never a size.
Nothing here prints or writes to stderr, and no function touches the global random state:
``build_model`` and ``train`` draw from their own seeds.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple, Sequence

import sacrebleu
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attention_course.attention import AdditiveScore, masked_softmax
from attention_course.corpus import Batch, SentencePair, ToyTranslationCorpus, Vocab

__all__ = [
    "EncoderOutput",
    "Encoder",
    "PlainDecoder",
    "AttentionDecoder",
    "Seq2Seq",
    "build_model",
    "translate",
    "LogPoint",
    "TrainingHistory",
    "sequence_loss",
    "train",
    "evaluate",
    "LengthBucket",
    "accuracy_by_length",
    "bleu_by_length",
]


# ---------------------------------------------------------------------------------------------
# The encoder: x_1 … x_S → h_1 … h_S and C.


class EncoderOutput(NamedTuple):
    """What the encoder hands to a decoder.

    - ``states`` (B, S, d_h), or (B, S, 2·d_h) for a bidirectional encoder: h_j, the hidden state
      after reading x_j; exactly 0 beyond each source's length.
    - ``final`` (B, d_h): the single code C. One direction: the state after each source's *last real*
      token. Bidirectional: the backward GRU's state at x_1, ←h_1, which has read the whole sentence
      from its end back to x_1 (Bahdanau et al. start their decoder from it).
    - ``lengths`` (B,): tokens per source sentence, which the attention decoder masks with.
    """

    states: torch.Tensor
    final: torch.Tensor
    lengths: torch.Tensor


class Encoder(nn.Module):
    """An embedding and a one-layer GRU over the source ids, one-directional unless ``bidirectional``.

    forward: source (B, S) ids padded with ``<pad>``, lengths (B,) → ``EncoderOutput``.
    The GRU reads a packed sequence, so padding never enters a state (in either direction): a
    sentence gets the same h_j and C alone or batched beside a longer one.

    One direction (the default) keeps the picture of the notes: h_j has read x_1 … x_j, and
    attention can still look at any later h_j it needs. ``bidirectional=True`` is the encoder of
    Bahdanau et al. (2015): a forward GRU reads x_1 … x_S, a backward GRU reads x_S … x_1, and
    h_j = [→h_j; ←h_j] (size 2·d_h) has read the whole sentence, with the words near x_j most recent.
    """

    def __init__(self, vocab_size: int, embed_dim: int, hidden_dim: int, bidirectional: bool = False) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=Vocab.pad_id)
        self.bidirectional = bidirectional
        self.hidden_dim = hidden_dim
        self.rnn = nn.GRU(embed_dim, hidden_dim, batch_first=True, bidirectional=bidirectional)

    @property
    def state_dim(self) -> int:
        """The size of each h_j: d_h, or 2·d_h for a bidirectional encoder."""
        return 2 * self.hidden_dim if self.bidirectional else self.hidden_dim

    def forward(self, source: torch.Tensor, lengths: torch.Tensor) -> EncoderOutput:
        if source.ndim != 2 or lengths.shape != source.shape[:1]:
            raise ValueError(f"need source (B, S) and lengths (B,), got {tuple(source.shape)} and {tuple(lengths.shape)}")
        if int(lengths.min()) < 1 or int(lengths.max()) > source.shape[1]:
            raise ValueError(f"every source length must be between 1 and S = {source.shape[1]}, got {lengths.tolist()}")
        embedded = self.embedding(source)  # (B, S, E)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        # final: (directions, B, d_h). Forward: the state at each sentence's own last token; backward: at x_1.
        packed_states, final = self.rnn(packed)
        states, _ = pad_packed_sequence(packed_states, batch_first=True, total_length=source.shape[1])  # (B, S, d_h or 2·d_h)
        return EncoderOutput(states, final[-1], lengths)


# ---------------------------------------------------------------------------------------------
# The decoders. Both have the same three methods:
#   initial_state(encoded) -> H_0 (B, d_h)
#   step(previous_tokens (B,), previous_hidden H_{i-1} (B, d_h), encoded) -> (logits (B, vocab), H_i (B, d_h), weights (B, S) or None)
#   forward(target_input (B, T), encoded) -> (logits (B, T, vocab), weights (B, T, S) or None), teacher forcing.


class PlainDecoder(nn.Module):
    """The "distracted model" (分心模型): every output word is read from the same code C.

    y_i = f(C, y_1 … y_{i-1}): H_0 = tanh(W C); the GRU step consumes [embedding(y_{i-1}); C] and the
    output layer reads [H_i; C; embedding(y_{i-1})] (Cho et al. 2014). C is the encoder's final
    state, whatever the length of the sentence it has to hold.
    """

    def __init__(self, vocab_size: int, embed_dim: int, hidden_dim: int, context_dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=Vocab.pad_id)
        self.init_state = nn.Linear(context_dim, hidden_dim)
        self.rnn = nn.GRU(embed_dim + context_dim, hidden_dim, batch_first=True)
        self.output = nn.Linear(hidden_dim + context_dim + embed_dim, vocab_size)

    def initial_state(self, encoded: EncoderOutput) -> torch.Tensor:
        """H_0 (B, d_h), computed from C."""
        return torch.tanh(self.init_state(encoded.final))

    def forward(self, target_input: torch.Tensor, encoded: EncoderOutput) -> tuple[torch.Tensor, None]:
        """target_input (B, T) (``<bos>`` y_1 … y_{T-1}) → (logits (B, T, vocab), None).

        C is the same at every step, so all T steps run as one GRU call; ``step`` computes the same thing
        one step at a time (for greedy decoding).
        """
        embedded = self.embedding(target_input)  # (B, T, E)
        context = encoded.final.unsqueeze(1).expand(-1, target_input.shape[1], -1)  # (B, T, d_h): C, T times
        hidden, _ = self.rnn(torch.cat([embedded, context], -1), self.initial_state(encoded).unsqueeze(0))  # (B, T, d_h)
        return self.output(torch.cat([hidden, context, embedded], -1)), None

    def step(
        self, previous_tokens: torch.Tensor, previous_hidden: torch.Tensor, encoded: EncoderOutput
    ) -> tuple[torch.Tensor, torch.Tensor, None]:
        """One output step: y_{i-1} (B,) and H_{i-1} (B, d_h) → (logits (B, vocab), H_i (B, d_h), None)."""
        embedded = self.embedding(previous_tokens)  # (B, E)
        context = encoded.final  # (B, d_h): C, the same at every step
        _, hidden = self.rnn(torch.cat([embedded, context], -1).unsqueeze(1), previous_hidden.unsqueeze(0))
        hidden = hidden[0]  # (B, d_h)
        return self.output(torch.cat([hidden, context, embedded], -1)), hidden, None


class AttentionDecoder(nn.Module):
    """The decoder with attention, in the notes' form (Bahdanau et al. 2015): each step has its own C_i.

    At output step i (producing y_i), with H_{i-1} the decoder's hidden state *before* this step
    (``previous_hidden`` in ``step``; H_0 = tanh(W C) for the first word):

    1. scores F(h_j, H_{i-1}) = w_vᵀ tanh(W_q H_{i-1} + W_k h_j) for every source position j (``AdditiveScore``);
    2. a_ij = softmax over j of those scores, over the source's real tokens only (``masked_softmax``
       with the source lengths): a_ij is exactly 0 for j beyond the sentence;
    3. C_i = Σ_j a_ij h_j;
    4. H_i = GRU([embedding(y_{i-1}); C_i], H_{i-1}), and y_i is read from [H_i; C_i; embedding(y_{i-1})].

    The query is H_{i-1}, not H_i: the alignment decides where to look *before* the step that uses
    it. Scoring with H_i (computing the new state first, then attending) is a different model and,
    in this course, a bug: it makes a_i depend on y_{i-1} through H_i, and C_i could no longer be
    an input of the GRU step that produces H_i. The tests check that a_1 depends on H_0 alone.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_dim: int,
        context_dim: int,
        attention_dim: int,
        initial_dim: int | None = None,
    ) -> None:
        """``context_dim`` is the size of each h_j (the keys and values); ``initial_dim`` the size of
        the encoder's ``final`` state that H_0 is computed from (default: ``context_dim``; a
        bidirectional encoder's h_j are twice the size of its ``final`` ←h_1)."""
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=Vocab.pad_id)
        self.init_state = nn.Linear(context_dim if initial_dim is None else initial_dim, hidden_dim)
        self.score = AdditiveScore(query_dim=hidden_dim, key_dim=context_dim, hidden_dim=attention_dim)
        self.cell = nn.GRUCell(embed_dim + context_dim, hidden_dim)
        self.output = nn.Linear(hidden_dim + context_dim + embed_dim, vocab_size)

    def initial_state(self, encoded: EncoderOutput) -> torch.Tensor:
        """H_0 (B, d_h), computed from the encoder's final state; it is the query of the first step."""
        return torch.tanh(self.init_state(encoded.final))

    def forward(self, target_input: torch.Tensor, encoded: EncoderOutput) -> tuple[torch.Tensor, torch.Tensor]:
        """target_input (B, T) (``<bos>`` y_1 … y_{T-1}) → (logits (B, T, vocab), weights (B, T, S)).

        ``weights[b, i, j]`` is a_ij for sentence b: how much output step i attends to source token j.
        """
        hidden = self.initial_state(encoded)  # H_0
        logits, weights = [], []
        for i in range(target_input.shape[1]):
            step_logits, hidden, step_weights = self.step(target_input[:, i], hidden, encoded)
            logits.append(step_logits)
            weights.append(step_weights)
        return torch.stack(logits, 1), torch.stack(weights, 1)

    def step(
        self, previous_tokens: torch.Tensor, previous_hidden: torch.Tensor, encoded: EncoderOutput
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One output step i: y_{i-1} (B,) and H_{i-1} (B, d_h) → (logits (B, vocab), H_i (B, d_h), a_i (B, S)).

        ``previous_hidden`` is H_{i-1}, and it alone is the query: the weights of step i must not
        depend on ``previous_tokens`` (using the new state H_i as the query would be the bug).
        """
        query = previous_hidden.unsqueeze(1)  # (B, 1, d_h): H_{i-1}
        scores = self.score(query, encoded.states)  # (B, 1, S): s_ij = F(h_j, H_{i-1})
        weights = masked_softmax(scores, encoded.lengths)  # (B, 1, S): a_ij, 0 beyond each source's length
        context = torch.bmm(weights, encoded.states).squeeze(1)  # (B, d_h or 2·d_h): C_i = Σ_j a_ij h_j
        embedded = self.embedding(previous_tokens)  # (B, E)
        hidden = self.cell(torch.cat([embedded, context], -1), previous_hidden)  # (B, d_h): H_i
        logits = self.output(torch.cat([hidden, context, embedded], -1))  # (B, vocab)
        return logits, hidden, weights.squeeze(1)


# ---------------------------------------------------------------------------------------------
# The whole model.


class Seq2Seq(nn.Module):
    """An encoder and a decoder (``PlainDecoder`` or ``AttentionDecoder``)."""

    def __init__(self, encoder: Encoder, decoder: PlainDecoder | AttentionDecoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    @property
    def has_attention(self) -> bool:
        return isinstance(self.decoder, AttentionDecoder)

    def forward(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: the decoder reads the true previous words ``batch.target_input``.

        Returns (logits (B, T, vocab), weights (B, T, S) for an attention decoder, else None).
        Position i of the logits predicts ``batch.target_output[:, i]``.
        """
        encoded = self.encoder(batch.source, batch.source_lengths)
        return self.decoder(batch.target_input, encoded)

    @torch.no_grad()
    def greedy_decode(
        self, source: torch.Tensor, source_lengths: torch.Tensor, max_len: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Translate by always taking the most likely next word, feeding it back, until ``<eos>``.

        source (B, S), source_lengths (B,) → (tokens (B, T), weights (B, T, S) or None), T ≤ ``max_len``
        (default 2 S + 2). Each row holds its words, then its ``<eos>``, then ``<pad>``; the weights of
        the steps after a row's ``<eos>`` are 0. Decoding stops once every row has produced ``<eos>``.
        """
        if max_len is None:
            max_len = 2 * source.shape[1] + 2
        batch_size, source_len = source.shape
        was_training = self.training
        self.eval()
        try:
            encoded = self.encoder(source, source_lengths)
            hidden = self.decoder.initial_state(encoded)  # H_0
            previous = torch.full((batch_size,), Vocab.bos_id, dtype=torch.long, device=source.device)
            finished = torch.zeros(batch_size, dtype=torch.bool, device=source.device)
            tokens = [source.new_zeros((batch_size, 0))]  # so that max_len = 0 gives (B, 0)
            weights = [encoded.states.new_zeros((batch_size, 0, source_len))]
            while len(tokens) <= max_len and not bool(finished.all()):
                logits, hidden, step_weights = self.decoder.step(previous, hidden, encoded)
                previous = logits.argmax(-1).masked_fill(finished, Vocab.pad_id)  # (B,)
                tokens.append(previous.unsqueeze(1))
                if step_weights is not None:
                    weights.append(step_weights.masked_fill(finished.unsqueeze(1), 0.0).unsqueeze(1))
                finished = finished | (previous == Vocab.eos_id)
        finally:
            self.train(was_training)
        return torch.cat(tokens, 1), torch.cat(weights, 1) if self.has_attention else None


def build_model(
    corpus: ToyTranslationCorpus,
    *,
    attention: bool = True,
    embed_dim: int = 32,
    hidden_dim: int = 64,
    attention_dim: int = 64,
    seed: int = 0,
    bidirectional: bool = False,
) -> Seq2Seq:
    """A ``Seq2Seq`` sized for ``corpus``'s vocabularies, with an ``AttentionDecoder`` or a ``PlainDecoder``.

    ``bidirectional=True`` gives the attention decoder the encoder of Bahdanau et al. (2015):
    h_j = [→h_j; ←h_j] of size 2·d_h, and H_0 = tanh(W ←h_1). (It needs ``attention=True``: the
    plain decoder is built for a one-directional encoder.) The default, one-directional model is
    the same, weight for weight, as before the option existed.

    The weights are drawn from ``seed`` (the global random state is left as it was), so the same
    arguments always give the same model.
    """
    if bidirectional and not attention:
        raise ValueError("the bidirectional encoder is built for the attention decoder; use attention=True")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = Encoder(len(corpus.source_vocab), embed_dim, hidden_dim, bidirectional=bidirectional)
        target_size = len(corpus.target_vocab)
        if attention:
            decoder = AttentionDecoder(
                target_size, embed_dim, hidden_dim, encoder.state_dim, attention_dim, initial_dim=hidden_dim
            )
        else:
            decoder = PlainDecoder(target_size, embed_dim, hidden_dim, hidden_dim)
        return Seq2Seq(encoder, decoder)


def translate(model: Seq2Seq, corpus: ToyTranslationCorpus, sentence: str) -> tuple[str, torch.Tensor | None]:
    """Translate one English sentence (tokens separated by spaces, e.g. ``"Tom chase Jerry"``).

    Words the corpus's English vocabulary does not know become ``<unk>`` (matching is exact, so
    ``"tom"`` is unknown). Returns the Chinese words joined by spaces and, for an attention model,
    the weights (T, S): row i is the attention of output word i (``<eos>`` not included) over the
    S source words; None without attention. Raises ``ValueError`` for an empty or blank sentence.
    """
    if not isinstance(sentence, str):
        raise TypeError(f"translate takes a sentence as a string, got {type(sentence).__name__}")
    if not sentence.strip():
        raise ValueError(f"cannot translate an empty sentence (got {sentence!r}); give at least one English word")
    ids = corpus.source_vocab.encode(sentence)
    source = torch.tensor([ids])  # (1, S)
    # A translation here is never longer than its source plus <eos>; the slack covers an untrained model.
    tokens, weights = model.greedy_decode(source, torch.tensor([len(ids)]), max_len=2 * len(ids) + 2)
    words = tokens[0].tolist()
    length = words.index(Vocab.eos_id) if Vocab.eos_id in words else len(words)
    text = corpus.target_vocab.decode(words[:length], keep_special=True)
    return text, None if weights is None else weights[0, :length]


# ---------------------------------------------------------------------------------------------
# Training.


@dataclass(frozen=True)
class LogPoint:
    """The state of training after ``step`` steps: mean training loss since the previous log point,
    held-out exact-match accuracy, and training seconds so far (evaluation not counted)."""

    step: int
    loss: float
    accuracy: float
    seconds: float


@dataclass
class TrainingHistory:
    """What ``train`` returns. The lists ``steps``, ``losses``, ``accuracies``, ``seconds`` have one entry per log point."""

    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)  # every step's training loss
    train_seconds: float = 0.0  # time spent in training steps
    eval_seconds: float = 0.0  # time spent evaluating at log points
    stopped_by: str = ""  # "steps", "epochs", "time_budget" or "accuracy"

    @property
    def seconds_per_step(self) -> float:
        return self.train_seconds / max(1, len(self.step_losses))

    def seconds_to_accuracy(self, target: float) -> float | None:
        """Training seconds at the first log point whose accuracy reached ``target``; None if none did."""
        return next((s for s, a in zip(self.seconds, self.accuracies) if a >= target), None)

    def log_points(self) -> list[LogPoint]:
        return [LogPoint(*row) for row in zip(self.steps, self.losses, self.accuracies, self.seconds)]


def sequence_loss(logits: torch.Tensor, target_output: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the real target tokens: logits (B, T, vocab), target_output (B, T); ``<pad>`` is ignored."""
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target_output.reshape(-1), ignore_index=Vocab.pad_id
    )


def train(
    model: Seq2Seq,
    corpus: ToyTranslationCorpus,
    *,
    steps: int | None = None,
    epochs: int | None = None,
    time_budget_s: float | None = None,
    batch_size: int = 64,
    lr: float = 3e-3,
    clip_norm: float = 1.0,
    seed: int = 0,
    log_every: int = 50,
    on_log: Callable[[LogPoint], None] | None = None,
    stop_at_accuracy: float | None = None,
    eval_split: str = "held_out",
    num_threads: int | None = 1,
) -> TrainingHistory:
    """Train ``model`` on ``corpus``'s train split with teacher forcing, Adam and gradient-norm clipping.

    Training stops at whichever comes first: ``steps`` optimiser steps, ``epochs`` passes over the
    training pairs, ``time_budget_s`` seconds of training, or (if given) a held-out accuracy of
    ``stop_at_accuracy`` at a log point. Every ``log_every`` steps, and at the end, the model is
    evaluated on ``eval_split`` and ``on_log`` (if given) receives a ``LogPoint``.

    Deterministic given ``seed``: the batches are shuffled by a seed derived from it (a new order each
    epoch) and the global random state is left as it was. A time budget is the one exception, since
    how many steps fit in it depends on the machine. Evaluation time is not counted in the budget.

    ``num_threads`` is torch's intra-op thread count during training (restored afterwards; None leaves
    it alone). One thread is the default because it is the predictable choice: these models are many
    small operations, and on a 2-core machine two threads made an attention step about 20 % faster
    when the machine was idle but 1.1 to 8 times slower while other work ran on it
    (bench/seq2seq_training.py measures both). A fixed count also keeps the losses reproducible.
    """
    if steps is None and epochs is None and time_budget_s is None:
        raise ValueError("say how long to train: give steps, epochs or time_budget_s")
    for name, value in (("steps", steps), ("epochs", epochs), ("batch_size", batch_size), ("log_every", log_every)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be positive, got {value}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = TrainingHistory()
    window: list[float] = []  # losses since the last log point

    def log(step: int) -> float:
        start = time.perf_counter()
        accuracy = evaluate(model, corpus, eval_split)
        history.eval_seconds += time.perf_counter() - start
        point = LogPoint(step, sum(window) / len(window), accuracy, history.train_seconds)
        history.steps.append(point.step)
        history.losses.append(point.loss)
        history.accuracies.append(point.accuracy)
        history.seconds.append(point.seconds)
        window.clear()
        if on_log is not None:
            on_log(point)
        return accuracy

    with _torch_threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # for anything random inside the model (none of ours is)
        model.train()
        for step, batch in enumerate(_training_batches(corpus, batch_size, seed, epochs), start=1):
            start = time.perf_counter()
            optimizer.zero_grad()
            logits, _ = model(batch)  # (B, T, vocab), teacher forcing
            loss = sequence_loss(logits, batch.target_output)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimizer.step()
            history.train_seconds += time.perf_counter() - start
            window.append(loss.item())
            history.step_losses.append(window[-1])
            if steps is not None and step >= steps:
                history.stopped_by = "steps"
            elif time_budget_s is not None and history.train_seconds >= time_budget_s:
                history.stopped_by = "time_budget"
            if step % log_every == 0 or history.stopped_by:
                accuracy = log(step)
                if not history.stopped_by and stop_at_accuracy is not None and accuracy >= stop_at_accuracy:
                    history.stopped_by = "accuracy"
            if history.stopped_by:
                break
        else:
            history.stopped_by = "epochs"
            if window:  # the last epoch ended between log points
                log(step)
        model.eval()
    return history


def _training_batches(corpus: ToyTranslationCorpus, batch_size: int, seed: int, epochs: int | None) -> Iterator[Batch]:
    """Shuffled training batches, epoch after epoch (for ever if ``epochs`` is None).

    Epoch e is shuffled with the seed ``seed * 1_000_003 + e``: the same run always sees the same
    batches, and each epoch sees them in a new order.
    """
    epoch = 0
    while epochs is None or epoch < epochs:
        yield from corpus.batches("train", batch_size, shuffle_seed=seed * 1_000_003 + epoch)
        epoch += 1


@contextmanager
def _torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with torch using ``count`` intra-op threads (None: as it is), then restore the setting."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# Evaluation: exact match and BLEU, overall and by source length.


def _translations(model: Seq2Seq, corpus: ToyTranslationCorpus, pairs: Sequence[SentencePair], batch_size: int = 512) -> list[str]:
    """Greedy translations of ``pairs``' sources, as space-separated Chinese words, in order."""
    hypotheses = []
    for start in range(0, len(pairs), batch_size):
        batch = corpus.collate(pairs[start : start + batch_size])
        # Some slack over the longest reference, so a wrong, long output stays wrong rather than cut to fit.
        tokens, _ = model.greedy_decode(batch.source, batch.source_lengths, max_len=batch.target_input.shape[1] + 5)
        hypotheses.extend(corpus.target_vocab.decode(row) for row in tokens)
    return hypotheses


def evaluate(model: Seq2Seq, corpus: ToyTranslationCorpus, split: str = "held_out") -> float:
    """Exact-match sentence accuracy on ``split``: the share of sentences whose greedy translation is the reference."""
    pairs = corpus.split(split)
    hypotheses = _translations(model, corpus, pairs)
    return sum(h == p.target_text for h, p in zip(hypotheses, pairs)) / len(pairs)


@dataclass(frozen=True)
class LengthBucket:
    """A score on the sentences whose source length is ``min_length`` to ``max_length`` tokens."""

    min_length: int
    max_length: int
    sentences: int
    score: float

    @property
    def label(self) -> str:
        return f"{self.min_length}–{self.max_length}"


DEFAULT_LENGTH_EDGES = (10, 20)  # buckets of 1–10, 11–20 and 21+ source tokens


def _buckets(pairs: Sequence[SentencePair], edges: Sequence[int]) -> list[tuple[int, int, list[int]]]:
    """(min, max, indices of pairs) for each non-empty bucket; bucket k holds lengths in (edges[k-1], edges[k]]."""
    bounds = [0, *sorted(edges), math.inf]
    buckets = []
    for low, high in zip(bounds, bounds[1:]):
        indices = [i for i, pair in enumerate(pairs) if low < len(pair.source) <= high]
        if indices:
            lengths = [len(pairs[i].source) for i in indices]
            buckets.append((min(lengths), max(lengths), indices))
    return buckets


def accuracy_by_length(
    model: Seq2Seq, corpus: ToyTranslationCorpus, split: str = "held_out", edges: Sequence[int] = DEFAULT_LENGTH_EDGES
) -> list[LengthBucket]:
    """Exact-match accuracy (0 to 1) per bucket of source length; ``edges`` are the buckets' inclusive upper ends.

    A bucket's ``min_length``/``max_length`` are the shortest and longest sources actually in it.
    """
    pairs = corpus.split(split)
    hypotheses = _translations(model, corpus, pairs)
    return [
        LengthBucket(low, high, len(indices), sum(hypotheses[i] == pairs[i].target_text for i in indices) / len(indices))
        for low, high, indices in _buckets(pairs, edges)
    ]


def bleu_by_length(
    model: Seq2Seq, corpus: ToyTranslationCorpus, split: str = "held_out", edges: Sequence[int] = DEFAULT_LENGTH_EDGES
) -> list[LengthBucket]:
    """Corpus BLEU (0 to 100, sacrebleu) per bucket of source length, as in Bahdanau et al. (2015), fig. 2.

    The Chinese side is already split into words by spaces, so sacrebleu runs with
    ``tokenize="none"``: its n-grams are our words (its default tokenizers would re-split the text,
    "zh" into single characters). Each bucket is scored as one corpus, with sacrebleu's default
    smoothing, against the one reference per sentence.
    """
    pairs = corpus.split(split)
    hypotheses = _translations(model, corpus, pairs)
    results = []
    for low, high, indices in _buckets(pairs, edges):
        bleu = sacrebleu.corpus_bleu(
            [hypotheses[i] for i in indices], [[pairs[i].target_text for i in indices]], tokenize="none"
        )
        results.append(LengthBucket(low, high, len(indices), bleu.score))
    return results
