"""Checks of the assignment ``multi-head`` (chapter 8, on chapter 4): multi-head attention and two steps beyond it.

Four test cells, each judging one part:

- ``scaled_dot_product(queries, keys, values, mask=None)`` (warm-up), called directly: any number of
  leading axes, a boolean mask (True = may attend) that broadcasts to the scores;
- ``MultiHeadAttention`` (warm-up), built with given weights and called; the reference is PyTorch's own
  ``nn.MultiheadAttention`` loaded with the same weights;
- ``GroupedQueryAttention`` (new): fewer key/value heads than query heads, query head i sharing key/value
  head i // (num_heads / num_kv_heads); per-head masks;
- ``CachedSelfAttention`` (new): causal self-attention computed on new tokens only, from a cache of the
  keys and values of the tokens before them; the new tokens' outputs must be those of the full causally
  masked computation over the whole sequence (PyTorch's ``nn.MultiheadAttention`` with a causal mask),
  and the cache must come back with the new keys and values appended.

In the three module checks, a stand-in answers the notebook's ``scaled_dot_product`` when it is called
with exactly the per-head queries, keys, values and mask that the part should pass (to rounding): a bug
in ``scaled_dot_product`` costs only its own test, and each module's test judges the module itself
(projections, heads, grouping, cache, causal mask, concatenation, output projection). A module that
computes its heads some other way is judged on what it returns.

The references are here, not in the package that the book prints: nothing of the new parts' solutions
may appear in the book.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from attention_course.grading.cases import Case, Check, StandIn
from attention_course.grading.checks._draw import describe, integer, normal

ASSIGNMENT = "multi-head"
SDPA_PARAMS = ("queries", "keys", "values", "mask")


# ---------------------------------------------------------------------------------------------
# References.


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The notebook's given helper: softmax over the last axis, exactly 0 where ``mask`` is False."""
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    shift = scores.amax(dim=-1, keepdim=True)
    shift = torch.where(torch.isinf(shift), torch.zeros_like(shift), shift)
    exps = torch.exp(scores - shift)
    return exps / exps.sum(dim=-1, keepdim=True).clamp_min(1.0)


def scaled_dot_product(queries, keys, values, mask=None):
    """(..., Q, d), (..., K, d), (..., K, d_v), mask broadcasting to (..., Q, K) -> ((..., Q, d_v), (..., Q, K))."""
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    weights = masked_softmax(scores, mask)
    return weights @ values, weights


