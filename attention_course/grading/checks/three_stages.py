"""Checks of the assignment ``three-stages`` (chapter 4): four scores, the masked softmax, attention.

``attention`` is graded as the notebook's ``attention_with`` describes: called with one of the two
score functions the setup cell gives (copied below as :data:`GIVEN_SCORES`; the notebook's own,
re-installed from the release, is what the call receives) and, in place of the student's
``masked_softmax``, a stand-in that answers with the correct weights when it is asked for exactly
this call's scores and valid lengths. So a bug in a score function or in ``masked_softmax`` costs
the points of that function's own test, and the attention test judges what ``attention`` itself
does: call ``score_fn(queries, keys)``, pass ``valid_lens`` on, and take the weighted sum of the values.

Hidden cases always have a number of queries different from the number of keys, so that a
transposed result has the wrong shape.

The new work (the book prints neither; ``new=True``), with its references here:

- ``packing_mask(query_segments, key_segments, causal=False)``: several sequences packed into one row
  of a batch, each position labelled with its sequence's id (negative for padding); query i may see key
  j only within its own sequence, and with ``causal`` only j <= i. Hidden cases use ids that are neither
  consecutive nor starting at 0, padding queries and keys, ids that no key has, rows of padding only.
- ``masked_attention(queries, keys, values, score_fn, keep)``: attention with any boolean mask that
  broadcasts to (B, Q, K) (per query, per key, shared by the batch), not only a prefix of valid
  lengths: weights exactly 0 where masked, a row with nothing to see all zeros, scores of 1e4 finite,
  and masked keys that would win every query (equal to it, with values of 1000) never reach the output.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attention_course import attention
from attention_course.grading.cases import Case, Check, NotebookName, StandIn
from attention_course.grading.checks._draw import describe, integer, normal
from attention_course.grading.verdicts import compare

ASSIGNMENT = "three-stages"

# Chapter 4's worked example: one query, three keys, one number per value.
CHAPTER_QUERY = torch.tensor([[[1.0, 2.0]]])  # (B=1, Q=1, d=2)
CHAPTER_KEYS = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # (B=1, K=3, d=2)
CHAPTER_VALUES = torch.tensor([[[10.0], [20.0], [30.0]]])  # (B=1, K=3, d_v=1)
# Chapter 4's masking example: two sequences, two queries each, padded to four keys.
CHAPTER_MASK_SCORES = torch.tensor([[[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0]],
                                    [[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]]])  # (2, 2, 4)
CHAPTER_VALID_LENS = torch.tensor([2, 3])  # (B,)


# ---------------------------------------------------------------------------------------------
# The score functions the notebook's setup cell gives for testing attention on its own. These
# must compute what the notebook's copies compute (tests/test_grading_three_stages.py checks it).


def distance_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """-|q - k|^2 / 2, the Gaussian kernel's exponent: queries (B, Q, d), keys (B, K, d) -> (B, Q, K)."""
    differences = queries.unsqueeze(2) - keys.unsqueeze(1)  # (B, Q, K, d)
    return -0.5 * (differences**2).sum(dim=-1)


