"""Chapter 2's experiment: train soft and hard attention on the same small retrieval task.

The task. Each example has S keys (S, d), each carrying a value (S, d_v). A query (d,) is a
disguised copy of one of the keys, the target: ``query = R @ key + noise`` with a fixed rotation R
that the model does not know. Attention must find the target key and return its value. The model
is one learned matrix W (d, d) that scores each key as ``s_j = q @ W @ k_j``; W = R (scaled
up) undoes the disguise. Keys, values and targets are drawn afresh for every batch, so the model
must learn to *match*, not to remember.

Two ways to train W, with the same loss, the squared distance between the output and the target's
value:

- soft attention: the output is the softmax-weighted sum of the values, and backpropagation
  through it gives the gradient with respect to W directly;
- hard attention: the output is *one* value, picked by sampling an index from softmax(scores).
  The pick has no gradient, so W learns by REINFORCE (the score-function estimator) with a
  running-average baseline: the surrogate loss ``(L - b) * log p(pick)`` has, on average, the
  gradient of the expected loss.

Both are judged the same way: retrieval accuracy, how often the highest-scoring key is the target,
on a fixed held-out set. Everything is seeded with local generators, so a run is reproducible.

Shapes, in the book's notation (chapter 1): B batch, S keys, d key/query size, d_v value size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from attention_course.attention import soft_attention

__all__ = [
    "RetrievalTask",
    "RetrievalBatch",
    "BilinearScore",
    "squared_error",
    "reinforce_surrogate",
    "TrainingHistory",
    "train_retrieval",
]


@dataclass(frozen=True)
class RetrievalBatch:
    """queries (B, d), keys (B, S, d), values (B, S, d_v), targets (B,) (the index of the matching key)."""

    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    targets: torch.Tensor

    def target_values(self) -> torch.Tensor:
        """The value each query should retrieve: (B, d_v)."""
        return self.values[torch.arange(len(self.targets)), self.targets]


@dataclass(frozen=True)
class RetrievalTask:
    """Find, among ``num_keys`` random keys, the one that a rotated, noisy query came from.

    ``seed`` fixes the hidden rotation R (d, d); batches are drawn with a generator the caller passes.
    """

    num_keys: int = 16
    key_dim: int = 16
    value_dim: int = 4
    noise: float = 0.1
    seed: int = 0
    rotation: torch.Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.num_keys < 2:
            raise ValueError(f"num_keys must be at least 2, got {self.num_keys}")
        if self.key_dim < 1 or self.value_dim < 1:
            raise ValueError(f"key_dim and value_dim must be positive, got {self.key_dim} and {self.value_dim}")
        if self.noise < 0:
            raise ValueError(f"noise must be >= 0, got {self.noise}")
        generator = torch.Generator().manual_seed(self.seed)
        # The Q factor of a Gaussian matrix is a random orthogonal matrix: it hides which key a
        # query came from (the plain dot product query · key is no better than chance) without
        # destroying any information, so a learned W can undo it exactly.
        q, _ = torch.linalg.qr(torch.randn(self.key_dim, self.key_dim, generator=generator))
        object.__setattr__(self, "rotation", q)

    def sample(self, batch_size: int, generator: torch.Generator) -> RetrievalBatch:
        """A fresh batch of ``batch_size`` examples drawn with ``generator``."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        S, d, d_v = self.num_keys, self.key_dim, self.value_dim
        keys = torch.randn(batch_size, S, d, generator=generator)  # (B, S, d)
        # Unit-length keys: then the target is the key with the largest dot product with R^T query,
        # and no key wins just by being long.
        keys = keys / keys.norm(dim=-1, keepdim=True)
        values = torch.randn(batch_size, S, d_v, generator=generator)  # (B, S, d_v)
        targets = torch.randint(0, S, (batch_size,), generator=generator)  # (B,)
        target_keys = keys[torch.arange(batch_size), targets]  # (B, d)
        noise = self.noise * torch.randn(batch_size, d, generator=generator)
        queries = target_keys @ self.rotation.T + noise  # (B, d): row b is R @ key_b + noise
        return RetrievalBatch(queries, keys, values, targets)


