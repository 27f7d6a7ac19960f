"""Checks of the assignment ``soft-hard`` (chapter 2): softmax, soft attention, hard attention.

The hidden cases are stratified: whatever the course seed, they include 1-D, 2-D, 3-D and 4-D
scores with every size at least 2, ``dim`` left out, 0, -1, a middle axis and a negative one,
float32 and float64, scores of about 1e4, ties and equal scores. So a softmax that always works
along ``dim=0``, a soft attention that normalises over the wrong axis, or hard attention weights in
float32 for float64 scores fail for every seed (tests/test_grading_reproducible.py checks it).

``soft_attention`` is judged on its own: while it runs, a call of ``softmax`` with the scaled scores
(to rounding) along the last axis gets the correct weights (see :class:`~attention_course.grading.cases.StandIn`),
so a bug or a shortcut in ``softmax`` costs ``softmax``'s points only.

The new work (the book names it, never prints it; ``new=True``), with its references here:

- ``sample_hard_attention(scores, values, uniform)``: the Gumbel-max trick, a hard choice *sampled* with
  the probabilities softmax(scores), made deterministic by passing the uniform noise in. Hidden noise is
  drawn so that no two perturbed scores are within 1e-3 of the top one (no rounding can flip the choice),
  and one case ties every key. ``hard_attention`` has a stand-in for the perturbed scores.
- ``straight_through_attention(scores, values, temperature)``: the forward pass of hard attention, the
  backward pass of soft attention at the temperature. Its cases are gradient cases: the runner
  back-propagates random output gradients inside the sandbox and sends the gradients of the scores and the
  values back; they are judged against the reference's, computed here. Its stand-ins (``softmax``,
  ``soft_attention``, ``hard_attention``) carry the correct gradient (``StandIn.derivatives``), so a student
  who builds it on their own parts is charged for a bug in them only once, in their own test.
"""

from __future__ import annotations

import torch

from attention_course import attention
from attention_course.grading.cases import Case, Check, StandIn
from attention_course.grading.checks._draw import describe, integer, normal
from attention_course.grading.verdicts import compare, rebuild

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
        _soft_case("scores [2, 1, 0] at temperature 0.01 (nearly hard attention)", scores, values, 0.01, hidden=False),
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


# ---------------------------------------------------------------------------------------------
# New work: sampling a hard choice (Gumbel-max), and the straight-through estimator.


def gumbel(uniform: torch.Tensor) -> torch.Tensor:
    """Gumbel noise -log(-log u) from uniform noise u in (0, 1)."""
    return -torch.log(-torch.log(uniform))


def sample_hard_attention_reference(scores, values, uniform):
    """The Gumbel-max trick: hard attention on scores + Gumbel noise picks key k with probability softmax(scores)_k."""
    return attention.hard_attention(scores + gumbel(uniform), values)


def straight_through_reference(scores, values, temperature=1.0):
    """Straight-through hard attention: one-hot weights forward, the gradient of softmax(scores / temperature) backward."""
    soft = attention.softmax(scores / temperature, dim=-1)
    weights = attention.hard_attention(scores, values)[1] + soft - soft.detach()
    return torch.einsum("...k,...kd->...d", weights, values), weights


def _uniform(g: torch.Generator, scores: torch.Tensor, gap: float = 1e-3) -> torch.Tensor:
    """Uniform noise in [0.001, 0.999] for which every row's best perturbed score leads the next by ``gap``."""
    while True:
        uniform = (0.001 + 0.998 * torch.rand(scores.shape, generator=g, dtype=torch.float64)).to(scores.dtype)
        top2 = (scores.double() + gumbel(uniform.double())).topk(2, dim=-1).values
        if bool((top2[..., 0] - top2[..., 1] > gap).all()):
            return uniform