def bilinear_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q^T M k with a fixed M (d_q, d_k): queries (B, Q, d_q), keys (B, K, d_k) -> (B, Q, K)."""
    d_q, d_k = queries.shape[-1], keys.shape[-1]
    mixing = torch.linspace(-1.0, 1.0, d_q * d_k, dtype=queries.dtype).reshape(d_q, d_k)
    return queries @ mixing @ keys.transpose(1, 2)


GIVEN_SCORES = {"distance": distance_score, "bilinear": bilinear_score}


# ---------------------------------------------------------------------------------------------
# References: the course's implementations, called as the notebook's names are.


def _reference(case: Case):
    return getattr(attention, case.call)(*case.args, **case.kwargs)


def _additive_reference(case: Case):
    state = case.state or {}
    module = attention.AdditiveScore(**case.construct).to(next(iter(state.values())).dtype)
    module.load_state_dict(state, strict=True)
    return module(*case.args)


def _attention_reference(case: Case):
    queries, keys, values, score_fn, valid_lens = case.args
    return attention.attention(queries, keys, values, GIVEN_SCORES[score_fn.name.removesuffix("_score")], valid_lens)


# ---------------------------------------------------------------------------------------------
# Inputs.


def _sizes(g: torch.Generator) -> tuple[int, int, int]:
    """B, Q, K with Q != K, so that a transposed result has the wrong shape."""
    num_queries = integer(g, 1, 5)
    num_keys = integer(g, 1, 5)
    return integer(g, 1, 3), num_queries, num_keys + (num_keys >= num_queries)


def _queries_keys(g: torch.Generator, dtype, d_low: int = 1, d_high: int = 8, scale: float = 1.0):
    batch, num_queries, num_keys = _sizes(g)
    d = integer(g, d_low, d_high)
    return normal(g, batch, num_queries, d, dtype=dtype, scale=scale), normal(g, batch, num_keys, d, dtype=dtype, scale=scale)


def _label(queries: torch.Tensor, keys: torch.Tensor, extra: str = "") -> str:
    return f"{describe(queries, 'queries')}, {describe(keys, 'keys')}" + (f", {extra}" if extra else "")


def _vectors(g: torch.Generator, dtype, *size: int) -> torch.Tensor:
    """Random directions with lengths between 0.2 and 3, so that no norm is near eps."""
    directions = normal(g, *size, dtype=torch.float64)
    lengths = 0.2 + 2.8 * torch.rand(*size[:-1], 1, generator=g, dtype=torch.float64)
    return (directions / directions.norm(dim=-1, keepdim=True) * lengths).to(dtype)


def _lengths(g: torch.Generator, size: tuple[int, ...], num_keys: int, masks_something: bool = True) -> torch.Tensor:
    """Valid lengths in [0, num_keys]; with ``masks_something``, the first is below num_keys."""
    lengths = torch.randint(0, num_keys + 1, size, generator=g)
    if masks_something:
        lengths.view(-1)[0] = integer(g, 0, num_keys - 1)
    return lengths


# ---------------------------------------------------------------------------------------------
# Scores.


def dot_score_cases(g: torch.Generator) -> list[Case]:
    arange_queries = torch.arange(2 * 3 * 5, dtype=torch.float32).reshape(2, 3, 5) / 10
    arange_keys = torch.arange(2 * 4 * 5, dtype=torch.float32).reshape(2, 4, 5) / 10 - 1
    cases = [
        Case("test-dot-score", "the chapter's query (1, 2) against keys (1, 0), (0, 1), (1, 1)", "dot_score",
             (CHAPTER_QUERY, CHAPTER_KEYS), hidden=False),
        Case("test-dot-score", "a batch: queries (2, 3, 5), keys (2, 4, 5)", "dot_score",
             (arange_queries, arange_keys), hidden=False),
    ]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        queries, keys = _queries_keys(g, dtype)
        cases.append(Case("test-dot-score", _label(queries, keys), "dot_score", (queries, keys)))
    queries, keys = normal(g, 3, 7, 1, dtype=torch.float64), normal(g, 3, 2, 1, dtype=torch.float64)
    cases.append(Case("test-dot-score", _label(queries, keys, "d = 1"), "dot_score", (queries, keys)))
    return cases


def _with_dot_stand_ins(case: Case) -> Case:
    """``case`` (of scaled_dot_score or cosine_score) with the notebook's ``dot_score`` answering correctly
    while it runs, when asked for the case's queries and keys, or for their unit vectors (what a cosine built on
    dot_score asks for): so a bug in dot_score costs dot_score's own points, once."""
    queries, keys = case.args
    eps = case.kwargs.get("eps", 1e-8)
    unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(eps)
    unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(eps)
    stand_ins = tuple(
        StandIn("global", "dot_score", ("queries", "keys"), (), matchers, q @ k.transpose(1, 2))
        for matchers, q, k in (((("equal", queries), ("equal", keys)), queries, keys),
                               ((("close", unit_queries, 1e-5, 1e-7), ("close", unit_keys, 1e-5, 1e-7)),
                                unit_queries, unit_keys)))
    return dataclasses.replace(case, stand_ins=stand_ins)


