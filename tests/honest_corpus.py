"""Honest submissions: correct answers in the many styles real students write, for every assignment.

Each one is what a student might hand in after reading the task and copying from d2l.ai, the UvA deep
learning tutorials, the PyTorch documentation or Stack Overflow: einsum, bmm, matmul or broadcasting;
``masked_fill`` or ``torch.where`` with ``-inf``, a large negative number or ``finfo.min``; helpers nested
or at module level; classes with extra methods; docstrings and comments that name ``torch.softmax``;
``print`` and ``warnings.warn`` inside and outside functions; type hints and keyword arguments; asserts of
their own; scratch cells that compare with ``torch.softmax``, ``F.cosine_similarity`` or
``nn.MultiheadAttention``, print shapes or plot with matplotlib. Each is CORRECT by its task's text (the
release notebook's markdown) and by the reference implementations (``attention_course/attention.py``,
``attention_course/seq2seq.py``, the ``transformer`` checks' own), so the grader must give each full
marks and raise no flag (tests/test_grading_honest.py).

A submission is an :class:`Honest`: the answer cells by grade id (the whole cell, as the student leaves
it) and extra cells appended at the end of the notebook. Each one's ``origin`` says where its style
comes from. Some first showed a problem of the grader (a lost function, or a flag), since fixed: their
``guards`` says which, so that a test failing on them says what came back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Honest:
    origin: str  # where the style comes from, and what is unusual about it
    answers: dict[str, str]  # grade id -> the answer cell's whole source
    extra_cells: tuple[str, ...] = field(default=())
    guards: str = ""  # the grader's problem this submission first showed, since fixed ("" if none)


# The grader's problems this corpus found, since fixed (each named by the submissions' ``guards``).
MATPLOTLIB_STARTS_PROCESSES = (
    "importing matplotlib.pyplot builds matplotlib's font cache, which runs `fc-list` (subprocess.Popen); "
    "the runner's audit hook notes it and the grader flags 'starts processes'")
SEALED_BEFORE_THE_DEF = (
    "in the sealed run torch.softmax raises from the first cell, so a check with it placed above the def in "
    "an answer cell stops that cell before the graded function is defined: the function's points are lost")
SEALED_TRACEBACK_TRUNCATED = (
    "in the sealed run a scratch cell calling nn.MultiheadAttention raises deep inside torch, and IPython's "
    "traceback (about 4,000 characters) is counted as the cell's output: flagged 'printed more than the "
    "grader keeps (truncated)'")
STATIC_WORDS_IN_STRINGS = (
    "the static scan reads every string constant, docstrings included: 'grader' (the task text's own word) "
    "flags 'looks for the grader', and 'solutions' flags 'reaches for files outside its folder'")
GRADED_CALL_GETFRAME = (
    "in a graded call the runner's audit hook refuses sys._getframe, which the standard library's logging "
    "uses at every record it emits (Logger.findCaller), and so does the import of torch.distributed.tensor "
    "that the first torch.testing.assert_close makes: the call raises PermissionError and the function's "
    "points are lost")
GRADED_CALL_LAZY_IMPORT = (
    "the first print of a tensor (Tensor.__repr__ -> torch.utils._python_dispatch._disable_current_modes) "
    "imports torch._subclasses.schema_check_mode, whose typing.NamedTuple sets "
    "__new__.__defaults__; in a graded call the audit hook refuses that (object.__setattr__ __defaults__): "
    "PermissionError, and the function's points are lost (unless an earlier cell happened to print a tensor)")
RESULT_TUPLE_SUBCLASS = (
    "the runner takes a result for a sequence only if its type is exactly tuple or list: a NamedTuple (a "
    "tuple, which the visible test accepts with isinstance(result, tuple)) gets 'expected tensors, got "
    "__main__.AttentionResult'")
STATIC_ENVIRON = (
    "the static scan flags any os.environ as 'reads or changes environment variables', even Stack Overflow's "
    "KMP_DUPLICATE_LIB_OK fix for the OpenMP clash of torch and matplotlib on macOS")


# =============================================================================================
# soft-hard: softmax(scores, dim=-1), soft_attention(scores, values, temperature=1.0),
# hard_attention(scores, values) (first maximum wins, weights of the scores' dtype).
# =============================================================================================

SOFT_HARD: dict[str, Honest] = {}

SOFT_HARD["d2l-max-indexing"] = Honest(
    "d2l.ai 3.6 (softmax from scratch): X_exp / partition, made stable with X.max(...)[0]; matmul with an "
    "unsqueezed query axis as in d2l 11.3; F.one_hot(...).type_as for hard attention.",
    {
        "softmax": '''def softmax(X, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    # d2l: X_exp = torch.exp(X); partition = X_exp.sum(1, keepdims=True); return X_exp / partition
    # plus the max trick so that exp(1e4) does not overflow.
    X_exp = torch.exp(X - X.max(dim, keepdim=True)[0])
    partition = X_exp.sum(dim, keepdim=True)
    return X_exp / partition  # The broadcast mechanism is applied here
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    attention_weights = softmax(scores / temperature)
    # (..., 1, K) @ (..., K, d) -> (..., 1, d)
    output = torch.matmul(attention_weights.unsqueeze(-2), values).squeeze(-2)
    return output, attention_weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    idx = torch.argmax(scores, dim=-1)  # argmax returns the first maximal index on ties
    weights = F.one_hot(idx, num_classes=scores.size(-1)).type_as(scores)
    output = torch.matmul(weights.unsqueeze(-2), values).squeeze(-2)
    return output, weights
''',
    },
)

SOFT_HARD["uva-type-hints-einsum"] = Honest(
    "UvA DL tutorial 6 style: type hints, math/typing imports, einsum over an ellipsis, a docstring that "
    "says it matches torch.softmax, scatter_ into a fresh zeros tensor.",
    {
        "softmax": '''from typing import Tuple

from torch import Tensor


def softmax(scores: Tensor, dim: int = -1) -> Tensor:
    """Same result as torch.softmax(scores, dim=dim) / F.softmax, written by hand.

    Subtracting the max along dim does not change the result but keeps exp() finite.
    """
    maximum = torch.amax(scores, dim=dim, keepdim=True)
    numerator = torch.exp(scores - maximum)
    denominator = torch.sum(numerator, dim=dim, keepdim=True)
    return numerator / denominator
''',
        "soft_attention": '''def soft_attention(scores: Tensor, values: Tensor, temperature: float = 1.0) -> Tuple[Tensor, Tensor]:
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    attention = softmax(scores / temperature, dim=-1)
    output = torch.einsum("...k,...kd->...d", attention, values)
    return output, attention
''',
        "hard_attention": '''def hard_attention(scores: Tensor, values: Tensor) -> Tuple[Tensor, Tensor]:
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    index = scores.argmax(dim=-1, keepdim=True)                       # (..., 1)
    weights = torch.zeros_like(scores).scatter_(-1, index, 1.0)      # a new tensor: scores are untouched
    output = torch.einsum("...k,...kd->...d", weights, values)
    return output, weights
''',
    },
)

SOFT_HARD["logsumexp"] = Honest(
    "Stack Overflow 'numerically stable softmax': exp(x - logsumexp(x)); broadcasting with [..., None] "
    "for the weighted sum; torch.where against an arange for the one-hot weights.",
    {
        "softmax": '''def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    # log softmax = x - logsumexp(x), and logsumexp is computed stably by PyTorch
    return torch.exp(scores - torch.logsumexp(scores, dim=dim, keepdim=True))
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature)
    return (weights[..., None] * values).sum(dim=-2), weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    positions = torch.arange(scores.shape[-1])
    best = scores.argmax(dim=-1)
    weights = torch.where(positions == best[..., None], 1.0, 0.0).to(scores.dtype)
    return (weights[..., None] * values).sum(dim=-2), weights
''',
    },
)

SOFT_HARD["module-helper-and-check"] = Honest(
    "A module-level _stable_softmax helper (Stack Overflow), a sanity check against torch.softmax at the "
    "end of the answer cell, torch.max(...).indices for the hard choice and gather for its value.",
    {
        "softmax": '''def _stable_softmax(x, axis):
    shifted = x - x.max(dim=axis, keepdim=True).values
    e = shifted.exp()
    return e / e.sum(dim=axis, keepdim=True)


def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    return _stable_softmax(scores, dim)


# sanity check against PyTorch's own softmax (fine outside the function)
_x = torch.randn(3, 4)
assert torch.allclose(softmax(_x), torch.softmax(_x, dim=-1), atol=1e-6)
assert torch.allclose(softmax(_x, dim=0), torch.softmax(_x, dim=0), atol=1e-6)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature, dim=-1)
    output = torch.sum(weights.unsqueeze(-1) * values, dim=-2)
    return output, weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    best = torch.max(scores, dim=-1).indices  # the first maximum on ties, like argmax
    weights = F.one_hot(best, scores.shape[-1]).to(dtype=scores.dtype)
    index = best[..., None, None].expand(*best.shape, 1, values.shape[-1])  # (..., 1, d)
    output = torch.gather(values, -2, index).squeeze(-2)
    return output, weights
''',
    },
)

SOFT_HARD["print-debugging"] = Honest(
    "A student who debugs with print: prints inside every function (shapes, dtypes), and a scratch cell "
    "that prints shapes and compares with torch.softmax.",
    {
        "softmax": '''def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    print("softmax:", tuple(scores.shape), scores.dtype, "dim =", dim)
    m = scores.amax(dim=dim, keepdim=True)
    e = (scores - m).exp()
    s = e.sum(dim=dim, keepdim=True)
    return e / s
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature)
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)
    print("soft_attention: weights", tuple(weights.shape), "output", tuple(output.shape))
    return output, weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    chosen = scores.argmax(dim=-1)
    print("hard_attention: chosen keys", chosen.tolist())
    weights = F.one_hot(chosen, num_classes=scores.shape[-1]).to(scores.dtype)
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)
    return output, weights
''',
    },
    extra_cells=(
        '''# scratch: shapes, and my softmax against PyTorch's
x = torch.randn(2, 3, 5)
print(x.shape, softmax(x).shape, softmax(x, dim=1).shape)
print((softmax(x) - torch.softmax(x, dim=-1)).abs().max())
out, w = soft_attention(x, torch.randn(2, 3, 5, 4), temperature=0.5)
print(out.shape, w.shape)
''',
    ),
)

SOFT_HARD["warnings-and-asserts"] = Honest(
    "Defensive code from a software-engineering background: asserts of its own on arguments, warnings.warn "
    "at import time and inside softmax (it fires on the huge scores of the hidden cases).",
    {
        "softmax": '''import warnings

warnings.warn("softmax below is my own implementation (no torch.softmax)", UserWarning)


def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    assert isinstance(scores, torch.Tensor), "scores must be a tensor"
    assert scores.is_floating_point(), f"scores must be floating point, got {scores.dtype}"
    if scores.numel() and scores.abs().max() > 1e3:
        warnings.warn("very large scores: subtracting the max keeps exp finite", RuntimeWarning)
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    assert temperature > 0, "temperature must be positive"
    assert scores.shape[-1] == values.shape[-2], f"{scores.shape} vs {values.shape}: one value per key"
    weights = softmax(scores / temperature, dim=-1)
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)
    assert output.shape == values.shape[:-2] + values.shape[-1:]
    return output, weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    assert scores.shape[-1] == values.shape[-2]
    chosen = scores.argmax(dim=-1)
    weights = F.one_hot(chosen, num_classes=scores.shape[-1]).to(scores.dtype)
    assert torch.all(weights.sum(-1) == 1)
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)
    return output, weights
''',
    },
)

SOFT_HARD["matplotlib-temperatures"] = Honest(
    "The book's own figure redone: a cell that plots the weights at several temperatures with matplotlib "
    "(Agg backend, savefig to a local file); bmm on flattened leading axes as in d2l's batch_dot.",
    {
        "softmax": '''def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    stable = scores - scores.max(dim=dim, keepdim=True).values
    numerator = stable.exp()
    return numerator / numerator.sum(dim=dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature, dim=-1)
    K, d = values.shape[-2], values.shape[-1]
    lead = weights.shape[:-1]
    # flatten the leading axes into one batch axis for torch.bmm, then restore them
    flat = torch.bmm(weights.reshape(-1, 1, K), values.reshape(-1, K, d))
    return flat.reshape(*lead, d), weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    K, d = values.shape[-2], values.shape[-1]
    weights = F.one_hot(scores.argmax(-1), K).to(scores.dtype)
    flat = torch.bmm(weights.reshape(-1, 1, K), values.reshape(-1, K, d))
    return flat.reshape(*weights.shape[:-1], d), weights
''',
    },
    extra_cells=(
        '''import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

scores = torch.tensor([2.0, 1.0, 0.0, -1.0])
fig, ax = plt.subplots(figsize=(5, 3))
for t in (0.1, 0.5, 1.0, 5.0):
    _, w = soft_attention(scores, torch.eye(4), temperature=t)
    ax.plot(range(4), w.numpy(), marker="o", label=f"T = {t}")
ax.set_xlabel("key")
ax.set_ylabel("weight")
ax.legend()
fig.savefig("temperatures.png", dpi=80)
plt.close(fig)
''',
    ),
    guards=MATPLOTLIB_STARTS_PROCESSES,
)

SOFT_HARD["nested-helpers-decorators"] = Honest(
    "Functional style with nested helpers (a _shift inside softmax, a _weighted_sum inside soft_attention), "
    "@torch.no_grad() decorators and keyword arguments everywhere.",
    {
        "softmax": '''@torch.no_grad()
def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""

    def _shift(x):
        return x - torch.amax(x, dim=dim, keepdim=True)

    exps = torch.exp(input=_shift(scores))
    return torch.div(exps, torch.sum(exps, dim=dim, keepdim=True))
''',
        "soft_attention": '''@torch.no_grad()
def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""

    def _weighted_sum(weights, vectors):
        return torch.sum(weights.unsqueeze(dim=-1) * vectors, dim=-2)

    weights = softmax(scores=torch.div(scores, temperature), dim=-1)
    return _weighted_sum(weights, values), weights
''',
        "hard_attention": '''@torch.no_grad()
def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""

    def _one_hot(index, size):
        return torch.eq(torch.arange(size), index.unsqueeze(-1)).to(dtype=scores.dtype)

    weights = _one_hot(torch.argmax(scores, dim=-1), scores.shape[-1])
    return torch.sum(weights.unsqueeze(dim=-1) * values, dim=-2), weights
''',
    },
)

SOFT_HARD["inplace-on-copies"] = Honest(
    "C/NumPy habits: clone first, then in-place ops on the copy (sub_, exp_, div_); "
    "the first maximum found with a cumulative sum over the ties.",
    {
        "softmax": '''def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    out = scores.clone()          # never touch the caller's tensor
    out -= out.max(dim=dim, keepdim=True).values
    out.exp_()
    out /= out.sum(dim=dim, keepdim=True)
    return out
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    scaled = scores.clone()
    scaled /= temperature          # in place on my own copy only
    weights = softmax(scaled)
    output = weights.unsqueeze(-1).mul(values).sum(-2)
    return output, weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    is_max = scores == scores.max(dim=-1, keepdim=True).values
    first = is_max & (is_max.cumsum(dim=-1) == 1)   # keep only the first of tied maxima
    weights = first.to(scores.dtype)
    output = weights.unsqueeze(-1).mul(values).sum(-2)
    return output, weights
''',
    },
)

SOFT_HARD["pytorch-docs-keepdim-math"] = Honest(
    "From the PyTorch docs' reductions page: torch.max returning (values, indices) unpacked, dim normalised "
    "with % ndim, sum with keepdim, and torch.index_select-free one-hot via eye indexing.",
    {
        "softmax": '''import math


def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    dim = dim % scores.dim()  # accept negative dims
    top, _ = torch.max(scores, dim=dim, keepdim=True)
    e = torch.exp(scores - top)
    return e / torch.sum(e, dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    if math.isclose(temperature, 1.0):
        scaled = scores
    else:
        scaled = scores / temperature
    weights = softmax(scaled, scaled.dim() - 1)
    output = (values * weights.unsqueeze(-1)).sum(-2)
    return output, weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    _, index = torch.max(scores, dim=-1)
    weights = torch.eye(scores.shape[-1], dtype=scores.dtype)[index]  # row `index` of the identity
    output = (values * weights.unsqueeze(-1)).sum(-2)
    return output, weights
''',
    },
)

SOFT_HARD["scratch-compare-with-torch"] = Honest(
    "Answer cells like the book's, followed by scratch cells that compare with torch.softmax and "
    "F.softmax over random shapes and try nn.MultiheadAttention out of curiosity.",
    {
        "softmax": '''def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature, dim=-1)
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)
    return output, weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    chosen = scores.argmax(dim=-1)
    weights = F.one_hot(chosen, num_classes=scores.shape[-1]).to(scores.dtype)
    output = (weights.unsqueeze(-1) * values).sum(dim=-2)
    return output, weights
''',
    },
    extra_cells=(
        '''# does my softmax agree with PyTorch's?
for shape in [(5,), (3, 4), (2, 3, 4)]:
    x = torch.randn(*shape, dtype=torch.float64) * 10
    for d in range(-len(shape), len(shape)):
        assert torch.allclose(softmax(x, d), torch.softmax(x, dim=d))
        assert torch.allclose(softmax(x, d), F.softmax(x, dim=d))
print("my softmax matches torch.softmax")
''',
        '''# nn.MultiheadAttention uses the same softmax inside (just curious)
from torch import nn

mha = nn.MultiheadAttention(embed_dim=4, num_heads=1, batch_first=True)
q = torch.randn(1, 2, 4)
out, w = mha(q, q, q)
print(out.shape, w.shape, w.sum(-1))
''',
    ),
    guards=SEALED_TRACEBACK_TRUNCATED,
)

SOFT_HARD["numpy-roundtrip"] = Honest(
    "A NumPy user (cs231n's softmax): the work done in NumPy on .numpy() views and wrapped back with "
    "torch.from_numpy (same dtype); np.argmax's first occurrence for the ties; np.eye rows as one-hot weights.",
    {
        "softmax": '''import numpy as np


def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    x = scores.detach().cpu().numpy()
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))  # shift for numeric stability (cs231n)
    return torch.from_numpy(e / np.sum(e, axis=dim, keepdims=True))
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature)
    output = np.einsum("...k,...kd->...d", weights.numpy(), values.detach().numpy())
    return torch.from_numpy(output), weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    s = scores.detach().numpy()
    one_hot = np.eye(s.shape[-1], dtype=s.dtype)[np.argmax(s, axis=-1)]  # argmax: first occurrence
    output = (one_hot[..., None] * values.detach().numpy()).sum(axis=-2)
    return torch.from_numpy(output), torch.from_numpy(one_hot)
''',
    },
)

SOFT_HARD["softmax-as-module"] = Honest(
    "Object-oriented: softmax is an instance of a hand-written nn.Softmax look-alike (a module with a "
    "default dim), hard attention's pieces are static and class methods of a helper class.",
    {
        "softmax": '''class Softmax(torch.nn.Module):
    """Like torch.nn.Softmax(dim), written by hand (the real one is not allowed)."""

    def __init__(self, default_dim=-1):
        super().__init__()
        self.default_dim = default_dim

    def forward(self, scores, dim=None):
        dim = self.default_dim if dim is None else dim
        shifted = scores - scores.amax(dim=dim, keepdim=True)
        exps = shifted.exp()
        return exps / exps.sum(dim=dim, keepdim=True)

    def extra_repr(self):
        return f"default_dim={self.default_dim}"


softmax = Softmax()
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature)
    return torch.einsum("...k,...kd->...d", weights, values), weights
''',
        "hard_attention": '''class _OneHot:
    """Helpers for hard attention."""

    @staticmethod
    def first_max(scores):
        return scores.argmax(dim=-1)  # the first maximum on ties

    @classmethod
    def weights(cls, scores):
        return F.one_hot(cls.first_max(scores), scores.shape[-1]).to(scores.dtype)


def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    weights = _OneHot.weights(scores)
    return torch.einsum("...k,...kd->...d", weights, values), weights
''',
    },
)


SOFT_HARD["logging-not-print"] = Honest(
    "An engineer's habit: the logging module instead of print (basicConfig at INFO, a module logger), "
    "one log line per call in every function.",
    {
        "softmax": '''import logging

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
log = logging.getLogger("attention")


def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    log.info("softmax of %s scores along dim %d", tuple(scores.shape), dim)
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    log.info("soft attention over %d keys at temperature %s", scores.shape[-1], temperature)
    weights = softmax(scores / temperature, dim=-1)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    chosen = scores.argmax(dim=-1)
    log.info("hard attention chose %s", chosen.tolist())
    weights = F.one_hot(chosen, num_classes=scores.shape[-1]).to(scores.dtype)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
    },
    guards=GRADED_CALL_GETFRAME,
)

SOFT_HARD["prints-tensors"] = Honest(
    "print debugging of values, not just shapes: soft_attention prints the weights tensor it computed "
    "(and no other cell happens to print a tensor before).",
    {
        "softmax": '''def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature, dim=-1)
    print("weights:", weights)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    weights = F.one_hot(scores.argmax(dim=-1), num_classes=scores.shape[-1]).to(scores.dtype)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
    },
    guards=GRADED_CALL_LAZY_IMPORT,
)

SOFT_HARD["looks-at-torch-softmax-first"] = Honest(
    "A student who first prints what torch.softmax gives at the top of the softmax cell (the notebook "
    "says using it anywhere but in the graded functions is fine), then writes the function below it.",
    {
        "softmax": '''# what I should get (from the docs example): tensor([0.0900, 0.2447, 0.6652])
print(torch.softmax(torch.tensor([1.0, 2.0, 3.0]), dim=0))


def softmax(scores, dim=-1):
    """Softmax of ``scores`` along ``dim``: same shape and dtype, positive, summing to 1 along ``dim``."""
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K))."""
    weights = softmax(scores / temperature, dim=-1)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """scores (..., K), values (..., K, d) -> (output (..., d), one-hot weights (..., K))."""
    weights = F.one_hot(scores.argmax(dim=-1), num_classes=scores.shape[-1]).to(scores.dtype)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
    },
    guards=SEALED_BEFORE_THE_DEF,
)

