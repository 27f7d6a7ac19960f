"""Attention, one small function per idea: the reference implementations of the graded functions.

Shapes, in the book's notation (chapter 1): B batch, T queries, S keys (and values), d the size of
queries and keys, d_v the size of values. The error messages name the same sizes as the exercises'
task texts do, Q for T and K for S. The three stages of attention are a score for every
query–key pair (``dot_score``, ``scaled_dot_score``, ``cosine_score``, ``AdditiveScore``), a softmax
that turns the scores into weights (``softmax``, ``masked_softmax``), and a weighted sum of the
values (``soft_attention``, ``attention``). ``hard_attention`` replaces the weights with a one-hot pick.

Every function takes and returns plain ``torch.Tensor``, never modifies its inputs, works for
float32 and float64, and raises ``ValueError`` naming the argument and the shapes it got when a
shape is wrong. The softmax is written out rather than taken from ``torch.softmax``: this module is
what the chapters show and what the exercises are compared with.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

__all__ = [
    "softmax",
    "soft_attention",
    "hard_attention",
    "dot_score",
    "scaled_dot_score",
    "cosine_score",
    "AdditiveScore",
    "masked_softmax",
    "attention",
]


# ---------------------------------------------------------------------------------------------
# Argument checks, shared so that each function below reads as its computation.


def _shape(tensor: torch.Tensor) -> tuple[int, ...]:
    return tuple(tensor.shape)


def _require_tensor(name: str, tensor: object) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")


def _require_ndim(name: str, tensor: torch.Tensor, layout: str) -> None:
    """Raise unless ``tensor`` has as many dimensions as ``layout`` names, e.g. ``"(B, Q, d)"``."""
    _require_tensor(name, tensor)
    ndim = len(layout.strip("()").split(","))
    if tensor.ndim != ndim:
        raise ValueError(f"{name} must have shape {layout} ({ndim} dimensions), got {_shape(tensor)}")


def _require_same_size(
    what: str, name_a: str, a: torch.Tensor, dim_a: int, name_b: str, b: torch.Tensor, dim_b: int
) -> None:
    if a.shape[dim_a] != b.shape[dim_b]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same {what}, "
            f"got {name_a} {_shape(a)} and {name_b} {_shape(b)}"
        )


def _require_last_size(name: str, tensor: torch.Tensor, size_name: str, size: int) -> None:
    if tensor.shape[-1] != size:
        raise ValueError(f"{name} must have {size_name} = {size} features in its last dimension, "
                         f"got {_shape(tensor)}")


def _check_scores_and_values(scores: torch.Tensor, values: torch.Tensor) -> None:
    """scores (..., K) and values (..., K, d): the same K, and leading dimensions that broadcast."""
    _require_tensor("scores", scores)
    _require_tensor("values", values)
    if scores.ndim < 1:
        raise ValueError(f"scores must have shape (..., K) (1 or more dimensions), got {_shape(scores)}")
    if values.ndim < 2:
        raise ValueError(f"values must have shape (..., K, d) (2 or more dimensions), got {_shape(values)}")
    _require_same_size("number of keys K", "scores", scores, -1, "values", values, -2)
    try:
        torch.broadcast_shapes(scores.shape[:-1], values.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of scores (..., K) and values (..., K, d) must match (or broadcast), "
            f"got scores {_shape(scores)} and values {_shape(values)}"
        ) from None


def _check_queries_and_keys(queries: torch.Tensor, keys: torch.Tensor, same_features: bool = True) -> None:
    _require_ndim("queries", queries, "(B, Q, d)")
    _require_ndim("keys", keys, "(B, K, d)")
    _require_same_size("batch size B", "queries", queries, 0, "keys", keys, 0)
    if same_features:
        _require_same_size("feature size d", "queries", queries, 2, "keys", keys, 2)


def _check_attention_inputs(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
    # The feature sizes of queries and keys are score_fn's business (additive scores allow d_q != d_k).
    _check_queries_and_keys(queries, keys, same_features=False)
    _require_ndim("values", values, "(B, K, d_v)")
    _require_same_size("batch size B", "keys", keys, 0, "values", values, 0)
    _require_same_size("number of keys K", "keys", keys, 1, "values", values, 1)


def _check_scores(scores: object, queries: torch.Tensor, keys: torch.Tensor, score_fn: Callable) -> None:
    expected = (queries.shape[0], queries.shape[1], keys.shape[1])
    if not isinstance(scores, torch.Tensor) or _shape(scores) != expected:
        got = _shape(scores) if isinstance(scores, torch.Tensor) else type(scores).__name__
        name = getattr(score_fn, "__name__", type(score_fn).__name__)
        raise ValueError(f"score_fn {name} must return scores of shape (B, Q, K) = {expected}, got {got}")


def _valid_lens_per_query(valid_lens: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """valid_lens (B,) or (B, Q) as (B, Q): one length for every query's row of scores (B, Q, K)."""
    _require_tensor("valid_lens", valid_lens)
    batch, num_queries, _ = scores.shape
    if valid_lens.shape == (batch,):
        return valid_lens[:, None].expand(batch, num_queries)
    if valid_lens.shape == (batch, num_queries):
        return valid_lens
    raise ValueError(
        f"valid_lens must have shape (B,) = ({batch},) or (B, Q) = ({batch}, {num_queries}) "
        f"for scores {_shape(scores)}, got {_shape(valid_lens)}"
    )