def scaled_dot_score_cases(g: torch.Generator) -> list[Case]:
    cases = [
        Case("test-scaled-dot-score", "the chapter's query (1, 2) against keys (1, 0), (0, 1), (1, 1), d = 2",
             "scaled_dot_score", (CHAPTER_QUERY, CHAPTER_KEYS), hidden=False),
        Case("test-scaled-dot-score", "a query and a key of ones with d = 4", "scaled_dot_score",
             (torch.ones(1, 1, 4), torch.ones(1, 1, 4)), hidden=False),
    ]
    # d >= 2 throughout: at d = 1, dividing by d and by sqrt(d) agree.
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        queries, keys = _queries_keys(g, dtype, d_low=2, d_high=12)
        cases.append(Case("test-scaled-dot-score", _label(queries, keys), "scaled_dot_score", (queries, keys)))
    queries, keys = normal(g, 2, 3, 64, dtype=torch.float64), normal(g, 2, 5, 64, dtype=torch.float64)
    cases.append(Case("test-scaled-dot-score", _label(queries, keys, "d = 64"), "scaled_dot_score", (queries, keys)))
    return [_with_dot_stand_ins(case) for case in cases]


def cosine_score_cases(g: torch.Generator) -> list[Case]:
    zero_query = torch.tensor([[[0.0, 0.0], [1.0, 2.0]]])
    cases = [
        Case("test-cosine-score", "the chapter's query (1, 2) against keys (1, 0), (0, 1), (1, 1)", "cosine_score",
             (CHAPTER_QUERY, CHAPTER_KEYS), hidden=False),
        Case("test-cosine-score", "queries (0, 0) and (1, 2) against the chapter's keys", "cosine_score",
             (zero_query, CHAPTER_KEYS), hidden=False),
    ]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        batch, num_queries, num_keys = _sizes(g)
        d = integer(g, 2, 8)
        queries, keys = _vectors(g, dtype, batch, num_queries, d), _vectors(g, dtype, batch, num_keys, d)
        cases.append(Case("test-cosine-score", _label(queries, keys), "cosine_score", (queries, keys)))
    # Zero vectors among the queries and among the keys: they score 0, never NaN.
    for dtype in (torch.float64, torch.float32):
        queries, keys = _vectors(g, dtype, 2, 4, 3), _vectors(g, dtype, 2, 5, 3)
        queries[0, integer(g, 0, 3)] = 0.0
        keys[1, integer(g, 0, 4)] = 0.0
        keys[0, 0] = 0.0
        cases.append(Case("test-cosine-score", _label(queries, keys, "with zero vectors among both"), "cosine_score",
                          (queries, keys)))
    # Parallel and opposite vectors: cosines of exactly 1 and -1, whatever the lengths.
    direction = _vectors(g, torch.float64, 1, 1, 5)
    queries = torch.cat([direction * 3.0, direction * 0.5], dim=1)  # (1, 2, 5)
    keys = torch.cat([direction, -2.0 * direction, direction * 0.3], dim=1)  # (1, 3, 5)
    cases.append(Case("test-cosine-score", _label(queries, keys, "parallel and opposite vectors"), "cosine_score",
                      (queries, keys)))
    queries, keys = _vectors(g, torch.float64, 1, 3, 4), _vectors(g, torch.float64, 1, 2, 4)
    cases.append(Case("test-cosine-score", _label(queries, keys, "eps=1e-6"), "cosine_score", (queries, keys),
                      {"eps": 1e-6}))
    return [_with_dot_stand_ins(case) for case in cases]


def _additive_case(label: str, queries, keys, W_q, W_k, w_v, hidden: bool = True) -> Case:
    hidden_dim, query_dim = W_q.shape
    key_dim = W_k.shape[1]
    return Case("test-additive-score", label, "AdditiveScore", (queries, keys),
                construct={"query_dim": query_dim, "key_dim": key_dim, "hidden_dim": hidden_dim},
                state={"W_q.weight": W_q, "W_k.weight": W_k, "w_v.weight": w_v}, hidden=hidden)


