"""The reference implementations of attention agree with PyTorch, with hand-checked numbers, and with the
contract that solutions, tests and the grader share (DESIGN.md, "Graded functions")."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_course.attention import (
    AdditiveScore,
    attention,
    cosine_score,
    dot_score,
    hard_attention,
    masked_softmax,
    scaled_dot_score,
    soft_attention,
    softmax,
)

DTYPES = [torch.float32, torch.float64]
# Tolerances per dtype for comparisons with PyTorch's own (differently ordered) arithmetic.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def randn(*shape: int, dtype: torch.dtype = torch.float64, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def seeded_additive_score(query_dim: int, key_dim: int, hidden_dim: int, dtype=torch.float64):
    """An AdditiveScore with weights from a local generator, so that no test depends on the global seed."""
    module = AdditiveScore(query_dim, key_dim, hidden_dim).to(dtype)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=dtype))
    return module


def lengths_mask(valid_lens: torch.Tensor, num_queries: int, num_keys: int) -> torch.Tensor:
    """The boolean mask (B, Q, K) that scaled_dot_product_attention takes: True where a key takes part."""
    if valid_lens.ndim == 1:
        valid_lens = valid_lens[:, None].expand(-1, num_queries)
    return torch.arange(num_keys) < valid_lens[..., None]


def qkv(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """queries (3, 4, 8), keys (3, 6, 8), values (3, 6, 5)."""
    queries, keys = randn(3, 4, 8, dtype=dtype), randn(3, 6, 8, dtype=dtype, seed=1)
    return queries, keys, randn(3, 6, 5, dtype=dtype, seed=2)


# --- softmax -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_agrees_with_torch_on_random_scores(dtype, dim):
    scores = 3 * randn(4, 5, 6, dtype=dtype)
    weights = softmax(scores, dim=dim)
    assert weights.dtype == dtype
    torch.testing.assert_close(weights, torch.softmax(scores, dim=dim), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_is_finite_and_correct_for_huge_scores(dtype):
    scores = torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4, -1e4], [-1e4, -1e4 + 1, -1e4]], dtype=dtype)
    weights = softmax(scores)
    assert torch.isfinite(weights).all()
    torch.testing.assert_close(weights, torch.softmax(scores, dim=-1), **TOL[dtype])
    torch.testing.assert_close(weights[:2], torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]], dtype=dtype))


def test_softmax_gives_zero_weight_to_minus_infinity_and_zeros_for_an_all_minus_infinity_row():
    inf = math.inf
    scores = torch.tensor([[0.0, -inf, 0.0], [-inf, -inf, -inf]])
    weights = softmax(scores)
    assert torch.equal(weights, torch.tensor([[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]]))


def test_softmax_has_finite_gradients_even_for_an_all_minus_infinity_row():
    scores = torch.tensor([[1.0, 2.0, -math.inf], [-math.inf, -math.inf, -math.inf]], requires_grad=True)
    (softmax(scores) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert torch.isfinite(scores.grad).all()


# --- soft and hard attention ---------------------------------------------------------------------


def test_soft_attention_matches_a_hand_computed_example():
    # exp(0) : exp(ln 3) = 1 : 3, so the weights are 1/4 and 3/4.
    scores = torch.tensor([0.0, math.log(3.0)])
    values = torch.tensor([[4.0, 0.0], [0.0, 8.0]])
    output, weights = soft_attention(scores, values)
    torch.testing.assert_close(weights, torch.tensor([0.25, 0.75]))
    torch.testing.assert_close(output, torch.tensor([1.0, 6.0]))
    # Temperature 2 halves the scores: doubling them first gives the same weights.
    output, weights = soft_attention(2 * scores, values, temperature=2.0)
    torch.testing.assert_close(weights, torch.tensor([0.25, 0.75]))
    torch.testing.assert_close(output, torch.tensor([1.0, 6.0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_soft_attention_on_batches_is_a_softmax_weighted_sum(dtype):
    scores, values = randn(2, 3, 5, dtype=dtype), randn(2, 3, 5, 4, dtype=dtype, seed=1)
    output, weights = soft_attention(scores, values, temperature=0.7)
    assert output.shape == (2, 3, 4) and weights.shape == (2, 3, 5)
    assert output.dtype == weights.dtype == dtype
    expected_weights = torch.softmax(scores / 0.7, dim=-1)
    torch.testing.assert_close(weights, expected_weights, **TOL[dtype])
    torch.testing.assert_close(output, torch.einsum("bqk,bqkd->bqd", expected_weights, values), **TOL[dtype])


def test_soft_attention_lets_gradients_reach_every_score():
    scores = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    values = torch.tensor([[1.0], [2.0], [-3.0]])
    soft_attention(scores, values)[0].sum().backward()
    assert (scores.grad != 0).all()


def test_a_small_temperature_makes_soft_attention_approach_hard_attention():
    scores = torch.tensor([0.3, 1.2, -0.5, 1.0], dtype=torch.float64)
    values = randn(4, 3)
    hard_output, hard_weights = hard_attention(scores, values)
    distances = [
        (soft_attention(scores, values, temperature=t)[0] - hard_output).abs().max().item()
        for t in (1.0, 0.1, 0.01)
    ]
    assert distances[0] > distances[1] > distances[2]
    output, weights = soft_attention(scores, values, temperature=0.01)
    torch.testing.assert_close(weights, hard_weights, rtol=0, atol=1e-8)
    torch.testing.assert_close(output, hard_output, rtol=0, atol=1e-7)


def test_a_large_temperature_makes_soft_attention_the_plain_average():
    scores, values = randn(6), randn(6, 3, seed=1)
    output, weights = soft_attention(scores, values, temperature=1e9)
    torch.testing.assert_close(weights, torch.full((6,), 1 / 6, dtype=torch.float64))
    torch.testing.assert_close(output, values.mean(dim=0))


@pytest.mark.parametrize("temperature", [0.0, -1.0, math.nan])
def test_soft_attention_rejects_a_temperature_that_is_not_positive(temperature):
    with pytest.raises(ValueError, match="temperature"):
        soft_attention(torch.zeros(3), torch.zeros(3, 2), temperature=temperature)


def test_hard_attention_picks_the_first_index_on_ties():
    scores = torch.tensor([1.0, 3.0, 3.0, 2.0])
    values = torch.tensor([[10.0], [20.0], [30.0], [40.0]])
    output, weights = hard_attention(scores, values)
    assert torch.equal(weights, torch.tensor([0.0, 1.0, 0.0, 0.0]))
    assert torch.equal(output, torch.tensor([20.0]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_hard_attention_copies_the_value_with_the_highest_score(dtype):
    scores, values = randn(2, 3, 5, dtype=dtype), randn(2, 3, 5, 4, dtype=dtype, seed=1)
    output, weights = hard_attention(scores, values)
    assert weights.dtype == output.dtype == dtype
    assert torch.equal(weights, F.one_hot(scores.argmax(-1), 5).to(dtype))
    chosen = scores.argmax(-1)[..., None, None].expand(2, 3, 1, 4)
    assert torch.equal(output, values.gather(-2, chosen).squeeze(-2))


# --- scores --------------------------------------------------------------------------------------

QUERIES = torch.tensor([[[1.0, 2.0]]])  # (B=1, Q=1, d=2)
KEYS = torch.tensor([[[3.0, 4.0], [1.0, 0.0], [-2.0, 1.0]]])  # (B=1, K=3, d=2)


def test_dot_score_on_a_hand_checkable_example():
    # 1*3 + 2*4 = 11, 1*1 + 2*0 = 1, 1*(-2) + 2*1 = 0
    assert torch.equal(dot_score(QUERIES, KEYS), torch.tensor([[[11.0, 1.0, 0.0]]]))


def test_scaled_dot_score_divides_by_the_square_root_of_d():
    expected = torch.tensor([[[11.0, 1.0, 0.0]]]) / math.sqrt(2)
    torch.testing.assert_close(scaled_dot_score(QUERIES, KEYS), expected)


def test_cosine_score_on_a_hand_checkable_example():
    # |q| = sqrt(5); |k| = 5, 1, sqrt(5)
    expected = torch.tensor([[[11 / (5 * math.sqrt(5)), 1 / math.sqrt(5), 0.0]]])
    torch.testing.assert_close(cosine_score(QUERIES, KEYS), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scores_agree_with_torch_on_random_batches(dtype):
    queries, keys = randn(2, 3, 4, dtype=dtype), randn(2, 5, 4, dtype=dtype, seed=1)
    dots = torch.einsum("bqd,bkd->bqk", queries, keys)
    for score in (dot_score(queries, keys), scaled_dot_score(queries, keys), cosine_score(queries, keys)):
        assert score.shape == (2, 3, 5) and score.dtype == dtype
    torch.testing.assert_close(dot_score(queries, keys), dots, **TOL[dtype])
    torch.testing.assert_close(scaled_dot_score(queries, keys), dots / 2, **TOL[dtype])
    cosines = F.cosine_similarity(queries[:, :, None, :], keys[:, None, :, :], dim=-1)
    torch.testing.assert_close(cosine_score(queries, keys), cosines, **TOL[dtype])


def test_cosine_score_of_a_zero_vector_is_exactly_zero():
    queries = torch.tensor([[[0.0, 0.0], [1.0, 1.0]]])
    keys = torch.tensor([[[1.0, 2.0], [0.0, 0.0]]])
    scores = cosine_score(queries, keys)
    assert not scores.isnan().any()
    assert torch.equal(scores[0, 0], torch.zeros(2))  # zero query
    assert torch.equal(scores[0, :, 1], torch.zeros(2))  # zero key
    torch.testing.assert_close(scores[0, 1, 0], torch.tensor(3 / math.sqrt(10)))


def test_additive_score_has_the_documented_parameters():
    module = AdditiveScore(query_dim=3, key_dim=4, hidden_dim=6)
    assert isinstance(module, torch.nn.Module)
    assert isinstance(module.W_q, torch.nn.Linear) and module.W_q.weight.shape == (6, 3)
    assert isinstance(module.W_k, torch.nn.Linear) and module.W_k.weight.shape == (6, 4)
    assert isinstance(module.w_v, torch.nn.Linear) and module.w_v.weight.shape == (1, 6)
    assert module.W_q.bias is None and module.W_k.bias is None and module.w_v.bias is None
    assert sum(p.numel() for p in module.parameters()) == 6 * 3 + 6 * 4 + 6


def test_additive_score_is_w_v_tanh_of_the_projected_query_plus_the_projected_key():
    module = seeded_additive_score(query_dim=3, key_dim=4, hidden_dim=6)
    queries, keys = randn(2, 3, 3), randn(2, 5, 4, seed=1)
    scores = module(queries, keys)
    assert scores.shape == (2, 3, 5) and scores.dtype == torch.float64
    W_q, W_k, w_v = module.W_q.weight, module.W_k.weight, module.w_v.weight[0]
    for b in range(2):
        for i in range(3):
            for j in range(5):
                expected = w_v @ torch.tanh(W_q @ queries[b, i] + W_k @ keys[b, j])
                torch.testing.assert_close(scores[b, i, j], expected)


def test_additive_score_passes_gradients_to_its_parameters_and_inputs():
    module = seeded_additive_score(query_dim=3, key_dim=4, hidden_dim=6)
    queries = randn(2, 3, 3).requires_grad_()
    keys = randn(2, 5, 4, seed=1).requires_grad_()
    output, _ = attention(queries, keys, randn(2, 5, 2, seed=2), module)
    output.square().sum().backward()
    for name, tensor in [*module.named_parameters(), ("queries", queries), ("keys", keys)]:
        assert tensor.grad is not None and tensor.grad.abs().sum() > 0, name


def test_additive_score_works_in_float32_and_float64():
    queries, keys = randn(2, 3, 3, dtype=torch.float32), randn(2, 5, 4, dtype=torch.float32, seed=1)
    module = AdditiveScore(3, 4, 6)
    assert module(queries, keys).dtype == torch.float32
    assert module.double()(queries.double(), keys.double()).dtype == torch.float64


# --- masking -------------------------------------------------------------------------------------


def test_masked_softmax_gives_exactly_zero_beyond_each_valid_length():
    scores = randn(3, 2, 5)
    valid_lens = torch.tensor([2, 5, 1])
    weights = masked_softmax(scores, valid_lens)
    for b, length in enumerate(valid_lens.tolist()):
        assert torch.equal(weights[b, :, length:], torch.zeros(2, 5 - length, dtype=torch.float64))
        torch.testing.assert_close(weights[b, :, :length], torch.softmax(scores[b, :, :length], dim=-1))


def test_masked_softmax_ignores_whatever_the_masked_scores_are():
    scores = randn(2, 3, 4)
    valid_lens = torch.tensor([2, 3])
    garbage = scores.clone()
    garbage[0, :, 2:] = 1e6
    garbage[1, :, 3:] = math.nan
    assert torch.equal(masked_softmax(garbage, valid_lens), masked_softmax(scores, valid_lens))


def test_masked_softmax_row_with_valid_length_zero_is_all_zeros_with_finite_gradients():
    scores = randn(2, 3, 4).requires_grad_()
    weights = masked_softmax(scores, torch.tensor([0, 3]))
    assert torch.equal(weights[0], torch.zeros(3, 4, dtype=torch.float64))
    assert not weights.isnan().any()
    (weights * randn(2, 3, 4, seed=1)).sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_masked_softmax_takes_one_length_per_sequence_or_one_per_query():
    scores = randn(2, 3, 4)
    per_sequence = torch.tensor([1, 3])
    per_query = torch.tensor([[1, 1, 1], [3, 3, 3]])
    assert torch.equal(masked_softmax(scores, per_sequence), masked_softmax(scores, per_query))
    different = masked_softmax(scores, torch.tensor([[1, 2, 4], [0, 3, 2]]))
    nonzero_per_row = (different > 0).sum(-1)
    assert torch.equal(nonzero_per_row, torch.tensor([[1, 2, 4], [0, 3, 2]]))


def test_masked_softmax_without_lengths_is_the_plain_softmax():
    scores = randn(2, 3, 4)
    torch.testing.assert_close(masked_softmax(scores), torch.softmax(scores, dim=-1), **TOL[torch.float64])
    torch.testing.assert_close(masked_softmax(scores, None), softmax(scores), **TOL[torch.float64])


# --- attention: the three stages -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_with_scaled_dot_scores_agrees_with_scaled_dot_product_attention(dtype):
    queries, keys, values = qkv(dtype)
    output, weights = attention(queries, keys, values, scaled_dot_score)
    assert output.shape == (3, 4, 5) and weights.shape == (3, 4, 6)
    assert output.dtype == weights.dtype == dtype
    torch.testing.assert_close(output, F.scaled_dot_product_attention(queries, keys, values), **TOL[dtype])
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, dtype=dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "valid_lens",
    [torch.tensor([1, 6, 3]), torch.tensor([[1, 2, 6, 4], [6, 5, 4, 3], [2, 2, 1, 1]])],
    ids=["per-sequence (B,)", "per-query (B,Q)"],
)
def test_masked_attention_agrees_with_scaled_dot_product_attention_and_a_boolean_mask(dtype, valid_lens):
    queries, keys, values = qkv(dtype)
    mask = lengths_mask(valid_lens, num_queries=4, num_keys=6)
    expected = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)
    output, weights = attention(queries, keys, values, scaled_dot_score, valid_lens)
    torch.testing.assert_close(output, expected, **TOL[dtype])
    assert torch.equal(weights == 0, ~mask)


def test_attention_with_additive_scores_accepts_queries_and_keys_of_different_sizes():
    module = seeded_additive_score(query_dim=3, key_dim=4, hidden_dim=6)
    queries, keys, values = randn(2, 3, 3), randn(2, 5, 4, seed=1), randn(2, 5, 2, seed=2)
    output, weights = attention(queries, keys, values, module, torch.tensor([2, 5]))
    torch.testing.assert_close(weights, masked_softmax(module(queries, keys), torch.tensor([2, 5])))
    torch.testing.assert_close(output, weights @ values)


def test_attention_output_for_a_query_with_no_valid_key_is_zero():
    queries, keys, values = randn(2, 3, 4), randn(2, 5, 4, seed=1), randn(2, 5, 2, seed=2)
    output, _ = attention(queries, keys, values, dot_score, torch.tensor([0, 2]))
    assert torch.equal(output[0], torch.zeros(3, 2, dtype=torch.float64))
    assert not output.isnan().any()


# --- the contract every graded function keeps ----------------------------------------------------


def _calls(dtype: torch.dtype):
    """One call of every public function, on fresh inputs: (name, function, args)."""
    q, k = randn(2, 3, 4, dtype=dtype), randn(2, 5, 4, dtype=dtype, seed=1)
    v = randn(2, 5, 6, dtype=dtype, seed=2)
    scores = randn(2, 3, 5, dtype=dtype, seed=3)
    additive = seeded_additive_score(4, 4, 7, dtype=dtype)
    return [
        ("softmax", softmax, (scores,)),
        ("soft_attention", soft_attention, (scores, randn(2, 3, 5, 6, dtype=dtype, seed=4), 0.5)),
        ("hard_attention", hard_attention, (scores, randn(2, 3, 5, 6, dtype=dtype, seed=4))),
        ("dot_score", dot_score, (q, k)),
        ("scaled_dot_score", scaled_dot_score, (q, k)),
        ("cosine_score", cosine_score, (q, k)),
        ("AdditiveScore", additive, (q, k)),
        ("masked_softmax", masked_softmax, (scores, torch.tensor([2, 0]))),
        ("attention", attention, (q, k, v, scaled_dot_score, torch.tensor([[1, 2, 3], [5, 4, 0]]))),
    ]


def _outputs(result) -> list:
    return list(result) if isinstance(result, tuple) else [result]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_function_leaves_its_inputs_unchanged(dtype):
    for name, function, args in _calls(dtype):
        before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        function(*args)
        for original, after in zip(before, args):
            if isinstance(original, torch.Tensor):
                assert torch.equal(original, after), name


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_function_returns_plain_tensors_of_the_input_dtype(dtype):
    for name, function, args in _calls(dtype):
        for output in _outputs(function(*args)):
            assert type(output) is torch.Tensor, name
            assert output.dtype == dtype, name
            assert not output.isnan().any(), name


def test_outputs_are_plain_tensors_even_for_parameter_inputs():
    values = torch.nn.Parameter(randn(5, 3))
    scores = torch.nn.Parameter(randn(5, seed=1))
    for output in (*soft_attention(scores, values), *hard_attention(scores, values), softmax(scores)):
        assert type(output) is torch.Tensor


def test_the_module_computes_its_softmax_itself(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the reference implementation must not call a library softmax")

    monkeypatch.setattr(torch, "softmax", forbidden)
    monkeypatch.setattr(F, "softmax", forbidden)
    monkeypatch.setattr(torch.Tensor, "softmax", forbidden)
    for _, function, args in _calls(torch.float64):
        function(*args)


# --- bad input: a ValueError that names the argument and the shapes it got -------------------------

X3 = torch.zeros(2, 3, 4)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: soft_attention(torch.zeros(3), torch.zeros(4, 2)), r"scores and values.*\(3,\).*\(4, 2\)"),
        (lambda: soft_attention(torch.zeros(3), torch.zeros(3)), r"values.*\(3,\)"),
        (lambda: soft_attention(torch.tensor(1.0), torch.zeros(1, 2)), r"scores.*\(\)"),
        (lambda: soft_attention(torch.zeros(2, 3), torch.zeros(4, 3, 2)), r"leading.*\(2, 3\).*\(4, 3, 2\)"),
        (lambda: hard_attention(torch.zeros(2, 3), torch.zeros(2, 4, 5)), r"scores and values.*\(2, 4, 5\)"),
        (lambda: dot_score(torch.zeros(3, 4), X3), r"queries.*\(3, 4\)"),
        (lambda: dot_score(X3, torch.zeros(1, 2, 3, 4)), r"keys.*\(1, 2, 3, 4\)"),
        (lambda: dot_score(X3, torch.zeros(5, 3, 4)), r"batch size.*\(2, 3, 4\).*\(5, 3, 4\)"),
        (lambda: scaled_dot_score(X3, torch.zeros(2, 3, 5)), r"feature size.*\(2, 3, 4\).*\(2, 3, 5\)"),
        (lambda: cosine_score(X3, torch.zeros(2, 3, 5)), r"feature size.*\(2, 3, 4\).*\(2, 3, 5\)"),
        (lambda: cosine_score(X3, X3, eps=0.0), r"eps"),
        (lambda: AdditiveScore(4, 5, 6)(X3, torch.zeros(2, 3, 4)), r"keys.*key_dim = 5.*\(2, 3, 4\)"),
        (lambda: AdditiveScore(5, 4, 6)(X3, X3), r"queries.*query_dim = 5.*\(2, 3, 4\)"),
        (lambda: AdditiveScore(4, 4, 6)(torch.zeros(3, 4), X3), r"queries.*\(3, 4\)"),
        (lambda: masked_softmax(torch.zeros(3, 4)), r"scores.*\(3, 4\)"),
        (lambda: masked_softmax(X3, torch.tensor([1, 2, 3])), r"valid_lens.*\(3,\)"),
        (lambda: masked_softmax(X3, torch.ones(2, 4)), r"valid_lens.*\(2, 4\)"),
        (lambda: masked_softmax(X3, torch.ones(2, 3, 1)), r"valid_lens.*\(2, 3, 1\)"),
        (lambda: attention(X3, X3, torch.zeros(2, 4, 6), dot_score), r"keys and values.*K.*\(2, 4, 6\)"),
        (lambda: attention(X3, X3, torch.zeros(3, 3, 6), dot_score), r"keys and values.*B.*\(3, 3, 6\)"),
        (lambda: attention(X3, X3, torch.zeros(3, 6), dot_score), r"values.*\(3, 6\)"),
        (lambda: attention(X3, torch.zeros(4, 3, 4), X3, dot_score), r"queries and keys.*B.*\(4, 3, 4\)"),
        (lambda: attention(X3, X3, X3, lambda q, k: q), r"score_fn.*\(2, 3, 3\).*\(2, 3, 4\)"),
        (lambda: attention(X3, X3, X3, dot_score, torch.ones(3)), r"valid_lens.*\(3,\)"),
    ],
)
def test_bad_shapes_raise_a_value_error_that_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_an_input_that_is_not_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="scores"):
        softmax([1.0, 2.0])
    with pytest.raises(TypeError, match="valid_lens"):
        masked_softmax(X3, [1, 2])
