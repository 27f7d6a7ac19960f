"""The assignment ``transformer`` graded end to end: real nbgrader, the sandbox, a real gradebook.

One batch: the solution written in another style (full marks), a typical bug in each part (each losing
exactly the points of its own part: the cache's test hands correct rotations to a module that asks for them,
so a bug in ``rope`` is charged once), and a shortcut through PyTorch's own layer, which loses its part's
points only and is flagged (tests/hostile_corpus.py has the others: nn.MultiheadAttention, PyTorch's
attention and softmax in the new parts, the seal, the channel, the stand-ins). Then, fast and in this process: the grader's references
against PyTorch and against the package the book prints, and the stand-ins that answer ``rope`` twice.
"""

from __future__ import annotations

import dataclasses
import marshal
import math
import re

import pytest
import torch
import torch.nn.functional as F

import in_process
from attention_course import positions, tiled_attention, transformer as book_transformer
from attention_course.grading import runner
from attention_course.grading.cases import encode_case
from attention_course.grading.checks import checks_for, multi_head, transformer
from attention_course.grading.grade import case_generator, plan_cases
from attention_course.grading.nbgrader_bridge import COURSE_ID
from attention_course.grading.submission import given_helpers
from attention_course.grading.verdicts import Outcome, judge_case
from canonical_bugs import CANONICAL_BUGS
from grading_support import assert_gradebook_holds_the_results, assert_only_these_checks_failed, filled, graded_batch, released_notebook

ASSIGNMENT = NOTEBOOK = "transformer"
POINTS = {"test-encoder-layer": 4, "test-rope": 2, "test-tiled-attention": 6, "test-rotary-cache": 4}
ANSWER_CELLS = ("EncoderLayer", "rope", "causal_tiled_attention", "RotaryCachedSelfAttention")
SOLUTION = {cell: source for cell, source in in_process.solution_cells(ASSIGNMENT).items() if cell in ANSWER_CELLS}

# Correct, in another style: F.layer_norm with the modules' own weights and a helper method for both residual
# arrangements; RoPE as complex products with float32 angles (LLaMA's precompute_freqs_cis); the tiled attention
# as one block of all queries, tiles starting at the first key any query sees, and the output kept normalised
# with a running log-sum-exp (torch.logsumexp, torch.logaddexp); the cache with einsum and positions
# arange(T) + P; a scratch cell that compares with torch.softmax outside any graded call.
OTHER_STYLE = {
    "EncoderLayer": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm_first: bool = False):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm_first = norm_first

    def _residual(self, x, norm, sublayer):
        ln = lambda t: F.layer_norm(t, t.shape[-1:], norm.weight, norm.bias, norm.eps)
        return x + sublayer(ln(x)) if self.norm_first else ln(x + sublayer(x))

    def forward(self, x, mask=None):
        x = self._residual(x, self.norm1, lambda h: self.self_attention(h, h, h, mask=mask)[0])
        return self._residual(x, self.norm2, lambda h: self.linear2(F.relu(self.linear1(h))))
''',
    "rope": '''
