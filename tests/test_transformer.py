"""Chapters 9–11's code: positions, the Transformer, the language model and tiled attention.

What a reader relies on: self-attention without positions only reorders its outputs; RoPE's scores
depend on the offset alone and ALiBi's bias on the distance alone, in the right head; the book's
Transformer layers compute what PyTorch's compute with the same weights, post-LN and pre-LN, with
padding and causal masks; a decoder position never sees a later one; generation with a key/value cache
writes the same tokens as without; tiled attention equals full attention while its memory grows as S,
not S².
"""

from __future__ import annotations

import math

import pytest
import torch

from attention_course.attention import attention, scaled_dot_score
from attention_course.corpus import ToyTranslationCorpus, Vocab
from attention_course.language_model import (
    KeyValueCache, _cached_forward, build_language_model, generate, train_language_model,
)
from attention_course.multi_head import MultiHeadAttention, torch_twin
from attention_course.positions import (
    ALiBiScore, LearnedPositions, RotaryScore, alibi_bias, alibi_slopes, permutation_gap, rotate,
)
from attention_course.tiled_attention import peak_memory, tiled_attention
from attention_course.transformer import build_transformer, torch_decoder_twin, torch_encoder_twin

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus() -> ToyTranslationCorpus:
    return ToyTranslationCorpus(num_pairs=300, seed=0)


def _random(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- positions ---------------------------------------------------------------------------------------


def test_self_attention_without_positions_only_reorders_its_outputs_and_positions_break_that():
    torch.manual_seed(0)
    layer = MultiHeadAttention(d_model=16, num_heads=4)
    x, order = _random(2, 6, 16), torch.tensor([3, 0, 5, 1, 4, 2])
    assert permutation_gap(lambda v: layer(v, v, v)[0], x, order) < 1e-6
    rotary = MultiHeadAttention(d_model=16, num_heads=4, score_fn=RotaryScore())
    rotary.load_state_dict(layer.state_dict())
    assert permutation_gap(lambda v: rotary(v, v, v)[0], x, order) > 1e-2


def test_rope_keeps_lengths_and_its_scores_depend_only_on_the_offset():
    x = _random(3, 5, 8, dtype=torch.float64)
    turned = rotate(x, torch.arange(5))
    assert torch.allclose(turned.norm(dim=-1), x.norm(dim=-1))
    assert torch.equal(rotate(x, torch.zeros(5, dtype=torch.long)), x)  # position 0 turns nothing
    q, k = _random(1, 1, 8, seed=1, dtype=torch.float64), _random(1, 1, 8, seed=2, dtype=torch.float64)
    scores = {}
    for i, j in [(3, 1), (10, 8), (40, 38), (2, 5), (7, 10)]:
        scores[(i, j)] = float(rotate(q, torch.tensor([i])) @ rotate(k, torch.tensor([j])).transpose(1, 2))
    assert scores[(3, 1)] == pytest.approx(scores[(10, 8)]) == pytest.approx(scores[(40, 38)])
    assert scores[(2, 5)] == pytest.approx(scores[(7, 10)])
    assert scores[(3, 1)] != pytest.approx(scores[(2, 5)])


def test_rope_odd_sizes_are_refused():
    with pytest.raises(ValueError, match="even"):
        rotate(torch.zeros(1, 2, 5), torch.arange(2))


def test_rotary_scores_put_queries_at_the_end_of_the_keys():
    """A decoder's new token, scored against a cache, must score as it does in the whole sequence."""
    q, k = _random(2, 6, 8, seed=3), _random(2, 6, 8, seed=4)
    whole = RotaryScore()(q, k)  # (B, 6, 6)
    last_two = RotaryScore()(q[:, 4:], k)  # queries at positions 4 and 5
    assert torch.allclose(whole[:, 4:], last_two, atol=1e-6)


def test_alibi_slopes_follow_press_et_al():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -k for k in range(1, 9)]))
    assert torch.allclose(alibi_slopes(4), torch.tensor([2.0 ** -k for k in (2, 4, 6, 8)]))
    # six heads: the four of n = 4, then every other slope of n = 8 (2^-1, 2^-3)
    assert torch.allclose(alibi_slopes(6), torch.tensor([2.0 ** -k for k in (2, 4, 6, 8, 1, 3)]))
    with pytest.raises(ValueError):
        alibi_slopes(0)


