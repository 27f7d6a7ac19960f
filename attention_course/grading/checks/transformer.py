"""Checks of the assignment ``transformer`` (chapters 9–11, on chapter 8 and the assignment ``multi-head``).

Four test cells, each judging one part:

- ``EncoderLayer(d_model, num_heads, d_ff, norm_first)`` (warm-up), built with given weights and called;
  the reference is PyTorch's own ``nn.TransformerEncoderLayer`` loaded with the same weights (dropout 0),
  post-LN and pre-LN, with padding, causal and per-head masks. Its self-attention is the notebook's given
  ``MultiHeadAttention``, which the grader re-installs before every call;
- ``rope(x, positions, base)`` (warm-up), called directly: rotary positions on interleaved pairs
  (x_2m, x_2m+1) turned by p θ_m, θ_m = base^(-2m/d), for any leading axes and any positions;
- ``causal_tiled_attention(queries, keys, values, tile_size, window=None)`` (new): causal scaled
  dot-product attention with the T queries at the last T of the S key positions, optionally a sliding
  window, computed over key tiles with an online softmax; it returns the output and each query's
  log-sum-exp of its scaled scores. Cases with a window include rows whose first tile is wholly masked
  (a running maximum of -inf: exp(-inf - (-inf)) is NaN), and keys and values that no query can see
  filled with infinity, which an implementation that skips the tiles it must skip never reads;
- ``RotaryCachedSelfAttention(d_model, num_heads, base)`` (new): causal self-attention with RoPE on new
  tokens after a cache of rotated keys and of values; the new tokens' outputs must be those of the full
  causally masked RoPE attention over the whole sequence, and the cache must come back with the new
  tokens' rotated keys and values appended.

Stand-ins, so that one bug is charged once: in the cached module's check, the notebook's ``rope`` answers
with the correct rotation when it is called on exactly the new tokens' per-head queries (or keys) at the
new tokens' positions 0-based from the cache's length, with the module's base. A wrong ``rope`` then costs
only its own test; a module that rotates at the wrong positions, or something else, gets the student's own
``rope`` and is judged on what it returns.

The references are here, not in the package that the book prints: nothing of the new parts' solutions
may appear in the book. (The book prints ``attention_course.positions.rotate`` and
``attention_course.tiled_attention.tiled_attention``; tests/test_grading_transformer.py checks these
references against them.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from attention_course.grading.cases import Case, Check, StandIn
from attention_course.grading.checks._draw import describe, integer, normal
from attention_course.grading.checks.multi_head import (
    _heads, _linear, _padding_mask, _random_mask, _weights, masked_softmax,
)

ASSIGNMENT = "transformer"
ROPE_PARAMS = ("x", "positions", "base")
DEFAULT_BASE = 10000.0


# ---------------------------------------------------------------------------------------------
# References.


def rope(x: torch.Tensor, positions: torch.Tensor, base: float = DEFAULT_BASE) -> torch.Tensor:
    """RoPE on interleaved pairs, in float64 as complex products: x (..., S, d), positions (S,) -> (..., S, d).

    Pair m = (x_2m, x_2m+1) is the complex number x_2m + i x_2m+1; at position p it is multiplied by
    exp(i p θ_m), θ_m = base^(-2m/d): a turn by p θ_m."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d / 2,)
    angles = positions.to(torch.float64)[:, None] * theta  # (S, d / 2)
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d // 2, 2).contiguous())
    turned = pairs * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)