def additive_score_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _additive_case("the chapter's example: W_q = W_k = I/2, w_v = (1, 1)", CHAPTER_QUERY, CHAPTER_KEYS,
                       0.5 * torch.eye(2), 0.5 * torch.eye(2), torch.ones(1, 2), hidden=False),
    ]
    for dtype in (torch.float32, torch.float64, torch.float32, torch.float64):
        batch, num_queries, num_keys = _sizes(g)
        query_dim, key_dim, hidden_dim = integer(g, 1, 6), integer(g, 1, 6), integer(g, 1, 8)
        queries = normal(g, batch, num_queries, query_dim, dtype=dtype)
        keys = normal(g, batch, num_keys, key_dim, dtype=dtype)
        W_q = normal(g, hidden_dim, query_dim, dtype=dtype, scale=0.7)
        W_k = normal(g, hidden_dim, key_dim, dtype=dtype, scale=0.7)
        w_v = normal(g, 1, hidden_dim, dtype=dtype)
        label = _label(queries, keys, f"query_dim={query_dim}, key_dim={key_dim}, hidden_dim={hidden_dim}")
        cases.append(_additive_case(label, queries, keys, W_q, W_k, w_v))
    # Query and key sizes that differ, and more queries than keys.
    queries, keys = normal(g, 2, 4, 3, dtype=torch.float64), normal(g, 2, 2, 5, dtype=torch.float64)
    W_q, W_k = normal(g, 6, 3, dtype=torch.float64), normal(g, 6, 5, dtype=torch.float64)
    w_v = normal(g, 1, 6, dtype=torch.float64)
    cases.append(_additive_case(_label(queries, keys, "query_dim=3, key_dim=5, hidden_dim=6"), queries, keys, W_q, W_k, w_v))
    return cases


# ---------------------------------------------------------------------------------------------
# Masked softmax.


def masked_softmax_cases(g: torch.Generator) -> list[Case]:
    per_query = torch.tensor([[1, 4], [0, 2]])  # (B, Q): one length per query, one of them 0
    cases = [
        Case("test-masked-softmax", "the chapter's scores (2, 2, 4) with valid_lens [2, 3]", "masked_softmax",
             (CHAPTER_MASK_SCORES, CHAPTER_VALID_LENS), hidden=False),
        Case("test-masked-softmax", "the chapter's scores with valid_lens [[1, 4], [0, 2]] of shape (B, Q)",
             "masked_softmax", (CHAPTER_MASK_SCORES, per_query), hidden=False),
        Case("test-masked-softmax", "the chapter's scores with valid_lens None", "masked_softmax",
             (CHAPTER_MASK_SCORES, None), hidden=False),
        Case("test-masked-softmax", "scores [[[1e4, 0, -1e4]]] with valid_lens [2]", "masked_softmax",
             (torch.tensor([[[1e4, 0.0, -1e4]]]), torch.tensor([2])), hidden=False),
    ]
    for dtype, per in ((torch.float32, False), (torch.float64, False), (torch.float32, True), (torch.float64, True)):
        batch, num_queries, _ = _sizes(g)
        num_keys = integer(g, 2, 7)
        scores = normal(g, batch, num_queries, num_keys, dtype=dtype, scale=2.0)
        lengths = _lengths(g, (batch, num_queries) if per else (batch,), num_keys)
        shape = "(B, Q)" if per else "(B,)"
        cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, valid_lens {lengths.tolist()} of shape {shape}",
                          "masked_softmax", (scores, lengths)))
    # Masked positions exactly 0 (atol=0): a large finite fill such as -100 leaves weights of 1e-44.
    scores = normal(g, 3, 2, 5, dtype=torch.float64)
    lengths = torch.tensor([1, 3, 4])
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, valid_lens [1, 3, 4]: masked weights exactly 0",
                      "masked_softmax", (scores, lengths), atol=0.0))
    # Rows with valid length 0 are all zeros, not NaN.
    scores = normal(g, 2, 3, 4, dtype=torch.float32)
    lengths = torch.tensor([[0, 2, 0], [4, 0, 1]])
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, valid_lens {lengths.tolist()} (rows of length 0)",
                      "masked_softmax", (scores, lengths)))
    cases.append(Case("test-masked-softmax", "float64 scores of shape (2, 1, 3), valid_lens [0, 0]", "masked_softmax",
                      (normal(g, 2, 1, 3, dtype=torch.float64), torch.tensor([0, 0]))))
    # Scores of about 1e4: still finite.
    scores = normal(g, 2, 3, 5, dtype=torch.float64, scale=1e4)
    lengths = _lengths(g, (2,), 5)
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')} of size about 1e4, valid_lens {lengths.tolist()}",
                      "masked_softmax", (scores, lengths)))
    # No mask, or a mask that keeps everything; a single key.
    scores = normal(g, 2, 3, 4, dtype=torch.float32, scale=3.0)
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, valid_lens left out", "masked_softmax", (scores,)))
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')}, valid_lens [4, 4] (nothing masked)",
                      "masked_softmax", (scores, torch.tensor([4, 4]))))
    scores = normal(g, 3, 2, 1, dtype=torch.float64)
    cases.append(Case("test-masked-softmax", f"{describe(scores, 'scores')} (one key), valid_lens [1, 0, 1]",
                      "masked_softmax", (scores, torch.tensor([1, 0, 1]))))
    return cases


