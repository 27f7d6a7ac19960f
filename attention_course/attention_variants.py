"""Beyond soft attention (chapter 7): local attention, self-attention, positions, and why RNNs are slow.

Soft attention (``attention.soft_attention``, ``attention.attention``) is *global*: every key gets
a weight. Hard attention (``attention.hard_attention``) puts all the weight on one key. This module
adds the two other kinds the notes name:

- **local attention** (Luong, Pham and Manning, 2015): only the keys in a window of half-width D
  around a position p take part, ``window_mask`` and ``local_attention``; p is given (local-m:
  p_i = i) or predicted from the query, ``PositionPredictor`` (local-p);
- **self-attention** (Vaswani et al., 2017): queries, keys and values are all projections of the
  *same* sequence, ``SelfAttention``; ``causal_valid_lens`` lets position i see positions ≤ i only,
  and ``sinusoidal_positions`` adds the order that attention alone ignores.

``LocalAttentionDecoder`` (with ``build_local_model``) is chapter 6's decoder with local-p attention.
``time_recurrent_and_self_attention`` measures how a GRU and a self-attention layer slow down as
sequences grow, and ``receptive_field`` finds which inputs one output of a layer can depend on. Everything builds on the course's own ``softmax``, ``masked_softmax``,
``scaled_dot_score`` and ``attention``.

Shapes: B batch, T queries, S keys (for self-attention, S positions that are queries and keys at
once), d features, d_h a hidden size. Every function takes and returns
plain ``torch.Tensor`` and does not modify its inputs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from attention_course.attention import attention, scaled_dot_score, softmax
from attention_course.corpus import ToyTranslationCorpus
from attention_course.seq2seq import AttentionDecoder, Encoder, EncoderOutput, Seq2Seq

__all__ = [
    "window_mask",
    "local_attention",
    "PositionPredictor",
    "LocalAttentionDecoder",
    "build_local_model",
    "causal_valid_lens",
    "SelfAttention",
    "sinusoidal_positions",
    "LayerTiming",
    "time_recurrent_and_self_attention",
    "receptive_field",
]


# ---------------------------------------------------------------------------------------------
# Local attention.


def window_mask(positions: torch.Tensor, num_keys: int, half_width: float) -> torch.Tensor:
    """Which keys lie in each query's window: key j is in the window of query i if |j - p_i| <= D.

    positions (B, T), the (possibly fractional) centres p_i, counted from 0; ``num_keys`` S;
    ``half_width`` D >= 0. Returns a bool tensor (B, T, S). The window is [p_i - D, p_i + D]:
    2D + 1 keys when p_i is a whole number and the window lies inside the sequence.
    """
    if positions.ndim != 2:
        raise ValueError(f"positions must have shape (B, T), got {tuple(positions.shape)}")
    if not half_width >= 0:
        raise ValueError(f"half_width must be >= 0, got {half_width}")
    keys = torch.arange(num_keys, device=positions.device, dtype=positions.dtype)  # (S,)
    # A small tolerance so that a centre computed as 2.9999999 still counts key 5 with D = 2.
    return (keys - positions.unsqueeze(-1)).abs() <= half_width + 1e-6


def local_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    positions: torch.Tensor,
    half_width: float,
    score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = scaled_dot_score,
    valid_lens: torch.Tensor | None = None,
    gaussian: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention within a window of half-width D around each query's position p_i.

    Luong et al. (2015). queries (B, T, d), keys (B, S, d), values (B, S, d_v),
    positions (B, T): the centres p_i, counted from 0; valid_lens (B,) or None;
    score_fn(queries, keys) -> (B, T, S).
    Returns (output (B, T, d_v), weights (B, T, S)).

    The scores are softmaxed over the keys inside the window (and the valid
    length) only; every key outside gets weight exactly 0. With ``gaussian``
    (local-p) each weight is then multiplied by exp(-(j - p_i)² / (2 σ²)),
    σ = D / 2, favouring keys near the centre; the weights then sum to less
    than 1, as in the paper. A window with no valid key gives a row of zeros.
    For clarity every key is scored and the outside ones masked; a fast version
    scores only the 2D + 1 keys in the window, which is where local attention
    saves work on long sources.
    """
    if not half_width > 0:
        raise ValueError(f"half_width must be > 0, got {half_width}")
    if positions.shape != queries.shape[:2]:
        raise ValueError(f"positions must have shape (B, T) = "
                         f"{tuple(queries.shape[:2])}, got {tuple(positions.shape)}")
    scores = score_fn(queries, keys)  # (B, T, S)
    centres = positions.to(scores.dtype)  # (B, T)
    keep = window_mask(centres, keys.shape[1], half_width)  # (B, T, S)
    if valid_lens is not None:
        if valid_lens.shape != queries.shape[:1]:
            raise ValueError(f"valid_lens must have shape (B,) = "
                             f"({queries.shape[0]},), got {tuple(valid_lens.shape)}")
        positions_k = torch.arange(keys.shape[1], device=keys.device)  # (S,)
        real = positions_k < valid_lens[:, None]  # (B, S)
        keep = keep & real[:, None, :]  # (B, T, S)
    # As in masked_softmax: a score of -inf takes a key out of the softmax's sum.
    weights = softmax(scores.masked_fill(~keep, -math.inf), dim=-1)  # (B, T, S)
    if gaussian:
        sigma = half_width / 2
        j = torch.arange(keys.shape[1], device=keys.device, dtype=scores.dtype)
        offsets = j - centres.unsqueeze(-1)  # (B, T, S): j - p_i
        weights = weights * torch.exp(-offsets.pow(2) / (2 * sigma**2))
    output = torch.bmm(weights, values)  # (B, T, d_v)
    return output, weights