def torch_encoder_layer(state: dict, num_heads: int, norm_first: bool) -> nn.TransformerEncoderLayer:
    """PyTorch's own layer with the case's weights; in training mode with dropout 0: the plain computation,
    never the fused inference path."""
    d_model = state["self_attention.W_q.weight"].shape[1]
    d_ff = state["linear1.weight"].shape[0]
    dtype = state["linear1.weight"].dtype
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True,
                                       norm_first=norm_first).to(dtype)
    attention = {name: state[f"self_attention.{name}"] for name in
                 ("W_q.weight", "W_k.weight", "W_v.weight", "W_q.bias", "W_k.bias", "W_v.bias")}
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([attention[f"{w}.weight"] for w in ("W_q", "W_k", "W_v")]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([attention[f"{w}.bias"] for w in ("W_q", "W_k", "W_v")]))
        layer.self_attn.out_proj.weight.copy_(state["self_attention.W_o.weight"])
        layer.self_attn.out_proj.bias.copy_(state["self_attention.W_o.bias"])
        for name in ("linear1", "linear2", "norm1", "norm2"):
            getattr(layer, name).weight.copy_(state[f"{name}.weight"])
            getattr(layer, name).bias.copy_(state[f"{name}.bias"])
    return layer.train()


def encoder_layer(state: dict, num_heads: int, norm_first: bool, x: torch.Tensor, mask=None) -> torch.Tensor:
    """``nn.TransformerEncoderLayer`` with our mask convention (True = may attend, broadcasting to (B, h, S, S))."""
    batch, length, _ = x.shape
    attn_mask = None
    if mask is not None:  # PyTorch: True = hidden, one (S, S) mask per sequence and head
        attn_mask = ~mask.expand(batch, num_heads, length, length).reshape(batch * num_heads, length, length)
    return torch_encoder_layer(state, num_heads, norm_first)(x, src_mask=attn_mask)


def _encoder_reference(case: Case):
    return encoder_layer(case.state, case.construct["num_heads"], case.construct["norm_first"], *case.args)


def visible_keys(num_queries: int, num_keys: int, window: int | None = None) -> torch.Tensor:
    """(T, S): query t, at position S - T + t, sees key j when j <= S - T + t (and j > S - T + t - window)."""
    query_positions = torch.arange(num_keys - num_queries, num_keys)[:, None]
    key_positions = torch.arange(num_keys)[None, :]
    seen = key_positions <= query_positions
    if window is not None:
        seen &= key_positions > query_positions - window
    return seen


def causal_attention(queries, keys, values, window: int | None = None):
    """Causal (sliding-window) scaled dot-product attention, computed whole in float64:
    (output (B, T, d_v), log-sum-exp of each query's visible scaled scores (B, T)), in the queries' dtype.
    Keys and values that no query sees may hold anything (infinity): they are set to 0 first."""
    dtype, d = queries.dtype, queries.shape[-1]
    seen = visible_keys(queries.shape[1], keys.shape[1], window)  # (T, S)
    anyone = seen.any(dim=0)[None, :, None]  # (1, S, 1): keys some query sees
    keys = torch.where(anyone, keys.double(), 0.0)
    values = torch.where(anyone, values.double(), 0.0)
    scores = (queries.double() @ keys.transpose(1, 2) / math.sqrt(d)).masked_fill(~seen, -math.inf)
    top = scores.amax(dim=-1, keepdim=True)  # finite: every query sees at least its own position
    exps = torch.exp(scores - top)
    total = exps.sum(dim=-1, keepdim=True)
    return ((exps / total) @ values).to(dtype), (top + total.log()).squeeze(-1).to(dtype)


def _tiled_reference(case: Case):
    return causal_attention(*case.args[:3], window=case.kwargs.get("window"))


def rotary_attention(state: dict, num_heads: int, base: float, sequence: torch.Tensor):
    """Causal RoPE self-attention over a whole sequence (B, L, d_model), in float64: (output (B, L, d_model),
    rotated keys (B, h, L, d_head), values (B, h, L, d_head)), in the sequence's dtype."""
    dtype = sequence.dtype
    state = {name: value.double() for name, value in state.items()}
    whole = sequence.double()
    positions = torch.arange(whole.shape[1])
    queries = rope(_heads(_linear(state, "W_q", whole), num_heads), positions, base)
    keys = rope(_heads(_linear(state, "W_k", whole), num_heads), positions, base)
    values = _heads(_linear(state, "W_v", whole), num_heads)
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    weights = masked_softmax(scores, torch.ones(len(positions), len(positions), dtype=torch.bool).tril())
    merged = (weights @ values).transpose(1, 2).flatten(2)  # (B, L, d_model)
    return _linear(state, "W_o", merged).to(dtype), keys.to(dtype), values.to(dtype)


