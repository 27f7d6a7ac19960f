"""Chapter 4's optional section: Nadaraya–Watson kernel regression is attention pooling."""

from __future__ import annotations

import math

import pytest
import torch

from attention_course.kernel_regression import (
    gaussian_score,
    make_regression_data,
    nadaraya_watson,
    target_function,
)


def test_the_data_are_seeded_sorted_and_scattered_around_the_curve():
    x, y = make_regression_data(n=200, seed=1)
    assert x.shape == y.shape == (200,)
    assert torch.equal(x, make_regression_data(n=200, seed=1)[0])
    assert not torch.equal(x, make_regression_data(n=200, seed=2)[0])
    assert torch.all(x[1:] >= x[:-1])
    assert 0 <= x.min() and x.max() < 5
    residual_std = (y - target_function(x)).std().item()
    assert residual_std == pytest.approx(0.5, rel=0.2)


def test_without_noise_the_data_lie_on_the_curve():
    x, y = make_regression_data(n=10, noise=0.0)
    assert torch.allclose(y, target_function(x))


def test_the_gaussian_score_is_minus_half_the_squared_distance():
    queries = torch.tensor([[[0.0], [2.0]]])  # (1, 2, 1)
    keys = torch.tensor([[[0.0], [1.0], [3.0]]])  # (1, 3, 1)
    expected = torch.tensor([[[0.0, -0.5, -4.5], [-2.0, -0.5, -0.5]]])
    assert torch.equal(gaussian_score(queries, keys), expected)
    # A bandwidth h divides the squared distance by 2 h^2.
    assert torch.allclose(gaussian_score(queries, keys, bandwidth=0.5), 4 * expected)


def test_the_weights_are_the_normalised_gaussian_kernel():
    x_train = torch.tensor([0.0, 1.0, 3.0])
    y_train = torch.tensor([1.0, 2.0, 4.0])
    prediction, weights = nadaraya_watson(torch.tensor([0.5]), x_train, y_train)
    kernel = torch.exp(-((0.5 - x_train) ** 2) / 2)
    assert torch.allclose(weights[0], kernel / kernel.sum())
    assert prediction.item() == pytest.approx((kernel / kernel.sum() * y_train).sum().item())


def test_predictions_follow_the_curve_and_beat_the_plain_average():
    x, y = make_regression_data(n=100, seed=0)
    x_query = torch.linspace(0.5, 4.5, 41)
    prediction, weights = nadaraya_watson(x_query, x, y, bandwidth=0.3)
    assert prediction.shape == (41,) and weights.shape == (41, 100)
    assert torch.allclose(weights.sum(dim=1), torch.ones(41), atol=1e-6)
    kernel_error = (prediction - target_function(x_query)).abs().mean()
    average_error = (y.mean() - target_function(x_query)).abs().mean()
    assert kernel_error < 0.3 < average_error


def test_a_huge_bandwidth_gives_the_plain_average_and_a_tiny_one_the_nearest_neighbour():
    x, y = make_regression_data(n=20, seed=3)
    wide, _ = nadaraya_watson(torch.tensor([1.0, 4.0]), x, y, bandwidth=1e4)
    assert torch.allclose(wide, y.mean().expand(2), atol=1e-4)
    narrow, _ = nadaraya_watson(x[5:6] + 1e-4, x, y, bandwidth=1e-3)
    assert narrow.item() == pytest.approx(y[5].item())


def test_the_inputs_are_not_modified_and_float64_works():
    x, y = make_regression_data(n=8)
    x, y = x.double(), y.double()
    x_before, y_before = x.clone(), y.clone()
    prediction, weights = nadaraya_watson(x, x, y)
    assert prediction.dtype == weights.dtype == torch.float64
    assert torch.equal(x, x_before) and torch.equal(y, y_before)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nadaraya_watson(torch.zeros(2, 1), torch.zeros(3), torch.zeros(3)), "x_query must be a 1-D"),
        (lambda: nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(4)), "same shape"),
        (lambda: nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(3), bandwidth=0), "bandwidth"),
        (lambda: nadaraya_watson(torch.zeros(2), torch.zeros(3), torch.zeros(3), bandwidth=math.inf), "bandwidth"),
        (lambda: gaussian_score(torch.zeros(1, 2, 2), torch.zeros(1, 3, 1)), r"queries must have shape \(B, T, 1\)"),
        (lambda: gaussian_score(torch.zeros(1, 2, 1), torch.zeros(3, 1)), r"keys must have shape \(B, S, 1\)"),
        (lambda: make_regression_data(n=0), "n must be at least 1"),
        (lambda: make_regression_data(noise=-1.0), "noise must be >= 0"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()