# ---------------------------------------------------------------------------------------------
# Chapter 2: soft and hard attention.


def softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Weights that are positive and sum to 1 along ``dim``: a_j = exp(s_j) / sum_l exp(s_l).

    scores: any shape. Returns a tensor of the same shape. Entries of -inf get weight exactly 0,
    and a slice that is all -inf (everything masked) gets all zeros rather than NaN.
    """
    _require_tensor("scores", scores)
    # Softmax does not change when every score moves by the same amount, so shift the largest to 0:
    # exp never overflows (scores of 1e4 are fine), and no gradient needs to flow through the shift.
    shift = scores.amax(dim=dim, keepdim=True).detach()
    # An all -inf slice would give -inf - (-inf) = NaN; shifting it by 0 keeps every exp at 0.
    shift = shift.masked_fill(shift == -math.inf, 0.0)
    exps = torch.exp(scores - shift)
    totals = exps.sum(dim=dim, keepdim=True)
    # The largest score contributes exp(0) = 1, so a total is at least 1 unless the slice is all -inf;
    # then it is 0, and dividing by 1 instead leaves that slice all zeros.
    return exps / totals.clamp_min(1.0)


def soft_attention(
    scores: torch.Tensor, values: torch.Tensor, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attend to every value at once, each in proportion to softmax(scores / temperature).

    scores (..., S), values (..., S, d_v) -> (output (..., d_v), weights (..., S)).
    A small temperature sharpens the weights towards hard attention; a large one flattens them
    towards the plain average of the values.
    """
    _check_scores_and_values(scores, values)
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    weights = softmax(scores / temperature, dim=-1)  # (..., S), sums to 1
    # output = sum_j a_j v_j: every value contributes, so gradients reach every score.
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)  # (..., d_v)
    return output, weights