SOFT_HARD["docstring-quotes-the-task"] = Honest(
    "Docstrings that paraphrase the task text, which talks about the grader and its hidden tests; a "
    "print that says the solutions pass the visible tests.",
    {
        "softmax": '''def softmax(scores, dim=-1):
    """Softmax along dim. The grader also tries float64 and scores of 1e4, so subtract the max first."""
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)
''',
        "soft_attention": '''def soft_attention(scores, values, temperature=1.0):
    """Weighted sum of the values. The grader hands this the correct softmax weights (soft_attention_with)."""
    weights = softmax(scores / temperature, dim=-1)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
        "hard_attention": '''def hard_attention(scores, values):
    """One-hot weights at the first highest score, in the dtype of the scores (the autograder checks it)."""
    weights = F.one_hot(scores.argmax(dim=-1), num_classes=scores.shape[-1]).to(scores.dtype)
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights


print("my solutions pass the visible tests")
''',
    },
    guards=STATIC_WORDS_IN_STRINGS,
)

# The new work of soft-hard (Gumbel-max sampling, straight-through attention), in the solution's style: the
# submissions above, written before it, get these answers for it; those below write their own.
_SH_NEW_WORK = {
    "sample_hard_attention": '''def sample_hard_attention(scores, values, uniform):
    """scores (..., K), values (..., K, d), uniform (..., K) in (0, 1) -> (output (..., d), one-hot weights (..., K))."""
    noise = -torch.log(-torch.log(uniform))
    return hard_attention(scores + noise, values)
''',
    "straight_through_attention": '''def straight_through_attention(scores, values, temperature=1.0):
    """scores (..., K), values (..., K, d) -> (output (..., d), weights (..., K)): hard forward, soft backward."""
    soft = softmax(scores / temperature, dim=-1)
    weights = hard_attention(scores, values)[1] + soft - soft.detach()
    return (weights.unsqueeze(-1) * values).sum(dim=-2), weights
''',
}
for _name, _submission in list(SOFT_HARD.items()):
    SOFT_HARD[_name] = replace(_submission, answers={**_SH_NEW_WORK, **_submission.answers})

SOFT_HARD["st-custom-autograd-function"] = Honest(
    "PyTorch docs 'Extending torch.autograd': the straight-through estimator as a torch.autograd.Function "
    "with its own backward (softmax's Jacobian-vector product written out), the Gumbel noise as "
    "-(-u.log()).log() and the arg-max taken by hand; a scratch cell that tries F.gumbel_softmax(hard=True).",
    {
        **{k: v for k, v in SOFT_HARD["uva-type-hints-einsum"].answers.items() if k not in _SH_NEW_WORK},
        "sample_hard_attention": '''def sample_hard_attention(scores, values, uniform):
    """Gumbel-max: argmax(scores + g), g = -log(-log u), is a sample from softmax(scores)."""
    perturbed = scores + -(-uniform.log()).log()
    index = perturbed.argmax(dim=-1, keepdim=True)  # the first maximum on ties
    weights = torch.zeros_like(scores).scatter(-1, index, 1.0)
    return torch.einsum("...k,...kd->...d", weights, values), weights
''',
        "straight_through_attention": '''class StraightThrough(torch.autograd.Function):
    """Forward: one-hot at the arg-max. Backward: the gradient of softmax(scores / temperature)."""

    @staticmethod
    def forward(ctx, scores, temperature):
        shifted = (scores - scores.amax(dim=-1, keepdim=True)) / temperature
        soft = shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)
        ctx.save_for_backward(soft)
        ctx.temperature = temperature
        return torch.zeros_like(scores).scatter(-1, scores.argmax(dim=-1, keepdim=True), 1.0)

    @staticmethod
    def backward(ctx, grad):
        (soft,) = ctx.saved_tensors
        return soft * (grad - (soft * grad).sum(dim=-1, keepdim=True)) / ctx.temperature, None


def straight_through_attention(scores, values, temperature=1.0):
    weights = StraightThrough.apply(scores, temperature)
    return torch.matmul(weights.unsqueeze(-2), values).squeeze(-2), weights
''',
    },
    extra_cells=('''# Compare with PyTorch's own (random, so only the shape and the one-hot form can match).
hard = F.gumbel_softmax(torch.tensor([[1.0, 0.0, -1.0]]), tau=1.0, hard=True)
print(hard, hard.sum())
''',),
)

SOFT_HARD["st-through-soft-attention"] = Honest(
    "Builds the new parts on its own warm-ups, as the task allows: Gumbel-max through hard_attention with "
    "torch.rand-style clamping of its own, straight-through from soft_attention's weights; prints shapes "
    "inside the functions.",
    {
        **{k: v for k, v in SOFT_HARD["d2l-max-indexing"].answers.items() if k not in _SH_NEW_WORK},
        "sample_hard_attention": '''def sample_hard_attention(scores, values, uniform):
    u = uniform.clamp(1e-20, 1.0)  # the task promises 0 < u < 1; this is only my habit
    gumbel_noise = -torch.log(-torch.log(u))
    print("perturbed scores", tuple(scores.shape))
    return hard_attention(scores + gumbel_noise, values)
''',
        "straight_through_attention": '''def straight_through_attention(scores, values, temperature=1.0):
    _, soft_weights = soft_attention(scores, values, temperature)
    _, hard_weights = hard_attention(scores, values)
    st_weights = hard_weights - soft_weights.detach() + soft_weights  # value: hard, gradient: soft
    print("straight-through weights", tuple(st_weights.shape))
    return (st_weights[..., None] * values).sum(-2), st_weights
''',
    },
)


# =============================================================================================
# three-stages: dot_score, scaled_dot_score, cosine_score, AdditiveScore, masked_softmax, attention.
# =============================================================================================

THREE_STAGES: dict[str, Honest] = {}

_TS_ADDITIVE_D2L = '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, queries, keys):
        queries, keys = self.W_q(queries), self.W_k(keys)
        # After dimension expansion, shape of queries: (batch_size, no. of queries, 1, num_hiddens)
        # and shape of keys: (batch_size, 1, no. of key-value pairs, num_hiddens). Sum them up with broadcasting
        features = queries.unsqueeze(2) + keys.unsqueeze(1)
        features = torch.tanh(features)
        # There is only one output of self.w_v, so we remove the last one-dimensional entry from the shape.
        return self.w_v(features).squeeze(-1)
'''

# The solution's own style, for submissions that differ from it in a cell or two.
_TS_SOLUTION_STYLE = {
    "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return torch.bmm(queries, keys.transpose(1, 2))
''',
    "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    return dot_score(queries, keys) / math.sqrt(queries.shape[-1])
''',
    "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(eps)
    unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)
    return dot_score(unit_queries, unit_keys)
''',
    "AdditiveScore": _TS_ADDITIVE_D2L,
    "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is None:
        keep = torch.ones_like(scores, dtype=torch.bool)
    else:
        lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
        keep = torch.arange(scores.shape[-1]) < lengths[..., None]
    masked = scores.masked_fill(~keep, -math.inf)
    shift = masked.amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isinf(shift), torch.zeros_like(shift), shift)
    exps = torch.exp(masked - shift)
    return exps / exps.sum(dim=-1, keepdim=True).clamp_min(1.0)
''',
    "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    weights = masked_softmax(score_fn(queries, keys), valid_lens)
    return torch.bmm(weights, values), weights
''',
}

THREE_STAGES["d2l-sequence-mask"] = Honest(
    "d2l.ai 11.3: masked_softmax with repeat_interleave and sequence_mask(value=-1e6) (on a clone: d2l's "
    "X[~mask] = value would change the caller's scores), plus the rows of length 0 set to zero; "
    "AdditiveScore with d2l's comments; torch.bmm everywhere.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    # Swap the last two dimensions of keys with keys.transpose(1, 2)
    return torch.bmm(queries, keys.transpose(1, 2))
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    d = queries.shape[-1]
    return torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    q_norm = torch.norm(queries, dim=-1, keepdim=True)
    k_norm = torch.norm(keys, dim=-1, keepdim=True)
    q = queries / torch.max(q_norm, torch.full_like(q_norm, eps))
    k = keys / torch.max(k_norm, torch.full_like(k_norm, eps))
    return torch.bmm(q, k.transpose(1, 2))
''',
        "AdditiveScore": _TS_ADDITIVE_D2L,
        "masked_softmax": '''def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X = X.clone()  # d2l writes into X directly, which would change the caller's scores
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens=None):
    """Perform softmax operation by masking elements on the last axis."""
    # X: 3D tensor, valid_lens: 1D or 2D tensor
    def _softmax(X):
        X_exp = torch.exp(X - X.max(dim=-1, keepdim=True).values)
        return X_exp / X_exp.sum(dim=-1, keepdim=True)

    if valid_lens is None:
        return _softmax(X)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    # On the last axis, replace masked elements with a very large negative value, whose exponentiation outputs 0
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    weights = _softmax(X.reshape(shape))
    # d2l gives a uniform row when valid_len is 0; the task wants zeros there
    empty = (valid_lens == 0).reshape(shape[0], shape[1], 1)
    return weights.masked_fill(empty, 0.0)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    scores = score_fn(queries, keys)
    attention_weights = masked_softmax(scores, valid_lens)
    return torch.bmm(attention_weights, values), attention_weights
''',
    },
)