def _rotary_reference(case: Case):
    """The new tokens' rows of the full computation over prefix and new tokens, and the whole cache."""
    output, keys, values = rotary_attention(case.state, case.construct["num_heads"], case.base,
                                            torch.cat([case.prefix, case.args[0]], dim=1))
    return output[:, case.prefix.shape[1]:], keys, values


# ---------------------------------------------------------------------------------------------
# EncoderLayer.


def _encoder_weights(g: torch.Generator, dtype, d_model: int, d_ff: int) -> dict:
    state = {f"self_attention.{name}": value for name, value in _weights(g, dtype, d_model).items()}
    state["linear1.weight"] = normal(g, d_ff, d_model, dtype=dtype, scale=1.0 / math.sqrt(d_model))
    state["linear1.bias"] = normal(g, d_ff, dtype=dtype, scale=0.3)
    state["linear2.weight"] = normal(g, d_model, d_ff, dtype=dtype, scale=1.0 / math.sqrt(d_ff))
    state["linear2.bias"] = normal(g, d_model, dtype=dtype, scale=0.3)
    for norm in ("norm1", "norm2"):  # not 1 and 0: a layer norm without its own weights shows
        state[f"{norm}.weight"] = 1.0 + normal(g, d_model, dtype=dtype, scale=0.3)
        state[f"{norm}.bias"] = normal(g, d_model, dtype=dtype, scale=0.3)
    return state


def _encoder_case(label: str, state: dict, num_heads: int, norm_first: bool, x, mask=None,
                  hidden: bool = True) -> Case:
    d_model, d_ff = x.shape[-1], state["linear1.weight"].shape[0]
    args = (x,) if mask is None else (x, mask)
    kind = "pre-LN" if norm_first else "post-LN"
    return Case("test-encoder-layer",
                f"d_model={d_model}, num_heads={num_heads}, d_ff={d_ff}, norm_first={norm_first} ({kind}): {label}",
                "EncoderLayer", args,
                construct={"d_model": d_model, "num_heads": num_heads, "d_ff": d_ff, "norm_first": norm_first},
                state=state, hidden=hidden)


def visible_encoder_inputs() -> tuple[dict, torch.Tensor]:
    """The visible example: d_model = 4, two heads, d_ff = 8, two sequences of 3 positions."""
    generator = torch.Generator().manual_seed(9)
    return _encoder_weights(generator, torch.float32, 4, 8), torch.randn(2, 3, 4, generator=generator)


