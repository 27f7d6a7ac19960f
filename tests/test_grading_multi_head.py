"""The assignment ``multi-head`` graded end to end: real nbgrader, the sandbox, a real gradebook.

One batch: the solution written in another style (full marks), a typical bug in each part (each losing
exactly the points of its own part: the module tests hand correct per-head attention to a module that asks
for it, so a bug in ``scaled_dot_product`` is charged once), and a shortcut through PyTorch's own attention
in the grouped-query part, which loses that part's points only and is flagged.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

import in_process
from attention_course.grading.checks import multi_head
from attention_course.grading.nbgrader_bridge import COURSE_ID
from grading_support import assert_gradebook_holds_the_results, assert_only_these_checks_failed, filled, graded_batch, released_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = NOTEBOOK = "multi-head"
POINTS = {"test-scaled-dot-product": 2, "test-multi-head": 4, "test-grouped-query": 4, "test-cached-attention": 4}
SOLUTION = in_process.solution_cells(ASSIGNMENT)

# Correct, in another style: einsum, a loop over the heads (each head its own call, so the grader's
# stand-in is not asked and the student's own scaled_dot_product answers), expand + reshape to share
# the key/value heads, the causal mask built from positions, the cache as a padded copy.
OTHER_STYLE = {
    "scaled_dot_product": '''
def scaled_dot_product(queries, keys, values, mask=None):
    d = queries.size(-1)
    scores = torch.einsum("...qd,...kd->...qk", queries, keys) * d ** -0.5
    weights = masked_softmax(scores, mask=mask)
    return torch.einsum("...qk,...kv->...qv", weights, values), weights
''',
    "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values, mask=None):
        q, k, v = self.W_q(queries), self.W_k(keys), self.W_v(values)
        outputs, all_weights = [], []
        for head in range(self.num_heads):  # one head at a time, as in the paper's formula
            part = slice(head * self.d_k, (head + 1) * self.d_k)
            head_mask = None if mask is None else mask.expand(q.shape[0], self.num_heads, q.shape[1], k.shape[1])[:, head]
            out, w = scaled_dot_product(q[..., part], k[..., part], v[..., part], head_mask)
            outputs.append(out)
            all_weights.append(w)
        return self.W_o(torch.cat(outputs, dim=-1)), torch.stack(all_weights, dim=1)
''',
    "GroupedQueryAttention": '''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.h_kv, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_k)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values, mask=None):
        B, Q, _ = queries.shape
        K = keys.shape[1]
        q = self.W_q(queries).view(B, Q, self.h, self.d_k).permute(0, 2, 1, 3)
        k = self.W_k(keys).view(B, K, self.h_kv, 1, self.d_k).expand(B, K, self.h_kv, self.h // self.h_kv, self.d_k)
        v = self.W_v(values).view(B, K, self.h_kv, 1, self.d_k).expand(B, K, self.h_kv, self.h // self.h_kv, self.d_k)
        k = k.reshape(B, K, self.h, self.d_k).permute(0, 2, 1, 3)
        v = v.reshape(B, K, self.h, self.d_k).permute(0, 2, 1, 3)
        out, w = scaled_dot_product(q, k, v, mask=mask)
        return self.W_o(out.permute(0, 2, 1, 3).reshape(B, Q, self.h * self.d_k)), w
''',
    "CachedSelfAttention": '''
class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, past_keys=None, past_values=None):
        B, T, D = x.shape
        heads = lambda t: t.view(B, T, self.num_heads, D // self.num_heads).transpose(1, 2)
        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        P = 0 if past_keys is None else past_keys.size(2)
        if P:
            k = torch.cat((past_keys, k), dim=-2)
            v = torch.cat((past_values, v), dim=-2)
        query_positions = torch.arange(P, P + T)[:, None]  # where the new tokens sit
        key_positions = torch.arange(P + T)[None, :]
        out, _ = scaled_dot_product(q, k, v, key_positions <= query_positions)
        return self.W_o(out.transpose(1, 2).reshape(B, T, D)), k, v
''',
}


def with_bug(cell: str, before: str, after: str) -> dict[str, str]:
    assert before in SOLUTION[cell], (cell, before)
    return {**SOLUTION, cell: SOLUTION[cell].replace(before, after)}


# The solution itself is graded by `attention-course release`, which must give it full marks.
SAMPLES = {
    "other-style": OTHER_STYLE,
    "scaled-by-d": with_bug("scaled_dot_product", "math.sqrt(queries.shape[-1])", "queries.shape[-1]"),
    "heads-split-along-the-sequence": with_bug(
        "MultiHeadAttention", "x.reshape(B, x.shape[1], h, d_model // h).transpose(1, 2)",
        "x.reshape(B, h, x.shape[1], d_model // h)"),
    "kv-heads-in-the-wrong-order": with_bug("GroupedQueryAttention", ".repeat_interleave(group_size, dim=1)",
                                            ".repeat(1, group_size, 1, 1)"),
    "causal-mask-not-shifted": with_bug("CachedSelfAttention", ".tril(diagonal=num_past)", ".tril()"),
    "torch-attention-shortcut": with_bug(
        "GroupedQueryAttention",
        "per_head, weights = scaled_dot_product(query_heads, shared_keys, shared_values, mask)",
        "per_head = F.scaled_dot_product_attention(query_heads, shared_keys, shared_values, attn_mask=mask)\n"
        "        weights = masked_softmax(query_heads @ shared_keys.transpose(-2, -1) / math.sqrt(self.d_head), mask)"),
}

# Which test cell each sample fails, and a phrase its feedback must contain.
EXPECTED_FAILURES = {
    "other-style": {},
    "scaled-by-d": {"test-scaled-dot-product": "wrong values"},
    "heads-split-along-the-sequence": {"test-multi-head": "wrong values"},
    "kv-heads-in-the-wrong-order": {"test-grouped-query": "wrong values"},
    "causal-mask-not-shifted": {"test-cached-attention": "wrong values"},
    "torch-attention-shortcut": {"test-grouped-query": "forbidden shortcut: F.scaled_dot_product_attention"},
}
EXPECTED_FLAGS = {student: [] for student in SAMPLES} | {
    "torch-attention-shortcut": [
        "forbidden shortcuts: GroupedQueryAttention uses F.scaled_dot_product_attention (or a relative)"],
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    released = released_notebook(tmp_path_factory, ASSIGNMENT, NOTEBOOK)
    return graded_batch(tmp_path_factory, ASSIGNMENT, {student: filled(released, answers)
                                                       for student, answers in SAMPLES.items()})


@pytest.mark.slow
@pytest.mark.parametrize("student", list(SAMPLES))
def test_each_bug_costs_exactly_the_points_of_its_own_part(graded, student):
    _, summaries, results = graded
    result = results[student]
    assert result.flags == EXPECTED_FLAGS[student]
    assert summaries[student].flags == [f"{NOTEBOOK}: {flag}" for flag in EXPECTED_FLAGS[student]]
    assert_only_these_checks_failed(result, summaries[student], POINTS, EXPECTED_FAILURES[student])


@pytest.mark.slow
def test_the_gradebook_holds_the_same_scores_and_feedback_names_hidden_cases_by_label_only(graded):
    course, _, results = graded
    assert_gradebook_holds_the_results(course.root, COURSE_ID, ASSIGNMENT, NOTEBOOK,
                                       {s: results[s] for s in SAMPLES}, 14)
    message = results["causal-mask-not-shifted"].checks["test-cached-attention"]["message"]
    assert re.search(r"hidden case '.*a cache of \d+ earlier tokens", message)
    assert "run_hidden_check" not in message and "BEGIN HIDDEN TESTS" not in message


# ---------------------------------------------------------------------------------------------
# The grader's references (fast, in this process).


def test_the_setup_cells_masked_softmax_is_the_graders():
    source = nbformat.read(ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    setup = next(c.source for c in source.cells if (c.metadata.get("nbgrader") or {}).get("grade_id") == "setup")
    namespace: dict = {}
    exec(compile(setup, "setup", "exec"), namespace)
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 4, 5, generator=generator, dtype=torch.float64) * 5
    mask = torch.rand(2, 1, 4, 5, generator=generator) < 0.5
    mask[0, 0, 1] = False  # a row with nothing to attend to
    for m in (None, mask):
        torch.testing.assert_close(namespace["masked_softmax"](scores, m), multi_head.masked_softmax(scores, m))
    assert torch.equal(multi_head.masked_softmax(scores, mask)[0, :, 1], torch.zeros(3, 5, dtype=torch.float64))


def _state(num_heads: int, num_kv_heads: int, d_head: int, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return multi_head._weights(generator, torch.float64, num_heads * d_head, num_kv_heads * d_head)


def test_the_grouped_reference_is_pytorchs_grouped_attention_and_multi_head_when_nothing_is_shared():
    queries, keys, values = torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 5, 8, dtype=torch.float64), \
        torch.randn(2, 5, 8, dtype=torch.float64)
    mask = torch.rand(2, 4, 3, 5) < 0.7
    mask[..., 0] = True
    state = _state(4, 4, 2, seed=1)
    ours = multi_head.grouped_query_attention(state, 4, 4, queries, keys, values, mask)
    theirs = multi_head.torch_attention(state, 4, queries, keys, values, mask)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)
    state = _state(4, 2, 2, seed=2)
    output, _ = multi_head.grouped_query_attention(state, 4, 2, queries, keys, values, mask)
    heads = lambda x, n: x.unflatten(-1, (n, 2)).transpose(1, 2)  # noqa: E731
    lin = lambda name, x: F.linear(x, state[f"{name}.weight"], state[f"{name}.bias"])  # noqa: E731
    pytorch = F.scaled_dot_product_attention(heads(lin("W_q", queries), 4), heads(lin("W_k", keys), 2),
                                             heads(lin("W_v", values), 2), attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(output, lin("W_o", pytorch.transpose(1, 2).flatten(2)))


def test_the_cached_reference_computed_token_by_token_equals_the_whole_causal_computation():
    state = _state(2, 2, 3, seed=3)
    sequence = torch.randn(2, 5, 6, dtype=torch.float64)
    whole = multi_head.torch_attention(state, 2, sequence, sequence, sequence,
                                       torch.ones(5, 5, dtype=torch.bool).tril())[0]
    for start in range(5):
        case = multi_head._cached_case("", state, 2, sequence[:, :start], sequence[:, start:start + 1])
        output, keys, values = multi_head._cached_reference(case)
        torch.testing.assert_close(output, whole[:, start:start + 1])
        assert keys.shape == values.shape == (2, 2, start + 1, 3)
    # The stand-in's mask is the one the task describes: new token t sees positions 0 … P + t.
    assert multi_head.causal_offset_mask(2, 3).tolist() == [[True, True, True, True, False],
                                                           [True, True, True, True, True]]
    assert math.isclose(sum(c.points for c in multi_head.CHECKS if c.new), 8)