THREE_STAGES["uva-einsum-minus-9e15"] = Honest(
    "UvA DL tutorial 6 (Transformers): matmul with transpose(-2, -1), math.sqrt(d_k), "
    "masked_fill(mask == 0, -9e15) with a mask built from reshape(B, -1, 1), einsum in AdditiveScore.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return torch.matmul(queries, keys.transpose(-2, -1))
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    d_k = queries.size()[-1]
    attn_logits = torch.matmul(queries, keys.transpose(-2, -1))
    attn_logits = attn_logits / math.sqrt(d_k)
    return attn_logits
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    q = F.normalize(queries, p=2, dim=-1, eps=eps)   # v / max(||v||, eps)
    k = F.normalize(keys, p=2, dim=-1, eps=eps)
    return torch.matmul(q, k.transpose(-2, -1))
''',
        "AdditiveScore": '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)
        self._reset_parameters()

    def _reset_parameters(self):
        # Original Transformer initialization, see PyTorch documentation
        nn.init.xavier_uniform_(self.W_q.weight)
        nn.init.xavier_uniform_(self.W_k.weight)
        nn.init.xavier_uniform_(self.w_v.weight)

    def forward(self, queries, keys):
        q = self.W_q(queries)  # (B, Q, h)
        k = self.W_k(keys)     # (B, K, h)
        hidden = torch.tanh(q[:, :, None, :] + k[:, None, :, :])  # (B, Q, K, h)
        return torch.einsum("bqkh,h->bqk", hidden, self.w_v.weight[0])
''',
        "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    B, Q, K = scores.shape
    if valid_lens is None:
        mask = torch.ones(B, Q, K, dtype=torch.bool)
    else:
        mask = torch.arange(K).view(1, 1, K) < valid_lens.reshape(B, -1, 1)   # (B, 1 or Q, K)
        mask = mask.expand(B, Q, K)
    attn_logits = scores.masked_fill(mask == 0, -9e15)
    attn_logits = attn_logits - attn_logits.max(dim=-1, keepdim=True).values
    attention = torch.exp(attn_logits) * mask          # rows of length 0 become all zeros here
    total = attention.sum(dim=-1, keepdim=True)
    return attention / torch.where(total == 0, torch.ones_like(total), total)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    attn_logits = score_fn(queries, keys)
    attention = masked_softmax(attn_logits, valid_lens)
    values = torch.matmul(attention, values)
    return values, attention
''',
    },
)

THREE_STAGES["finfo-min-where"] = Honest(
    "Stack Overflow 'masked softmax in PyTorch': torch.where with torch.finfo(dtype).min instead of -inf, "
    "the weights zeroed again with the mask, the denominator clamped; d ** 0.5; einsum for the scores.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return torch.einsum("bqd,bkd->bqk", queries, keys)
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    d = queries.shape[-1]
    return dot_score(queries, keys) / d ** 0.5
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    qn = torch.linalg.vector_norm(queries, dim=-1, keepdim=True).clamp(min=eps)
    kn = torch.linalg.vector_norm(keys, dim=-1, keepdim=True).clamp(min=eps)
    return torch.einsum("bqd,bkd->bqk", queries / qn, keys / kn)
''',
        "AdditiveScore": '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def extra_repr(self):
        return f"query_dim={self.W_q.in_features}, key_dim={self.W_k.in_features}, hidden_dim={self.W_q.out_features}"

    def forward(self, queries, keys):
        pairs = self.W_q(queries).unsqueeze(-2) + self.W_k(keys).unsqueeze(-3)  # (B, Q, K, hidden)
        return self.w_v(torch.tanh(pairs))[..., 0]
''',
        "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is None:
        valid_lens = torch.full(scores.shape[:1], scores.shape[-1])
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]                       # (B, 1): the same for every query
    mask = torch.arange(scores.shape[-1]) < valid_lens[..., None]  # (B, 1 or Q, K)
    very_negative = torch.finfo(scores.dtype).min
    masked = torch.where(mask, scores, torch.tensor(very_negative, dtype=scores.dtype))
    exps = torch.exp(masked - masked.max(dim=-1, keepdim=True).values)
    exps = torch.where(mask, exps, torch.zeros_like(exps))    # exactly 0, also in rows of length 0
    return exps / exps.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(scores.dtype).tiny)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    weights = masked_softmax(score_fn(queries, keys), valid_lens=valid_lens)
    return torch.einsum("bqk,bkv->bqv", weights, values), weights
''',
    },
)

THREE_STAGES["logsumexp-nan-to-num"] = Honest(
    "Numerically minded: masked log-softmax with logsumexp over -inf fills, torch.nan_to_num for the rows "
    "of length 0; a cosine that divides by the product of the norms clamped at eps (old F.cosine_similarity).",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return queries @ keys.transpose(1, 2)
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    return queries @ keys.transpose(1, 2) * queries.shape[-1] ** -0.5
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    dots = queries @ keys.transpose(1, 2)                               # (B, Q, K)
    lengths = queries.norm(dim=-1)[:, :, None] * keys.norm(dim=-1)[:, None, :]
    return dots / lengths.clamp_min(eps)   # a zero vector has dot product 0, so it scores 0
''',
        "AdditiveScore": _TS_ADDITIVE_D2L,
        "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is not None:
        lens = valid_lens.unsqueeze(-1) if valid_lens.dim() == 2 else valid_lens.view(-1, 1, 1)
        scores = scores.masked_fill(torch.arange(scores.size(-1)) >= lens, float("-inf"))
    log_weights = scores - torch.logsumexp(scores, dim=-1, keepdim=True)  # -inf - (-inf) = nan in empty rows
    return torch.nan_to_num(torch.exp(log_weights), nan=0.0)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    scores = score_fn(queries, keys)
    weights = masked_softmax(scores, valid_lens)
    return weights @ values, weights
''',
    },
)

THREE_STAGES["python-loops-beginner"] = Honest(
    "A beginner's loops: masked_softmax row by row with a small stable softmax helper (weights written into "
    "a zeros tensor), dot products with a loop over the batch, an explicit broadcast sum for attention.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    results = []
    for b in range(queries.shape[0]):
        results.append(queries[b] @ keys[b].T)   # (Q, d) @ (d, K)
    return torch.stack(results)
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    d = queries.shape[2]
    return dot_score(queries, keys) / torch.sqrt(torch.tensor(d, dtype=queries.dtype))
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    q_len = torch.sqrt((queries ** 2).sum(dim=2, keepdim=True))
    k_len = torch.sqrt((keys ** 2).sum(dim=2, keepdim=True))
    q_len = torch.clamp(q_len, min=eps)
    k_len = torch.clamp(k_len, min=eps)
    return dot_score(queries / q_len, keys / k_len)
''',
        "AdditiveScore": '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, queries, keys):
        B, Q, K = queries.shape[0], queries.shape[1], keys.shape[1]
        q = self.W_q(queries).reshape(B, Q, 1, -1).expand(B, Q, K, -1)
        k = self.W_k(keys).reshape(B, 1, K, -1).expand(B, Q, K, -1)
        return self.w_v(torch.tanh(q + k)).reshape(B, Q, K)
''',
        "masked_softmax": '''def stable_softmax(x):
    x = x - x.max()
    return x.exp() / x.exp().sum()


def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    B, Q, K = scores.shape
    weights = torch.zeros_like(scores)
    for b in range(B):
        for q in range(Q):
            if valid_lens is None:
                n = K
            elif valid_lens.dim() == 1:
                n = int(valid_lens[b])
            else:
                n = int(valid_lens[b, q])
            if n > 0:
                weights[b, q, :n] = stable_softmax(scores[b, q, :n])
    return weights
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    scores = score_fn(queries, keys)
    weights = masked_softmax(scores, valid_lens)
    # (B, Q, K, 1) * (B, 1, K, d_v), summed over the keys
    output = (weights.unsqueeze(3) * values.unsqueeze(1)).sum(dim=2)
    return output, weights
''',
    },
)