def _heads(x: torch.Tensor, count: int) -> torch.Tensor:
    """(B, S, count * d_head) -> (B, count, S, d_head)."""
    return x.unflatten(-1, (count, x.shape[-1] // count)).transpose(1, 2)


def _linear(state: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return nn.functional.linear(x, state[f"{name}.weight"], state[f"{name}.bias"])


def _torch_multi_head(state: dict, num_heads: int) -> nn.MultiheadAttention:
    """PyTorch's own layer with the case's weights."""
    d_model = state["W_q.weight"].shape[1]
    layer = nn.MultiheadAttention(d_model, num_heads, batch_first=True).to(state["W_q.weight"].dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([state["W_q.weight"], state["W_k.weight"], state["W_v.weight"]]))
        layer.in_proj_bias.copy_(torch.cat([state["W_q.bias"], state["W_k.bias"], state["W_v.bias"]]))
        layer.out_proj.weight.copy_(state["W_o.weight"])
        layer.out_proj.bias.copy_(state["W_o.bias"])
    return layer.eval()


def torch_attention(state: dict, num_heads: int, queries, keys, values, mask=None):
    """``nn.MultiheadAttention`` with our mask convention (True = may attend, broadcasting to (B, h, Q, K)):
    (output (B, Q, d_model), weights (B, h, Q, K)). Every row of the mask must keep a key (PyTorch gives NaN)."""
    batch, num_queries, _ = queries.shape
    attn_mask = None
    if mask is not None:
        full = mask.expand(batch, num_heads, num_queries, keys.shape[1])
        attn_mask = ~full.reshape(batch * num_heads, num_queries, keys.shape[1])  # PyTorch: True = hidden
    with torch.no_grad():
        return _torch_multi_head(state, num_heads)(queries, keys, values, attn_mask=attn_mask,
                                                  average_attn_weights=False)


def _multi_head_reference(case: Case):
    return torch_attention(case.state, case.construct["num_heads"], *case.args)


def grouped_query_attention(state: dict, num_heads: int, num_kv_heads: int, queries, keys, values, mask=None):
    """Grouped-query attention: (output (B, Q, d_model), weights (B, h, Q, K))."""
    group = num_heads // num_kv_heads
    q = _heads(_linear(state, "W_q", queries), num_heads)  # (B, h, Q, d_head)
    k = _heads(_linear(state, "W_k", keys), num_kv_heads).repeat_interleave(group, dim=1)  # (B, h, K, d_head)
    v = _heads(_linear(state, "W_v", values), num_kv_heads).repeat_interleave(group, dim=1)
    heads, weights = scaled_dot_product(q, k, v, mask)
    merged = heads.transpose(1, 2).flatten(2)  # (B, Q, d_model)
    return _linear(state, "W_o", merged), weights


def _grouped_reference(case: Case):
    return grouped_query_attention(case.state, case.construct["num_heads"], case.construct["num_kv_heads"], *case.args)


def causal_offset_mask(num_new: int, num_past: int) -> torch.Tensor:
    """(T, P + T): new token t, at position P + t, may attend to positions 0 … P + t."""
    return torch.ones(num_new, num_past + num_new, dtype=torch.bool).tril(diagonal=num_past)


def _cached_reference(case: Case):
    """The new tokens' rows of the full causal computation (PyTorch's layer over the whole sequence), and the
    whole sequence's keys and values per head."""
    x, prefix = case.args[0], case.prefix
    num_heads = case.construct["num_heads"]
    whole = torch.cat([prefix, x], dim=1)  # (B, P + T, d_model)
    length = whole.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    output, _ = torch_attention(case.state, num_heads, whole, whole, whole, causal)
    keys = _heads(_linear(case.state, "W_k", whole), num_heads)
    values = _heads(_linear(case.state, "W_v", whole), num_heads)
    return output[:, prefix.shape[1]:], keys, values


# ---------------------------------------------------------------------------------------------
# Inputs.


def _weights(g: torch.Generator, dtype, d_model: int, kv_features: int | None = None) -> dict:
    kv_features = kv_features or d_model
    scale = 1.0 / math.sqrt(d_model)
    shapes = {"W_q": (d_model, d_model), "W_k": (kv_features, d_model), "W_v": (kv_features, d_model),
              "W_o": (d_model, d_model)}
    state = {}
    for name, shape in shapes.items():
        state[f"{name}.weight"] = normal(g, *shape, dtype=dtype, scale=1.5 * scale)
        state[f"{name}.bias"] = normal(g, shape[0], dtype=dtype, scale=0.3)
    return state


def _random_mask(g: torch.Generator, *shape: int) -> torch.Tensor:
    """A boolean mask that keeps at least one key in every row and hides at least one key somewhere."""
    mask = torch.rand(shape, generator=g) < 0.6
    keep = torch.randint(0, shape[-1], shape[:-1], generator=g)
    mask.scatter_(-1, keep.unsqueeze(-1), True)
    if mask.all() and shape[-1] > 1:
        flat = mask.view(-1, shape[-1])
        flat[0, (int(keep.view(-1)[0]) + 1) % shape[-1]] = False
    return mask


def _padding_mask(g: torch.Generator, batch: int, num_keys: int) -> tuple[torch.Tensor, list[int]]:
    """(B, 1, 1, K): sequence b has lengths[b] >= 1 real keys; the first is padded when K > 1."""
    lengths = torch.randint(1, num_keys + 1, (batch,), generator=g)
    if num_keys > 1:
        lengths[0] = integer(g, 1, num_keys - 1)
    mask = torch.arange(num_keys) < lengths[:, None]
    return mask[:, None, None, :], lengths.tolist()


def _mask_label(mask, extra: str = "") -> str:
    if mask is None:
        return "no mask"
    return f"a mask of shape {tuple(mask.shape)}" + (f" ({extra})" if extra else "")


# ---------------------------------------------------------------------------------------------
# scaled_dot_product.

CHAPTER_QUERY = torch.tensor([[[1.0, 2.0]]])  # (B=1, Q=1, d=2), chapter 4's example
CHAPTER_KEYS = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # (B=1, K=3, d=2)
CHAPTER_VALUES = torch.tensor([[[10.0], [20.0], [30.0]]])  # (B=1, K=3, d_v=1)


def _sdpa_case(label: str, queries, keys, values, mask=None, hidden: bool = True, explicit_none: bool = False,
               **kwargs) -> Case:
    args = (queries, keys, values) if mask is None and not explicit_none else (queries, keys, values, mask)
    return Case("test-scaled-dot-product", label, "scaled_dot_product", args, hidden=hidden, **kwargs)


def scaled_dot_product_cases(g: torch.Generator) -> list[Case]:
    cases = [
        _sdpa_case("chapter 4's query (1, 2), keys (1, 0), (0, 1), (1, 1), values 10, 20, 30, no mask",
                   CHAPTER_QUERY, CHAPTER_KEYS, CHAPTER_VALUES, hidden=False),
        _sdpa_case("chapter 4's example with the mask [[[True, True, False]]]", CHAPTER_QUERY, CHAPTER_KEYS,
                   CHAPTER_VALUES, torch.tensor([[[True, True, False]]]), hidden=False),
    ]
    # Heads as a second leading axis, (B, h, Q, d), with every kind of mask the modules pass.
    for number, dtype in enumerate((torch.float32, torch.float64, torch.float32, torch.float64)):
        batch, heads, num_queries = integer(g, 1, 3), integer(g, 1, 3), integer(g, 1, 5)
        num_keys = integer(g, 2, 6)
        d, d_v = integer(g, 2, 6), integer(g, 1, 4)  # d >= 2: dividing by d and by sqrt(d) differ
        queries = normal(g, batch, heads, num_queries, d, dtype=dtype, scale=1.5)
        keys = normal(g, batch, heads, num_keys, d, dtype=dtype, scale=1.5)
        values = normal(g, batch, heads, num_keys, d_v, dtype=dtype)
        if number == 0:
            mask, what = _padding_mask(g, batch, num_keys)[0], "padding: True for the real keys"
        elif number == 1:
            mask, what = _random_mask(g, batch, heads, num_queries, num_keys), "one per head"
        elif number == 2:
            mask, what = _random_mask(g, num_queries, num_keys), "the same for every sequence and head"
        else:
            mask, what = None, ""
        label = (f"{describe(queries, 'queries')}, {describe(keys, 'keys')}, {describe(values, 'values')}, "
                 f"{_mask_label(mask, what)}")
        cases.append(_sdpa_case(label, queries, keys, values, mask, explicit_none=number == 3))
    # Three axes, as in chapter 4, and five (a group axis).
    queries, keys, values = (normal(g, 2, 4, 3, dtype=torch.float64), normal(g, 2, 5, 3, dtype=torch.float64),
                             normal(g, 2, 5, 2, dtype=torch.float64))
    mask = _random_mask(g, 2, 4, 5)
    cases.append(_sdpa_case(f"{describe(queries, 'queries')} (three axes), {describe(keys, 'keys')}, "
                            f"{_mask_label(mask)}", queries, keys, values, mask))
    queries = normal(g, 1, 2, 3, 4, 5, dtype=torch.float32)
    keys, values = normal(g, 1, 2, 1, 6, 5, dtype=torch.float32), normal(g, 1, 2, 1, 6, 3, dtype=torch.float32)
    cases.append(_sdpa_case(f"{describe(queries, 'queries')} (five axes), {describe(keys, 'keys')} that broadcast "
                            "over axis 2, no mask", queries, keys, values))
    # A row with nothing to attend to: all-zero weights and output, never NaN.
    queries, keys, values = (normal(g, 1, 2, 3, 4, dtype=torch.float64), normal(g, 1, 2, 4, 4, dtype=torch.float64),
                             normal(g, 1, 2, 4, 2, dtype=torch.float64))
    mask = _random_mask(g, 1, 2, 3, 4)
    mask[0, 1, 2] = False
    cases.append(_sdpa_case(f"{describe(queries, 'queries')}, a mask of shape (1, 2, 3, 4) whose row [0, 1, 2] is "
                            "all False", queries, keys, values, mask))
    # Masked keys exactly 0 even where their scores are the largest (atol 0).
    queries = normal(g, 2, 3, 4, dtype=torch.float64)
    keys = torch.cat([normal(g, 2, 2, 4, dtype=torch.float64), 5 * queries[:, :1].expand(2, 2, 4)], dim=1)
    values = normal(g, 2, 4, 3, dtype=torch.float64)
    mask = torch.tensor([True, True, False, False]).expand(2, 3, 4)
    cases.append(_sdpa_case(f"{describe(queries, 'queries')}, keys 2 and 3 (masked) scoring highest: masked weights "
                            "exactly 0", queries, keys, values, mask, atol=0.0))
    return cases


# ---------------------------------------------------------------------------------------------
# The modules: a stand-in for scaled_dot_product, answering exactly the per-head call.


def _sdpa_stand_in(q, k, v, mask) -> StandIn:
    answer = scaled_dot_product(q, k, v, mask)
    return StandIn("global", "scaled_dot_product", SDPA_PARAMS, (("mask", None),),
                   (("close", q, 1e-4, 1e-5), ("close", k, 1e-4, 1e-5), ("close", v, 1e-4, 1e-5),
                    ("none",) if mask is None else ("equal", mask)), answer)


def _multi_head_case(label: str, g_state: dict, num_heads: int, queries, keys, values, mask=None,
                     hidden: bool = True) -> Case:
    q = _heads(_linear(g_state, "W_q", queries), num_heads)
    k = _heads(_linear(g_state, "W_k", keys), num_heads)
    v = _heads(_linear(g_state, "W_v", values), num_heads)
    args = (queries, keys, values) if mask is None else (queries, keys, values, mask)
    d_model = queries.shape[-1]
    return Case("test-multi-head", f"d_model={d_model}, num_heads={num_heads}: {label}", "MultiHeadAttention", args,
                construct={"d_model": d_model, "num_heads": num_heads}, state=g_state,
                stand_ins=(_sdpa_stand_in(q, k, v, mask),), hidden=hidden)


def visible_multi_head_weights() -> dict:
    """The visible example's weights: d_model = 4, two heads; W_q = W_k = W_v = identity, W_o swaps the heads."""
    eye = torch.eye(4)
    swap = torch.cat([eye[2:], eye[:2]])
    return {"W_q.weight": eye.clone(), "W_q.bias": torch.zeros(4), "W_k.weight": eye.clone(), "W_k.bias": torch.zeros(4),
            "W_v.weight": eye.clone(), "W_v.bias": torch.zeros(4), "W_o.weight": swap, "W_o.bias": torch.zeros(4)}


def multi_head_cases(g: torch.Generator) -> list[Case]:
    x = torch.tensor([[[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]]])  # (1, 3, 4)
    cases = [_multi_head_case("the notebook's example: identity projections, W_o swapping the two heads, "
                              "self-attention over 3 positions", visible_multi_head_weights(), 2, x, x, x, hidden=False)]
    for number, dtype in enumerate((torch.float32, torch.float64, torch.float32, torch.float64, torch.float64)):
        num_heads, d_head = integer(g, 2, 4), integer(g, 1, 3)
        d_model, batch = num_heads * d_head, integer(g, 1, 3)
        state = _weights(g, dtype, d_model)
        if number in (2, 3):  # self-attention, causal in one of them
            length = integer(g, 2, 5)
            queries = keys = values = normal(g, batch, length, d_model, dtype=dtype)
            mask = torch.ones(length, length, dtype=torch.bool).tril() if number == 2 else None
            label = f"self-attention on {describe(queries, 'x')}, " + (
                f"a causal mask of shape ({length}, {length})" if mask is not None else "no mask")
        else:
            num_queries, num_keys = integer(g, 1, 5), integer(g, 2, 6)
            num_queries += num_queries == num_keys  # Q != K: a transposed result has the wrong shape
            queries = normal(g, batch, num_queries, d_model, dtype=dtype)
            keys, values = normal(g, batch, num_keys, d_model, dtype=dtype), normal(g, batch, num_keys, d_model, dtype=dtype)
            if number == 0:
                mask, lengths = _padding_mask(g, batch, num_keys)
                what = f"padding, lengths {lengths}"
            elif number == 1:
                mask, what = _random_mask(g, batch, num_heads, num_queries, num_keys), "one per head"
            else:
                mask, what = None, ""
            label = (f"{describe(queries, 'queries')}, {describe(keys, 'keys')} and values, "
                     f"{_mask_label(mask, what)}")
        cases.append(_multi_head_case(label, state, num_heads, queries, keys, values, mask))
    return cases


def _grouped_case(label: str, state: dict, num_heads: int, num_kv_heads: int, queries, keys, values, mask=None,
                  hidden: bool = True) -> Case:
    group = num_heads // num_kv_heads
    q = _heads(_linear(state, "W_q", queries), num_heads)
    k = _heads(_linear(state, "W_k", keys), num_kv_heads).repeat_interleave(group, dim=1)
    v = _heads(_linear(state, "W_v", values), num_kv_heads).repeat_interleave(group, dim=1)
    args = (queries, keys, values) if mask is None else (queries, keys, values, mask)
    d_model = queries.shape[-1]
    return Case("test-grouped-query", f"d_model={d_model}, num_heads={num_heads}, num_kv_heads={num_kv_heads}: {label}",
                "GroupedQueryAttention", args,
                construct={"d_model": d_model, "num_heads": num_heads, "num_kv_heads": num_kv_heads}, state=state,
                stand_ins=(_sdpa_stand_in(q, k, v, mask),), hidden=hidden)


def visible_grouped_weights() -> dict:
    """The visible example's weights: d_model = 4, four query heads of 1 feature, two key/value heads."""
    eye = torch.eye(4)
    return {"W_q.weight": eye.clone(), "W_q.bias": torch.zeros(4),
            "W_k.weight": torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]), "W_k.bias": torch.zeros(2),
            "W_v.weight": torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]), "W_v.bias": torch.zeros(2),
            "W_o.weight": eye.clone(), "W_o.bias": torch.zeros(4)}


