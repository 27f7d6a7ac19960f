"""The assignment ``three-stages`` graded end to end: real nbgrader, the sandbox, a real gradebook.

Each sample submission has one bug (or none), and must lose exactly the points of the test cell that
targets the function with the bug: a bug in ``masked_softmax`` must not also cost ``attention``'s points.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch

from attention_course.grading.checks import three_stages
from attention_course.grading.nbgrader_bridge import COURSE_ID
from grading_support import assert_gradebook_holds_the_results, assert_only_these_checks_failed, filled, graded_batch, released_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = NOTEBOOK = "three-stages"
POINTS = {"test-dot-score": 1, "test-scaled-dot-score": 1, "test-cosine-score": 1, "test-additive-score": 2,
          "test-masked-softmax": 2, "test-attention": 1, "test-packing-mask": 3, "test-masked-attention": 5}

# The instructor's solution, one entry per solution cell; each bug below is a small edit of it.
SOLUTION = {
    "dot_score": '''
def dot_score(queries, keys):
    return torch.bmm(queries, keys.transpose(1, 2))
''',
    "scaled_dot_score": '''
def scaled_dot_score(queries, keys):
    return dot_score(queries, keys) / math.sqrt(queries.shape[-1])
''',
    "cosine_score": '''
def cosine_score(queries, keys, eps=1e-8):
    unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(eps)
    unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)
    return dot_score(unit_queries, unit_keys)
''',
    "AdditiveScore": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, queries, keys):
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1))
        return self.w_v(features).squeeze(-1)
''',
    "masked_softmax": '''
def masked_softmax(scores, valid_lens=None):
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
    "attention": '''
def attention(queries, keys, values, score_fn, valid_lens=None):
    weights = masked_softmax(score_fn(queries, keys), valid_lens)
    return torch.bmm(weights, values), weights
''',
    "packing_mask": '''
def packing_mask(query_segments, key_segments, causal=False):
    same_sequence = query_segments.unsqueeze(2) == key_segments.unsqueeze(1)
    real_keys = (key_segments >= 0).unsqueeze(1)
    not_ahead = torch.ones(query_segments.shape[1], key_segments.shape[1], dtype=torch.bool).tril()
    return same_sequence & real_keys & not_ahead if causal else same_sequence & real_keys
''',
    "masked_attention": '''
def masked_attention(queries, keys, values, score_fn, keep):
    logits = score_fn(queries, keys).masked_fill(~keep, -math.inf)
    top = logits.amax(dim=-1, keepdim=True)
    top = top.masked_fill(torch.isinf(top), 0.0)
    exps = (logits - top).exp()
    weights = exps / exps.sum(dim=-1, keepdim=True).clamp_min(1.0)
    return weights @ values, weights
''',
}

# Correct, in another style: einsum, a norm product in the cosine, the student's own softmax helper,
# torch.where for the mask, valid_lens passed by keyword.
OTHER_STYLE = {
    "dot_score": '''
def dot_score(queries, keys):
    return torch.einsum("bqd,bkd->bqk", queries, keys)
''',
    "scaled_dot_score": '''
def scaled_dot_score(queries, keys):
    d = queries.size(-1)
    return torch.einsum("bqd,bkd->bqk", queries, keys) * d ** -0.5
''',
    "cosine_score": '''
def cosine_score(queries, keys, eps=1e-8):
    lengths = queries.norm(dim=-1)[:, :, None] * keys.norm(dim=-1)[:, None, :]
    return dot_score(queries, keys) / lengths.clamp_min(eps)
''',
    "AdditiveScore": '''
class AdditiveScore(nn.Module):
    def __init__(self, query_dim, key_dim, hidden_dim):
        super().__init__()
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.w_v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, queries, keys):
        q = self.W_q(queries)[:, :, None, :]
        k = self.W_k(keys)[:, None, :, :]
        return (torch.tanh(q + k) * self.w_v.weight[0]).sum(dim=-1)
''',
    "masked_softmax": '''
def softmax(x, dim=-1):
    top = torch.nan_to_num(x.max(dim=dim, keepdim=True).values, neginf=0.0)
    e = (x - top).exp()
    total = e.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, e / total, torch.zeros_like(e))


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return softmax(scores)
    B, Q, K = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.unsqueeze(1).expand(B, Q)
    padding = torch.arange(K).view(1, 1, K) >= valid_lens.unsqueeze(-1)
    return softmax(torch.where(padding, torch.full_like(scores, float("-inf")), scores))
''',
    "attention": '''
def attention(queries, keys, values, score_fn, valid_lens=None):
    w = masked_softmax(score_fn(queries, keys), valid_lens=valid_lens)
    return torch.einsum("bqk,bkv->bqv", w, values), w
''',
    "packing_mask": '''
def packing_mask(query_segments, key_segments, causal=False):
    keep = torch.eq(query_segments[..., :, None], key_segments[..., None, :]) & key_segments.ge(0)[..., None, :]
    if causal:
        positions = torch.arange(query_segments.shape[-1])
        keep = keep & (positions[None, :] <= positions[:, None])
    return keep
''',
    "masked_attention": '''
def masked_attention(queries, keys, values, score_fn, keep):
    scores = score_fn(queries, keys)
    w = softmax(torch.where(keep, scores, torch.full_like(scores, float("-inf"))))  # the helper above
    return torch.einsum("bqk,bkv->bqv", w, values), w
''',
}


def with_bug(function: str, before: str, after: str) -> dict[str, str]:
    assert before in SOLUTION[function], (function, before)
    return {**SOLUTION, function: SOLUTION[function].replace(before, after)}


# The solution itself is graded by `attention-course release`, which must give it full marks.
SAMPLES = {
    "other-style": OTHER_STYLE,
    "mask-zero": with_bug("masked_softmax", "-math.inf)", "0.0)"),
    "cosine-no-eps": {**SOLUTION, "cosine_score": '''
def cosine_score(queries, keys, eps=1e-8):
    lengths = queries.norm(dim=-1).unsqueeze(2) * keys.norm(dim=-1).unsqueeze(1)
    return dot_score(queries, keys) / lengths
'''},
    "scaled-by-d": with_bug("scaled_dot_score", "math.sqrt(queries.shape[-1])", "queries.shape[-1]"),
    "in-place": with_bug("masked_softmax", "masked = scores.masked_fill(", "masked = scores.masked_fill_("),
    "attention-ignores-mask": with_bug("attention", "score_fn(queries, keys), valid_lens)", "score_fn(queries, keys))"),
    "forbidden-cosine": {**SOLUTION, "cosine_score": '''
def cosine_score(queries, keys, eps=1e-8):
    return F.cosine_similarity(queries.unsqueeze(2), keys.unsqueeze(1), dim=-1, eps=eps)
'''},
    "padding-sees-padding": with_bug("packing_mask", "same_sequence & real_keys & not_ahead if causal else "
                                     "same_sequence & real_keys", "same_sequence & not_ahead if causal else same_sequence"),
    "empty-row-nan": with_bug("masked_attention", "top = top.masked_fill(torch.isinf(top), 0.0)", "pass"),
    # A bug in masked_softmax costs its own points only: masked_attention does not go through it.
    "mask-large-negative": with_bug("masked_softmax", "-math.inf)", "-1e4)"),
    "masked-attention-forbidden-softmax": {**SOLUTION, "masked_attention": '''
def masked_attention(queries, keys, values, score_fn, keep):
    weights = torch.softmax(score_fn(queries, keys).masked_fill(~keep, -math.inf), dim=-1).nan_to_num(0.0)
    return weights @ values, weights
'''},
}

# Which test cell each sample fails, and a phrase its feedback must contain.
EXPECTED_FAILURES = {
    "other-style": {},
    "mask-zero": {"test-masked-softmax": "wrong values"},
    "cosine-no-eps": {"test-cosine-score": "NaN"},
    "scaled-by-d": {"test-scaled-dot-score": "wrong values"},
    "in-place": {"test-masked-softmax": "modified in place"},
    "attention-ignores-mask": {"test-attention": "wrong values"},
    "forbidden-cosine": {"test-cosine-score": "forbidden shortcut: cosine similarity (F.cosine_similarity"},
    "padding-sees-padding": {"test-packing-mask": "wrong entries"},
    "empty-row-nan": {"test-masked-attention": "NaN"},
    "mask-large-negative": {"test-masked-softmax": "wrong values"},
    "masked-attention-forbidden-softmax": {"test-masked-attention": "forbidden shortcut: softmax"},
}
# What the instructor is told about each sample beyond its score.
EXPECTED_FLAGS = {student: [] for student in SAMPLES} | {
    "forbidden-cosine": ["forbidden shortcuts: cosine_score uses cosine similarity (F.cosine_similarity or a relative)"],
    "masked-attention-forbidden-softmax": ["forbidden shortcuts: masked_attention uses softmax (torch.softmax, F.softmax, "
                                           "Tensor.softmax, nn.Softmax or a relative)"],
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    released = released_notebook(tmp_path_factory, ASSIGNMENT, NOTEBOOK)
    return graded_batch(tmp_path_factory, ASSIGNMENT, {student: filled(released, answers)
                                                       for student, answers in SAMPLES.items()})


@pytest.mark.slow
@pytest.mark.parametrize("student", list(SAMPLES))
def test_each_bug_costs_exactly_the_points_of_its_own_test(graded, student):
    _, summaries, results = graded
    result = results[student]
    assert result.flags == EXPECTED_FLAGS[student]
    assert summaries[student].flags == [f"{NOTEBOOK}: {flag}" for flag in EXPECTED_FLAGS[student]]
    assert_only_these_checks_failed(result, summaries[student], POINTS, EXPECTED_FAILURES[student])


@pytest.mark.slow
def test_the_gradebook_holds_the_same_scores_per_test_cell(graded):
    course, _, results = graded
    assert_gradebook_holds_the_results(course.root, COURSE_ID, ASSIGNMENT, NOTEBOOK,
                                       {s: results[s] for s in SAMPLES}, sum(POINTS.values()))


@pytest.mark.slow
def test_hidden_cases_are_named_only_by_their_labels_in_feedback(graded):
    _, _, results = graded
    message = results["mask-zero"].checks["test-masked-softmax"]["message"]
    assert re.search(r"hidden case '.*valid_lens", message)
    assert "run_hidden_check" not in message and "BEGIN HIDDEN TESTS" not in message


def test_the_notebooks_given_score_functions_are_the_graders():
    """The setup cell's distance_score and bilinear_score compute what the grader's references assume."""
    source = nbformat.read(ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    setup = next(c.source for c in source.cells if (c.metadata.get("nbgrader") or {}).get("grade_id") == "setup")
    namespace: dict = {}
    exec(compile(setup, "setup", "exec"), namespace)
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        queries = torch.randn(2, 3, 4, generator=generator).to(dtype)
        keys = torch.randn(2, 5, 4, generator=generator).to(dtype)
        other_keys = torch.randn(2, 5, 3, generator=generator).to(dtype)
        for name, score_fn in three_stages.GIVEN_SCORES.items():
            for k in (keys, other_keys) if name == "bilinear" else (keys,):
                torch.testing.assert_close(namespace["GIVEN_SCORES"][name](queries, k), score_fn(queries, k))