THREE_STAGES["type-hints-dropout-d2l"] = Honest(
    "d2l's AdditiveAttention with its dropout argument kept (p = 0 by default, so nothing changes), type "
    "hints and keyword arguments, masked_fill with -inf and a max that ignores the rows of length 0.",
    {
        "dot_score": '''from torch import Tensor
from typing import Callable, Optional, Tuple


def dot_score(queries: Tensor, keys: Tensor) -> Tensor:
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return torch.bmm(queries, keys.permute(0, 2, 1))
''',
        "scaled_dot_score": '''def scaled_dot_score(queries: Tensor, keys: Tensor) -> Tensor:
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    scale: float = 1.0 / math.sqrt(queries.size(-1))
    return dot_score(queries, keys) * scale
''',
        "cosine_score": '''def cosine_score(queries: Tensor, keys: Tensor, eps: float = 1e-8) -> Tensor:
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    unit_q = queries / queries.norm(p=2, dim=-1, keepdim=True).clamp_min(eps)
    unit_k = keys / keys.norm(p=2, dim=-1, keepdim=True).clamp_min(eps)
    return dot_score(queries=unit_q, keys=unit_k)
''',
        "AdditiveScore": '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        features = torch.tanh(self.W_q(queries).unsqueeze(dim=2) + self.W_k(keys).unsqueeze(dim=1))
        features = self.dropout(features)
        return self.w_v(features).squeeze(dim=-1)
''',
        "masked_softmax": '''def masked_softmax(scores: Tensor, valid_lens: Optional[Tensor] = None) -> Tensor:
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is None:
        masked = scores
    else:
        lengths = valid_lens if valid_lens.dim() == 2 else valid_lens.unsqueeze(-1)  # (B, Q) or (B, 1)
        padding = torch.arange(scores.shape[-1]).view(1, 1, -1) >= lengths.unsqueeze(-1)
        masked = scores.masked_fill(padding, -math.inf)
    row_max = masked.amax(dim=-1, keepdim=True)
    row_max = row_max.masked_fill(row_max == -math.inf, 0.0)  # an empty row: shift by 0, not by -inf
    exps = torch.exp(masked - row_max)
    total = exps.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, exps / total, torch.zeros_like(exps))
''',
        "attention": '''def attention(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    score_fn: Callable[[Tensor, Tensor], Tensor],
    valid_lens: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor]:
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    scores = score_fn(queries, keys)
    weights = masked_softmax(scores=scores, valid_lens=valid_lens)
    return torch.bmm(weights, values), weights
''',
    },
)

THREE_STAGES["print-and-warn"] = Honest(
    "Prints inside the functions (shapes), a warnings.warn inside cosine_score when it meets a zero "
    "vector (it fires in the hidden cases), and one at the top of the masked_softmax cell.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    print("dot_score:", tuple(queries.shape), "x", tuple(keys.shape))
    return torch.bmm(queries, keys.transpose(1, 2))
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    d = queries.shape[-1]
    print("scaled_dot_score: dividing by sqrt", d)
    return dot_score(queries, keys) / math.sqrt(d)
''',
        "cosine_score": '''import warnings


def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    q_norm = queries.norm(dim=-1, keepdim=True)
    k_norm = keys.norm(dim=-1, keepdim=True)
    if (q_norm == 0).any() or (k_norm == 0).any():
        warnings.warn("cosine_score: zero vector(s), their scores will be 0")
    return dot_score(queries / q_norm.clamp_min(eps), keys / k_norm.clamp_min(eps))
''',
        "AdditiveScore": '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)
        print(f"AdditiveScore({query_dim}, {key_dim}, {hidden_dim})")

    def forward(self, queries, keys):
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        print("features:", tuple(features.shape))
        return self.w_v(features).squeeze(-1)
''',
        "masked_softmax": '''import warnings

warnings.warn("masked_softmax: my own softmax, torch.softmax is not allowed here")


def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is None:
        keep = torch.ones_like(scores, dtype=torch.bool)
    else:
        lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
        keep = torch.arange(scores.shape[-1]) < lengths[..., None]
    print("masked_softmax: keeping", keep.sum().item(), "of", keep.numel())
    masked = scores.masked_fill(~keep, -math.inf)
    shift = masked.amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isinf(shift), torch.zeros_like(shift), shift)
    exps = torch.exp(masked - shift)
    return exps / exps.sum(dim=-1, keepdim=True).clamp_min(1.0)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    scores = score_fn(queries, keys)
    print("attention: scores", tuple(scores.shape))
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
''',
    },
)

THREE_STAGES["scratch-cells-compare"] = Honest(
    "The solution's style with scratch cells that compare cosine_score with F.cosine_similarity, "
    "masked_softmax with torch.softmax, attention with F.scaled_dot_product_attention and "
    "nn.MultiheadAttention, and print shapes.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return torch.bmm(queries, keys.transpose(1, 2))
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    return dot_score(queries, keys) / math.sqrt(queries.shape[-1])
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(eps)
    unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)
    return dot_score(unit_queries, unit_keys)
''',
        "AdditiveScore": _TS_ADDITIVE_D2L,
        "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is None:
        keep = torch.ones_like(scores, dtype=torch.bool)
    else:
        lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
        keep = torch.arange(scores.shape[-1]) < lengths[..., None]
    masked = scores.masked_fill(~keep, -math.inf)
    shift = masked.amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isinf(shift), torch.zeros_like(shift), shift)
    exps = torch.exp(masked - shift)
    return exps / exps.sum(dim=-1, keepdim=True).clamp_min(1.0)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    scores = score_fn(queries, keys)
    weights = masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights
''',
    },
    extra_cells=(
        '''# scratch: compare with PyTorch
q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
reference = F.cosine_similarity(q.unsqueeze(2), k.unsqueeze(1), dim=-1)
print("cosine:", torch.allclose(cosine_score(q, k), reference, atol=1e-6))
print("softmax:", torch.allclose(masked_softmax(dot_score(q, k)), torch.softmax(dot_score(q, k), dim=-1), atol=1e-6))
print(dot_score(q, k).shape, scaled_dot_score(q, k).shape, cosine_score(q, k).shape)
''',
        '''# the same thing with PyTorch's attention
v = torch.randn(2, 5, 6)
mine, _ = attention(q, k, v, scaled_dot_score)
theirs = F.scaled_dot_product_attention(q, k, v)
print("sdpa:", torch.allclose(mine, theirs, atol=1e-5))
mha = nn.MultiheadAttention(embed_dim=4, num_heads=1, batch_first=True)
print(mha(q, k, k)[0].shape)
''',
    ),
)

THREE_STAGES["functional-keywords"] = Honest(
    "Everything through torch functions with keyword arguments (torch.matmul(input=..., other=...), "
    "torch.Tensor.masked_fill), rsqrt for the scale, a -inf mask built with torch.lt and unsqueeze chains.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return torch.matmul(input=queries, other=torch.transpose(keys, dim0=1, dim1=2))
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    d = torch.tensor(float(queries.shape[-1]), dtype=torch.float64)
    return dot_score(queries, keys) * torch.rsqrt(d).item()
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    return dot_score(F.normalize(queries, dim=2, eps=eps), F.normalize(keys, dim=2, eps=eps))
''',
        "AdditiveScore": '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(in_features=query_dim, out_features=hidden_dim, bias=False)
        self.W_k = nn.Linear(in_features=key_dim, out_features=hidden_dim, bias=False)
        self.w_v = nn.Linear(in_features=hidden_dim, out_features=1, bias=False)

    def pairwise(self, queries, keys):
        """(B, Q, K, hidden): W_q q + W_k k for every pair."""
        return torch.add(self.W_q(queries).unsqueeze(2), self.W_k(keys).unsqueeze(1))

    def forward(self, queries, keys):
        return torch.squeeze(self.w_v(torch.tanh(self.pairwise(queries, keys))), dim=-1)
''',
        "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is None:
        valid_lens = torch.tensor([scores.shape[-1]] * scores.shape[0])
    if valid_lens.ndim == 1:
        valid_lens = valid_lens.unsqueeze(1).expand(-1, scores.shape[1])      # (B, Q)
    positions = torch.arange(scores.shape[-1]).unsqueeze(0).unsqueeze(0)        # (1, 1, K)
    padding = torch.ge(positions, valid_lens.unsqueeze(-1))                     # (B, Q, K)
    masked = torch.Tensor.masked_fill(scores, padding, float("-inf"))
    top = torch.max(masked, dim=-1, keepdim=True).values
    top = torch.nan_to_num(top, neginf=0.0)
    exps = torch.exp(torch.sub(masked, top))
    return torch.div(exps, torch.clamp(torch.sum(exps, dim=-1, keepdim=True), min=1e-30))
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    weights = masked_softmax(scores=score_fn(queries, keys), valid_lens=valid_lens)
    return torch.matmul(input=weights, other=values), weights
''',
    },
)

THREE_STAGES["numpy-sqrt-asserts"] = Honest(
    "A NumPy user: np.sqrt for the scale, asserts on shapes inside every function, a softmax helper "
    "defined inside masked_softmax, and the rows of length 0 handled by a final multiply with the mask.",
    {
        "dot_score": '''import numpy as np


def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    assert queries.dim() == 3 and keys.dim() == 3, "expected (B, Q, d) and (B, K, d)"
    assert queries.shape[-1] == keys.shape[-1], "queries and keys must have the same size d"
    return queries.matmul(keys.mT)
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    return dot_score(queries, keys) / np.sqrt(queries.shape[-1])
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    nq = queries.norm(dim=-1, keepdim=True)
    nk = keys.norm(dim=-1, keepdim=True)
    out = dot_score(queries / torch.maximum(nq, torch.tensor(eps, dtype=nq.dtype)),
                    keys / torch.maximum(nk, torch.tensor(eps, dtype=nk.dtype)))
    assert out.shape == (queries.shape[0], queries.shape[1], keys.shape[1])
    return out
''',
        "AdditiveScore": _TS_ADDITIVE_D2L,
        "masked_softmax": '''def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""

    def softmax_last(x):
        x = x - x.max(dim=-1, keepdim=True).values
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)

    assert scores.dim() == 3, "scores must be (B, Q, K)"
    if valid_lens is None:
        return softmax_last(scores)
    K = scores.shape[-1]
    if valid_lens.dim() == 1:
        mask = torch.arange(K)[None, None, :] < valid_lens[:, None, None]
    else:
        assert valid_lens.shape == scores.shape[:2]
        mask = torch.arange(K)[None, None, :] < valid_lens[:, :, None]
    weights = softmax_last(scores.masked_fill(~mask, -1e9))
    return weights * mask   # the rows of length 0 were uniform: zero them (and nothing else changes)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    scores = score_fn(queries, keys)
    assert scores.shape == (queries.shape[0], queries.shape[1], keys.shape[1])
    weights = masked_softmax(scores, valid_lens)
    return weights.matmul(values), weights
''',
    },
)

THREE_STAGES["matplotlib-heatmap"] = Honest(
    "The book's heat maps redone: a module-level _stable_softmax helper used by masked_softmax, a "
    "per-query-length mask via expand, and a cell that draws the weights with matplotlib (Agg).",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return (queries.unsqueeze(2) * keys.unsqueeze(1)).sum(dim=-1)   # (B, Q, 1, d) * (B, 1, K, d)
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    return torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.shape[-1])
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    q = queries / queries.norm(dim=-1, keepdim=True).clamp(min=eps)
    k = keys / keys.norm(dim=-1, keepdim=True).clamp(min=eps)
    return (q.unsqueeze(2) * k.unsqueeze(1)).sum(dim=-1)
''',
        "AdditiveScore": '''class AdditiveScore(nn.Module):
    """Additive scores w_v^T tanh(W_q q + W_k k): queries (B, Q, query_dim), keys (B, K, key_dim) -> (B, Q, K)."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, queries, keys):
        hidden = torch.tanh(self.W_q(queries)[:, :, None, :] + self.W_k(keys)[:, None, :, :])
        return (hidden @ self.w_v.weight.T).squeeze(-1)

    def __repr__(self):
        return f"AdditiveScore(hidden={self.w_v.in_features})"
''',
        "masked_softmax": '''def _stable_softmax(x, mask):
    """Softmax over the last axis of x where mask is True; 0 elsewhere (and in empty rows)."""
    x = torch.where(mask, x, torch.full_like(x, -math.inf))
    m = x.max(dim=-1, keepdim=True).values
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    B, Q, K = scores.shape
    if valid_lens is None:
        lens = torch.full((B, Q), K)
    elif valid_lens.dim() == 1:
        lens = valid_lens[:, None].expand(B, Q)
    else:
        lens = valid_lens
    mask = torch.arange(K).expand(B, Q, K) < lens[..., None]
    return _stable_softmax(scores, mask)
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    weights = masked_softmax(score_fn(queries, keys), valid_lens)
    output = torch.einsum("bqk,bkd->bqd", weights, values)
    return output, weights
''',
    },
    extra_cells=(
        '''import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

keys = torch.randn(1, 10, 2)
queries = torch.randn(1, 6, 2)
values = torch.randn(1, 10, 1)
fig, axes = plt.subplots(1, 3, figsize=(9, 3))
for ax, fn in zip(axes, (dot_score, scaled_dot_score, cosine_score)):
    _, w = attention(queries, keys, values, fn, torch.tensor([7]))
    ax.imshow(w[0].detach().numpy(), cmap="Reds")
    ax.set_title(fn.__name__)
fig.savefig("heatmaps.png")
plt.close(fig)
''',
    ),
    guards=MATPLOTLIB_STARTS_PROCESSES,
)

THREE_STAGES["logging-zero-vectors"] = Honest(
    "logging.warning instead of warnings.warn when cosine_score meets a zero vector (it does in the hidden "
    "cases); the solution's style otherwise.",
    {
        **_TS_SOLUTION_STYLE,
        "cosine_score": '''import logging


def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    q_norm = queries.norm(dim=-1, keepdim=True)
    k_norm = keys.norm(dim=-1, keepdim=True)
    if (q_norm == 0).any() or (k_norm == 0).any():
        logging.warning("cosine_score: zero vectors get a score of 0")
    return dot_score(queries / q_norm.clamp_min(eps), keys / k_norm.clamp_min(eps))
''',
    },
    guards=GRADED_CALL_GETFRAME,
)

THREE_STAGES["assert-close-self-check"] = Honest(
    "A self-check inside dot_score with torch.testing.assert_close (the comparison the PyTorch docs "
    "recommend): one entry of the batched product against a plain dot product.",
    {
        **_TS_SOLUTION_STYLE,
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    scores = torch.bmm(queries, keys.transpose(1, 2))
    # self-check: the first entry is the dot product of the first query and the first key
    torch.testing.assert_close(scores[0, 0, 0], torch.dot(queries[0, 0], keys[0, 0]))
    return scores
''',
    },
    guards=GRADED_CALL_GETFRAME,
)

THREE_STAGES["namedtuple-result"] = Honest(
    "attention returns a typing.NamedTuple (output, weights), as torch.max returns (values, indices): a "
    "tuple, so `output, weights = attention(...)` and the visible test's isinstance(result, tuple) hold.",
    {
        **_TS_SOLUTION_STYLE,
        "attention": '''from typing import NamedTuple


class AttentionResult(NamedTuple):
    output: torch.Tensor   # (B, Q, d_v)
    weights: torch.Tensor  # (B, Q, K)


def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    weights = masked_softmax(score_fn(queries, keys), valid_lens)
    return AttentionResult(output=torch.bmm(weights, values), weights=weights)
''',
    },
    guards=RESULT_TUPLE_SUBCLASS,
)

THREE_STAGES["sanity-check-before-def"] = Honest(
    "A softmax helper in the masked_softmax cell checked against torch.softmax right after it is defined "
    "(the notebook says the helper may live in this cell, and that torch.softmax may be used anywhere but "
    "in the graded functions), then masked_softmax below it.",
    {
        "dot_score": '''def dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): every query's dot product with every key."""
    return torch.bmm(queries, keys.transpose(1, 2))