def test_alibi_bias_depends_on_distance_and_lands_on_the_right_head():
    bias = alibi_bias(4, 3, 5)  # queries at positions 2, 3, 4; keys at 0 … 4
    slopes = alibi_slopes(4)
    assert bias.shape == (4, 3, 5)
    assert torch.allclose(bias[:, 0, 2], torch.zeros(4))  # query 2 on key 2
    assert torch.allclose(bias[:, 2, 0], -4 * slopes)  # query 4 on key 0
    assert torch.allclose(bias[:, 0, 4], -2 * slopes)  # both sides are penalised alike
    # in the folded batch of chapter 8's layer, row b·n_h + r is head r
    q, k = _random(2 * 4, 3, 8, seed=5), _random(2 * 4, 5, 8, seed=6)
    scores = ALiBiScore(4)(q, k)
    for row in range(8):
        assert torch.allclose(scores[row] - scaled_dot_score(q[row:row + 1], k[row:row + 1])[0], bias[row % 4])


def test_learned_positions_refuse_a_position_past_their_table():
    table = LearnedPositions(max_length=10, d_model=4)
    assert table(10).shape == (10, 4)
    with pytest.raises(ValueError, match="up to 10"):
        table(11)


# --- the Transformer -----------------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_the_layers_compute_what_pytorchs_compute_with_the_same_weights_and_masks(corpus, norm_first):
    model = build_transformer(corpus, seed=1, norm_first=norm_first, d_model=16, num_heads=2, d_ff=24, num_layers=2)
    batch = corpus.collate(corpus.train_pairs[:6])
    padding = torch.arange(batch.source.shape[1]) >= batch.source_lengths[:, None]
    with torch.no_grad():
        memory, _ = model.encode(batch.source, batch.source_lengths)
        theirs = torch_encoder_twin(model)(model._embed(batch.source, model.source_embedding, "source"),
                                           src_key_padding_mask=padding)
        assert torch.allclose(memory[~padding], theirs[~padding], atol=1e-5)
        logits, _, _ = model.decode(batch.target_input, memory, batch.source_lengths)
        length = batch.target_input.shape[1]
        decoded = torch_decoder_twin(model)(
            model._embed(batch.target_input, model.target_embedding, "target"), memory,
            tgt_mask=torch.ones(length, length, dtype=torch.bool).triu(diagonal=1), memory_key_padding_mask=padding)
        assert torch.allclose(logits, model.output(decoded), atol=1e-5)


def test_a_decoder_position_never_sees_a_later_one_and_padding_changes_nothing(corpus):
    model = build_transformer(corpus, seed=2, positions="rope", d_model=16, num_heads=2, d_ff=24)
    batch = corpus.collate(corpus.train_pairs[:4])
    changed = batch.target_input.clone()
    changed[:, 3:] = Vocab.unk_id
    with torch.no_grad():
        memory, _ = model.encode(batch.source, batch.source_lengths)
        before, _, _ = model.decode(batch.target_input, memory, batch.source_lengths)
        after, _, _ = model.decode(changed, memory, batch.source_lengths)
        alone = corpus.collate(corpus.train_pairs[:1])  # the first pair without the others' padding
        alone_logits, _ = model(alone)
    assert torch.allclose(before[:, :3], after[:, :3], atol=1e-6)
    assert not torch.allclose(before[:, 3:], after[:, 3:])
    full_logits, weights = model(batch)
    length = alone.target_input.shape[1]
    assert torch.allclose(full_logits[0, :length], alone_logits[0], atol=1e-5)
    assert torch.all(weights[0, :, alone.source.shape[1]:] == 0)  # no weight on the source's padding


@pytest.mark.parametrize("positions", ["none", "sinusoidal", "learned", "rope", "alibi"])
def test_greedy_decoding_writes_what_teacher_forcing_on_its_own_output_predicts(corpus, positions):
    model = build_transformer(corpus, seed=3, positions=positions, d_model=16, num_heads=2, d_ff=24)
    batch = corpus.collate(corpus.held_out_pairs[:5])
    tokens, weights = model.greedy_decode(batch.source, batch.source_lengths, max_len=12)
    assert tokens.shape[0] == 5 and tokens.shape[1] <= 12 and weights.shape == (*tokens.shape, batch.source.shape[1])
    with torch.no_grad():
        memory, _ = model.encode(batch.source, batch.source_lengths)
        prefix = torch.cat([torch.full((5, 1), Vocab.bos_id), tokens[:, :-1]], dim=1)
        logits, _, _ = model.decode(prefix, memory, batch.source_lengths)
    written = logits.argmax(-1)
    for row in range(5):
        ids = tokens[row].tolist()
        end = ids.index(Vocab.eos_id) + 1 if Vocab.eos_id in ids else len(ids)
        assert written[row, :end].tolist() == ids[:end]
        assert torch.all(tokens[row, end:] == Vocab.pad_id) and torch.all(weights[row, end:] == 0)