class BilinearScore(nn.Module):
    """Scores s_j = q^T W k_j with one learned matrix W (d, d), initialised to zero.

    At W = 0 every key scores the same, so both learners start from uniform attention.
    forward: queries (B, d), keys (B, S, d) -> scores (B, S).
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.zeros(dim, dim))

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        # (B, 1, d) @ (B, d, S): one batched product gives every query's score for each of its keys.
        projected = (queries @ self.W).unsqueeze(1)  # (B, 1, d)
        return (projected @ keys.transpose(1, 2)).squeeze(1)  # (B, S)


def squared_error(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-example loss ||output - target||^2: outputs (B, d_v), targets (B, d_v) -> (B,)."""
    return ((outputs - targets) ** 2).sum(dim=-1)


def reinforce_surrogate(
    scores: torch.Tensor,
    values: torch.Tensor,
    target_values: torch.Tensor,
    baseline: float | None,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One REINFORCE step for hard attention that samples its pick from softmax(scores).

    scores (B, S), values (B, S, d_v), target_values (B, d_v); ``baseline`` b is a number, or None
    to use this batch's mean loss (for a first step, before there is any history to average).
    Returns ``(surrogate, losses, picks)``: the surrogate loss (a scalar), whose gradient with
    respect to the scores is the REINFORCE estimate mean_b (L_b - b) * d log p(pick_b) / d scores;
    the per-example losses L (B,) of the picked values; and the picks (B,).
    """
    # Sampling, not arg-max: the learner must sometimes try keys other than its current favourite,
    # or it never finds out that another key would have been better.
    with torch.no_grad():
        probabilities = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))  # (B, S)
        picks = torch.multinomial(probabilities, 1, generator=generator).squeeze(1)  # (B,)
        rows = torch.arange(len(picks))
        losses = squared_error(values[rows, picks], target_values)  # (B,)
    if baseline is None:
        baseline = losses.mean().item()
    log_probabilities = scores - torch.logsumexp(scores, dim=-1, keepdim=True)  # (B, S)
    log_p_pick = log_probabilities[rows, picks]  # (B,)
    # The loss itself is a constant here (the pick has no gradient); it only weighs how strongly to
    # make this pick more likely (L < b) or less likely (L > b).
    surrogate = ((losses - baseline) * log_p_pick).mean()
    return surrogate, losses, picks


@dataclass
class TrainingHistory:
    """Per step: the training loss (mean over the batch) and the held-out retrieval accuracy."""

    method: str
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)


def train_retrieval(
    method: str,
    task: RetrievalTask | None = None,
    steps: int = 200,
    batch_size: int = 32,
    lr: float = 0.05,
    seed: int = 0,
    eval_size: int = 512,
    baseline_decay: float = 0.9,
) -> tuple[BilinearScore, TrainingHistory]:
    """Train a :class:`BilinearScore` with ``method`` ``"soft"`` (backpropagation through
    soft attention) or ``"hard"`` (REINFORCE through sampled hard attention), with Adam.

    ``seed`` fixes the training batches and the hard learner's samples; the held-out set is fixed
    by the task. Returns the trained model and its :class:`TrainingHistory`; the same arguments
    give the same history.
    """
    if method not in ("soft", "hard"):
        raise ValueError(f"method must be 'soft' or 'hard', got {method!r}")
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    task = task or RetrievalTask()
    held_out = task.sample(eval_size, torch.Generator().manual_seed(10_000 + task.seed))
    batches = torch.Generator().manual_seed(seed)
    picks = torch.Generator().manual_seed(seed + 1)

    model = BilinearScore(task.key_dim)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    history = TrainingHistory(method)
    baseline = None
    for _ in range(steps):
        batch = task.sample(batch_size, batches)
        scores = model(batch.queries, batch.keys)  # (B, S)
        if method == "soft":
            outputs, _ = soft_attention(scores, batch.values)  # (B, d_v)
            losses = squared_error(outputs, batch.target_values())  # (B,)
            objective = losses.mean()
        else:
            objective, losses, _ = reinforce_surrogate(
                scores, batch.values, batch.target_values(), baseline, picks
            )
            # The baseline follows the recent average loss; it lowers the estimate's variance
            # without biasing it, because it does not depend on this step's picks.
            batch_loss = losses.mean().item()
            baseline = batch_loss if baseline is None else baseline_decay * baseline + (1 - baseline_decay) * batch_loss
        optimiser.zero_grad()
        objective.backward()
        optimiser.step()

        history.loss.append(losses.mean().item())
        with torch.no_grad():
            found = model(held_out.queries, held_out.keys).argmax(dim=-1) == held_out.targets
        history.accuracy.append(found.float().mean().item())
    return model, history