''',
        "scaled_dot_score": '''def scaled_dot_score(queries, keys):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): the dot products divided by sqrt(d)."""
    return dot_score(queries, keys) / math.sqrt(queries.shape[-1])
''',
        "cosine_score": '''def cosine_score(queries, keys, eps=1e-8):
    """queries (B, Q, d), keys (B, K, d) -> scores (B, Q, K): cosines, and 0 for a zero vector."""
    unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(eps)
    unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)
    return dot_score(unit_queries, unit_keys)
''',
        "AdditiveScore": _TS_ADDITIVE_D2L,
        "masked_softmax": '''def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


# my helper against PyTorch's softmax
_x = torch.randn(2, 3, 4)
assert torch.allclose(softmax(_x), torch.softmax(_x, dim=-1), atol=1e-6)


def masked_softmax(scores, valid_lens=None):
    """scores (B, Q, K), valid_lens (B,), (B, Q) or None -> weights (B, Q, K), exactly 0 where masked."""
    if valid_lens is None:
        return softmax(scores)
    lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(scores.shape[-1]) < lengths[..., None]
    weights = softmax(scores.masked_fill(~keep, -1e9))
    return weights * keep
''',
        "attention": '''def attention(queries, keys, values, score_fn, valid_lens=None):
    """queries (B, Q, d_q), keys (B, K, d_k), values (B, K, d_v) -> (output (B, Q, d_v), weights (B, Q, K))."""
    weights = masked_softmax(score_fn(queries, keys), valid_lens)
    return torch.bmm(weights, values), weights
''',
    },
    guards=SEALED_BEFORE_THE_DEF,
)

THREE_STAGES["os-environ-kmp-fix"] = Honest(
    "Stack Overflow's fix for 'OMP: Error #15' on macOS (torch and matplotlib each bringing an OpenMP): "
    "os.environ['KMP_DUPLICATE_LIB_OK'] = 'TRUE' at the top of the first answer cell; the solution's style "
    "otherwise.",
    {
        **_TS_SOLUTION_STYLE,
        "dot_score": 'import os\n\nos.environ["KMP_DUPLICATE_LIB_OK"] = "TRUE"   # "OMP: Error #15" on my Mac '
                     'otherwise (Stack Overflow)\n\n\n' + _TS_SOLUTION_STYLE["dot_score"],
    },
    guards=STATIC_ENVIRON,
)

# The new work of three-stages (packing_mask, masked_attention), in the solution's style: the submissions
# above, written before it, get these answers for it; those below write their own.
_TS_NEW_WORK = {
    "packing_mask": '''def packing_mask(query_segments, key_segments, causal=False):
    """query_segments (B, Q), key_segments (B, K) ids (negative: padding) -> keep (B, Q, K) bool."""
    keep = (query_segments[:, :, None] == key_segments[:, None, :]) & (key_segments[:, None, :] >= 0)
    if causal:
        keep = keep & torch.ones(query_segments.shape[1], key_segments.shape[1], dtype=torch.bool).tril()
    return keep
''',
    "masked_attention": '''def masked_attention(queries, keys, values, score_fn, keep):
    """Attention where keep (broadcastable to (B, Q, K)) is True; exactly 0 elsewhere."""
    scores = score_fn(queries, keys).masked_fill(~keep, -math.inf)
    shift = scores.amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isinf(shift), torch.zeros_like(shift), shift)
    exps = torch.exp(scores - shift)
    weights = exps / exps.sum(dim=-1, keepdim=True).clamp_min(1.0)
    return torch.bmm(weights, values), weights
''',
}
for _name, _submission in list(THREE_STAGES.items()):
    THREE_STAGES[_name] = replace(_submission, answers={**_TS_NEW_WORK, **_submission.answers})

THREE_STAGES["packing-loops-finfo-min"] = Honest(
    "A beginner's packing_mask with Python loops over the batch and the positions, and masked_attention with "
    "torch.finfo(dtype).min instead of -inf (as in Hugging Face's code), the empty rows zeroed afterwards "
    "with keep.any(-1); a print of the mask in a scratch cell.",
    {
        **_TS_SOLUTION_STYLE,
        "packing_mask": '''def packing_mask(query_segments, key_segments, causal=False):
    B, Q = query_segments.shape
    K = key_segments.shape[1]
    keep = torch.zeros(B, Q, K, dtype=torch.bool)
    for b in range(B):
        for i in range(Q):
            for j in range(K):
                same = int(query_segments[b, i]) == int(key_segments[b, j])
                visible = same and int(key_segments[b, j]) >= 0 and (not causal or j <= i)
                keep[b, i, j] = visible
    return keep
''',
        "masked_attention": '''def masked_attention(queries, keys, values, score_fn, keep):
    scores = score_fn(queries, keys)
    keep = keep.expand(scores.shape)
    very_negative = torch.finfo(scores.dtype).min
    scores = torch.where(keep, scores, torch.full_like(scores, very_negative))
    scores = scores - scores.max(dim=-1, keepdim=True).values
    weights = scores.exp() * keep  # exp(min - max) is 0 anyway; a row with no key is uniform until here
    weights = weights / weights.sum(dim=-1, keepdim=True).clamp(min=1e-30)
    weights = weights * keep.any(dim=-1, keepdim=True)
    return weights @ values, weights
''',
    },
    extra_cells=('''packed = torch.tensor([[0, 0, 0, 1, 1, -1]])
print(packing_mask(packed, packed, causal=True).int())
''',),
)

THREE_STAGES["einsum-nan-to-num"] = Honest(
    "Vectorised with torch.eq / torch.logical_and and tril(diagonal=0); masked_attention through einsum, "
    "with the NaN of an empty row turned into 0 by torch.nan_to_num after a plain exp-normalise.",
    {
        **_TS_SOLUTION_STYLE,
        "packing_mask": '''def packing_mask(query_segments, key_segments, causal=False):
    keep = torch.logical_and(torch.eq(query_segments.unsqueeze(-1), key_segments.unsqueeze(-2)),
                             key_segments.ge(0).unsqueeze(-2))
    if causal:
        keep = torch.logical_and(keep, torch.tril(torch.ones_like(keep[0]), diagonal=0))
    return keep
''',
        "masked_attention": '''def masked_attention(queries, keys, values, score_fn, keep):
    scores = score_fn(queries, keys).masked_fill(torch.logical_not(keep), float("-inf"))
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))  # NaN for a row that is all -inf
    weights = torch.nan_to_num(exps / exps.sum(dim=-1, keepdim=True), nan=0.0)
    return torch.einsum("bqk,bkd->bqd", weights, values), weights
''',
    },
)


# =============================================================================================
# seq2seq-attention: masked_softmax(scores (B, S), lengths (B,)), AdditiveAttention, one step of
# AttentionDecoder, the train cell (torch.manual_seed(0), the model as the task says, train(model)),
# translate(model, sentences) by greedy decoding.
# =============================================================================================

SEQ2SEQ: dict[str, Honest] = {}

_S2S_ATTENTION_INIT = '''class AdditiveAttention(nn.Module):
    """Scores F(h_j, q) = w_v^T tanh(W_q q + W_k h_j), weights from masked_softmax, context = their sum over the keys."""

    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)
'''

_S2S_DECODER_INIT = '''class AttentionDecoder(nn.Module):
    """One step of the decoder with attention: y_{i-1}, H_{i-1} and the h_j -> (logits for y_i, H_i, a_i)."""

    def __init__(self, vocab_size, embed_dim, hidden_dim, context_dim, attention_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.attention = AdditiveAttention(hidden_dim, context_dim, attention_dim)
        self.cell = nn.GRUCell(embed_dim + context_dim, hidden_dim)
        self.output = nn.Linear(hidden_dim + context_dim + embed_dim, vocab_size)
'''

_S2S_TRAIN = '''torch.manual_seed(0)
encoder = Encoder(len(source_words), embed_dim=32, hidden_dim=64)
decoder = AttentionDecoder(len(target_words), embed_dim=32, hidden_dim=64, context_dim=64, attention_dim=64)
model = Seq2Seq(encoder, decoder)
validation_accuracy = train(model)
'''

_S2S_TRANSLATE_SOLUTION_STYLE = '''def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    source, lengths = source_batch(sentences)
    with torch.no_grad():
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        previous = torch.full((len(sentences),), BOS)
        finished = torch.zeros(len(sentences), dtype=torch.bool)
        produced = []
        for _ in range(2 * source.shape[1] + 2):
            logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
            previous = logits.argmax(-1)
            produced.append(previous)
            finished |= previous == EOS
            if finished.all():
                break
    return [decode_target(row) for row in torch.stack(produced, dim=1)]
'''

SEQ2SEQ["d2l-sequence-mask"] = Honest(
    "d2l.ai 11.4 (Bahdanau attention): masked_softmax through sequence_mask(value=-1e6) on a clone and a "
    "softmax of its own, d2l's unsqueeze-and-broadcast AdditiveAttention with bmm, a decoder step with "
    "d2l's comments; translate keeps a finished mask and calls decode_target.",
    {
        "masked_softmax": '''def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X = X.clone()  # d2l assigns into X: on a clone, so that the caller's scores stay as they are
    X[~mask] = value
    return X


def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    X = sequence_mask(scores, lengths, value=-1e6)
    X_exp = torch.exp(X - X.max(dim=-1, keepdim=True)[0])
    return X_exp / X_exp.sum(dim=-1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        queries, projected_keys = self.W_q(query), self.W_k(keys)
        # After dimension expansion, shape of queries: (batch_size, 1, num_hiddens) and shape of keys:
        # (batch_size, no. of key-value pairs, num_hiddens). Sum them up with broadcasting
        features = queries.unsqueeze(1) + projected_keys
        features = torch.tanh(features)
        # There is only one output of self.w_v, so we remove the last one-dimensional entry from the shape.
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, lengths)
        # Shape of values: (batch_size, no. of key-value pairs, value dimension)
        return torch.bmm(self.attention_weights.unsqueeze(1), keys).squeeze(1), self.attention_weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        # Shape of query: (batch_size, num_hiddens): the state before this step
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)
        # Shape of embedded: (batch_size, embed_size)
        embedded = self.embedding(previous_tokens)
        # Concatenate on the feature dimension
        hidden = self.cell(torch.cat((embedded, context), dim=-1), previous_hidden)
        logits = self.output(torch.cat((hidden, context, embedded), dim=-1))
        return logits, hidden, weights
''',
        "train": _S2S_TRAIN,
        "translate": _S2S_TRANSLATE_SOLUTION_STYLE,
    },
)

SEQ2SEQ["uva-minus-9e15-own-words"] = Honest(
    "UvA DL tutorial style: masked_fill(mask == 0, -9e15), einsum for the context, keyword arguments to the "
    "attention; translate with a Python loop per step that builds the words itself, skipping PAD and BOS.",
    {
        "masked_softmax": '''def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    mask = (torch.arange(scores.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).long()
    attn_logits = scores.masked_fill(mask == 0, -9e15)
    attn_logits = attn_logits - attn_logits.max(dim=-1, keepdim=True).values
    attention = torch.exp(attn_logits)
    return attention / attention.sum(dim=-1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        hidden = torch.tanh(self.W_q(query)[:, None, :] + self.W_k(keys))    # (B, S, hidden_dim)
        scores = torch.einsum("bsh,h->bs", hidden, self.w_v.weight[0])      # (B, S)
        attention = masked_softmax(scores, lengths=lengths)
        context = torch.einsum("bs,bsc->bc", attention, keys)
        return context, attention
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        context, attention = self.attention(query=previous_hidden, keys=encoder_states, lengths=source_lengths)
        embedded = self.embedding(previous_tokens)
        hidden = self.cell(torch.cat([embedded, context], dim=1), previous_hidden)
        logits = self.output(torch.cat([hidden, context, embedded], dim=1))
        return logits, hidden, attention
''',
        "train": _S2S_TRAIN,
        "translate": '''def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    source, lengths = source_batch(sentences)
    max_steps = 2 * source.shape[1] + 2
    words = [[] for _ in sentences]
    done = [False for _ in sentences]
    with torch.no_grad():
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        tokens = torch.tensor([BOS] * len(sentences))
        step = 0
        while step < max_steps and not all(done):
            logits, hidden, _ = model.decoder(tokens, hidden, states, lengths)
            tokens = logits.argmax(dim=-1)
            for i, token in enumerate(tokens.tolist()):
                if done[i]:
                    continue
                if token == EOS:
                    done[i] = True
                elif token not in (PAD, BOS):
                    words[i].append(target_words[token])
            step += 1
    return [" ".join(w) for w in words]
''',
    },
)

SEQ2SEQ["finfo-where-print-accuracy"] = Honest(
    "Stack Overflow's masked softmax with torch.where and finfo(dtype).min, scores.max(...).values; "
    "the train cell prints the final accuracy; translate collects tokens in a tensor and decodes with "
    "decode_target, as a @torch.no_grad() decorated function.",
    {
        "masked_softmax": '''def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    real = torch.arange(scores.size(-1)).expand_as(scores) < lengths.unsqueeze(-1)
    lowest = torch.finfo(scores.dtype).min
    masked = torch.where(real, scores, torch.full_like(scores, lowest))
    exps = torch.exp(masked - masked.max(dim=-1, keepdim=True).values)
    exps = torch.where(real, exps, torch.zeros_like(exps))   # exactly zero on the padding
    return exps / exps.sum(dim=-1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        scores = self.w_v(torch.tanh(self.W_q(query).unsqueeze(-2) + self.W_k(keys))).squeeze(-1)
        weights = masked_softmax(scores, lengths)
        context = (weights.unsqueeze(-1) * keys).sum(dim=-2)
        return context, weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        embedded = self.embedding(previous_tokens)                                     # y_{i-1}
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)  # with H_{i-1}
        hidden = self.cell(torch.cat([embedded, context], -1), previous_hidden)        # H_i
        return self.output(torch.cat([hidden, context, embedded], -1)), hidden, weights
''',
        "train": _S2S_TRAIN + '''print(f"final validation accuracy: {validation_accuracy:.3f}")
''',
        "translate": '''@torch.no_grad()
def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    source, lengths = source_batch(sentences)
    states, final = model.encoder(source, lengths)
    hidden = model.initial_state(final)
    batch = source.shape[0]
    tokens = torch.full((batch, 1), BOS)
    for _ in range(2 * source.shape[1] + 2):
        logits, hidden, _ = model.decoder(tokens[:, -1], hidden, states, lengths)
        tokens = torch.cat([tokens, logits.argmax(dim=-1, keepdim=True)], dim=1)
        if (tokens == EOS).any(dim=1).all():
            break
    return [decode_target(row[1:]) for row in tokens]
''',
    },
)

SEQ2SEQ["logsumexp-inference-mode"] = Honest(
    "Log-space masked softmax with logsumexp over -inf fills; the context with matmul; translate under "
    "torch.inference_mode(), feeding EOS again to sentences that are done, decode_target per row.",
    {
        "masked_softmax": '''def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    padding = torch.arange(scores.shape[-1])[None, :] >= lengths[:, None]
    masked = scores.masked_fill(padding, float("-inf"))
    return torch.exp(masked - torch.logsumexp(masked, dim=-1, keepdim=True))
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        features = torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))
        scores = self.w_v(features)[:, :, 0]
        weights = masked_softmax(scores, lengths)
        context = torch.matmul(weights.unsqueeze(1), keys).squeeze(1)
        return context, weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)
        embedded = self.embedding(previous_tokens)
        rnn_input = torch.cat([embedded, context], dim=-1)
        hidden = self.cell(rnn_input, previous_hidden)
        features = torch.cat([hidden, context, embedded], dim=-1)
        return self.output(features), hidden, weights
''',
        "train": _S2S_TRAIN,
        "translate": '''def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    source, lengths = source_batch(sentences)
    with torch.inference_mode():
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        current = torch.full((source.shape[0],), BOS, dtype=torch.long)
        done = torch.zeros(source.shape[0], dtype=torch.bool)
        steps = []
        for _ in range(2 * source.shape[1] + 2):
            logits, hidden, _ = model.decoder(current, hidden, states, lengths)
            best = logits.argmax(dim=-1)
            steps.append(best)
            done = done | (best == EOS)
            current = torch.where(done, torch.full_like(best, EOS), best)  # done sentences just repeat EOS
            if bool(done.all()):
                break
        ids = torch.stack(steps, dim=1)
    return [decode_target(ids[i]) for i in range(ids.shape[0])]
''',
    },
)

SEQ2SEQ["nested-helpers-extra-methods"] = Honest(
    "A softmax helper nested inside masked_softmax, an AdditiveAttention with a separate score() method, "
    "a decoder with an attend() helper method and an extra_repr, a translate split into small functions.",
    {
        "masked_softmax": '''def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""

    def softmax(x, dim=-1):
        # my own softmax: torch.softmax is not allowed in this assignment
        e = torch.exp(x - x.amax(dim=dim, keepdim=True))
        return e / e.sum(dim=dim, keepdim=True)

    real = torch.arange(scores.shape[-1]) < lengths[:, None]
    return softmax(scores.masked_fill(~real, float("-inf")))
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def score(self, query, keys):
        """e_j = w_v^T tanh(W_q q + W_k h_j): (B, S)."""
        return self.w_v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))).squeeze(2)

    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        weights = masked_softmax(self.score(query, keys), lengths)
        return torch.bmm(weights.unsqueeze(1), keys).squeeze(1), weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def extra_repr(self):
        return f"hidden={self.cell.hidden_size}, vocab={self.output.out_features}"

    def attend(self, previous_hidden, encoder_states, source_lengths):
        """C_i and a_i, with the previous state H_{i-1} as the query."""
        return self.attention(previous_hidden, encoder_states, source_lengths)

    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        context, weights = self.attend(previous_hidden, encoder_states, source_lengths)
        embedded = self.embedding(previous_tokens)
        hidden = self.cell(torch.cat([embedded, context], dim=-1), previous_hidden)
        logits = self.output(torch.cat([hidden, context, embedded], dim=-1))
        return logits, hidden, weights
''',
        "train": _S2S_TRAIN,
        "translate": '''def _greedy_ids(model, source, lengths):
    """(B, steps) ids from greedy decoding: at most 2 S + 2 steps, fewer if every row has produced EOS."""
    states, final = model.encoder(source, lengths)
    hidden = model.initial_state(final)
    previous = torch.full((source.shape[0],), BOS)
    columns = []
    for _ in range(2 * source.shape[1] + 2):
        logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
        previous = logits.argmax(-1)
        columns.append(previous)
        if (torch.stack(columns, 1) == EOS).any(1).all():
            break
    return torch.stack(columns, 1)


def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    with torch.no_grad():
        ids = _greedy_ids(model, *source_batch(sentences))
    return [decode_target(row) for row in ids]
''',
    },
)

SEQ2SEQ["module-helper-checks-and-plot"] = Honest(
    "A module-level _stable_softmax helper checked against torch.softmax at the end of its cell, a scratch "
    "cell comparing masked_softmax with torch.softmax, and after training a matplotlib heat map of the "
    "notes' example (Agg), as the book's chapter 6 draws it.",
    {
        "masked_softmax": '''def _stable_softmax(x):
    z = x - x.max(dim=-1, keepdim=True).values
    return z.exp() / z.exp().sum(dim=-1, keepdim=True)


def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    real = torch.arange(scores.shape[-1])[None, :] < lengths[:, None]
    return _stable_softmax(scores.masked_fill(~real, -torch.inf))


# quick check against PyTorch (outside the function, which is allowed)
_s = torch.randn(3, 5)
assert torch.allclose(masked_softmax(_s, torch.tensor([5, 5, 5])), torch.softmax(_s, dim=-1), atol=1e-6)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        features = torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))  # (B, S, hidden_dim)
        scores = self.w_v(features).squeeze(-1)                                # (B, S)
        weights = masked_softmax(scores, lengths)                              # (B, S)
        context = torch.bmm(weights.unsqueeze(1), keys).squeeze(1)             # (B, key_dim)
        return context, weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)
        embedded = self.embedding(previous_tokens)
        hidden = self.cell(torch.cat([embedded, context], dim=-1), previous_hidden)
        logits = self.output(torch.cat([hidden, context, embedded], dim=-1))
        return logits, hidden, weights
''',
        "train": _S2S_TRAIN,
        "translate": _S2S_TRANSLATE_SOLUTION_STYLE,
    },
    extra_cells=(
        '''# scratch: masked_softmax against torch.softmax on the real positions
s = torch.randn(2, 6)
w = masked_softmax(s, torch.tensor([4, 6]))
print(torch.allclose(w[0, :4], torch.softmax(s[0, :4], dim=0)), w[0, 4:].tolist())
''',
        '''import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

english, chinese = "Tom chase Jerry in the kitchen yesterday", "汤姆 昨天 在 厨房 追逐 杰瑞"
source, lengths, target_input, _ = training_batch([(english, chinese)])
with torch.no_grad():
    _, weights = model(source, lengths, target_input)
fig, ax = plt.subplots()
ax.imshow(weights[0].numpy(), cmap="Reds")
ax.set_xticks(range(len(english.split())))
ax.set_xticklabels(english.split(), rotation=45)
fig.savefig("attention.png")
plt.close(fig)
''',
    ),
    guards=MATPLOTLIB_STARTS_PROCESSES,
)

SEQ2SEQ["print-debugging"] = Honest(
    "Prints for debugging: in translate (the batch size and the number of steps), after training (the "
    "final accuracy and an example), and a scratch cell printing the shapes of one decoder step.",
    {
        "masked_softmax": '''def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    real = torch.arange(scores.shape[-1]) < lengths[:, None]  # (B, S)
    masked = scores.masked_fill(~real, float("-inf"))
    exps = torch.exp(masked - masked.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        features = torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))
        weights = masked_softmax(self.w_v(features).squeeze(-1), lengths)
        return (weights.unsqueeze(-1) * keys).sum(1), weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)
        embedded = self.embedding(previous_tokens)
        hidden = self.cell(torch.cat([embedded, context], dim=-1), previous_hidden)
        logits = self.output(torch.cat([hidden, context, embedded], dim=-1))
        return logits, hidden, weights
''',
        "train": _S2S_TRAIN + '''print("trained to", validation_accuracy)
source, lengths, target_input, _ = training_batch(train_pairs[:1])
with torch.no_grad():
    logits, _ = model(source, lengths, target_input)
print(train_pairs[0][1], "->", decode_target(logits.argmax(-1)[0]))
''',
        "translate": '''def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    source, lengths = source_batch(sentences)
    print(f"translate: {len(sentences)} sentences, source shape {tuple(source.shape)}")
    with torch.no_grad():
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        previous = torch.full((len(sentences),), BOS)
        finished = torch.zeros(len(sentences), dtype=torch.bool)
        produced = []
        for step in range(2 * source.shape[1] + 2):
            logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
            previous = logits.argmax(-1)
            produced.append(previous)
            finished = finished | (previous == EOS)
            if finished.all():
                break
    print(f"translate: stopped after {step + 1} steps")
    return [decode_target(row) for row in torch.stack(produced, dim=1)]
''',
    },
    extra_cells=(
        '''# scratch: one decoder step by hand
source, lengths = source_batch(["Tom chase Jerry", "Jerry chase Tom in the kitchen"])
with torch.no_grad():
    states, final = model.encoder(source, lengths)
    hidden = model.initial_state(final)
    logits, hidden, weights = model.decoder(torch.full((2,), BOS), hidden, states, lengths)
print(states.shape, hidden.shape, logits.shape, weights.shape)
print(weights)
print(translate(model, ["Tom chase Jerry"]))
''',
    ),
)

SEQ2SEQ["warnings-eval-mode"] = Honest(
    "Careful engineering: translate switches the model to eval mode with a warning when it is in training "
    "mode (as it is after train) and restores it afterwards; a warnings.warn at the top of a cell; asserts "
    "on shapes in the decoder step.",
    {
        "masked_softmax": '''import warnings

warnings.warn("using my own masked softmax (no torch.softmax)", stacklevel=1)


def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    assert scores.dim() == 2 and lengths.shape == scores.shape[:1], (scores.shape, lengths.shape)
    real = torch.arange(scores.shape[-1]) < lengths[:, None]
    masked = scores.masked_fill(~real, float("-inf"))
    exps = torch.exp(masked - masked.max(dim=-1, keepdim=True).values)
    return exps / exps.sum(dim=-1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        assert query.shape[0] == keys.shape[0] == lengths.shape[0]
        scores = self.w_v(torch.tanh(self.W_q(query).unsqueeze(1) + self.W_k(keys))).squeeze(-1)
        weights = masked_softmax(scores, lengths)
        return torch.bmm(weights.unsqueeze(1), keys).squeeze(1), weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        assert previous_tokens.dim() == 1 and previous_hidden.dim() == 2 and encoder_states.dim() == 3
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)
        embedded = self.embedding(previous_tokens)
        hidden = self.cell(torch.cat([embedded, context], dim=-1), previous_hidden)
        logits = self.output(torch.cat([hidden, context, embedded], dim=-1))
        assert logits.shape == (previous_tokens.shape[0], self.output.out_features)
        return logits, hidden, weights
''',
        "train": _S2S_TRAIN,
        "translate": '''import warnings


def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    was_training = model.training
    if was_training:
        warnings.warn("translate: switching the model to eval mode for decoding")
        model.eval()
    try:
        source, lengths = source_batch(sentences)
        with torch.no_grad():
            states, final = model.encoder(source, lengths)
            hidden = model.initial_state(final)
            previous = torch.full((len(sentences),), BOS)
            finished = torch.zeros(len(sentences), dtype=torch.bool)
            produced = []
            for _ in range(2 * source.shape[1] + 2):
                logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
                previous = logits.argmax(-1)
                produced.append(previous)
                finished |= previous == EOS
                if finished.all():
                    break
        return [decode_target(row) for row in torch.stack(produced, dim=1)]
    finally:
        model.train(was_training)
''',
    },
)

SEQ2SEQ["type-hints-keywords"] = Honest(
    "Type hints everywhere (typing.List, Tuple), keyword arguments to every call, math-free code, "
    "torch.cat with a tuple; translate returns List[str] built from target_words itself.",
    {
        "masked_softmax": '''from typing import List, Tuple

from torch import Tensor


def masked_softmax(scores: Tensor, lengths: Tensor) -> Tensor:
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    positions: Tensor = torch.arange(scores.size(dim=1)).unsqueeze(dim=0)   # (1, S)
    real: Tensor = positions < lengths.unsqueeze(dim=1)                    # (B, S)
    masked: Tensor = scores.masked_fill(mask=~real, value=float("-inf"))
    shifted: Tensor = masked - torch.amax(masked, dim=1, keepdim=True)
    exps: Tensor = torch.exp(shifted)
    return exps / torch.sum(exps, dim=1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query: Tensor, keys: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        projected: Tensor = self.W_q(query).unsqueeze(dim=1) + self.W_k(keys)
        scores: Tensor = self.w_v(torch.tanh(projected)).squeeze(dim=-1)
        weights: Tensor = masked_softmax(scores=scores, lengths=lengths)
        context: Tensor = torch.bmm(weights.unsqueeze(dim=1), keys).squeeze(dim=1)
        return context, weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens: Tensor, previous_hidden: Tensor, encoder_states: Tensor,
                source_lengths: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)
        embedded: Tensor = self.embedding(previous_tokens)
        hidden: Tensor = self.cell(torch.cat(tensors=(embedded, context), dim=-1), previous_hidden)
        logits: Tensor = self.output(torch.cat(tensors=(hidden, context, embedded), dim=-1))
        return logits, hidden, weights
''',
        "train": _S2S_TRAIN,
        "translate": '''def translate(model: nn.Module, sentences: List[str]) -> List[str]:
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    source, lengths = source_batch(sentences)
    with torch.no_grad():
        states, final = model.encoder(source, lengths)
        hidden: Tensor = model.initial_state(final)
        previous: Tensor = torch.full(size=(len(sentences),), fill_value=BOS)
        ended: Tensor = torch.zeros(len(sentences), dtype=torch.bool)
        steps: List[Tensor] = []
        for _ in range(2 * source.size(dim=1) + 2):
            logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
            previous = torch.argmax(logits, dim=-1)
            steps.append(previous)
            ended = torch.logical_or(ended, previous == EOS)
            if bool(ended.all()):
                break
    translations: List[str] = []
    for row in torch.stack(steps, dim=1).tolist():
        words: List[str] = []
        for i in row:
            if i == EOS:
                break
            if i != PAD and i != BOS:
                words.append(target_words[i])
        translations.append(" ".join(words))
    return translations
''',
    },
)

SEQ2SEQ["inplace-on-copies"] = Honest(
    "NumPy habits: a clone of the scores written into with boolean indexing, then -= in place on that "
    "copy; the context by broadcasting; translate that fills PAD after EOS in a preallocated tensor.",
    {
        "masked_softmax": '''def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    weights = scores.clone()
    padding = torch.arange(scores.shape[1])[None, :] >= lengths[:, None]
    weights[padding] = float("-inf")
    weights -= weights.max(dim=1, keepdim=True).values
    weights = weights.exp()   # not exp_ (nor /= below): backward needs exp's output as it was
    return weights / weights.sum(dim=1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        features = torch.tanh(self.W_k(keys) + self.W_q(query)[:, None])
        weights = masked_softmax(self.w_v(features)[..., 0], lengths)
        context = (keys * weights[:, :, None]).sum(dim=1)
        return context, weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)
        embedded = self.embedding(previous_tokens)
        new_hidden = self.cell(torch.cat([embedded, context], 1), previous_hidden)
        return self.output(torch.cat([new_hidden, context, embedded], 1)), new_hidden, weights
''',
        "train": _S2S_TRAIN,
        "translate": '''def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    source, lengths = source_batch(sentences)
    batch, max_steps = source.shape[0], 2 * source.shape[1] + 2
    ids = torch.full((batch, max_steps), PAD)
    alive = torch.ones(batch, dtype=torch.bool)
    with torch.no_grad():
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        previous = torch.full((batch,), BOS)
        for t in range(max_steps):
            logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
            previous = logits.argmax(-1)
            ids[alive, t] = previous[alive]          # nothing is written after a sentence's EOS
            alive &= previous != EOS
            if not alive.any():
                break
    return [decode_target(row) for row in ids]
''',
    },
)

SEQ2SEQ["pytorch-tutorial-style"] = Honest(
    "The PyTorch 'NLP From Scratch: Translation with a Sequence to Sequence Network and Attention' tutorial: "
    "its topk(1) for the next word and detach(), names like decoder_input and decoder_hidden; a masked "
    "softmax that multiplies by the mask after exp (with -inf scores first) and renormalises.",
    {
        "masked_softmax": '''def masked_softmax(scores, lengths):
    """scores (B, S), lengths (B,) -> weights (B, S): each row's first lengths[b] scores normalised, 0 beyond."""
    mask = (torch.arange(scores.size(1)).unsqueeze(0) < lengths.unsqueeze(1)).to(scores.dtype)
    scores = scores.masked_fill(mask == 0, float("-inf"))
    scores = scores - scores.max(dim=1, keepdim=True)[0]
    exps = scores.exp() * mask
    return exps / exps.sum(dim=1, keepdim=True)