def encoder_layer_cases(g: torch.Generator) -> list[Case]:
    state, x = visible_encoder_inputs()
    padding = torch.tensor([True, True, True, True, True, False]).reshape(2, 1, 1, 3)  # lengths 3 and 2
    cases = [
        _encoder_case("the notebook's example: 2 sequences of 3 positions, no mask", state, 2, False, x, hidden=False),
        _encoder_case("the notebook's example with padding (lengths 3 and 2)", state, 2, True, x, padding, hidden=False),
    ]
    for dtype, norm_first, kind in ((torch.float32, False, "padding"), (torch.float64, True, "padding"),
                                    (torch.float64, False, "causal"), (torch.float32, True, "per head"),
                                    (torch.float64, True, None), (torch.float32, False, "one position")):
        num_heads, d_head = integer(g, 1, 3), integer(g, 2, 3)
        d_model, d_ff = num_heads * d_head, integer(g, 3, 8)
        batch, length = integer(g, 1, 3), integer(g, 2, 5)
        if kind == "one position":
            batch, length = 1, 1
        weights = _encoder_weights(g, dtype, d_model, d_ff)
        x = normal(g, batch, length, d_model, dtype=dtype, scale=2.0) + 0.5  # off zero: the norms matter
        if kind == "padding":
            mask, lengths = _padding_mask(g, batch, length)
            what = f"a padding mask of shape {tuple(mask.shape)}, lengths {lengths}"
        elif kind == "causal":
            mask = torch.ones(length, length, dtype=torch.bool).tril()
            what = f"a causal mask of shape ({length}, {length})"
        elif kind == "per head":
            mask = _random_mask(g, batch, num_heads, length, length)
            what = f"a mask of shape {tuple(mask.shape)} (one per head)"
        else:
            mask, what = None, "no mask"
        cases.append(_encoder_case(f"{describe(x, 'x')}, {what}", weights, num_heads, norm_first, x, mask))
    return cases


# ---------------------------------------------------------------------------------------------
# rope.


def _rope_case(label: str, x, positions, base: float | None = None, hidden: bool = True, keyword: bool = True) -> Case:
    args, kwargs = (x, positions), {}
    if base is not None:
        if keyword:
            kwargs = {"base": base}
        else:
            args = (x, positions, base)
    return Case("test-rope", label, "rope", args, kwargs, hidden=hidden)


VISIBLE_ROPE_X = torch.tensor([[[1.0, 0.0, 1.0, 0.0]] * 3])  # (1, S=3, d=4): each pair (1, 0)


def rope_cases(g: torch.Generator) -> list[Case]:
    cases = [_rope_case("the notebook's example: (1, 0, 1, 0) at positions 0, 1, 2 (d = 4: pairs turned by p and "
                        "p / 100)", VISIBLE_ROPE_X, torch.arange(3), hidden=False)]
    # (dtype, leading axes, positions: "from 0", "offset", "any"), base (None: the default), base by keyword
    for dtype, leading, kind, base, keyword in (
            (torch.float32, (), "from 0", None, True), (torch.float64, (2, 3), "offset", None, True),
            (torch.float32, (2,), "any", None, True), (torch.float64, (1,), "from 0", 100.0, True),
            (torch.float64, (2, 1, 2), "any", 500.0, False)):
        length, d = integer(g, 2, 6), 2 * integer(g, 1, 6)
        x = normal(g, *leading, length, d, dtype=dtype, scale=1.5)
        if kind == "from 0":
            positions, where = torch.arange(length), f"positions 0 … {length - 1}"
        elif kind == "offset":
            start = integer(g, 1, 40)
            positions, where = torch.arange(start, start + length), f"positions {start} … {start + length - 1}"
        else:
            positions = torch.randint(0, 64, (length,), generator=g)
            where = f"positions {positions.tolist()}"
        label = f"{describe(x, 'x')}, {where}" + (f", base={base:g}" if base is not None else "")
        cases.append(_rope_case(label, x, positions, base, keyword=keyword))
    # d = 2 (one pair, turned by p radians) and a single position far from 0.
    x, position = normal(g, 1, 2, dtype=torch.float32), integer(g, 20, 60)
    cases.append(_rope_case(f"{describe(x, 'x')} (one pair), position {position}", x, torch.tensor([position])))
    return cases


# ---------------------------------------------------------------------------------------------
# causal_tiled_attention.


def _tiled_case(label: str, queries, keys, values, tile_size: int, window: int | None = None,
                hidden: bool = True) -> Case:
    kwargs = {} if window is None else {"window": window}
    where = f", window={window}" if window is not None else ""
    full = (f"{describe(queries, 'queries')}, {describe(keys, 'keys')}, {describe(values, 'values')}, "
            f"tile_size={tile_size}{where}: {label}")
    return Case("test-tiled-attention", full, "causal_tiled_attention", (queries, keys, values, tile_size), kwargs,
                hidden=hidden)