def _sample_case(label: str, scores, values, uniform, hidden: bool = True) -> Case:
    perturbed = scores + gumbel(uniform)
    stand_in = StandIn("global", "hard_attention", ("scores", "values"), (),
                       (("close", perturbed, 1e-5, 1e-6), ("equal", values)), attention.hard_attention(perturbed, values))
    return Case("test-sample-hard-attention", label, "sample_hard_attention", (scores, values, uniform),
                stand_ins=(stand_in,), hidden=hidden)


def sample_hard_attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _sample_case("equal scores [0, 0, 0], uniform [0.2, 0.9, 0.5]: key 1 has the largest noise",
                     torch.zeros(3), torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([0.2, 0.9, 0.5]), hidden=False),
        _sample_case("scores [2, 0, -1], uniform [0.3, 0.95, 0.5]: the noise beats the scores",
                     torch.tensor([2.0, 0.0, -1.0]), torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
                     torch.tensor([0.3, 0.95, 0.5]), hidden=False),
    ]
    for dtype, leading_dims in ((torch.float32, 1), (torch.float64, 2), (torch.float32, 0), (torch.float64, 1)):
        scores, values = _scores_and_values(g, dtype, leading_dims)
        uniform = _uniform(g, scores)
        cases.append(_sample_case(f"{describe(scores, 'scores')}, {describe(values, 'values')}, uniform noise",
                                  scores, values, uniform))
    # Many rows over few keys: the noise, not the scores, decides most of them.
    scores, values = normal(g, 12, 3, dtype=torch.float64, scale=0.3), normal(g, 12, 3, 2, dtype=torch.float64)
    cases.append(_sample_case(f"{describe(scores, 'scores')} close together, uniform noise", scores, values,
                              _uniform(g, scores)))
    # Every key ties (equal scores, equal noise): the first wins, as in hard_attention.
    scores, values = torch.zeros(2, 4, dtype=torch.float64), normal(g, 2, 4, 3, dtype=torch.float64)
    cases.append(_sample_case("equal scores and equal noise 0.5 of shape (2, 4): a tie everywhere", scores, values,
                              torch.full((2, 4), 0.5, dtype=torch.float64)))
    return cases


def _rowwise(blocks: torch.Tensor, lead: tuple, out_shape: tuple, in_shape: tuple) -> torch.Tensor:
    """The Jacobian (lead + out_shape + lead + in_shape) of a function applied row by row, from its blocks
    (rows, out, in): zero between different rows."""
    rows = blocks.shape[0]
    full = torch.zeros(rows, blocks.shape[1], rows, blocks.shape[2], dtype=blocks.dtype)
    every = torch.arange(rows)
    full[every, :, every, :] = blocks
    return full.reshape(*lead, *out_shape, *lead, *in_shape)


def _softmax_blocks(weights: torch.Tensor) -> torch.Tensor:
    """d softmax / d scores per row: diag(a) - a a^T, (rows, K, K)."""
    a = weights.reshape(-1, weights.shape[-1])
    return torch.diag_embed(a) - a[:, :, None] * a[:, None, :]


def _value_blocks(weights: torch.Tensor, features: int) -> torch.Tensor:
    """d (sum_k w_k v_k) / d values per row: w_k for the same feature, (rows, d, K * d)."""
    w = weights.reshape(-1, weights.shape[-1])
    eye = torch.eye(features, dtype=w.dtype)
    return torch.einsum("nk,de->ndke", w, eye).reshape(w.shape[0], features, -1)