class PositionPredictor(nn.Module):
    """Luong's local-p: predict where to look, p_i = (S - 1) · sigmoid(v_pᵀ tanh(W_p q_i)).

    forward: queries (B, T, query_dim), valid_lens (B,) (the source lengths S) -> positions (B, T),
    real numbers between 0 and L - 1 (positions are counted from 0). The position is differentiable
    in W_p and v_p, so it is learned with the rest of the model (through the Gaussian of
    ``local_attention``), with no alignment given.
    """

    def __init__(self, query_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.W_p = nn.Linear(query_dim, hidden_dim, bias=False)
        self.v_p = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, queries: torch.Tensor, valid_lens: torch.Tensor) -> torch.Tensor:
        if queries.ndim != 3 or valid_lens.shape != queries.shape[:1]:
            raise ValueError(f"need queries (B, T, d) and valid_lens (B,), got {tuple(queries.shape)} and {tuple(valid_lens.shape)}")
        fraction = torch.sigmoid(self.v_p(torch.tanh(self.W_p(queries)))).squeeze(-1)  # (B, T), in (0, 1)
        return fraction * (valid_lens.to(fraction.dtype) - 1).unsqueeze(-1)  # (B, T)


class LocalAttentionDecoder(AttentionDecoder):
    """``seq2seq.AttentionDecoder`` with local-p attention: each step looks only at a window of the source.

    Step i predicts a centre p_i from the query H_{i-1} (``PositionPredictor``) and attends with
    ``local_attention`` (the same additive score, half-width ``half_width``, Gaussian on) instead of
    over every source word. Everything else, the query H_{i-1} included, is ``AttentionDecoder``'s
    (Luong et al. use the new state H_i; the course keeps the notes' H_{i-1}). ``step`` returns
    (logits (B, V), H_i (B, d_h), weights (B, S)), so ``Seq2Seq``, ``train`` and ``translate`` work unchanged.
    """

    def __init__(
        self, vocab_size: int, embed_dim: int, hidden_dim: int, context_dim: int, attention_dim: int, half_width: float = 2.0
    ) -> None:
        super().__init__(vocab_size, embed_dim, hidden_dim, context_dim, attention_dim)
        self.half_width = half_width
        self.position = PositionPredictor(hidden_dim, attention_dim)

    def step(
        self,
        previous_tokens: torch.Tensor,
        previous_hidden: torch.Tensor,
        encoded: EncoderOutput,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """y_{i-1} (B,), H_{i-1} (B, d_h) -> logits (B, V), H_i (B, d_h), a_i (B, S)."""
        query = previous_hidden.unsqueeze(1)  # (B, 1, d_h): H_{i-1}
        positions = self.position(query, encoded.lengths)  # (B, 1): p_i
        context, weights = local_attention(
            query, encoded.states, encoded.states, positions,
            self.half_width, self.score, encoded.lengths,
        )  # (B, 1, d_h), (B, 1, S): weight only inside the window
        context = context.squeeze(1)  # (B, d_h): C_i
        embedded = self.embedding(previous_tokens)  # (B, E)
        hidden = self.cell(torch.cat([embedded, context], -1), previous_hidden)
        logits = self.output(torch.cat([hidden, context, embedded], -1))
        return logits, hidden, weights.squeeze(1)


def build_local_model(
    corpus: ToyTranslationCorpus,
    *,
    half_width: float = 2.0,
    embed_dim: int = 32,
    hidden_dim: int = 64,
    attention_dim: int = 64,
    seed: int = 0,
) -> Seq2Seq:
    """Like ``seq2seq.build_model``, with a ``LocalAttentionDecoder``; weights drawn from ``seed``, global random state untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = Encoder(len(corpus.source_vocab), embed_dim, hidden_dim)
        decoder = LocalAttentionDecoder(len(corpus.target_vocab), embed_dim, hidden_dim, hidden_dim, attention_dim, half_width)
        return Seq2Seq(encoder, decoder)


# ---------------------------------------------------------------------------------------------
# Self-attention.


def causal_valid_lens(
    num_positions: int,
    valid_lens: torch.Tensor | None = None,
    batch_size: int | None = None,
) -> torch.Tensor:
    """Valid lengths (B, S) that let query i see keys 0 … i only.

    ``masked_softmax`` keeps key j of row i when j < valid_lens[b, i]: a causal
    row i needs valid length i + 1, and a sequence padded after L tokens needs
    min(i + 1, L). Give ``valid_lens`` (B,) for padded sequences, or
    ``batch_size`` B when every sequence has the full length S.
    """
    steps = torch.arange(1, num_positions + 1)  # (S,): 1, 2, …, S
    if valid_lens is None:
        if batch_size is None:
            raise ValueError("give valid_lens (B,) or batch_size")
        return steps.expand(batch_size, num_positions).clone()  # (B, S)
    return torch.minimum(steps.to(valid_lens.device), valid_lens[:, None])


class SelfAttention(nn.Module):
    """Single-head scaled dot-product self-attention, softmax(Q Kᵀ / √d_k) V.

    Q = X W_q, K = X W_k, V = X W_v all come from the same sequence X
    (``nn.Linear``, no bias); then the course's ``attention``, scaled dot scores.
    forward: x (B, S, d_model), valid_lens (B,) or None, causal ->
    (output (B, S, d_v), weights (B, S, S)); weights[b, i, j] is how much
    position i attends to position j. With ``causal``, position i sees
    positions 0 … i only (a decoder must not read ahead). Outputs at padded
    positions are computed but meaningless.
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None) -> None:
        super().__init__()
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_v or d_k, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        valid_lens: torch.Tensor | None = None,
        causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if x.ndim != 3 or x.shape[-1] != self.W_q.in_features:
            raise ValueError(f"x must have shape (B, S, d_model="
                             f"{self.W_q.in_features}), got {tuple(x.shape)}")
        queries = self.W_q(x)  # (B, S, d_k)
        keys = self.W_k(x)  # (B, S, d_k)
        values = self.W_v(x)  # (B, S, d_v)
        if causal:  # query i may see keys j < i + 1 (and none past the padding)
            valid_lens = causal_valid_lens(x.shape[1], valid_lens, x.shape[0])
        return attention(queries, keys, values, scaled_dot_score, valid_lens)


