"""Attention pooling as Nadaraya–Watson kernel regression: the oldest attention there is.

Given S training pairs (x_j, y_j), Nadaraya–Watson predicts at a point x the weighted average of
the y_j, each weighted by how close x_j is to x. Read with chapter 4's words: x is the query, the x_j
are the keys, the y_j are the values, and a Gaussian kernel is a softmax over the scores
-(x - x_j)^2 / (2 sigma^2), sigma being the bandwidth. Nothing is learned; the weights come from
distances alone.

Shapes, in the book's notation: T query points, S training points (keys), B batch.
"""

from __future__ import annotations

import math

import torch

from attention_course.attention import attention

__all__ = ["target_function", "make_regression_data", "gaussian_score", "nadaraya_watson"]


def target_function(x: torch.Tensor) -> torch.Tensor:
    """The curve the data are drawn around: 2 sin(x) + x^0.8, for x >= 0. Any shape in, same shape out."""
    return 2 * torch.sin(x) + x.pow(0.8)


def make_regression_data(
    n: int = 50, x_max: float = 5.0, noise: float = 0.5, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded 1-D training data: x (n,) sorted uniform on [0, x_max), y (n,) = target_function(x) + noise.

    Sorting x makes the rows and columns of a weight matrix follow the x axis, so it reads as a picture.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not x_max > 0:
        raise ValueError(f"x_max must be > 0, got {x_max}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    generator = torch.Generator().manual_seed(seed)
    x, _ = torch.sort(torch.rand(n, generator=generator) * x_max)
    y = target_function(x) + noise * torch.randn(n, generator=generator)
    return x, y


def gaussian_score(queries: torch.Tensor, keys: torch.Tensor, bandwidth: float = 1.0) -> torch.Tensor:
    """The Gaussian kernel's exponent as an attention score: -(q - k_j)^2 / (2 sigma^2), sigma = ``bandwidth``.

    queries (B, T, 1), keys (B, S, 1) -> scores (B, T, S). The closer a key to the query, the higher
    its score (0 at best); softmax of these scores is exactly the normalised Gaussian kernel.
    """
    if queries.ndim != 3 or queries.shape[-1] != 1:
        raise ValueError(f"queries must have shape (B, T, 1), got {tuple(queries.shape)}")
    if keys.ndim != 3 or keys.shape[-1] != 1:
        raise ValueError(f"keys must have shape (B, S, 1), got {tuple(keys.shape)}")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
    differences = queries - keys.transpose(1, 2)  # (B, T, 1) - (B, 1, S) -> (B, T, S)
    return -differences.pow(2) / (2 * bandwidth**2)


def nadaraya_watson(
    x_query: torch.Tensor, x_train: torch.Tensor, y_train: torch.Tensor, bandwidth: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Predict y at every query point as attention over the training pairs.

    x_query (T,), x_train (S,), y_train (S,) -> (prediction (T,), weights (T, S)); each row of
    weights sums to 1, and prediction = weights @ y_train. It is chapter 4's ``attention`` with
    queries x_query, keys x_train, values y_train and ``gaussian_score`` as the score.
    """
    for name, tensor in (("x_query", x_query), ("x_train", x_train), ("y_train", y_train)):
        if not isinstance(tensor, torch.Tensor) or tensor.ndim != 1:
            raise ValueError(f"{name} must be a 1-D tensor, got {getattr(tensor, 'shape', type(tensor))}")
    if x_train.shape != y_train.shape:
        raise ValueError(f"x_train and y_train must have the same shape, got {tuple(x_train.shape)} "
                         f"and {tuple(y_train.shape)}")
    if not bandwidth > 0 or math.isinf(bandwidth):
        raise ValueError(f"bandwidth must be a positive number, got {bandwidth}")
    queries = x_query.reshape(1, -1, 1)  # (1, T, 1): a batch of one
    keys = x_train.reshape(1, -1, 1)  # (1, S, 1)
    values = y_train.reshape(1, -1, 1)  # (1, S, 1)
    output, weights = attention(
        queries, keys, values, lambda q, k: gaussian_score(q, k, bandwidth)
    )  # (1, T, 1), (1, T, S)
    return output.reshape(-1), weights[0]