GROUPINGS = ((4, 2), (6, 3), (6, 2), (4, 1), (3, 3), (8, 4))  # (num_heads, num_kv_heads)


def grouped_query_cases(g: torch.Generator) -> list[Case]:
    x = torch.tensor([[[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, 2.0], [1.0, 1.0, 1.0, 1.0]]])  # (1, 3, 4)
    cases = [_grouped_case("the notebook's example: self-attention over 3 positions", visible_grouped_weights(),
                           4, 2, x, x, x, hidden=False)]
    for number, (num_heads, num_kv_heads) in enumerate(GROUPINGS):
        dtype = (torch.float32, torch.float64)[number % 2]
        d_head, batch = integer(g, 1, 2), integer(g, 1, 2)
        d_model = num_heads * d_head
        state = _weights(g, dtype, d_model, num_kv_heads * d_head)
        num_queries, num_keys = integer(g, 1, 4), integer(g, 2, 5)
        queries = normal(g, batch, num_queries, d_model, dtype=dtype)
        keys, values = normal(g, batch, num_keys, d_model, dtype=dtype), normal(g, batch, num_keys, d_model, dtype=dtype)
        if number % 3 == 0:
            mask, what = _random_mask(g, batch, num_heads, num_queries, num_keys), "one per query head"
        elif number % 3 == 1:
            mask, lengths = _padding_mask(g, batch, num_keys)
            what = f"padding, lengths {lengths}"
        else:
            mask, what = None, ""
        label = f"{describe(queries, 'queries')}, {describe(keys, 'keys')} and values, {_mask_label(mask, what)}"
        cases.append(_grouped_case(label, state, num_heads, num_kv_heads, queries, keys, values, mask))
    return cases