''',
        "AdditiveAttention": _S2S_ATTENTION_INIT + '''
    def forward(self, query, keys, lengths):
        """query (B, query_dim), keys (B, S, key_dim), lengths (B,) -> (context (B, key_dim), weights (B, S))."""
        # Bahdanau: scores = Va(tanh(Wa(query) + Ua(keys)))
        scores = self.w_v(torch.tanh(self.W_q(query.unsqueeze(1)) + self.W_k(keys)))  # (B, S, 1)
        scores = scores.squeeze(2)
        weights = masked_softmax(scores, lengths)
        context = torch.bmm(weights.unsqueeze(1), keys)  # (B, 1, key_dim)
        return context.squeeze(1), weights
''',
        "AttentionDecoder": _S2S_DECODER_INIT + '''
    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """previous_tokens (B,), previous_hidden (B, H), encoder_states (B, S, C), source_lengths (B,)
        -> (logits (B, V), hidden (B, H), weights (B, S))."""
        embedded = self.embedding(previous_tokens)
        query = previous_hidden
        context, attn_weights = self.attention(query, encoder_states, source_lengths)
        input_gru = torch.cat((embedded, context), dim=1)
        decoder_hidden = self.cell(input_gru, previous_hidden)
        output = self.output(torch.cat((decoder_hidden, context, embedded), dim=1))
        return output, decoder_hidden, attn_weights