def hard_attention(scores: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Attend to one value only: the one with the highest score (the first of them on ties).

    scores (..., S), values (..., S, d_v) -> (output (..., d_v), weights (..., S)), weights one-hot.
    """
    _check_scores_and_values(scores, values)
    # argmax returns the first index among equal maxima, which makes ties deterministic.
    chosen = scores.argmax(dim=-1)  # (...,)
    weights = nn.functional.one_hot(chosen, num_classes=scores.shape[-1]).to(scores.dtype)  # (..., S)
    # The same weighted sum as soft attention; with one-hot weights it copies the chosen value.
    # argmax has no gradient, which is why hard attention needs REINFORCE or a straight-through trick.
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)  # (..., d_v)
    return output, weights


# ---------------------------------------------------------------------------------------------
# Chapter 4: scores, masking, and the three stages put together.


def dot_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """How well each query matches each key: the dot product q · k_j.

    queries (B, T, d), keys (B, S, d) -> scores (B, T, S).
    """
    _check_queries_and_keys(queries, keys)
    # One batched matrix product computes all T x S dot products of each batch element.
    return torch.bmm(queries, keys.transpose(1, 2))


def scaled_dot_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """The dot product divided by sqrt(d).

    queries (B, T, d), keys (B, S, d) -> scores (B, T, S).
    """
    # For d independent features of unit variance, q · k_j has variance d. Dividing by sqrt(d) keeps
    # the scores near unit variance at any d, so the softmax does not saturate into a one-hot.
    return dot_score(queries, keys) / math.sqrt(queries.shape[-1])


def cosine_score(queries: torch.Tensor, keys: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """The cosine of the angle between query and key: (q · k_j) / (|q| |k_j|), between -1 and 1.

    queries (B, T, d), keys (B, S, d) -> scores (B, T, S). A zero query or key scores exactly 0.
    """
    _check_queries_and_keys(queries, keys)
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    # Dividing each vector by max(|v|, eps) rather than |v|: a zero vector becomes 0 / eps = 0, not NaN.
    unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(eps)
    unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)
    return dot_score(unit_queries, unit_keys)


class AdditiveScore(nn.Module):
    """Additive (MLP) attention scores: w_v^T tanh(W_q q + W_k k_j), as in Bahdanau et al. (2015).

    Queries and keys may have different sizes: each is projected to ``hidden_dim`` first.
    forward: queries (B, T, query_dim), keys (B, S, key_dim) -> scores (B, T, S).
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """queries (B, T, query_dim), keys (B, S, key_dim) -> scores (B, T, S)."""
        _check_queries_and_keys(queries, keys, same_features=False)
        _require_last_size("queries", queries, "query_dim", self.W_q.in_features)
        _require_last_size("keys", keys, "key_dim", self.W_k.in_features)
        projected_queries = self.W_q(queries)  # (B, T, hidden)
        projected_keys = self.W_k(keys)  # (B, S, hidden)
        # Broadcasting (B, T, 1, hidden) against (B, 1, S, hidden) pairs every query with every key.
        features = torch.tanh(projected_queries.unsqueeze(2) + projected_keys.unsqueeze(1))
        return self.w_v(features).squeeze(-1)  # (B, T, S, hidden) -> (B, T, S, 1) -> (B, T, S)


def masked_softmax(scores: torch.Tensor, valid_lens: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the keys that exist: key j of a row takes part only if j < that row's valid length.

    scores (B, T, S); valid_lens (B,) (one length per sequence), (B, T) (one per query), or None
    (no mask). Returns weights (B, T, S): exactly 0 beyond the valid length, and a row whose valid
    length is 0 is all zeros.
    """
    _require_ndim("scores", scores, "(B, Q, K)")
    if valid_lens is None:
        return softmax(scores, dim=-1)
    lengths = _valid_lens_per_query(valid_lens, scores)  # (B, T)
    positions = torch.arange(scores.shape[-1], device=scores.device)  # (S,)
    keep = positions < lengths.unsqueeze(-1)  # (B, T, S)
    # Mask the scores with -inf, not the weights with 0: exp(-inf) = 0 takes the padding out of the
    # softmax's sum, so the weights that remain still add up to 1.
    return softmax(scores.masked_fill(~keep, -math.inf), dim=-1)


def attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    valid_lens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The three stages: score every query against every key, softmax, weighted sum of the values.

    queries (B, T, d_q), keys (B, S, d_k), values (B, S, d_v); ``score_fn(queries, keys)`` gives
    scores (B, T, S) (e.g. ``scaled_dot_score`` or an ``AdditiveScore``); valid_lens as in
    ``masked_softmax``. Returns (output (B, T, d_v), weights (B, T, S)).
    """
    _check_attention_inputs(queries, keys, values)
    scores = score_fn(queries, keys)  # (B, T, S)
    _check_scores(scores, queries, keys, score_fn)
    weights = masked_softmax(scores, valid_lens)  # (B, T, S), each row sums to 1 (or is all 0)
    output = torch.bmm(weights, values)  # (B, T, d_v): row i is sum_j a_ij v_j
    return output, weights