def visible_tiled_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The visible example: self-attention over 5 positions, d = 3, d_v = 2."""
    generator = torch.Generator().manual_seed(11)
    return (torch.randn(1, 5, 3, generator=generator), torch.randn(1, 5, 3, generator=generator),
            torch.randn(1, 5, 2, generator=generator))


def visible_tiled_prefix_and_far() -> tuple[tuple, tuple]:
    """The visible test's two other examples, drawn as the notebook draws them after its first one: two
    queries after a prefix (S = 6), and keys 0-5 that no query sees holding infinity (the queries at 9-11,
    window 2)."""
    generator = torch.Generator().manual_seed(11)
    queries = torch.randn(1, 5, 3, generator=generator)
    torch.randn(1, 5, 3, generator=generator), torch.randn(1, 5, 2, generator=generator)
    more_keys, more_values = torch.randn(1, 6, 3, generator=generator), torch.randn(1, 6, 2, generator=generator)
    far_keys, far_values = torch.randn(1, 12, 3, generator=generator), torch.randn(1, 12, 2, generator=generator)
    far_keys[:, :6], far_values[:, :6] = math.inf, math.inf
    return (queries[:, :2].clone(), more_keys, more_values), (queries[:, :3].clone(), far_keys, far_values)


def _qkv(g: torch.Generator, dtype, batch: int, num_queries: int, num_keys: int, d: int, d_v: int, scale: float = 1.5):
    return (normal(g, batch, num_queries, d, dtype=dtype, scale=scale), normal(g, batch, num_keys, d, dtype=dtype, scale=scale),
            normal(g, batch, num_keys, d_v, dtype=dtype))


def tiled_attention_cases(g: torch.Generator) -> list[Case]:
    queries, keys, values = visible_tiled_inputs()
    prefix, far = visible_tiled_prefix_and_far()
    cases = [_tiled_case("the notebook's example, self-attention", queries, keys, values, 2, hidden=False),
             _tiled_case("the notebook's example, window 2", queries, keys, values, 3, window=2, hidden=False),
             _tiled_case("the notebook's example: T = 2 queries after a prefix of 4", *prefix, 2, hidden=False),
             _tiled_case("the notebook's example: keys and values 0-5, which no query sees, hold infinity", *far, 2,
                         window=2, hidden=False)]

    def draw(dtype, num_queries, num_keys, batch=None, d=None, d_v=None, scale=1.5):
        return _qkv(g, dtype, batch or integer(g, 1, 2), num_queries, num_keys, d or integer(g, 2, 5),
                    d_v or integer(g, 1, 4), scale)

    # Self-attention (T = S) over several tiles, tiles that do not divide S.
    length = integer(g, 5, 9)
    cases.append(_tiled_case("self-attention", *draw(torch.float32, length, length), integer(g, 2, 3)))
    # A decoder's queries after a prefix (T < S): query t stands at S - T + t.
    num_keys = integer(g, 7, 12)
    cases.append(_tiled_case("the queries at the last positions", *draw(torch.float64, integer(g, 2, num_keys - 3),
                                                                         num_keys), integer(g, 2, 4)))
    # One key per tile, and one tile holding every key.
    length = integer(g, 3, 6)
    cases.append(_tiled_case("one key per tile", *draw(torch.float32, length, length), 1))
    num_keys = integer(g, 3, 7)
    cases.append(_tiled_case("one tile holds every key", *draw(torch.float64, integer(g, 1, num_keys - 1), num_keys),
                             num_keys + integer(g, 0, 3)))
    # One query (the next token), seeing every key.
    num_keys = integer(g, 3, 10)
    cases.append(_tiled_case("one query", *draw(torch.float32, 1, num_keys), integer(g, 2, 3)))
    # A sliding window narrower than a tile, over more queries than a tile: rows whose first tile is all masked.
    length, window = integer(g, 8, 12), integer(g, 2, 3)
    cases.append(_tiled_case("rows whose first tile is wholly masked", *draw(torch.float64, length, length),
                             window + integer(g, 1, 2), window=window))
    num_keys = integer(g, 10, 16)
    cases.append(_tiled_case("window and the queries at the last positions",
                             *draw(torch.float32, integer(g, 4, 7), num_keys), integer(g, 2, 3),
                             window=integer(g, 3, 5)))
    length = integer(g, 3, 7)
    cases.append(_tiled_case("window 1: each query sees itself only", *draw(torch.float64, length, length),
                             integer(g, 2, 3), window=1))
    length = integer(g, 3, 7)
    cases.append(_tiled_case("a window wider than the sequence", *draw(torch.float32, length, length),
                             integer(g, 2, 3), window=length + integer(g, 0, 4)))
    # Keys and values that no query can see hold infinity: the tiles that hold them must not be read.
    tile, window, num_queries = integer(g, 2, 3), integer(g, 2, 4), integer(g, 3, 6)
    num_keys = num_queries + window + 2 * tile + integer(g, 0, 4)
    queries, keys, values = draw(torch.float64, num_queries, num_keys)
    unseen = num_keys - num_queries - window + 1 - (tile - 1)  # keys 0 … unseen - 1 share no tile with a seen key
    keys[:, :unseen], values[:, :unseen] = math.inf, -math.inf
    cases.append(_tiled_case(f"keys and values 0 … {unseen - 1}, which no query sees, hold infinity",
                             queries, keys, values, tile, window=window))
    # Extreme scores: integers (exact in float32), d = 4 (sqrt(d) = 2), scores up to ±2e4.
    num_keys = integer(g, 5, 9)
    queries = torch.randint(-100, 101, (2, num_keys, 4), generator=g).to(torch.float32)
    keys = torch.randint(-100, 101, (2, num_keys, 4), generator=g).to(torch.float32)
    values = normal(g, 2, num_keys, 3, dtype=torch.float32)
    cases.append(_tiled_case("scores up to ±2e4", queries, keys, values, 2))
    num_keys = integer(g, 5, 9)
    queries = torch.full((1, num_keys, 4), 100.0, dtype=torch.float64)
    keys = -100.0 + normal(g, 1, num_keys, 4, dtype=torch.float64, scale=2.0)
    values = normal(g, 1, num_keys, 2, dtype=torch.float64)
    cases.append(_tiled_case("every score near -2e4 (exp underflows to 0 unless shifted)", queries, keys, values,
                             integer(g, 2, 3), window=integer(g, 2, 4)))
    # More query blocks than one, float64, d_v != d.
    length = integer(g, 14, 20)
    cases.append(_tiled_case("self-attention over many tiles", *draw(torch.float64, length, length, batch=2, d=3, d_v=5),
                             integer(g, 3, 5)))
    return cases


# ---------------------------------------------------------------------------------------------
# RotaryCachedSelfAttention: stand-ins for rope, answering exactly the calls on the new tokens.


def _rope_stand_in(x: torch.Tensor, positions: torch.Tensor, base: float) -> StandIn:
    return StandIn("global", "rope", ROPE_PARAMS, (("base", DEFAULT_BASE),),
                   (("close", x, 1e-4, 1e-5), ("equal", positions), ("scalar", base)), rope(x, positions, base))


@dataclass(frozen=True)
class RotaryCase(Case):
    """A call of ``RotaryCachedSelfAttention``, with the tokens before it (``prefix``, never sent to the
    sandbox: the cache holds their rotated keys and their values) and the module's base."""

    prefix: torch.Tensor | None = None
    base: float = DEFAULT_BASE