def _straight_through_case(label: str, scores, values, temperature, g: torch.Generator, hidden: bool = True,
                           grad_outputs: tuple | None = None) -> Case:
    tau = 1.0 if temperature is None else temperature
    kwargs = {} if temperature is None else {"temperature": temperature}
    scaled = scores / tau
    weights = attention.softmax(scaled, dim=-1)
    soft_answer = attention.soft_attention(scores, values, tau)
    hard_answer = attention.hard_attention(scores, values)
    # The Jacobians the stand-ins' answers carry (StandIn.derivatives), row by row over the leading axes.
    lead, (keys, features) = tuple(scores.shape[:-1]), values.shape[-2:]
    d_weights = _softmax_blocks(weights)  # d softmax(x) / d x
    d_output = torch.einsum("nkd,nkj->ndj", values.reshape(-1, keys, features), d_weights) / tau
    stand_ins = (
        StandIn("global", "softmax", ("scores", "dim"), (("dim", -1),), (("close", scaled, 1e-5, 1e-7), ("last_dim",)),
                weights, derivatives=((0, "scores", _rowwise(d_weights, lead, (keys,), (keys,))),)),
        StandIn("global", "soft_attention", ("scores", "values", "temperature"), (("temperature", 1.0),),
                (("close", scores, 1e-6, 1e-7), ("equal", values), ("scalar", tau)), soft_answer,
                derivatives=((0, "scores", _rowwise(d_output, lead, (features,), (keys,))),
                             (0, "values", _rowwise(_value_blocks(weights, features), lead, (features,), (keys, features))),
                             (1, "scores", _rowwise(d_weights / tau, lead, (keys,), (keys,))))),
        StandIn("global", "hard_attention", ("scores", "values"), (), (("close", scores, 1e-6, 1e-7), ("equal", values)),
                hard_answer, derivatives=((0, "values", _rowwise(_value_blocks(hard_answer[1], features), lead,
                                                                  (features,), (keys, features))),)),
    )
    if grad_outputs is None:
        grad_outputs = (normal(g, *soft_answer[0].shape, dtype=scores.dtype), normal(g, *scores.shape, dtype=scores.dtype))
    return Case("test-straight-through", label, "straight_through_attention", (scores, values), kwargs,
                stand_ins=stand_ins, hidden=hidden, grad_args=(0, 1), grad_outputs=grad_outputs)


def straight_through_cases(g: torch.Generator) -> list[Case]:
    scores = torch.tensor([2.0, 1.0, 0.0])
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    cases = [
        _straight_through_case("scores [2, 1, 0] over values [[1, 0], [0, 1], [1, 1]], output gradient [1, 0]",
                               scores, values, None, g, hidden=False,
                               grad_outputs=(torch.tensor([1.0, 0.0]), torch.zeros(3))),
        _straight_through_case("scores [2, 1, 0], temperature 0.5, weight gradient [1, 0, 0]", scores, values, 0.5, g,
                               hidden=False, grad_outputs=(torch.zeros(2), torch.tensor([1.0, 0.0, 0.0]))),
    ]
    for dtype, leading_dims, temperature in ((torch.float32, 1, None), (torch.float64, 2, 0.5), (torch.float64, 0, 2.0),
                                             (torch.float32, 1, 3.0), (torch.float64, 1, None)):
        scores, values = _scores_and_values(g, dtype, leading_dims)
        label = f"{describe(scores, 'scores')}, {describe(values, 'values')}" + (
            f", temperature={temperature}" if temperature is not None else "") + ", random output gradients"
        cases.append(_straight_through_case(label, scores, values, temperature, g))
    # Ties: the forward pass picks the first maximum; the backward pass is still the soft one.
    scores, values = _scores_and_values(g, torch.float64, 1)
    tied = scores.round().clamp(-1, 1)
    cases.append(_straight_through_case(f"{describe(tied, 'scores')} with ties, temperature=0.7", tied, values, 0.7, g))
    return cases


def _straight_through_expected(case: Case):
    """(output, weights, gradient of the scores, gradient of the values) of the reference."""
    scores, values = (arg.detach().clone().requires_grad_(True) for arg in case.args)
    with torch.enable_grad():
        output, weights = straight_through_reference(scores, values, **case.kwargs)
        grads = torch.autograd.grad((output, weights), (scores, values), case.grad_outputs)
    return output.detach(), weights.detach(), *grads