def rope(x, positions, base=10000.0):
    d = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    freqs_cis = torch.polar(torch.ones(len(positions), d // 2), torch.outer(positions.float(), freqs))
    x_ = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(x_ * freqs_cis).flatten(-2).to(x.dtype)
''',
    "causal_tiled_attention": '''
def causal_tiled_attention(queries, keys, values, tile_size, window=None):
    B, T, d = queries.shape
    S = keys.shape[1]
    pos = torch.arange(S - T, S)  # where the queries stand
    first = 0 if window is None else max(0, S - T - window + 1)  # the first key any query sees
    lse = queries.new_full((B, T), float("-inf"))
    out = queries.new_zeros((B, T, values.shape[-1]))  # normalised so far
    for start in range(first, S, tile_size):
        idx = torch.arange(start, min(start + tile_size, S))
        s = torch.einsum("btd,bkd->btk", queries, keys[:, idx]) * d ** -0.5
        ok = idx[None, :] <= pos[:, None]
        if window is not None:
            ok = ok & (idx[None, :] > pos[:, None] - window)
        s = s.masked_fill(~ok, float("-inf"))
        new_lse = torch.logaddexp(lse, torch.logsumexp(s, dim=-1))
        safe = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)[..., None]
        out = out * torch.exp(lse[..., None] - safe) + torch.einsum("btk,bkv->btv", torch.exp(s - safe), values[:, idx])
        lse = new_lse
    return out, lse
''',
    "RotaryCachedSelfAttention": '''
class RotaryCachedSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, base=10000.0):
        super().__init__()
        self.num_heads, self.base = num_heads, base
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x, past_keys=None, past_values=None):
        B, T, D = x.shape
        H = self.num_heads
        P = past_keys.size(2) if past_keys is not None else 0
        new_positions = torch.arange(T) + P
        q = rope(self.W_q(x).view(B, T, H, D // H).transpose(1, 2), new_positions, base=self.base)
        k = rope(self.W_k(x).view(B, T, H, D // H).transpose(1, 2), new_positions, base=self.base)
        v = self.W_v(x).view(B, T, H, D // H).transpose(1, 2)
        if P:
            k, v = torch.cat((past_keys, k), dim=2), torch.cat((past_values, v), dim=2)
        scores = torch.einsum("bhtd,bhsd->bhts", q, k) / (D // H) ** 0.5
        visible = torch.arange(P + T)[None, :] <= new_positions[:, None]
        out = torch.einsum("bhts,bhsd->bhtd", masked_softmax(scores, visible), v)
        return self.W_o(out.transpose(1, 2).reshape(B, T, D)), k, v
''',
}
SCRATCH = ("# scratch: my masked softmax against PyTorch's, outside any graded function\n"
           "_s = torch.randn(2, 5)\n"
           "print(torch.allclose(masked_softmax(_s), torch.softmax(_s, -1)))")


def with_bug(name: str) -> dict[str, str]:
    _, cell, source, _ = CANONICAL_BUGS[name]
    return {**SOLUTION, cell: source}


def with_change(cell: str, before: str, after: str) -> dict[str, str]:
    assert before in SOLUTION[cell], (cell, before)
    return {**SOLUTION, cell: SOLUTION[cell].replace(before, after)}


# The solution itself is graded by `attention-course release`, which must give it full marks.
SAMPLES = {
    "other-style": (OTHER_STYLE, [SCRATCH]),
    "post-ln-only": (with_bug("encoder layer always post-LN, norm_first ignored"), []),
    "rope-halves": (with_bug("RoPE turning the two halves instead of interleaved pairs"), []),
    "nan-first-tile": (with_bug("online softmax NaN for a row whose first tile is wholly masked"), []),
    "cache-without-offset": (with_bug("rotary cache without the position offset"), []),
    "torch-encoder-layer-shortcut": (with_change(
        "EncoderLayer", "        if self.norm_first:  # pre-LN",
        "        return torch_encoder_layer(self)(x, src_mask=None if mask is None else ~mask.expand(\n"
        "            x.shape[0], self.self_attention.num_heads, x.shape[1], x.shape[1]).flatten(0, 1))\n"
        "        if self.norm_first:  # pre-LN"), []),
}

# Which test cell each sample fails, and a phrase its feedback must contain.
EXPECTED_FAILURES = {
    "other-style": {},
    "post-ln-only": {"test-encoder-layer": "wrong values"},
    "rope-halves": {"test-rope": "wrong values"},
    "nan-first-tile": {"test-tiled-attention": "NaN where the expected values are finite"},
    "cache-without-offset": {"test-rotary-cache": "wrong values"},
    "torch-encoder-layer-shortcut": {"test-encoder-layer": "forbidden shortcut"},
}
EXPECTED_FLAGS = {student: [] for student in SAMPLES} | {
    "torch-encoder-layer-shortcut": ["forbidden shortcuts: EncoderLayer uses "],
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    released = released_notebook(tmp_path_factory, ASSIGNMENT, NOTEBOOK)
    return graded_batch(tmp_path_factory, ASSIGNMENT, {student: filled(released, answers, extra_cells=extra)
                                                       for student, (answers, extra) in SAMPLES.items()})


@pytest.mark.slow
@pytest.mark.parametrize("student", list(SAMPLES))
def test_each_bug_and_shortcut_costs_exactly_the_points_of_its_own_part(graded, student):
    _, summaries, results = graded
    result = results[student]
    assert len(result.flags) == len(EXPECTED_FLAGS[student]), result.flags
    for flag, fragment in zip(result.flags, EXPECTED_FLAGS[student]):
        assert flag.startswith(fragment), result.flags
    assert summaries[student].flags == [f"{NOTEBOOK}: {flag}" for flag in result.flags]
    assert_only_these_checks_failed(result, summaries[student], POINTS, EXPECTED_FAILURES[student])


@pytest.mark.slow
def test_the_gradebook_holds_the_same_scores_and_feedback_names_hidden_cases_by_label_only(graded):
    course, _, results = graded
    assert_gradebook_holds_the_results(course.root, COURSE_ID, ASSIGNMENT, NOTEBOOK,
                                       {s: results[s] for s in SAMPLES}, 16)
    message = results["cache-without-offset"].checks["test-rotary-cache"]["message"]
    assert re.search(r"hidden case '.*after a cache of \d+ earlier tokens", message)
    message = results["nan-first-tile"].checks["test-tiled-attention"]["message"]
    assert re.search(r"hidden case '.*rows whose first tile is wholly masked'", message)
    for result in results.values():
        for check in result.checks.values():
            assert "run_hidden_check" not in check["message"] and "BEGIN HIDDEN TESTS" not in check["message"]


# ---------------------------------------------------------------------------------------------
# The grader's references and stand-ins (fast, in this process).


def test_the_setup_cells_helpers_are_the_graders_and_compute_what_pytorch_computes():
    source = in_process.solution_notebook(ASSIGNMENT)
    setup = next(c.source for c in source.cells if (c.metadata.get("nbgrader") or {}).get("grade_id") == "setup")
    namespace: dict = {}
    exec(compile(setup, "setup", "exec"), namespace)
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 4, 5, generator=generator, dtype=torch.float64) * 5
    mask = torch.rand(2, 1, 4, 5, generator=generator) < 0.5
    mask[0, 0, 1] = False  # a row with nothing to attend to
    for m in (None, mask):
        torch.testing.assert_close(namespace["masked_softmax"](scores, m), transformer.masked_softmax(scores, m))
    # The given MultiHeadAttention is nn.MultiheadAttention with the same weights (and the mask convention).
    state = transformer._weights(generator, torch.float64, 6)
    layer = namespace["MultiHeadAttention"](6, 3).double()
    layer.load_state_dict(state)
    x = torch.randn(2, 4, 6, generator=generator, dtype=torch.float64)
    for m in (None, torch.ones(4, 4, dtype=torch.bool).tril(), torch.rand(2, 3, 4, 4, generator=generator) < 0.7):
        if m is not None:
            m[..., 0] = True  # (PyTorch gives NaN for a row with nothing to attend to)
        with torch.no_grad():
            for ours, theirs in zip(layer(x, x, x, m), multi_head.torch_attention(state, 3, x, x, x, m)):
                torch.testing.assert_close(ours, theirs)


def test_the_references_agree_with_the_package_the_book_prints():
    generator = torch.Generator().manual_seed(1)
    # rope: the book's rotate, for any positions and base.
    x = torch.randn(2, 3, 5, 8, generator=generator, dtype=torch.float64)
    where = torch.tensor([4, 0, 17, 3, 9])
    for base in (10000.0, 100.0):
        torch.testing.assert_close(transformer.rope(x, where, base), positions.rotate(x, where, base))
    # Causal attention: one query at the last position sees every key, as the book's (unmasked) tiled attention.
    queries, keys = torch.randn(2, 1, 4, generator=generator), torch.randn(2, 9, 4, generator=generator)
    values = torch.randn(2, 9, 3, generator=generator)
    output, lse = transformer.causal_attention(queries, keys, values)
    torch.testing.assert_close(output, tiled_attention.tiled_attention(queries, keys, values, tile_size=2))
    torch.testing.assert_close(lse, torch.logsumexp(queries @ keys.transpose(1, 2) / 2.0, dim=-1))
    # Self-attention, causal and sliding-window: PyTorch's attention with the same masks.
    queries = torch.randn(2, 9, 4, generator=generator, dtype=torch.float64)
    for window in (None, 3):
        sees = transformer.visible_keys(9, 9, window)
        output, _ = transformer.causal_attention(queries, queries, queries, window)
        torch.testing.assert_close(output, F.scaled_dot_product_attention(queries, queries, queries, attn_mask=sees))
    # The encoder layer's reference: the book's EncoderLayer (its own parameter names) with the same weights.
    state = transformer._encoder_weights(generator, torch.float64, 6, 10)
    x = torch.randn(2, 5, 6, generator=generator, dtype=torch.float64)
    padding = torch.tensor([[True] * 5, [True, True, True, False, False]])
    for norm_first in (False, True):
        book = book_transformer.EncoderLayer(6, 3, 10, norm_first=norm_first).double()
        book.load_state_dict({
            **{k: v for k, v in state.items() if k.startswith("self_attention.")},
            "feed_forward.linear1.weight": state["linear1.weight"], "feed_forward.linear1.bias": state["linear1.bias"],
            "feed_forward.linear2.weight": state["linear2.weight"], "feed_forward.linear2.bias": state["linear2.bias"],
            "attention_block.norm.weight": state["norm1.weight"], "attention_block.norm.bias": state["norm1.bias"],
            "feed_forward_block.norm.weight": state["norm2.weight"], "feed_forward_block.norm.bias": state["norm2.bias"]})
        with torch.no_grad():
            expected, _ = book(x, padding.sum(dim=1))
            got = transformer.encoder_layer(state, 3, norm_first, x, padding[:, None, None, :])
        torch.testing.assert_close(got, expected)


def test_the_rotary_reference_computed_token_by_token_equals_the_whole_computation():
    generator = torch.Generator().manual_seed(3)
    state = transformer._weights(generator, torch.float64, 8)
    sequence = torch.randn(2, 6, 8, generator=generator, dtype=torch.float64)
    whole, all_keys, all_values = transformer.rotary_attention(state, 2, 10000.0, sequence)
    for start in range(6):
        case = transformer._rotary_case("", state, 2, sequence[:, :start], sequence[:, start:start + 1])
        output, keys, values = transformer._rotary_reference(case)
        torch.testing.assert_close(output, whole[:, start:start + 1])
        torch.testing.assert_close(keys, all_keys[:, :, :start + 1])
        if start:  # the cache handed to the student: the earlier tokens' rotated keys, as the book's RoPE turns them
            cached = case.args[1]
            heads = transformer._heads(transformer._linear(state, "W_k", sequence[:, :start]), 2)
            torch.testing.assert_close(cached, positions.rotate(heads, torch.arange(start)))
    assert math.isclose(sum(c.points for c in transformer.CHECKS if c.new), 10)


def test_the_rope_stand_ins_answer_both_calls_so_a_wrong_rope_is_charged_once():
    # A rope that turns the halves: its own check fails; the cache's check passes, because both of the module's
    # calls (queries, then keys) get the stand-ins' answers. Without the stand-ins the module fails too.
    namespace = in_process.run_notebook(ASSIGNMENT, {"rope": CANONICAL_BUGS[
        "RoPE turning the two halves instead of interleaved pairs"][2]})
    verdicts = in_process.judge(ASSIGNMENT, namespace, seed=0, grade_ids={"test-rope", "test-rotary-cache"})
    assert not verdicts["test-rope"].passed
    assert verdicts["test-rotary-cache"].passed, verdicts["test-rotary-cache"].message()
    check = checks_for(ASSIGNMENT)["test-rotary-cache"]
    assert all([s.name for s in case.stand_ins] == ["rope", "rope"] for case in check.make_cases(case_generator(0, check.grade_id)))
    unaided = dataclasses.replace(check, make_cases=lambda g: [dataclasses.replace(case, stand_ins=())
                                                                for case in check.make_cases(g)])
    helpers = compile(given_helpers(in_process.solution_notebook(ASSIGNMENT)), "<given helpers>", "exec")
    plan = runner._snapshot()
    verdicts = []
    for case_id, _, case in plan_cases({unaided.grade_id: unaided}, 0):
        outcome = runner.run_case(marshal.loads(encode_case(case_id, case)), namespace, helpers, [], 30.0, plan)
        verdicts.append(judge_case(unaided, case, Outcome(*outcome[1:])))
    assert not all(verdict.passed for verdict in verdicts)