def sinusoidal_positions(length: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The Transformer's positional encoding, (length, dim): sines and cosines of the position at many wavelengths.

    PE[t, 2k] = sin(t / base^(2k/dim)) and PE[t, 2k+1] = cos(t / base^(2k/dim)), t = 0 … length - 1.
    Added to the token embeddings, it tells self-attention (which treats its inputs as a set) where
    each token stands. An odd ``dim`` drops the last cosine.
    """
    if length < 0 or dim < 1:
        raise ValueError(f"need length >= 0 and dim >= 1, got length={length}, dim={dim}")
    t = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # (length, 1)
    frequencies = base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (ceil(dim / 2),)
    angles = t * frequencies  # (length, ceil(dim / 2))
    encoding = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(length, -1)  # sin, cos interleaved
    return encoding[:, :dim]


# ---------------------------------------------------------------------------------------------
# Why RNN encoder–decoders are slow: time a GRU and a self-attention layer as sequences grow.


@dataclass(frozen=True)
class LayerTiming:
    """Seconds for one forward pass over a batch of sequences of ``length`` tokens (the fastest of the repeats)."""

    length: int
    gru_seconds: float
    self_attention_seconds: float

    @property
    def ratio(self) -> float:
        """How many times longer the GRU took."""
        return self.gru_seconds / self.self_attention_seconds


def _fastest_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The shortest of ``repeats`` timings of ``fn`` after one warm-up call: the least disturbed by other work."""
    fn()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
    return min(timings)


def time_recurrent_and_self_attention(
    lengths: Sequence[int],
    batch_size: int = 16,
    dim: int = 64,
    repeats: int = 5,
    seed: int = 0,
    num_threads: int | None = 1,
) -> list[LayerTiming]:
    """Time a one-layer GRU and one ``SelfAttention`` layer (both d -> d) on random (B, S, d) inputs, S in ``lengths``.

    The GRU must run its S steps one after the other (step t needs h_{t-1}); the self-attention layer
    computes all S positions with a few matrix products. Forward passes only, under ``no_grad``, on
    ``num_threads`` torch threads (restored afterwards; one thread keeps a shared machine's timings
    steady). The fastest of ``repeats`` runs is kept. The global random state is left as it was.
    """
    generator = torch.Generator().manual_seed(seed)
    before = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            gru = nn.GRU(dim, dim, batch_first=True)
            self_attention = SelfAttention(dim, dim)
        results = []
        with torch.no_grad():
            for length in lengths:
                x = torch.randn(batch_size, length, dim, generator=generator)  # (B, S, d)
                gru_seconds = _fastest_seconds(lambda: gru(x), repeats)
                attention_seconds = _fastest_seconds(lambda: self_attention(x), repeats)
                results.append(LayerTiming(length, gru_seconds, attention_seconds))
        return results
    finally:
        torch.set_num_threads(before)


def receptive_field(layer: Callable[[torch.Tensor], torch.Tensor], length: int, dim: int, position: int, seed: int = 0) -> torch.Tensor:
    """Which input positions can change the output at ``position``: bool (length,).

    ``layer`` maps x (1, S, dim) to (1, S, d_out) (wrap layers that return tuples). Found from the
    gradient of that output with respect to every input vector, on a random x drawn from ``seed``:
    a position whose gradient is exactly 0 cannot affect the output there.
    """
    if not 0 <= position < length:
        raise ValueError(f"position must be between 0 and length - 1 = {length - 1}, got {position}")
    x = torch.randn(1, length, dim, generator=torch.Generator().manual_seed(seed), requires_grad=True)
    with torch.enable_grad():
        output = layer(x)  # (1, S, d_out)
        (gradient,) = torch.autograd.grad(output[0, position].sum(), x)
    return gradient[0].abs().sum(-1) > 0  # (S,)