@dataclass(frozen=True)
class CachedCase(Case):
    """A call of ``CachedSelfAttention``, with the tokens before it (``prefix``, never sent to the sandbox: the
    cache holds their keys and values)."""

    prefix: torch.Tensor | None = None


def _cached_case(label: str, state: dict, num_heads: int, prefix: torch.Tensor, x: torch.Tensor, hidden: bool = True,
                 pass_none: bool = False) -> Case:
    num_past, num_new = prefix.shape[1], x.shape[1]
    whole = torch.cat([prefix, x], dim=1)
    keys = _heads(_linear(state, "W_k", whole), num_heads)  # (B, h, P + T, d_head)
    values = _heads(_linear(state, "W_v", whole), num_heads)
    q = _heads(_linear(state, "W_q", x), num_heads)  # (B, h, T, d_head)
    stand_in = _sdpa_stand_in(q, keys, values, causal_offset_mask(num_new, num_past))
    if num_past:
        args = (x, keys[:, :, :num_past].clone(), values[:, :, :num_past].clone())
    else:
        args = (x, None, None) if pass_none else (x,)
    d_model = x.shape[-1]
    return CachedCase("test-cached-attention", f"d_model={d_model}, num_heads={num_heads}: {label}",
                      "CachedSelfAttention", args, construct={"d_model": d_model, "num_heads": num_heads}, state=state,
                      stand_ins=(stand_in,), hidden=hidden, prefix=prefix)