def test_building_a_transformer_leaves_the_global_random_state_alone(corpus):
    state = torch.random.get_rng_state()
    first = build_transformer(corpus, seed=4, d_model=16, num_heads=2, d_ff=24)
    assert torch.equal(torch.random.get_rng_state(), state)
    second = build_transformer(corpus, seed=4, d_model=16, num_heads=2, d_ff=24)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
    with pytest.raises(ValueError, match="positions must be one of"):
        build_transformer(corpus, positions="relative")


def test_pytorchs_layer_refuses_position_aware_scores():
    with pytest.raises(ValueError, match="scaled dot product only"):
        torch_twin(MultiHeadAttention(8, 2, score_fn=ALiBiScore(2)))


# --- the language model --------------------------------------------------------------------------------


def test_generation_with_a_cache_writes_the_same_tokens_and_logits_as_without(corpus):
    model = build_language_model(len(corpus.source_vocab), seed=0, d_model=16, num_heads=2, num_layers=2, d_ff=24)
    prompt = torch.tensor([[Vocab.bos_id] + corpus.source_vocab.encode("Tom chase")])
    uncached, _ = generate(model, prompt, 40, use_cache=False, stop_at_eos=False)
    cached, seconds = generate(model, prompt, 40, use_cache=True, stop_at_eos=False)
    assert torch.equal(cached, uncached) and cached.shape == (1, 43) and len(seconds) == 40
    # the cached pass, fed one token at a time, gives every position the logits of the parallel pass
    cache = KeyValueCache.empty(len(model.layers))
    with torch.no_grad():
        one_by_one = torch.cat([_cached_forward(model, cached[:, t:t + 1], cache) for t in range(cached.shape[1])], 1)
        parallel = model(cached)
    assert cache.length == cached.shape[1]
    assert torch.allclose(one_by_one, parallel, atol=1e-5)


def test_the_language_model_learns_the_corpus_sentences(corpus):
    model, history = train_language_model(corpus, steps=60, seed=0, d_model=16, num_heads=2, d_ff=32)
    assert history.losses[-1] < 0.6 * history.losses[0]
    again, repeat = train_language_model(corpus, steps=60, seed=0, d_model=16, num_heads=2, d_ff=32)
    assert repeat.losses == history.losses  # deterministic for a seed


# --- tiled attention and memory ------------------------------------------------------------------------


@pytest.mark.parametrize("tile_size", [1, 3, 7, 50])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tiled_attention_equals_full_attention(tile_size, dtype):
    q, k, v = _random(2, 5, 8, seed=7, dtype=dtype), _random(2, 13, 8, seed=8, dtype=dtype), _random(2, 13, 3, seed=9, dtype=dtype)
    for scale in (1.0, 1e3):  # scores of thousands: the running maximum keeps every exp finite
        expected, _ = attention(q * scale, k, v, scaled_dot_score)
        got = tiled_attention(q * scale, k, v, tile_size)
        assert torch.isfinite(got).all()
        assert torch.allclose(got, expected, atol=1e-5 if dtype == torch.float32 else 1e-12)


def test_peak_memory_counts_the_bytes_a_computation_holds_at_once():
    def three_blocks():
        a = torch.ones(1000)  # 4000 bytes
        b = torch.ones(500, dtype=torch.float64)[:250]  # 4000 bytes (a view keeps its storage), while a is alive
        del a  # freed: not counted below
        c = torch.ones(3000)  # 12000 bytes beside b's 4000
        return (c[:250] + b).sum()  # 2000 + 8 bytes more

    _, peak = peak_memory(three_blocks)
    assert peak == 4000 + 12000 + 2000 + 8
    x = torch.ones(1000)
    _, peak_view = peak_memory(lambda t: t.view(10, 100).t(), x)  # an argument's view allocates nothing
    assert peak_view == 0


def test_full_attention_memory_grows_as_s_squared_and_tiled_as_s():
    full, tiled = {}, {}
    for length in (128, 256, 512):
        q = k = v = _random(1, length, 16, seed=length)
        _, full[length] = peak_memory(attention, q, k, v, scaled_dot_score)
        _, tiled[length] = peak_memory(tiled_attention, q, k, v, 64)
    assert 3.8 < full[512] / full[256] < 4.2 and 3.8 < full[256] / full[128] < 4.2
    assert 1.8 < tiled[512] / tiled[256] < 2.2
    assert full[512] >= 512 * 512 * 4  # at least the (S, S) weights in float32
    assert tiled[512] < full[512] / 4
