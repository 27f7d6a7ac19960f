"""Checks of the assignment ``soft-hard`` (chapter 2): softmax, soft attention, hard attention.

The hidden cases are stratified: whatever the course seed, they include 1-D, 2-D, 3-D and 4-D
scores with every size at least 2, ``dim`` left out, 0, -1, a middle axis and a negative one,
float32 and float64, scores of about 1e4, ties and equal scores. So a softmax that always works
along ``dim=0``, a soft attention that normalises over the wrong axis, or hard attention weights in
float32 for float64 scores fail for every seed (tests/test_grading_reproducible.py checks it).

``soft_attention`` is judged on its own: while it runs, a call of ``softmax`` with the scaled scores
(to rounding) along the last axis gets the correct weights (see :class:`~attention_course.grading.cases.StandIn`),
so a bug or a shortcut in ``softmax`` costs ``softmax``'s points only.
"""

from __future__ import annotations

import torch

from attention_course import attention
from attention_course.grading.cases import Case, Check, StandIn
from attention_course.grading.checks._draw import describe, integer, normal

ASSIGNMENT = "soft-hard"


def _reference(case: Case):
    return getattr(attention, case.call)(*case.args, **case.kwargs)


def _sizes(g: torch.Generator, ndim: int, low: int = 2, high: int = 5) -> tuple[int, ...]:
    return tuple(integer(g, low, high) for _ in range(ndim))


def softmax_cases(g: torch.Generator) -> list[Case]:
    table = torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]])
    cases = [
        Case("test-softmax", "scores [1, 2, 3]", "softmax", (torch.tensor([1.0, 2.0, 3.0]),), hidden=False),
        Case("test-softmax", "scores [1e4, 0, -1e4]", "softmax", (torch.tensor([1e4, 0.0, -1e4]),), hidden=False),
        Case("test-softmax", "scores [[1, 2, 3], [1, 1, 4]], default dim (each row sums to 1)", "softmax", (table,),
             hidden=False),
        Case("test-softmax", "scores [[1, 2, 3], [1, 1, 4]], dim=0 (each column sums to 1)", "softmax", (table,),
             {"dim": 0}, hidden=False),
    ]
    # (dtype, number of dimensions, dim: None for the default)
    for dtype, ndim, dim in ((torch.float32, 2, None), (torch.float64, 3, 1), (torch.float32, 3, 0),
                             (torch.float64, 4, -2), (torch.float32, 1, 0), (torch.float64, 2, -1)):
        scores = normal(g, *_sizes(g, ndim, high=5 if ndim < 4 else 3), dtype=dtype, scale=3.0)
        kwargs = {} if dim is None else {"dim": dim}
        label = f"{describe(scores, 'scores')}, " + ("default dim" if dim is None else f"dim={dim}")
        cases.append(Case("test-softmax", label, "softmax", (scores,), kwargs))
    huge = normal(g, 3, 5, dtype=torch.float64, scale=1e4)
    cases.append(Case("test-softmax", f"{describe(huge, 'scores')} of size about 1e4", "softmax", (huge,)))
    huge32 = normal(g, 4, 3, dtype=torch.float32, scale=1e4)
    cases.append(Case("test-softmax", f"{describe(huge32, 'scores')} of size about 1e4, dim=0", "softmax", (huge32,),
                      {"dim": 0}))
    cases.append(Case("test-softmax", "equal scores of shape (2, 4), dim=0", "softmax",
                      (torch.zeros(2, 4, dtype=torch.float64),), {"dim": 0}))
    return cases


def _scores_and_values(g: torch.Generator, dtype, leading_dims: int) -> tuple[torch.Tensor, torch.Tensor]:
    leading = _sizes(g, leading_dims, 2, 4)
    keys, features = integer(g, 2, 6), integer(g, 1, 5)
    return normal(g, *leading, keys, dtype=dtype, scale=2.0), normal(g, *leading, keys, features, dtype=dtype)


def _soft_case(label: str, scores, values, temperature, hidden: bool = True) -> Case:
    kwargs = {} if temperature is None else {"temperature": temperature}
    scaled = scores / (1.0 if temperature is None else temperature)
    weights = attention.softmax(scaled, dim=-1)
    stand_in = StandIn("global", "softmax", ("scores", "dim"), (("dim", -1),),
                       (("close", scaled, 1e-5, 1e-7), ("last_dim",)), weights)
    return Case("test-soft-attention", label, "soft_attention", (scores, values), kwargs, stand_ins=(stand_in,),
                hidden=hidden)


def soft_attention_cases(g: torch.Generator) -> list[Case]:
    scores = torch.tensor([2.0, 1.0, 0.0])
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    batch_scores = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
    batch_values = torch.tensor([[[1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0]]])
    cases = [
        _soft_case("scores [2, 1, 0] over values [[1, 0], [0, 1], [1, 1]]", scores, values, None, hidden=False),
        _soft_case("a batch of two: scores [[2, 1, 0], [0, 3, 1]] (weights normalised over each row)",
                   batch_scores, batch_values, None, hidden=False),
    ]
    for dtype, leading_dims, temperature in ((torch.float32, 1, None), (torch.float64, 2, 0.5), (torch.float32, 2, 3.0),
                                             (torch.float64, 1, None), (torch.float64, 0, 2.0)):
        scores, values = _scores_and_values(g, dtype, leading_dims)
        label = f"{describe(scores, 'scores')}, {describe(values, 'values')}" + (
            f", temperature={temperature}" if temperature is not None else "")
        cases.append(_soft_case(label, scores, values, temperature))
    return cases


def hard_attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        Case("test-hard-attention", "scores [1, 3, 3] (a tie) over values [[1], [2], [3]]", "hard_attention",
             (torch.tensor([1.0, 3.0, 3.0]), torch.tensor([[1.0], [2.0], [3.0]])), hidden=False),
        Case("test-hard-attention", "float64 scores [[0, 5], [7, 1]]: float64 weights", "hard_attention",
             (torch.tensor([[0.0, 5.0], [7.0, 1.0]], dtype=torch.float64),
              torch.tensor([[[1.0], [2.0]], [[3.0], [4.0]]], dtype=torch.float64)), hidden=False),
    ]
    for dtype, leading_dims in ((torch.float32, 1), (torch.float64, 2), (torch.float64, 0)):
        scores, values = _scores_and_values(g, dtype, leading_dims)
        cases.append(Case("test-hard-attention", f"{describe(scores, 'scores')}, {describe(values, 'values')}",
                          "hard_attention", (scores, values)))
    # Ties everywhere: scores rounded to few distinct values, so the first maximum must win.
    scores, values = _scores_and_values(g, torch.float64, 2)
    tied = scores.round().clamp(-1, 1)
    cases.append(Case("test-hard-attention", f"{describe(tied, 'scores')} with ties", "hard_attention", (tied, values)))
    return cases


CHECKS = [
    Check("test-softmax", 4, "softmax is correct, numerically stable, and works along any dim", softmax_cases, _reference),
    Check("test-soft-attention", 3, "soft_attention returns the weighted sum and the softmax weights (over the last "
          "axis, the keys) at any temperature", soft_attention_cases, _reference),
    Check("test-hard-attention", 3, "hard_attention picks the first highest-scoring key and returns its value, with "
          "one-hot weights of the scores' dtype", hard_attention_cases, _reference),
]
