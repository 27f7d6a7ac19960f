"""Checks of the assignment ``soft-hard`` (chapter 2): softmax, soft attention, hard attention."""

from __future__ import annotations

import torch

from attention_course import attention
from attention_course.grading.cases import Case, Check
from attention_course.grading.checks._draw import describe, integer, normal, shape

ASSIGNMENT = "soft-hard"


def _reference(case: Case):
    return getattr(attention, case.call)(*case.args, **case.kwargs)


def softmax_cases(g: torch.Generator) -> list[Case]:
    cases = [
        Case("test-softmax", "scores [1, 2, 3]", "softmax", (torch.tensor([1.0, 2.0, 3.0]),), hidden=False),
        Case("test-softmax", "scores [1e4, 0, -1e4]", "softmax", (torch.tensor([1e4, 0.0, -1e4]),), hidden=False),
    ]
    for dtype in (torch.float32, torch.float64):
        size = shape(g, 1, 4)
        scores = normal(g, *size, dtype=dtype, scale=3.0)
        dim = integer(g, -len(size), len(size) - 1)
        cases.append(Case("test-softmax", f"{describe(scores, 'scores')}, dim={dim}", "softmax", (scores,), {"dim": dim}))
        cases.append(Case("test-softmax", f"{describe(scores, 'scores')}, default dim", "softmax", (scores,)))
    huge = normal(g, 3, 5, dtype=torch.float64, scale=1e4)
    cases.append(Case("test-softmax", f"{describe(huge, 'scores')} of size about 1e4", "softmax", (huge,)))
    cases.append(Case("test-softmax", "equal scores", "softmax", (torch.zeros(2, 4, dtype=torch.float64),), {"dim": 0}))
    return cases


def _scores_and_values(g: torch.Generator, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    leading = shape(g, 0, 2, 1, 4)
    keys, features = integer(g, 1, 6), integer(g, 1, 5)
    return normal(g, *leading, keys, dtype=dtype, scale=2.0), normal(g, *leading, keys, features, dtype=dtype)


def soft_attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        Case("test-soft-attention", "scores [2, 1, 0] over values [[1, 0], [0, 1], [1, 1]]", "soft_attention",
             (torch.tensor([2.0, 1.0, 0.0]), torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])), hidden=False),
    ]
    for dtype, temperature in ((torch.float32, None), (torch.float64, 0.5), (torch.float32, 3.0), (torch.float64, None)):
        scores, values = _scores_and_values(g, dtype)
        kwargs = {} if temperature is None else {"temperature": temperature}
        label = f"{describe(scores, 'scores')}, {describe(values, 'values')}" + (f", temperature={temperature}" if kwargs else "")
        cases.append(Case("test-soft-attention", label, "soft_attention", (scores, values), kwargs))
    return cases


def hard_attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        Case("test-hard-attention", "scores [1, 3, 3] (a tie) over values [[1], [2], [3]]", "hard_attention",
             (torch.tensor([1.0, 3.0, 3.0]), torch.tensor([[1.0], [2.0], [3.0]])), hidden=False),
    ]
    for dtype in (torch.float32, torch.float64):
        scores, values = _scores_and_values(g, dtype)
        cases.append(Case("test-hard-attention", f"{describe(scores, 'scores')}, {describe(values, 'values')}",
                          "hard_attention", (scores, values)))
    # Ties everywhere: scores rounded to few distinct values, so the first maximum must win.
    scores, values = _scores_and_values(g, torch.float64)
    tied = scores.round().clamp(-1, 1)
    cases.append(Case("test-hard-attention", f"{describe(tied, 'scores')} with ties", "hard_attention", (tied, values)))
    return cases


CHECKS = [
    Check("test-softmax", 4, "softmax is correct, numerically stable, and works along any dim", softmax_cases, _reference),
    Check("test-soft-attention", 3, "soft_attention returns the weighted sum and the softmax weights at any temperature",
          soft_attention_cases, _reference),
    Check("test-hard-attention", 3, "hard_attention picks the first highest-scoring key and returns its value",
          hard_attention_cases, _reference),
]