# ---------------------------------------------------------------------------------------------
# Attention, through the notebook's ``attention_with`` (see the module's docstring).


def _attention_case(label: str, score_name: str, queries, keys, values, valid_lens, hidden: bool = True) -> Case:
    scores = GIVEN_SCORES[score_name](queries, keys)
    weights = attention.masked_softmax(scores, valid_lens)
    lengths = ("none",) if valid_lens is None else ("equal", valid_lens)
    stand_in = StandIn("global", "masked_softmax", ("scores", "valid_lens"), (("valid_lens", None),),
                       (("close", scores, 1e-5, 1e-7), lengths), weights)
    return Case("test-attention", label, "attention",
                (queries, keys, values, NotebookName(f"{score_name}_score"), valid_lens), stand_ins=(stand_in,),
                hidden=hidden)


def attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _attention_case("the chapter's example with distance_score", "distance",
                        CHAPTER_QUERY, CHAPTER_KEYS, CHAPTER_VALUES, None, hidden=False),
        _attention_case("the chapter's example with distance_score and valid_lens [2]", "distance",
                        CHAPTER_QUERY, CHAPTER_KEYS, CHAPTER_VALUES, torch.tensor([2]), hidden=False),
    ]
    for number, dtype in enumerate((torch.float32, torch.float64, torch.float32, torch.float64, torch.float64, torch.float32)):
        batch, num_queries, num_keys = _sizes(g)
        d_v = integer(g, 1, 5)
        if number % 2:  # bilinear scores allow queries and keys of different sizes
            score_name, d_q, d_k = "bilinear", integer(g, 1, 5), integer(g, 1, 5)
        else:
            score_name = "distance"
            d_q = d_k = integer(g, 1, 5)
        queries = normal(g, batch, num_queries, d_q, dtype=dtype)
        keys = normal(g, batch, num_keys, d_k, dtype=dtype)
        values = normal(g, batch, num_keys, d_v, dtype=dtype)
        valid_lens = (None, _lengths(g, (batch,), num_keys, masks_something=num_keys > 1),
                      _lengths(g, (batch, num_queries), num_keys, masks_something=num_keys > 1))[number % 3]
        mask = "no valid_lens" if valid_lens is None else f"valid_lens {valid_lens.tolist()}"
        label = f"{score_name}_score, {_label(queries, keys)}, {describe(values, 'values')}, {mask}"
        cases.append(_attention_case(label, score_name, queries, keys, values, valid_lens))
    # Padding that would win every query's attention (keys equal to a query, values of 1000) must not
    # reach the output.
    queries, keys, values = (normal(g, 2, 3, 4, dtype=torch.float64), normal(g, 2, 5, 4, dtype=torch.float64),
                             normal(g, 2, 5, 2, dtype=torch.float64))
    valid_lens = torch.tensor([2, 4])
    keys[0, 2:], keys[1, 4:] = queries[0, 0], queries[1, 0]
    values[0, 2:], values[1, 4:] = 1e3, 1e3
    cases.append(_attention_case(f"distance_score, {_label(queries, keys)}, {describe(values, 'values')}, "
                                 "valid_lens [2, 4], padding keys equal to a query and padding values of 1000",
                                 "distance", queries, keys, values, valid_lens))
    return cases


# ---------------------------------------------------------------------------------------------
# New work: packed sequences, and attention under any boolean mask.