def compare_straight_through(got, expected, case: Case, extra) -> str:
    """The forward values, then the gradients the runner sent back."""
    reason = compare(got, expected[:2], case)
    if reason:
        return reason
    if not extra or extra[0] != "gradients":
        why = extra[1] if extra and extra[0] == "no-gradients" else "no gradients came back"
        return f"could not back-propagate through the results: {why}"
    for name, described, wanted, fix in (
            ("scores", extra[1][0], expected[2],
             "the weights must carry the gradient of the soft weights softmax(scores / temperature), e.g. "
             "hard + soft - soft.detach()"),
            ("values", extra[1][1], expected[3],
             "the output is the sum of the values weighted by the straight-through weights, so only the chosen "
             "value gets a gradient")):
        try:
            gradient = rebuild(described)
        except ValueError as problem:
            return f"the gradient of the {name}: {problem}"
        if gradient is None:
            return f"no gradient reached the {name}: {fix}"
        reason = compare(gradient, wanted, case)
        if reason:
            return f"the gradient of the {name} is wrong ({reason}): {fix}"
    return ""


CHECKS = [
    Check("test-softmax", 2, "softmax is correct, numerically stable, and works along any dim", softmax_cases, _reference,
          hints=(
              ("scores [1e4, 0, -1e4]",
               "subtract the largest score before exp"),
              ("default dim (each row sums to 1)",
               "normalise along the dim you are given (dim=-1 here), not a fixed axis"),
              ("dim=0 (each column sums to 1)",
               "normalise along the dim you are given"),
          )),
    Check("test-soft-attention", 1, "soft_attention returns the weighted sum and the softmax weights (over the last "
          "axis, the keys) at any temperature", soft_attention_cases, _reference,
          hints=(
              ("a batch of two: scores [[2, 1, 0], [0, 3, 1]]",
               "normalise the scores along dim=-1, not along the batch"),
          )),
    Check("test-hard-attention", 2, "hard_attention picks the first highest-scoring key and returns its value, with "
          "one-hot weights of the scores' dtype", hard_attention_cases, _reference,
          hints=(
              ("scores [1, 3, 3] (a tie)",
               "a tie: the first maximum wins"),
              ("float64 scores [[0, 5], [7, 1]]",
               "convert the one-hot weights with .to(scores.dtype)"),
          )),
    Check("test-sample-hard-attention", 2, "sample_hard_attention picks the key with the highest score plus Gumbel "
          "noise -log(-log u) (a sample from softmax(scores)), the first on ties, and returns its value and one-hot "
          "weights", sample_hard_attention_cases, lambda case: sample_hard_attention_reference(*case.args),
          new=True, solution_cells=("sample_hard_attention",),
          hints=(
              ("equal scores [0, 0, 0], uniform [0.2, 0.9, 0.5]",
               "the noise -log(-log u) is [-0.476, 2.250, 0.367], so key 1 wins (use g = -log(-log(u)))"),
              ("scores [2, 0, -1], uniform [0.3, 0.95, 0.5]",
               "the noise is g = -log(-log(u)), added to the scores (not -log(u), not log(-log(u)))"),
          )),
    Check("test-straight-through", 3, "straight_through_attention returns hard attention's output and one-hot weights, "
          "and back-propagates the gradient of soft attention at the temperature (only the chosen value gets a "
          "gradient)", straight_through_cases, lambda case: _straight_through_expected(case),
          compare=compare_straight_through, new=True, solution_cells=("straight_through_attention",),
          hints=(
              ("output gradient [1, 0]",
               "only the chosen value gets one (compute the output from the straight-through weights, not as hard "
               "output + soft output - soft output.detach())"),
              ("output gradient [1, 0]",
               "build the weights as hard + soft - soft.detach(), with soft = softmax(scores / temperature) "
               "computed from the scores (not under torch.no_grad, not detached)"),
              ("temperature 0.5, weight gradient [1, 0, 0]",
               "divide the scores by the temperature before the softmax"),
          )),
]