''',
        "train": '''# Build and train, as the task says.
torch.manual_seed(0)
encoder = Encoder(len(source_words), embed_dim=32, hidden_dim=64)
decoder = AttentionDecoder(len(target_words), embed_dim=32, hidden_dim=64, context_dim=64, attention_dim=64)
model = Seq2Seq(encoder, decoder)
train(model)
''',
        "translate": '''def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    with torch.no_grad():
        input_tensor, input_lengths = source_batch(sentences)
        encoder_outputs, encoder_final = model.encoder(input_tensor, input_lengths)
        decoder_hidden = model.initial_state(encoder_final)
        decoder_input = torch.full((len(sentences),), BOS, dtype=torch.long)
        decoded_ids = []
        for di in range(2 * input_tensor.size(1) + 2):
            decoder_output, decoder_hidden, _ = model.decoder(decoder_input, decoder_hidden, encoder_outputs,
                                                              input_lengths)
            topv, topi = decoder_output.topk(1)
            decoder_input = topi.squeeze(-1).detach()  # detach from history as input
            decoded_ids.append(decoder_input)
            if (torch.stack(decoded_ids, dim=1) == EOS).any(dim=1).all():
                break
        decoded_ids = torch.stack(decoded_ids, dim=1)
    return [decode_target(ids) for ids in decoded_ids]
''',
    },
)

SEQ2SEQ["logging-progress"] = Honest(
    "An engineer's translate that logs its progress with the logging module (basicConfig at INFO) instead "
    "of printing; the same parts as print-debugging otherwise.",
    {
        **SEQ2SEQ["print-debugging"].answers,
        "train": _S2S_TRAIN,
        "translate": '''import logging

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger("translate")


def translate(model, sentences):
    """English sentences (list of str) -> their Chinese translations (list of str), by greedy decoding of model."""
    logger.info("translating %d sentences", len(sentences))
    source, lengths = source_batch(sentences)
    with torch.no_grad():
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        previous = torch.full((len(sentences),), BOS)
        finished = torch.zeros(len(sentences), dtype=torch.bool)
        produced = []
        for _ in range(2 * source.shape[1] + 2):
            logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
            previous = logits.argmax(-1)
            produced.append(previous)
            finished |= previous == EOS
            if finished.all():
                break
    logger.info("done after %d steps", len(produced))
    return [decode_target(row) for row in torch.stack(produced, dim=1)]
''',
    },
    guards=GRADED_CALL_GETFRAME,
)

# Part B of seq2seq-attention (Luong's decoder): GeneralAttention(query_dim, key_dim) with the layer W_a, and one
# step of LuongDecoder. Each submission above gets one of these styles, in turn, for its two part-B cells.
_S2S_GENERAL_STYLES = (
    # The score through W_a^T on the query side: q^T W_a h_j = (W_a^T q) . h_j, one (B, key_dim) product, einsum.
    '''class GeneralAttention(nn.Module):
    """Luong's general score e_j = q^T W_a h_j, weights from masked_softmax, context = their sum over the keys."""

    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, query, keys, lengths):
        q_W = query @ self.W_a.weight  # (B, key_dim): q^T W_a, cheaper than projecting every key
        scores = torch.einsum("bk,bsk->bs", q_W, keys)
        weights = masked_softmax(scores, lengths)
        return torch.einsum("bs,bsk->bk", weights, keys), weights
''',
    # Keyword arguments, type hints, an assert of its own and a print that the grader must ignore.
    '''class GeneralAttention(nn.Module):
    def __init__(self, query_dim: int, key_dim: int):
        super().__init__()
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, lengths: torch.Tensor):
        assert query.dim() == 2 and keys.dim() == 3, "query (B, d_q), keys (B, S, d_k)"
        scores = torch.matmul(self.W_a(keys), query[:, :, None])[..., 0]  # (B, S, d_q) @ (B, d_q, 1)
        weights = masked_softmax(scores=scores, lengths=lengths)
        if not hasattr(self, "_shown"):
            self._shown = True
            print("general attention: scores", tuple(scores.shape))
        return torch.matmul(weights[:, None, :], keys)[:, 0, :], weights


# scratch: the same weights with torch.softmax, outside any graded call
_check = GeneralAttention(3, 2)
with torch.no_grad():
    _w = _check(torch.randn(1, 3), torch.randn(1, 4, 2), torch.tensor([4]))[1]
    print(torch.allclose(_w, torch.softmax(torch.log(_w), -1)))
''',
    # A helper method for the score, F.linear with the layer's weight.
    '''class GeneralAttention(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def score(self, query, keys):
        """(B, d_q), (B, S, d_k) -> (B, S)"""
        return (F.linear(keys, self.W_a.weight) * query.unsqueeze(-2)).sum(-1)

    def forward(self, query, keys, lengths):
        weights = masked_softmax(self.score(query, keys), lengths)
        context = (keys * weights.unsqueeze(-1)).sum(-2)
        return context, weights
''',
)
_S2S_LUONG_HEAD = '''class LuongDecoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, context_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.cell = nn.GRUCell(embed_dim, hidden_dim)
        self.attention = GeneralAttention(hidden_dim, context_dim)
        self.W_c = nn.Linear(context_dim + hidden_dim, hidden_dim, bias=False)
        self.output = nn.Linear(hidden_dim, vocab_size)

'''
_S2S_LUONG_STYLES = (
    # Keyword call of the attention, F.linear with W_c's weight, hstack.
    _S2S_LUONG_HEAD + '''    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        new_state = self.cell(self.embedding(previous_tokens), previous_hidden)  # H_i first
        context, weights = self.attention(query=new_state, keys=encoder_states, lengths=source_lengths)
        h_tilde = torch.tanh(F.linear(torch.hstack([context, new_state]), self.W_c.weight))
        return self.output(h_tilde), new_state, weights
''',
    # The attentional state in a method of its own; W_c split into its context and state halves.
    _S2S_LUONG_HEAD + '''    def attentional_state(self, context, hidden):
        """tanh(W_c [C; H]) = tanh(W_c[:, :C] C + W_c[:, C:] H)"""
        C = context.shape[-1]
        return torch.tanh(context @ self.W_c.weight[:, :C].T + hidden @ self.W_c.weight[:, C:].T)

    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        x = self.embedding(previous_tokens)
        h = self.cell(x, previous_hidden)
        c, a = self.attention(h, encoder_states, source_lengths)
        logits = self.output(self.attentional_state(c, h))
        return logits, h, a
''',
    # Shape asserts of its own, and a comment that names torch.softmax.
    _S2S_LUONG_HEAD + '''    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        # Luong et al. (2015), eq. 5 and 6; the softmax is masked_softmax's, never torch.softmax
        B = previous_tokens.shape[0]
        hidden = self.cell(self.embedding(previous_tokens), previous_hidden)
        assert hidden.shape == previous_hidden.shape
        context, weights = self.attention(hidden, encoder_states, source_lengths)
        assert weights.shape == (B, encoder_states.shape[1])
        combined = torch.cat((context, hidden), dim=1)
        return self.output(self.W_c(combined).tanh()), hidden, weights
''',
)
for _turn, _submission in enumerate(SEQ2SEQ.values()):
    _submission.answers.setdefault("GeneralAttention", _S2S_GENERAL_STYLES[_turn % len(_S2S_GENERAL_STYLES)])
    _submission.answers.setdefault("LuongDecoder", _S2S_LUONG_STYLES[_turn % len(_S2S_LUONG_STYLES)])


# =============================================================================================
# transformer: EncoderLayer(d_model, num_heads, d_ff, norm_first) on the given MultiHeadAttention, rope(x, positions,
# base), causal_tiled_attention(queries, keys, values, tile_size, window=None) -> (output, logsumexp), and
# RotaryCachedSelfAttention(d_model, num_heads, base) over a cache of rotated keys.
# =============================================================================================

TRANSFORMER: dict[str, Honest] = {}

_TF_CACHE_INIT = '''class RotaryCachedSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        self.num_heads, self.base = num_heads, base
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

'''

TRANSFORMER["pytorch-source-gptj-row-loop"] = Honest(
    "PyTorch's own TransformerEncoderLayer source (_sa_block, _ff_block, x = x + ... in an if/else); GPT-J's "
    "rotate_every_two with cos and sin repeat_interleaved, float32 frequencies from einsum; the tiled attention "
    "one query at a time (a Python loop over rows, each reading only its own tiles) with a module-level helper "
    "for the online update; the cache head by head (rope called per head on (B, T, d_head), so the grader's "
    "stand-ins are not asked and the student's own rope answers).",
    {
        "EncoderLayer": '''class EncoderLayer(nn.Module):
    # after torch/nn/modules/transformer.py (TransformerEncoderLayer.forward)
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def _sa_block(self, x, mask):
        return self.self_attention(x, x, x, mask=mask)[0]

    def _ff_block(self, x):
        return self.linear2(F.relu(self.linear1(x)))

    def forward(self, src, mask=None):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, mask))
            x = self.norm2(x + self._ff_block(x))
        return x