def visible_cached_inputs() -> tuple[dict, torch.Tensor]:
    """The visible example: d_model = 4, two heads, a sequence of 4 tokens."""
    generator = torch.Generator().manual_seed(8)
    return _weights(generator, torch.float32, 4), torch.randn(1, 4, 4, generator=generator)


def cached_attention_cases(g: torch.Generator) -> list[Case]:
    state, sequence = visible_cached_inputs()
    cases = [
        _cached_case("the notebook's example: the first 3 tokens with no cache", state, 2, sequence[:, :0],
                     sequence[:, :3], hidden=False),
        _cached_case("the notebook's example: token 4 with the cache of the first 3", state, 2, sequence[:, :3],
                     sequence[:, 3:], hidden=False),
    ]
    # (past, new): a whole prompt with no cache, one new token, and several new tokens at once.
    for number, (dtype, num_past, num_new) in enumerate((
            (torch.float32, 0, integer(g, 2, 5)), (torch.float64, integer(g, 1, 5), 1),
            (torch.float32, integer(g, 1, 4), integer(g, 2, 4)), (torch.float64, integer(g, 2, 5), integer(g, 2, 3)),
            (torch.float64, integer(g, 1, 3), 1))):
        num_heads, d_head, batch = integer(g, 1, 3), integer(g, 1, 3), integer(g, 1, 2)
        if number >= 3:
            num_heads = max(num_heads, 2)
        d_model = num_heads * d_head
        weights = _weights(g, dtype, d_model)
        prefix = normal(g, batch, num_past, d_model, dtype=dtype)
        x = normal(g, batch, num_new, d_model, dtype=dtype)
        label = (f"{describe(x, 'x')} (new tokens)" + (
            f", a cache of {num_past} earlier tokens, keys and values of shape {(batch, num_heads, num_past, d_head)}"
            if num_past else (", past_keys=None, past_values=None" if number == 0 else ", no cache")))
        cases.append(_cached_case(label, weights, num_heads, prefix, x, pass_none=number == 0))
    return cases