def packing_mask_reference(query_segments: torch.Tensor, key_segments: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """(B, Q, K) bool: query i sees key j iff both belong to the same sequence (equal ids, not negative),
    and, with ``causal``, j <= i."""
    same = query_segments[:, :, None] == key_segments[:, None, :]
    keep = same & (key_segments[:, None, :] >= 0)
    if causal:
        positions_q = torch.arange(query_segments.shape[1])[:, None]
        positions_k = torch.arange(key_segments.shape[1])[None, :]
        keep = keep & (positions_k <= positions_q)
    return keep


def masked_attention_reference(queries, keys, values, score_fn, keep):
    scores = score_fn(queries, keys)
    weights = attention.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)
    return weights @ values, weights


def _masked_attention_reference(case: Case):
    queries, keys, values, score_fn, keep = case.args
    return masked_attention_reference(queries, keys, values, GIVEN_SCORES[score_fn.name.removesuffix("_score")], keep)


def compare_mask(got, expected, case: Case) -> str:
    if not isinstance(got, torch.Tensor):
        return f"expected a tensor, got {type(got).__name__}"
    if got.dtype != torch.bool:
        return f"expected a bool tensor (torch.bool, as == and & give), got {got.dtype}"
    if got.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    wrong = (got != expected).nonzero()
    if len(wrong):
        b, i, j = (int(n) for n in wrong[0])
        query_segments, key_segments = case.args[0], case.args[1]
        return (f"{len(wrong)} wrong entries; the first at [{b}, {i}, {j}]: query {i} (sequence "
                f"{int(query_segments[b, i])}) and key {j} (sequence {int(key_segments[b, j])}) should give "
                f"{bool(expected[b, i, j])}, got {bool(got[b, i, j])}")
    return ""


def _segments(g: torch.Generator, batch: int, length: int, dtype=torch.int64) -> torch.Tensor:
    """(B, length) ids of packed sequences: runs of non-consecutive ids (from 0 to 40), then padding (-1)."""
    rows = []
    for _ in range(batch):
        ids = sorted(set(int(i) for i in torch.randint(0, 41, (length,), generator=g)))
        row = torch.tensor(ids)[torch.randint(0, len(ids), (length,), generator=g).sort().values]
        padding = integer(g, 0, length // 2)
        if padding:
            row[length - padding:] = -1
        rows.append(row)
    return torch.stack(rows).to(dtype)


def compare_masked_attention(got, expected, case: Case) -> str:
    """Close to the reference, and the weights of masked keys exactly 0."""
    reason = compare(got, expected, case)
    if reason:
        return reason
    keep = case.args[4].expand(expected[1].shape)
    if (got[1][~keep] != 0).any():
        return ("the weights of masked keys must be exactly 0: give their scores -inf before exp (a large negative "
                "number such as -1e4 leaves tiny weights)")
    return ""


def _packing_case(label: str, query_segments, key_segments, causal, hidden: bool = True) -> Case:
    kwargs = {} if causal is None else {"causal": causal}
    return Case("test-packing-mask", label, "packing_mask", (query_segments, key_segments), kwargs, hidden=hidden)


# The visible example: "Tom chase Jerry" and "Jerry run" packed into one row of six, the last position padding.
PACKED = torch.tensor([[0, 0, 0, 1, 1, -1]])


def packing_mask_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _packing_case("one row of six: sequences 0, 0, 0, 1, 1 and padding (-1)", PACKED, PACKED, None, hidden=False),
        _packing_case("the same row, causal=True", PACKED, PACKED, True, hidden=False),
        _packing_case("queries [0, 0, 1, 1, 1] against the row of six (cross-attention)",
                      torch.tensor([[0, 0, 1, 1, 1]]), PACKED, False, hidden=False),
    ]
    for dtype, causal in ((torch.int64, None), (torch.int64, True), (torch.int32, False), (torch.int64, True)):
        batch, length = integer(g, 1, 3), integer(g, 4, 9)
        segments = _segments(g, batch, length, dtype)
        cases.append(_packing_case(f"self-attention over ids {segments.tolist()}" + ("" if causal is None else f", causal={causal}"),
                                   segments, segments.clone(), causal))
    for causal in (None, False):
        batch, num_queries = integer(g, 1, 3), integer(g, 2, 6)
        num_keys = num_queries + integer(g, 1, 3)
        query_segments, key_segments = _segments(g, batch, num_queries), _segments(g, batch, num_keys)
        query_segments[0, 0] = key_segments[0, 0]  # at least one pair that sees each other
        query_segments[-1, -1] = 41  # an id that no key has: sees nothing
        cases.append(_packing_case(f"query ids {query_segments.tolist()} against key ids {key_segments.tolist()}",
                                   query_segments, key_segments, causal))
    # A row of padding only, next to a row without padding: padding sees nothing and is seen by nothing.
    segments = torch.tensor([[-1, -1, -1, -1], [7, 7, 3, 3]])
    cases.append(_packing_case("ids [[-1, -1, -1, -1], [7, 7, 3, 3]], causal=True (a row of padding only)",
                               segments, segments.clone(), True))
    return cases