def _rotary_case(label: str, state: dict, num_heads: int, prefix: torch.Tensor, x: torch.Tensor, base: float = DEFAULT_BASE,
                 hidden: bool = True, pass_none: bool = False) -> Case:
    num_past, num_new = prefix.shape[1], x.shape[1]
    _, keys, values = rotary_attention(state, num_heads, base, torch.cat([prefix, x], dim=1))
    positions = torch.arange(num_past, num_past + num_new)
    stand_ins = (_rope_stand_in(_heads(_linear(state, "W_q", x), num_heads), positions, base),
                 _rope_stand_in(_heads(_linear(state, "W_k", x), num_heads), positions, base))
    if num_past:
        args = (x, keys[:, :, :num_past].clone(), values[:, :, :num_past].clone())
    else:
        args = (x, None, None) if pass_none else (x,)
    d_model = x.shape[-1]
    construct = {"d_model": d_model, "num_heads": num_heads}
    if base != DEFAULT_BASE:
        construct["base"] = base
    where = f", base={base:g}" if base != DEFAULT_BASE else ""
    return RotaryCase("test-rotary-cache", f"d_model={d_model}, num_heads={num_heads}{where}: {label}",
                      "RotaryCachedSelfAttention", args, construct=construct, state=state, stand_ins=stand_ins,
                      hidden=hidden, prefix=prefix, base=base)