CHECKS = [
    Check("test-scaled-dot-product", 2, "scaled_dot_product divides the scores by sqrt(d), hides what the mask "
          "hides (weights exactly 0) and works on any number of leading axes",
          scaled_dot_product_cases, lambda case: scaled_dot_product(*case.args),
          hints=(
              ("values 10, 20, 30, no mask",
               "divide the dot products by the square root of d instead"),
              ("with the mask [[[True, True, False]]]",
               "mask the scores before the softmax (masked_softmax(scores, mask)), not the weights after it"),
          )),
    Check("test-multi-head", 4, "MultiHeadAttention projects, splits the features into heads, attends in every head, "
          "concatenates and projects: what nn.MultiheadAttention computes with the same weights",
          multi_head_cases, _multi_head_reference,
          hints=(
              ("W_o swapping the two heads",
               "split the last axis into heads: x.reshape(B, S, h, d_head).transpose(1, 2), not x.reshape(B, h, S, "
               "d_head)"),
              ("W_o swapping the two heads",
               "put the heads back side by side with heads.transpose(1, 2).reshape(B, Q, d_model)"),
          )),
    Check("test-grouped-query", 4, "GroupedQueryAttention shares each key/value head among num_heads / num_kv_heads "
          "consecutive query heads, with per-head masks", grouped_query_cases, _grouped_reference,
          new=True, solution_cells=("GroupedQueryAttention",),
          hints=(
              ("num_kv_heads=2: the notebook's example",
               "query heads 1 and 3 share a key/value head, and so do 2 and 4: that is Tensor.repeat's order. Query "
               "head i must use key/value head i // (num_heads // num_kv_heads): heads 1 and 2 share key/value head "
               "1, heads 3 and 4 share key/value head 2 (copies next to each other)"),
          )),
    Check("test-cached-attention", 4, "CachedSelfAttention gives the new tokens exactly the outputs of the full causal "
          "self-attention over the whole sequence, and returns the cache with their keys and values appended",
          cached_attention_cases, _cached_reference, new=True, solution_cells=("CachedSelfAttention",),
          hints=(
              ("the first 3 tokens with no cache",
               "causal self-attention among them (token t sees tokens 0 … t)"),
              ("token 4 with the cache of the first 3",
               "new token t sits at position P + t and sees positions 0 … P + t (here all 4 tokens)"),
              ("token 4 with the cache of the first 3",
               "the cache (B, h, P, d_head) grows along the sequence axis: torch.cat([past_keys, new_keys], dim=2)"),
          )),
]
