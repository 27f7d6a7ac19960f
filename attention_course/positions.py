"""Where each token stands (chapter 9): attention ignores order, and four ways to give it back.

Self-attention treats its inputs as a set: permute them, and its outputs are permuted the same way
(``permutation_gap`` measures how far a layer is from that). Four ways to tell it positions, each
fitting one of chapter 4's three stages:

- **sinusoidal** (Vaswani et al., 2017): a fixed vector per position added to the token's embedding,
  ``sinusoidal_positions`` (chapter 7.2's);
- **learned** (as in BERT and GPT-2): a trained vector per position, added the same way,
  ``LearnedPositions``; it knows no position beyond its table;
- **rotary**, RoPE (Su et al., 2021): queries and keys, not inputs, are rotated by angles proportional
  to their positions, so that a query–key score depends on the two positions only through their
  offset, ``rotate`` and ``RotaryScore`` (a score function for chapter 4's ``attention``);
- **ALiBi** (Press, Smith and Lewis, 2022): nothing is added to any vector; each head subtracts from
  every score a penalty proportional to the distance between query and key, ``alibi_slopes``,
  ``alibi_bias`` and ``ALiBiScore``.

``RotaryScore`` and ``ALiBiScore`` are score functions, ``(queries, keys) -> scores``, as chapter 4's
``attention`` takes them; chapter 8's ``MultiHeadAttention`` passes its ``score_fn`` on. Both assume
self-attention's positions: the S keys stand at 0 … S - 1 and the T queries at the last T of them,
S - T … S - 1 (T = S, or a decoder's new tokens after a cache of S - T).

Shapes: B batch, T queries, S keys, d features (even, for RoPE), n_h heads. Every function takes and
returns plain ``torch.Tensor`` and does not modify its inputs.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from attention_course.attention import scaled_dot_score
from attention_course.attention_variants import sinusoidal_positions

__all__ = [
    "permutation_gap",
    "sinusoidal_positions",
    "LearnedPositions",
    "rotary_angles",
    "rotate",
    "RotaryScore",
    "alibi_slopes",
    "alibi_bias",
    "ALiBiScore",
    "POSITION_SCHEMES",
]

POSITION_SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi")


def permutation_gap(layer: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, order: torch.Tensor) -> float:
    """How far ``layer`` is from permutation equivariance on ``x`` (B, S, d) and one reordering ``order`` (S,).

    The largest |layer(x[:, order]) - layer(x)[:, order]|: 0 (to rounding) when shuffling the inputs
    only shuffles the outputs, as for self-attention without positions.
    """
    with torch.no_grad():
        return float((layer(x[:, order]) - layer(x)[:, order]).abs().max())


class LearnedPositions(nn.Module):
    """A trained vector for each position 0 … ``max_length`` - 1, added to the embeddings.

    forward: ``length`` S -> (S, d), the vectors of positions 0 … S - 1. A position past the table has
    no vector: asking for one raises ``ValueError`` rather than wrap around or clip.
    """

    def __init__(self, max_length: int, d_model: int) -> None:
        super().__init__()
        self.table = nn.Embedding(max_length, d_model)
        nn.init.normal_(self.table.weight, std=0.02)  # small, as GPT-2 starts them

    def forward(self, length: int) -> torch.Tensor:
        if length > self.table.num_embeddings:
            raise ValueError(f"learned positions exist for 0 … {self.table.num_embeddings - 1}; "
                             f"a sequence of {length} tokens needs positions up to {length - 1}")
        return self.table.weight[:length]


# ---------------------------------------------------------------------------------------------
# Rotary positions (RoPE).


def rotary_angles(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The angle by which RoPE turns each pair of features: positions (S,) -> (S, dim / 2).

    Pair m (features 2m and 2m + 1) at position j turns by j θ_m, θ_m = base^(-2m / dim): the first
    pair once per position, the last about base times more slowly, the wavelengths of
    ``sinusoidal_positions``.
    """
    if dim % 2:
        raise ValueError(f"rotary positions turn pairs of features: dim must be even, got {dim}")
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (dim / 2,)
    return positions.to(torch.float64)[:, None] * theta  # (S, dim / 2)


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """RoPE: turn each pair of features (x_2m, x_2m+1) of the vector at position j by the angle j θ_m.

    x (..., S, d), positions (S,) -> (..., S, d). A rotation keeps lengths, and rotating a query by
    i θ and a key by j θ changes their dot product only through (i - j) θ.
    """
    angles = rotary_angles(positions, x.shape[-1], base)  # (S, d / 2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., S, d / 2) each: the pairs' two coordinates
    turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., S, d / 2, 2)
    return turned.flatten(-2)  # the pairs back in their places: (..., S, d)