def visible_rotary_inputs() -> tuple[dict, torch.Tensor]:
    """The visible example: d_model = 4, two heads of 2 features, a sequence of 4 tokens."""
    generator = torch.Generator().manual_seed(12)
    return _weights(generator, torch.float32, 4), torch.randn(1, 4, 4, generator=generator)


def rotary_cache_cases(g: torch.Generator) -> list[Case]:
    state, sequence = visible_rotary_inputs()
    cases = [
        _rotary_case("the notebook's example: the first 3 tokens with no cache", state, 2, sequence[:, :0],
                     sequence[:, :3], hidden=False),
        _rotary_case("the notebook's example: token 4 with the cache of the first 3", state, 2, sequence[:, :3],
                     sequence[:, 3:], hidden=False),
    ]
    # (dtype, past, new, base): a prompt with no cache, one new token, several new tokens, another base, a long cache.
    for number, (dtype, num_past, num_new, base) in enumerate((
            (torch.float32, 0, integer(g, 2, 5), DEFAULT_BASE), (torch.float64, integer(g, 1, 5), 1, DEFAULT_BASE),
            (torch.float32, integer(g, 1, 4), integer(g, 2, 4), DEFAULT_BASE),
            (torch.float64, integer(g, 2, 5), integer(g, 2, 3), 100.0),
            (torch.float64, integer(g, 1, 3), 1, DEFAULT_BASE), (torch.float32, integer(g, 10, 20), 2, DEFAULT_BASE))):
        num_heads, d_head, batch = integer(g, 1, 3), 2 * integer(g, 1, 2), integer(g, 1, 2)
        if number >= 3:
            num_heads = max(num_heads, 2)
        d_model = num_heads * d_head
        weights = _weights(g, dtype, d_model)
        prefix = normal(g, batch, num_past, d_model, dtype=dtype)
        x = normal(g, batch, num_new, d_model, dtype=dtype)
        where = (f"position {num_past}" if num_new == 1 else f"positions {num_past} … {num_past + num_new - 1}")
        label = (f"{describe(x, 'x')} (new tokens)" + (
            f" at {where}, after a cache of {num_past} earlier tokens "
            f"(keys and values of shape {(batch, num_heads, num_past, d_head)})"
            if num_past else (", past_keys=None, past_values=None" if number == 0 else ", no cache")))
        cases.append(_rotary_case(label, weights, num_heads, prefix, x, base, pass_none=number == 0))
    return cases