''',
        "rope": '''def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def rope(x, positions, base=10000.0):
    dim = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    sinusoid = torch.einsum("i,j->ij", positions.float(), inv_freq)  # (S, d / 2), as GPT-J
    sin = sinusoid.sin().repeat_interleave(2, dim=-1).to(x.dtype)
    cos = sinusoid.cos().repeat_interleave(2, dim=-1).to(x.dtype)
    return x * cos + rotate_every_two(x) * sin
''',
        "causal_tiled_attention": '''def online_update(state, scores, tile_values):
    """One tile of the online softmax for one query: state = (m, l, acc), scores (B, k), tile_values (B, k, d_v)."""
    m, l, acc = state
    m_new = torch.maximum(m, scores.max(dim=-1).values)  # (B,): each row has a visible key here
    alpha = torch.exp(m - m_new)
    p = torch.exp(scores - m_new[:, None])
    return m_new, l * alpha + p.sum(-1), acc * alpha[:, None] + torch.bmm(p[:, None, :], tile_values)[:, 0]


def causal_tiled_attention(queries, keys, values, tile_size, window=None):
    B, T, d = queries.shape
    S = keys.shape[1]
    rows, lses = [], []
    for t in range(T):
        pos = S - T + t
        first = 0 if window is None else max(0, pos - window + 1)  # this row's first key
        state = (queries.new_full((B,), float("-inf")), queries.new_zeros(B), queries.new_zeros(B, values.shape[-1]))
        for start in range(first, pos + 1, tile_size):
            stop = min(start + tile_size, pos + 1)
            scores = (keys[:, start:stop] @ queries[:, t, :, None])[..., 0] / math.sqrt(d)  # (B, k)
            state = online_update(state, scores, values[:, start:stop])
        m, l, acc = state
        rows.append(acc / l[:, None])
        lses.append(m + torch.log(l))
    return torch.stack(rows, dim=1), torch.stack(lses, dim=1)
''',
        "RotaryCachedSelfAttention": _TF_CACHE_INIT + '''    def forward(self, x, past_keys=None, past_values=None):
        B, T, D = x.shape
        dh = D // self.num_heads
        P = 0 if past_keys is None else past_keys.shape[2]
        pos = torch.arange(P, P + T)
        Q, K, V = self.W_q(x), self.W_k(x), self.W_v(x)
        outs, keys, vals = [], [], []
        for h in range(self.num_heads):  # one head at a time
            cols = slice(h * dh, (h + 1) * dh)
            q, k, v = rope(Q[..., cols], pos, self.base), rope(K[..., cols], pos, self.base), V[..., cols]
            if P:
                k = torch.cat([past_keys[:, h], k], dim=1)
                v = torch.cat([past_values[:, h], v], dim=1)
            mask = torch.arange(P + T)[None, :] <= pos[:, None]
            w = masked_softmax(q @ k.transpose(1, 2) / math.sqrt(dh), mask)
            outs.append(w @ v)
            keys.append(k)
            vals.append(v)
        return self.W_o(torch.cat(outs, dim=-1)), torch.stack(keys, dim=1), torch.stack(vals, dim=1)
''',
    },
)

TRANSFORMER["flash-attention-2-notation"] = Honest(
    "FlashAttention-2's Algorithm 1 in its own notation (Q_i blocks of B_r rows, K_j tiles of B_c columns, m_i, "
    "l_i, O_i, L_i = m_i + log l_i), NaN turned to 0 with nan_to_num instead of a shifted maximum, tiles aligned "
    "to multiples of B_c; RoPE as a (S, d/2, 2, 2) rotation matrix and einsum; the encoder layer with one "
    "residual helper; the cache's head helpers (split_heads, merge_heads) in an extra cell at the end; a "
    "scratch cell that runs nn.TransformerEncoderLayer and torch.softmax on the student's own layer.",
    {
        "EncoderLayer": '''class EncoderLayer(nn.Module):
    """Transformer encoder layer: post-LN (Vaswani et al.) or pre-LN (Xiong et al.)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm_first: bool = False) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(d_model, num_heads)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def residual(self, x: torch.Tensor, norm: nn.LayerNorm, sublayer) -> torch.Tensor:
        if self.norm_first:
            return x + sublayer(norm(x))
        return norm(x + sublayer(x))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.residual(x, self.norm1, lambda h: self.self_attention(h, h, h, mask)[0])
        return self.residual(x, self.norm2, lambda h: self.linear2(self.linear1(h).clamp_min(0)))
''',
        "rope": '''def rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    d = x.size(-1)
    theta = torch.pow(torch.tensor(base, dtype=torch.float64), -torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions[:, None].double() * theta[None, :]  # (S, d/2)
    c, s = torch.cos(angle), torch.sin(angle)
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2).to(x.dtype)  # (S, d/2, 2, 2)
    pairs = x.reshape(*x.shape[:-1], d // 2, 2)
    return torch.einsum("...sdij,...sdj->...sdi", R, pairs).reshape(x.shape)
''',
        "causal_tiled_attention": '''import math

VERBOSE = False


def causal_tiled_attention(queries, keys, values, tile_size, window=None):
    """FlashAttention-2, Algorithm 1 (forward), with a causal / sliding-window mask."""
    B, N_q, d = queries.shape
    N_k = keys.shape[1]
    B_r = B_c = tile_size
    offset = N_k - N_q
    O, L = [], []
    for i in range(math.ceil(N_q / B_r)):
        Q_i = queries[:, i * B_r:(i + 1) * B_r]
        rows = torch.arange(i * B_r, i * B_r + Q_i.shape[1]) + offset
        lo = 0 if window is None else max(int(rows[0]) - window + 1, 0)
        m_i = torch.full(Q_i.shape[:2] + (1,), -float("inf"), dtype=Q_i.dtype)
        l_i = torch.zeros_like(m_i)
        O_i = torch.zeros(Q_i.shape[:2] + (values.shape[-1],), dtype=Q_i.dtype)
        for j in range(lo // B_c, int(rows[-1]) // B_c + 1):
            K_j, V_j = keys[:, j * B_c:(j + 1) * B_c], values[:, j * B_c:(j + 1) * B_c]
            cols = torch.arange(j * B_c, j * B_c + K_j.shape[1])
            S_ij = Q_i @ K_j.mT / math.sqrt(d)
            allowed = cols[None, :] <= rows[:, None]
            if window is not None:
                allowed = allowed & (cols[None, :] > rows[:, None] - window)
            S_ij = S_ij.masked_fill(~allowed, -float("inf"))
            m_new = torch.maximum(m_i, S_ij.amax(-1, keepdim=True))
            P_ij = torch.nan_to_num(torch.exp(S_ij - m_new), nan=0.0)  # a row with nothing yet: -inf - -inf
            scale = torch.nan_to_num(torch.exp(m_i - m_new), nan=0.0)
            l_i = scale * l_i + P_ij.sum(-1, keepdim=True)
            O_i = scale * O_i + P_ij @ V_j
            m_i = m_new
            if VERBOSE:
                print(i, j, tuple(S_ij.shape))
        O.append(O_i / l_i)
        L.append((m_i + torch.log(l_i)).squeeze(-1))
    return torch.cat(O, dim=1), torch.cat(L, dim=1)
''',
        "RotaryCachedSelfAttention": _TF_CACHE_INIT + '''    def forward(self, x, past_keys=None, past_values=None):
        T = x.shape[1]
        P = past_keys.shape[-2] if past_keys is not None else 0
        positions = torch.arange(P, P + T)
        q = rope(split_heads(self.W_q(x), self.num_heads), positions, self.base)
        k = rope(split_heads(self.W_k(x), self.num_heads), positions, self.base)
        v = split_heads(self.W_v(x), self.num_heads)
        keys = k if past_keys is None else torch.cat([past_keys, k], dim=-2)
        vals = v if past_values is None else torch.cat([past_values, v], dim=-2)
        mask = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)
        scores = torch.matmul(q, keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return self.W_o(merge_heads(torch.matmul(masked_softmax(scores, mask), vals))), keys, vals
''',
    },
    extra_cells=(
        '''def split_heads(x, num_heads):
    """(B, S, d_model) -> (B, h, S, d_head)"""
    B, S, D = x.shape
    return x.view(B, S, num_heads, D // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, h, S, d_head) -> (B, S, d_model)"""
    B, H, S, Dh = x.shape
    return x.transpose(1, 2).reshape(B, S, H * Dh)
''',
        '''# scratch: my layer against PyTorch's, and my tiles against torch.softmax (outside any graded function)
mine = load_weights(EncoderLayer(8, 2, 16, norm_first=True), seed=0)
x = torch.randn(2, 5, 8)
with torch.no_grad():
    print((mine(x) - torch_encoder_layer(mine)(x)).abs().max())
q, k, v = torch.randn(1, 6, 4), torch.randn(1, 6, 4), torch.randn(1, 6, 3)
scores = (q @ k.mT / 2).masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
print(torch.allclose(causal_tiled_attention(q, k, v, 4)[0], torch.softmax(scores, -1) @ v, atol=1e-5))
''',
    ),
)

TRANSFORMER["float64-accumulators-asserts"] = Honest(
    "A careful engineer: asserts of its own (T <= S, even d), the online softmax accumulated in float64 and cast "
    "back at the end, a guard written as torch.where(m == -inf, 0, m), logsumexp of each tile merged with "
    "logaddexp; rope with the pairs as x.unflatten and torch.complex; the encoder layer with F.layer_norm on the "
    "modules' weights; the cache's positions as arange(T) + P and its mask from torch.tril; warnings.warn for a "
    "window wider than the sequence.",
    {
        "EncoderLayer": '''class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm_first = bool(norm_first)

    @staticmethod
    def _ln(norm, x):
        return F.layer_norm(x, (x.shape[-1],), weight=norm.weight, bias=norm.bias, eps=norm.eps)

    def forward(self, x, mask=None):
        assert x.dim() == 3, "x is (B, S, d_model)"
        attend = lambda h: self.self_attention(h, h, h, mask)[0]
        ffn = lambda h: self.linear2(torch.clamp(self.linear1(h), min=0.0))
        if self.norm_first:
            x = x + attend(self._ln(self.norm1, x))
            x = x + ffn(self._ln(self.norm2, x))
            return x
        x = self._ln(self.norm1, x + attend(x))
        return self._ln(self.norm2, x + ffn(x))
''',
        "rope": '''def rope(x, positions, base=10000.0):
    assert x.shape[-1] % 2 == 0, "RoPE needs an even number of features"
    d = x.shape[-1]
    m = torch.arange(d // 2, dtype=torch.float64)
    angle = positions.to(torch.float64).unsqueeze(-1) * base ** (-2.0 * m / d)
    z = x.to(torch.float64).unflatten(-1, (d // 2, 2))
    z = torch.complex(z[..., 0], z[..., 1]) * torch.exp(1j * angle)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2).to(x.dtype)
''',
        "causal_tiled_attention": '''import warnings


def causal_tiled_attention(queries, keys, values, tile_size, window=None):
    B, T, d = queries.shape
    S = keys.shape[1]
    assert T <= S, "the queries stand at the last T of the S positions"
    if window is not None and window > S:
        warnings.warn("the window is wider than the sequence: plain causal attention")
    q = queries.to(torch.float64) / d ** 0.5
    out_rows, lse_rows = [], []
    for q0 in range(0, T, tile_size):
        qb = q[:, q0:q0 + tile_size]
        qpos = torch.arange(S - T + q0, S - T + q0 + qb.shape[1])
        start = 0 if window is None else max(0, int(qpos[0]) - window + 1)
        lse = torch.full(qb.shape[:2], -torch.inf, dtype=torch.float64)
        acc = torch.zeros(*qb.shape[:2], values.shape[-1], dtype=torch.float64)  # normalised so far
        for k0 in range(start, int(qpos[-1]) + 1, tile_size):
            k1 = min(k0 + tile_size, int(qpos[-1]) + 1)
            kpos = torch.arange(k0, k1)
            scores = qb @ keys[:, k0:k1].to(torch.float64).transpose(-1, -2)
            keep = kpos <= qpos[:, None]
            if window is not None:
                keep = keep & (kpos > qpos[:, None] - window)
            scores = torch.where(keep, scores, -torch.inf)
            new = torch.logaddexp(lse, torch.logsumexp(scores, dim=-1))
            ref = torch.where(new == -torch.inf, 0.0, new)
            acc = acc * torch.exp(lse - ref)[..., None] + torch.exp(scores - ref[..., None]) @ values[:, k0:k1].to(torch.float64)
            lse = new
        out_rows.append(acc)
        lse_rows.append(lse)
    return torch.cat(out_rows, 1).to(queries.dtype), torch.cat(lse_rows, 1).to(queries.dtype)
''',
        "RotaryCachedSelfAttention": _TF_CACHE_INIT + '''    def forward(self, x, past_keys=None, past_values=None):
        B, T, D = x.shape
        H, Dh = self.num_heads, D // self.num_heads
        P = 0 if past_keys is None else past_keys.shape[2]
        assert Dh % 2 == 0
        positions = torch.arange(T) + P
        to_heads = lambda t: t.reshape(B, T, H, Dh).transpose(1, 2)
        q = rope(to_heads(self.W_q(x)), positions, base=self.base)
        k = rope(to_heads(self.W_k(x)), positions, base=self.base)
        v = to_heads(self.W_v(x))
        if past_keys is not None:
            k = torch.cat([past_keys, k], dim=2)
            v = torch.cat([past_values, v], dim=2)
        mask = torch.tril(torch.ones(T, P + T, dtype=torch.bool), diagonal=P)
        out = masked_softmax(q @ k.transpose(2, 3) / Dh ** 0.5, mask) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, T, D)), k, v
''',
    },
)

CORPUS: dict[str, dict[str, Honest]] = {
    "soft-hard": SOFT_HARD,
    "three-stages": THREE_STAGES,
    "seq2seq-attention": SEQ2SEQ,
    "transformer": TRANSFORMER,
}