def _masked_case(label: str, score_name: str, queries, keys, values, keep, hidden: bool = True) -> Case:
    return Case("test-masked-attention", label, "masked_attention",
                (queries, keys, values, NotebookName(f"{score_name}_score"), keep), hidden=hidden)


def masked_attention_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _masked_case("the chapter's example with distance_score and keep [[[True, False, True]]] (a hole in the middle)",
                     "distance", CHAPTER_QUERY, CHAPTER_KEYS, CHAPTER_VALUES, torch.tensor([[[True, False, True]]]),
                     hidden=False),
        _masked_case("the chapter's example with keep [[[False, False, False]]]: nothing to see, all zeros",
                     "distance", CHAPTER_QUERY, CHAPTER_KEYS, CHAPTER_VALUES, torch.zeros(1, 1, 3, dtype=torch.bool),
                     hidden=False),
    ]
    layouts = ("(B, Q, K)", "(B, 1, K)", "(1, Q, K)", "(Q, K)", "(B, Q, K)", "(B, 1, K)")
    for number, (dtype, layout) in enumerate(zip((torch.float32, torch.float64, torch.float32, torch.float64,
                                                  torch.float64, torch.float32), layouts)):
        batch, num_queries, num_keys = _sizes(g)
        batch = max(batch, 2) if layout != "(B, Q, K)" else batch
        d_v = integer(g, 1, 4)
        if number % 2:  # bilinear scores allow queries and keys of different sizes
            score_name, d_q, d_k = "bilinear", integer(g, 1, 5), integer(g, 1, 5)
        else:
            score_name = "distance"
            d_q = d_k = integer(g, 1, 5)
        queries = normal(g, batch, num_queries, d_q, dtype=dtype)
        keys = normal(g, batch, num_keys, d_k, dtype=dtype)
        values = normal(g, batch, num_keys, d_v, dtype=dtype)
        size = {"(B, Q, K)": (batch, num_queries, num_keys), "(B, 1, K)": (batch, 1, num_keys),
                "(1, Q, K)": (1, num_queries, num_keys), "(Q, K)": (num_queries, num_keys)}[layout]
        keep = torch.rand(size, generator=g) < 0.6
        keep.view(-1)[0] = True
        if keep.numel() > 1:
            keep.view(-1)[-1] = False
        label = (f"{score_name}_score, {_label(queries, keys)}, {describe(values, 'values')}, keep of shape {layout} "
                 f"= {tuple(keep.shape)}")
        cases.append(_masked_case(label, score_name, queries, keys, values, keep))
    # Masked keys that would win every query (equal to it, values of 1000) must not reach the output; a row
    # with nothing to see is all zeros.
    queries, keys, values = (normal(g, 2, 3, 4, dtype=torch.float64), normal(g, 2, 5, 4, dtype=torch.float64),
                             normal(g, 2, 5, 2, dtype=torch.float64))
    keep = torch.rand(2, 3, 5, generator=g) < 0.5
    keep[0, 0, 0] = True
    keep[1, 2] = False
    for b, i, j in (~keep).nonzero().tolist()[:4]:
        keys[b, j], values[b, j] = queries[b, i], 1e3
    keep[0, 0, 0] = True
    keep[1, 2] = False
    cases.append(_masked_case(f"distance_score, {_label(queries, keys)}, masked keys equal to a query with values of "
                              f"1000, query 2 of row 1 sees nothing", "distance", queries, keys, values, keep & (values[:, None, :, 0] < 999)))
    # Scores of about 1e4: still finite.
    queries, keys = normal(g, 2, 3, 3, dtype=torch.float64, scale=60.0), normal(g, 2, 4, 3, dtype=torch.float64, scale=60.0)
    values = normal(g, 2, 4, 2, dtype=torch.float64)
    keep = torch.rand(2, 1, 4, generator=g) < 0.7
    keep[:, :, 0] = True
    cases.append(_masked_case(f"distance_score of about -1e4, {_label(queries, keys)}, keep of shape (2, 1, 4)",
                              "distance", queries, keys, values, keep))
    return cases