CHECKS = [
    Check("test-encoder-layer", 4, "EncoderLayer is self-attention then the feed-forward network, each in a residual "
          "connection with a layer norm after the sum (post-LN) or on the sublayer's input (pre-LN, norm_first=True): "
          "what nn.TransformerEncoderLayer computes with the same weights",
          encoder_layer_cases, _encoder_reference,
          hints=(
              ("norm_first=False (post-LN)",
               "post-LN (norm_first=False): x = norm1(x + SelfAttention(x)), then norm2(x + FFN(x)), with FFN(x) = "
               "linear2(relu(linear1(x))) and the mask handed to the self-attention"),
              ("norm_first=True (pre-LN)",
               "pre-LN (norm_first=True): x = x + SelfAttention(norm1(x)), then x + FFN(norm2(x)): the residual "
               "adds the sublayer's output to x itself, not to its normalised copy"),
              ("norm_first=True (pre-LN)",
               "norm_first=True asks for pre-LN, and your layer computed post-LN: pre-LN is x + "
               "SelfAttention(norm1(x)), then x + FFN(norm2(x)) (use self.norm_first in forward)"),
          )),
    Check("test-rope", 2, "rope turns each pair (x_2m, x_2m+1) of the vector at position p by the angle p * theta_m, "
          "theta_m = base ** (-2m / d), for any positions, leading axes and base",
          rope_cases, lambda case: rope(*case.args, **case.kwargs),
          hints=(
              ("(1, 0, 1, 0) at positions 0, 1, 2",
               "pair m turns by p * base ** (-2m / d), here by p for pair 0 and p / 100 for pair 1, and (1, 0) "
               "turned by a is (cos a, sin a)"),
              ("(1, 0, 1, 0) at positions 0, 1, 2",
               "RoPE here turns interleaved pairs (x_2m, x_2m+1): x[..., 0::2] with x[..., 1::2]"),
          )),
    Check("test-tiled-attention", 6, "causal_tiled_attention gives the output and the log-sum-exp of causal (sliding-"
          "window) attention with the queries at the last positions, by an online softmax over key tiles that stays "
          "finite for rows whose first tile is wholly masked and never reads a tile no query can see",
          tiled_attention_cases, _tiled_reference, new=True, solution_cells=("causal_tiled_attention",),
          hints=(
              ("tile_size=2: the notebook's example, self-attention",
               "whenever a tile raises a row's maximum from m_old to m_new, rescale the running sum l and the "
               "running output o by exp(m_old - m_new) before adding the tile's terms"),
              ("tile_size=2: the notebook's example, self-attention",
               "logsumexp = m + log l, the running maximum plus the log of the running sum (l alone is the sum of "
               "exp(s - m))"),
              ("window=2: the notebook's example, window 2",
               "A row that sees nothing in the first tile it reads has a running maximum of -inf, and exp(-inf - "
               "(-inf)) is NaN: where the maximum is still -inf, shift by 0 instead"),
              ("T = 2 queries after a prefix of 4",
               "query t stands at position S - T + t and sees keys 0 … S - T + t (not 0 … t)"),
              ("which no query sees, hold infinity",
               "those tiles must never be read (0 * inf is NaN); start each block at the tile holding the earliest "
               "key its first query's window reaches"),
          )),
    Check("test-rotary-cache", 4, "RotaryCachedSelfAttention rotates the new tokens' queries and keys at their "
          "positions after the cache, gives them exactly the outputs of the full causal RoPE self-attention over the "
          "whole sequence, and returns the cache with their rotated keys and values appended",
          rotary_cache_cases, _rotary_reference, new=True, solution_cells=("RotaryCachedSelfAttention",),
          hints=(
              ("the first 3 tokens with no cache",
               "the cache holds keys already rotated, each by rope at its own token's position"),
              ("token 4 with the cache of the first 3",
               "new token t stands at position P + t: rotate its query and key at torch.arange(P, P + T)"),
              ("token 4 with the cache of the first 3",
               "they were rotated when their tokens were new, so never rotate a cached key again; rotate only the "
               "new tokens' keys, then append them"),
          )),
]