class RotaryScore:
    """Scaled dot-product scores of rotated queries and keys, a score function for chapter 4's ``attention``.

    (queries (B, T, d), keys (B, S, d)) -> scores (B, T, S); keys at positions 0 … S - 1, queries at
    S - T … S - 1.
    """

    def __init__(self, base: float = 10000.0) -> None:
        self.base = base

    def __call__(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        num_queries, num_keys = queries.shape[1], keys.shape[1]
        key_positions = torch.arange(num_keys, device=keys.device)
        query_positions = key_positions[num_keys - num_queries:]
        return scaled_dot_score(rotate(queries, query_positions, self.base), rotate(keys, key_positions, self.base))

    def __repr__(self) -> str:
        return f"RotaryScore(base={self.base:g})"


# ---------------------------------------------------------------------------------------------
# ALiBi: attention with linear biases.


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Each head's penalty per position of distance, (n_h,): the geometric sequence of Press et al.

    For n_h a power of 2: 2^(-8/n_h), 2^(-16/n_h), …, 2^(-8) — head 1 looks close, the last far. For
    other n_h, the paper's rule: the slopes of the power of 2 just below, then every other slope of the
    power of 2 just above.
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be at least 1, got {num_heads}")

    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (r + 1) / n) for r in range(n)]

    below = 2 ** math.floor(math.log2(num_heads))
    slopes = geometric(below) + geometric(2 * below)[0::2][: num_heads - below]
    return torch.tensor(slopes)


def alibi_bias(num_heads: int, num_queries: int, num_keys: int) -> torch.Tensor:
    """ALiBi's additive bias, (n_h, T, S): -m_r |i - j| for head r, query position i, key position j.

    Keys stand at 0 … S - 1 and queries at S - T … S - 1. A causal mask hides every j > i, so in a
    decoder the bias is -m_r (i - j), as in Press et al.; an encoder sees both sides, at the same cost.
    """
    key_positions = torch.arange(num_keys)
    query_positions = key_positions[num_keys - num_queries:]
    distance = (query_positions[:, None] - key_positions[None, :]).abs()  # (T, S)
    return -alibi_slopes(num_heads)[:, None, None] * distance  # (n_h, T, S)


class ALiBiScore:
    """Scaled dot-product scores minus ALiBi's distance penalty, a score function for chapter 4's ``attention``.

    For multi-head attention with the heads folded into the batch, as chapter 8's layer does:
    (queries (B · n_h, T, d_head), keys (B · n_h, S, d_head)) -> scores (B · n_h, T, S), row b · n_h + r
    being head r of sequence b.
    """

    def __init__(self, num_heads: int) -> None:
        self.num_heads = num_heads

    def __call__(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        scores = scaled_dot_score(queries, keys)  # (B · n_h, T, S)
        bias = alibi_bias(self.num_heads, queries.shape[1], keys.shape[1]).to(scores)  # (n_h, T, S)
        return scores + bias.repeat(queries.shape[0] // self.num_heads, 1, 1)

    def __repr__(self) -> str:
        return f"ALiBiScore(num_heads={self.num_heads})"