CHECKS = [
    Check("test-dot-score", 1, "dot_score returns every query's dot product with every key, shape (B, Q, K)",
          dot_score_cases, _reference,
          hints=(
              ("a batch: queries (2, 3, 5), keys (2, 4, 5)",
               "queries (2, 3, 5) and keys (2, 4, 5) should give scores of shape (B, Q, K) = (2, 3, 4)"),
          )),
    Check("test-scaled-dot-score", 1, "scaled_dot_score divides the dot products by the square root of d",
          scaled_dot_score_cases, _reference,
          hints=(
              ("(1, 1), d = 2",
               "that divides by d = 2; divide by the square root of d instead"),
              ("a query and a key of ones with d = 4",
               "divide by the square root of d instead"),
          )),
    Check("test-cosine-score", 1, "cosine_score returns the cosines, and 0 (not NaN) for a zero vector",
          cosine_score_cases, _reference,
          hints=(
              ("queries (0, 0) and (1, 2)",
               "a zero vector has norm 0: divide by max(norm, eps) so that it scores 0"),
          )),
    Check("test-additive-score", 2, "AdditiveScore computes w_v^T tanh(W_q q + W_k k) for every query and key",
          additive_score_cases, _additive_reference,
          hints=(
              ("W_q = W_k = I/2, w_v = (1, 1)",
               "should have exactly the parameters W_q.weight (2, 2), W_k.weight (2, 2) and w_v.weight (1, 2) "
               "(nn.Linear without bias)"),
          )),
    Check("test-masked-softmax", 2, "masked_softmax gives weights exactly 0 beyond each valid length, "
          "summing to 1 over the valid keys (all zeros for length 0)", masked_softmax_cases, _reference,
          hints=(
              ("with valid_lens [2, 3]",
               "set the masked scores to -inf before exp"),
              ("with valid_lens [[1, 4], [0, 2]]",
               "a row with no valid key must be all zeros"),
              ("with valid_lens None",
               "masked_softmax without valid_lens (a plain softmax)"),
              ("scores [[[1e4, 0, -1e4]]]",
               "subtract the largest score before exp"),
          )),
    Check("test-attention", 1, "attention scores with score_fn, passes valid_lens on, and returns the weighted sum "
          "of the values with the weights", attention_cases, _attention_reference,
          hints=(
              ("with distance_score and valid_lens [2]",
               "pass valid_lens on to masked_softmax"),
          )),
    Check("test-packing-mask", 3, "packing_mask lets each query see the keys of its own sequence only (never "
          "padding), and with causal=True none after it, as a (B, Q, K) bool tensor", packing_mask_cases,
          lambda case: packing_mask_reference(*case.args, **case.kwargs), compare=compare_mask, new=True,
          solution_cells=("packing_mask",),
          hints=(
              ("one row of six",
               "a key with a negative id is padding and is never seen, whatever the query's id"),
              ("the same row, causal=True",
               "query i sees the keys j <= i of its own sentence"),
              ("(cross-attention)",
               "Q = 5 queries, K = 6 keys: shape (B, Q, K) = (1, 5, 6)"),
          )),
    Check("test-masked-attention", 5, "masked_attention gives weights exactly 0 where keep is False (keep of any "
          "shape that broadcasts to (B, Q, K)), summing to 1 over the kept keys, all zeros for a row with none, "
          "and the weighted sum of the values", masked_attention_cases, _masked_attention_reference,
          compare=compare_masked_attention, new=True,
          solution_cells=("masked_attention",),
          hints=(
              ("(a hole in the middle)",
               "mask the scores with -inf before exp, not the weights after it"),
              ("nothing to see, all zeros",
               "when a whole row is -inf, shift it by 0 instead of by its maximum, and divide by at least 1, so "
               "that it stays all zeros"),
          )),
]
