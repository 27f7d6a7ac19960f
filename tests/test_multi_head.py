"""Chapter 8's multi-head attention: what the book prints is what PyTorch computes."""

from __future__ import annotations

import pytest
import torch

from attention_course.multi_head import (
    IGNORE,
    MultiHeadAttention,
    merge_heads,
    neighbour_batch,
    split_heads,
    torch_twin,
)


def test_split_heads_cuts_the_features_and_merge_heads_undoes_it():
    x = torch.arange(2 * 5 * 6).reshape(2, 5, 6)  # (B, S, d_model)
    heads = split_heads(x, 3)  # (B, h, S, d_head)
    assert heads.shape == (2, 3, 5, 2)
    for head in range(3):
        assert torch.equal(heads[:, head], x[..., 2 * head:2 * head + 2])  # head j: features 2j and 2j + 1
    assert torch.equal(merge_heads(heads), x)
    with pytest.raises(ValueError, match="not divisible"):
        split_heads(x, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_layer_computes_what_nn_multihead_attention_computes(dtype):
    torch.manual_seed(0)
    layer = MultiHeadAttention(d_model=12, num_heads=3).to(dtype)
    twin = torch_twin(layer)
    queries, keys = torch.randn(2, 4, 12, dtype=dtype), torch.randn(2, 6, 12, dtype=dtype)
    valid_lens = torch.tensor([6, 3])
    tolerance = {"atol": 1e-5, "rtol": 1e-4} if dtype == torch.float32 else {}
    with torch.no_grad():
        output, weights = layer(queries, keys, keys, valid_lens)
        theirs, their_weights = twin(queries, keys, keys, key_padding_mask=torch.arange(6) >= valid_lens[:, None],
                                     average_attn_weights=False)
        torch.testing.assert_close(output, theirs, **tolerance)
        torch.testing.assert_close(weights, their_weights, **tolerance)
        assert output.dtype == weights.dtype == dtype and weights.shape == (2, 3, 4, 6)
        assert torch.all(weights[1, :, :, 3:] == 0)

        x = torch.randn(3, 5, 12, dtype=dtype)
        causal_output, causal_weights = layer(x, x, x, causal=True)
        theirs, _ = twin(x, x, x, attn_mask=torch.ones(5, 5, dtype=torch.bool).triu(diagonal=1))
        torch.testing.assert_close(causal_output, theirs, **tolerance)
        assert torch.all(causal_weights.triu(diagonal=1) == 0)


def test_one_head_is_the_chapter_7_self_attention_with_an_output_projection():
    # With h = 1 the layer is single-head scaled dot-product attention over all d_model features.
    torch.manual_seed(1)
    layer = MultiHeadAttention(d_model=8, num_heads=1)
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        output, weights = layer(x, x, x)
        q, k, v = layer.W_q(x), layer.W_k(x), layer.W_v(x)
        expected = torch.softmax(q @ k.transpose(1, 2) / 8 ** 0.5, dim=-1)
        torch.testing.assert_close(weights[:, 0], expected)
        torch.testing.assert_close(output, layer.W_o(expected @ v))


def test_causal_attention_needs_as_many_keys_as_queries():
    layer = MultiHeadAttention(d_model=4, num_heads=2)
    with pytest.raises(ValueError, match="as many keys as queries"):
        layer(torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4), causal=True)


def test_the_neighbour_targets_are_the_words_before_and_after():
    tokens = torch.tensor([[5, 6, 7, 8]])
    previous, following = neighbour_batch(tokens)
    assert previous.tolist() == [[IGNORE, 5, 6, 7]]
    assert following.tolist() == [[6, 7, 8, IGNORE]]
