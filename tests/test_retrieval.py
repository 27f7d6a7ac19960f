"""Chapter 2's experiment: soft and hard attention learning to retrieve the value of a matching key."""

from __future__ import annotations

import pytest
import torch

from attention_course.attention import softmax
from attention_course.retrieval import (
    BilinearScore,
    RetrievalTask,
    reinforce_surrogate,
    squared_error,
    train_retrieval,
)


def test_a_batch_has_the_documented_shapes_and_is_seeded():
    task = RetrievalTask(num_keys=5, key_dim=3, value_dim=2)
    batch = task.sample(7, torch.Generator().manual_seed(0))
    assert batch.queries.shape == (7, 3)
    assert batch.keys.shape == (7, 5, 3)
    assert batch.values.shape == (7, 5, 2)
    assert batch.targets.shape == (7,)
    assert batch.target_values().shape == (7, 2)
    again = task.sample(7, torch.Generator().manual_seed(0))
    assert torch.equal(batch.queries, again.queries) and torch.equal(batch.targets, again.targets)


def test_undoing_the_hidden_rotation_solves_the_task_and_the_plain_dot_product_does_not():
    task = RetrievalTask()
    batch = task.sample(1000, torch.Generator().manual_seed(1))
    oracle, plain = BilinearScore(task.key_dim), BilinearScore(task.key_dim)
    with torch.no_grad():
        oracle.W.copy_(task.rotation)  # q^T R k = (R^T q) . k, and R^T q is the target key plus noise
        plain.W.copy_(torch.eye(task.key_dim))
    accuracy = lambda model: (model(batch.queries, batch.keys).argmax(-1) == batch.targets).float().mean()
    assert accuracy(oracle) > 0.97
    assert accuracy(plain) < 0.2  # about chance, 1/16: the rotation hides the target


def test_the_model_starts_from_uniform_attention():
    task = RetrievalTask()
    batch = task.sample(4, torch.Generator().manual_seed(2))
    scores = BilinearScore(task.key_dim)(batch.queries, batch.keys)
    assert scores.shape == (4, task.num_keys)
    assert torch.equal(scores, torch.zeros_like(scores))


def test_the_reinforce_gradient_is_on_average_the_gradient_of_the_expected_loss():
    # One example with K = 4 keys, repeated N times: each row draws its own pick.
    generator = torch.Generator().manual_seed(3)
    K, N = 4, 40_000
    scores = torch.tensor([0.5, -0.2, 1.0, 0.0], dtype=torch.float64)
    values = torch.randn(K, 2, generator=generator, dtype=torch.float64)
    target = values[1]
    losses_per_key = squared_error(values, target.expand(K, 2))  # (K,)

    # Exact: d/ds sum_i softmax(s)_i L_i, which REINFORCE must match on average.
    exact_scores = scores.clone().requires_grad_()
    (softmax(exact_scores) * losses_per_key).sum().backward()

    repeated = scores.expand(N, K).clone().requires_grad_()
    surrogate, losses, picks = reinforce_surrogate(
        repeated, values.expand(N, K, 2), target.expand(N, 2), baseline=losses_per_key.mean().item(), generator=generator
    )
    surrogate.backward()
    assert losses.shape == picks.shape == (N,)
    estimate = repeated.grad.sum(0)  # the surrogate is a mean over rows: summing gives the average gradient
    assert exact_scores.grad.abs().max() > 0.1
    torch.testing.assert_close(estimate, exact_scores.grad, atol=0.02, rtol=0)
    # The key with the smallest loss (the target) is pushed up: gradient descent raises its score.
    assert estimate[1] < 0


def test_the_baseline_does_not_change_the_average_gradient():
    generator = torch.Generator().manual_seed(4)
    K, N = 3, 40_000
    values = torch.randn(K, 2, generator=generator, dtype=torch.float64)
    estimates = []
    for baseline in (0.0, 5.0):
        scores = torch.zeros(N, K, dtype=torch.float64, requires_grad=True)
        surrogate, _, _ = reinforce_surrogate(scores, values.expand(N, K, 2), values[0].expand(N, 2), baseline,
                                              torch.Generator().manual_seed(5))
        surrogate.backward()
        estimates.append(scores.grad.sum(0))
    torch.testing.assert_close(estimates[0], estimates[1], atol=0.08, rtol=0)


def test_soft_attention_learns_the_task_within_fifty_steps():
    _, history = train_retrieval("soft", steps=50)
    assert len(history.loss) == len(history.accuracy) == 50
    assert history.accuracy[0] < 0.6
    assert history.accuracy[-1] > 0.95
    assert history.loss[-1] < history.loss[0] / 5


def test_hard_attention_trained_with_reinforce_learns_too_but_more_slowly():
    _, soft = train_retrieval("soft", steps=150)
    _, hard = train_retrieval("hard", steps=150)
    assert hard.accuracy[-1] > 0.95
    first_good = lambda history: next(i for i, a in enumerate(history.accuracy) if a > 0.9)
    assert first_good(soft) < first_good(hard)


@pytest.mark.parametrize("method", ["soft", "hard"])
def test_the_same_seed_gives_the_same_curve(method):
    _, first = train_retrieval(method, steps=30, seed=7)
    _, second = train_retrieval(method, steps=30, seed=7)
    _, other = train_retrieval(method, steps=30, seed=8)
    assert first.loss == second.loss and first.accuracy == second.accuracy
    assert first.loss != other.loss


def test_bad_arguments_are_rejected_with_a_clear_message():
    with pytest.raises(ValueError, match="method must be 'soft' or 'hard'"):
        train_retrieval("argmax")
    with pytest.raises(ValueError, match="num_keys must be at least 2"):
        RetrievalTask(num_keys=1)
    with pytest.raises(ValueError, match="batch_size must be positive"):
        RetrievalTask().sample(0, torch.Generator())
