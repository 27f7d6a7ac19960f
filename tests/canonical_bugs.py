"""The canonical bugs of each assignment: what students really get wrong, one answer cell each.

Used by the tests that show every seed's hidden cases catch them (test_grading_reproducible.py) and
that the visible tests name the fix (test_visible_tests.py).
"""

# (assignment, answer cell, buggy source, the check it must fail)
CANONICAL_BUGS = {
    "softmax along dim 0 whatever dim says": ("soft-hard", "softmax", '''
def softmax(scores, dim=-1):
    e = (scores - scores.amax(dim=0, keepdim=True)).exp()
    return e / e.sum(dim=0, keepdim=True)
''', "test-softmax"),
    "softmax along the last dim whatever dim says": ("soft-hard", "softmax", '''
def softmax(scores, dim=-1):
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)
''', "test-softmax"),
    "softmax without subtracting the largest score": ("soft-hard", "softmax", '''
def softmax(scores, dim=-1):
    e = scores.exp()
    return e / e.sum(dim=dim, keepdim=True)
''', "test-softmax"),
    "soft attention normalised over the wrong axis": ("soft-hard", "soft_attention", '''
def soft_attention(scores, values, temperature=1.0):
    w = softmax(scores / temperature, dim=0)
    return (w.unsqueeze(-1) * values).sum(-2), w
''', "test-soft-attention"),
    "soft attention without the temperature": ("soft-hard", "soft_attention", '''
def soft_attention(scores, values, temperature=1.0):
    w = softmax(scores, dim=-1)
    return (w.unsqueeze(-1) * values).sum(-2), w
''', "test-soft-attention"),
    "hard attention with float32 weights for any scores": ("soft-hard", "hard_attention", '''
def hard_attention(scores, values):
    w = F.one_hot(scores.argmax(-1), scores.shape[-1]).float()
    return (w.unsqueeze(-1) * values).sum(-2), w
''', "test-hard-attention"),
    "hard attention picking the last of tied keys": ("soft-hard", "hard_attention", '''
def hard_attention(scores, values):
    k = scores.shape[-1] - 1 - scores.flip(-1).argmax(-1)
    w = F.one_hot(k, scores.shape[-1]).to(scores.dtype)
    return (w.unsqueeze(-1) * values).sum(-2), w
''', "test-hard-attention"),
    "Gumbel noise with the wrong sign": ("soft-hard", "sample_hard_attention", '''
def sample_hard_attention(scores, values, uniform):
    return hard_attention(scores + torch.log(-torch.log(uniform)), values)
''', "test-sample-hard-attention"),
    "exponential noise -log(u) instead of Gumbel noise": ("soft-hard", "sample_hard_attention", '''
def sample_hard_attention(scores, values, uniform):
    return hard_attention(scores - torch.log(uniform), values)
''', "test-sample-hard-attention"),
    "straight-through with the soft weights detached": ("soft-hard", "straight_through_attention", '''
def straight_through_attention(scores, values, temperature=1.0):
    soft = softmax(scores / temperature).detach()
    w = hard_attention(scores, values)[1] + soft - soft
    return (w.unsqueeze(-1) * values).sum(-2), w
''', "test-straight-through"),
    "straight-through output from soft attention's output": ("soft-hard", "straight_through_attention", '''
def straight_through_attention(scores, values, temperature=1.0):
    soft_output, soft = soft_attention(scores, values, temperature)
    hard_output, hard = hard_attention(scores, values)
    return hard_output + soft_output - soft_output.detach(), hard + soft - soft.detach()
''', "test-straight-through"),
    "straight-through without the temperature": ("soft-hard", "straight_through_attention", '''
def straight_through_attention(scores, values, temperature=1.0):
    soft = softmax(scores)
    w = hard_attention(scores, values)[1] + soft - soft.detach()
    return (w.unsqueeze(-1) * values).sum(-2), w
''', "test-straight-through"),
    "dot scores transposed (B, K, Q)": ("three-stages", "dot_score", '''
def dot_score(queries, keys):
    return torch.bmm(keys, queries.transpose(1, 2))
''', "test-dot-score"),
    "scaled by d instead of its square root": ("three-stages", "scaled_dot_score", '''
def scaled_dot_score(queries, keys):
    return dot_score(queries, keys) / queries.shape[-1]
''', "test-scaled-dot-score"),
    "cosine of a zero vector is NaN": ("three-stages", "cosine_score", '''
def cosine_score(queries, keys, eps=1e-8):
    return dot_score(queries, keys) / (queries.norm(dim=-1)[:, :, None] * keys.norm(dim=-1)[:, None, :])
''', "test-cosine-score"),
    "masking the weights after the softmax": ("three-stages", "masked_softmax", '''
def masked_softmax(scores, valid_lens=None):
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    w = e / e.sum(dim=-1, keepdim=True)
    if valid_lens is None:
        return w
    lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    return w * (torch.arange(scores.shape[-1]) < lengths[..., None])
''', "test-masked-softmax"),
    "masked softmax without subtracting the largest score": ("three-stages", "masked_softmax", '''
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        e = scores.exp()
        return e / e.sum(dim=-1, keepdim=True)
    lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(scores.shape[-1]) < lengths[..., None]
    e = scores.masked_fill(~keep, -math.inf).exp()
    return e / e.sum(dim=-1, keepdim=True)
''', "test-masked-softmax"),
    "attention forgetting valid_lens": ("three-stages", "attention", '''
def attention(queries, keys, values, score_fn, valid_lens=None):
    weights = masked_softmax(score_fn(queries, keys))
    return torch.bmm(weights, values), weights
''', "test-attention"),
    "packing mask in which padding sees padding": ("three-stages", "packing_mask", '''
def packing_mask(query_segments, key_segments, causal=False):
    keep = query_segments[:, :, None] == key_segments[:, None, :]
    if causal:
        keep = keep & torch.ones(keep.shape[1:], dtype=torch.bool).tril()
    return keep
''', "test-packing-mask"),
    "causal packing mask that hides the query's own position": ("three-stages", "packing_mask", '''
def packing_mask(query_segments, key_segments, causal=False):
    keep = (query_segments[:, :, None] == key_segments[:, None, :]) & (key_segments[:, None, :] >= 0)
    if causal:
        keep = keep & torch.ones(keep.shape[1:], dtype=torch.bool).tril(-1)
    return keep
''', "test-packing-mask"),
    "masked attention masking the weights after the softmax": ("three-stages", "masked_attention", '''
def masked_attention(queries, keys, values, score_fn, keep):
    scores = score_fn(queries, keys)
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    weights = e / e.sum(dim=-1, keepdim=True) * keep
    return weights @ values, weights
''', "test-masked-attention"),
    "masked attention giving NaN for a query that sees nothing": ("three-stages", "masked_attention", '''
def masked_attention(queries, keys, values, score_fn, keep):
    scores = score_fn(queries, keys).masked_fill(~keep, -math.inf)
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ values, weights
''', "test-masked-attention"),
    "masked softmax ignoring the lengths": ("seq2seq-attention", "masked_softmax", '''
def masked_softmax(scores, lengths):
    e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)
''', "test-masked-softmax"),
    "seq2seq masked softmax without subtracting the largest score": ("seq2seq-attention", "masked_softmax", '''
def masked_softmax(scores, lengths):
    keep = torch.arange(scores.shape[-1]) < lengths[:, None]
    e = scores.masked_fill(~keep, float("-inf")).exp()
    return e / e.sum(dim=-1, keepdim=True)
''', "test-masked-softmax"),
    "general score with W_a on the query side": ("seq2seq-attention", "GeneralAttention", '''
class GeneralAttention(nn.Module):
    def __init__(self, query_dim, key_dim):
        super().__init__()
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def forward(self, query, keys, lengths):
        scores = (keys * self.W_a(query).unsqueeze(1)).sum(-1)  # h_j^T W_a q: W_a transposed
        weights = masked_softmax(scores, lengths)
        return (weights.unsqueeze(-1) * keys).sum(1), weights
''', "test-general-attention"),
    "Luong decoder attending before its step": ("seq2seq-attention", "LuongDecoder", '''
class LuongDecoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, context_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.cell = nn.GRUCell(embed_dim, hidden_dim)
        self.attention = GeneralAttention(hidden_dim, context_dim)
        self.W_c = nn.Linear(context_dim + hidden_dim, hidden_dim, bias=False)
        self.output = nn.Linear(hidden_dim, vocab_size)

    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        context, weights = self.attention(previous_hidden, encoder_states, source_lengths)  # H_{i-1}, as chapter 6
        hidden = self.cell(self.embedding(previous_tokens), previous_hidden)
        return self.output(torch.tanh(self.W_c(torch.cat([context, hidden], -1)))), hidden, weights
''', "test-luong-step"),
    "Luong logits read from H_i instead of the attentional state": ("seq2seq-attention", "LuongDecoder", '''
class LuongDecoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim, context_dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.cell = nn.GRUCell(embed_dim, hidden_dim)
        self.attention = GeneralAttention(hidden_dim, context_dim)
        self.W_c = nn.Linear(context_dim + hidden_dim, hidden_dim, bias=False)
        self.output = nn.Linear(hidden_dim, vocab_size)

    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        hidden = self.cell(self.embedding(previous_tokens), previous_hidden)
        context, weights = self.attention(hidden, encoder_states, source_lengths)
        return self.output(hidden), hidden, weights  # the context never reaches the output
''', "test-luong-step"),
    "exact match that forgives words too many": ("attention-experiments", "exact_match", '''
def exact_match(model, pairs):
    translations = translate(model, [english for english, _ in pairs])
    return sum(got.startswith(chinese) for got, (_, chinese) in zip(translations, pairs)) / len(pairs)
''', "test-exact-match"),
    "agreement on the model's own guesses, not the reference": ("attention-experiments", "attention_agreement", '''
def attention_agreement(model, pairs, alignments):
    hits = words = 0
    with torch.no_grad():
        for (english, _), alignment in zip(pairs, alignments):
            source, lengths = source_batch([english])
            states, final = model.encoder(source, lengths)
            hidden, previous = model.initial_state(final), torch.tensor([BOS])
            for aligned in alignment:
                logits, hidden, weights = model.decoder(previous, hidden, states, lengths)
                previous = logits.argmax(-1)
                hits += int(weights[0].argmax()) in aligned
                words += 1
    return hits / words
''', "test-agreement"),
    "agreement averaged per sentence, not pooled over words": ("attention-experiments", "attention_agreement", '''
def attention_agreement(model, pairs, alignments):
    shares = []
    with torch.no_grad():
        for (english, chinese), alignment in zip(pairs, alignments):
            source, lengths = source_batch([english])
            target_input, _ = target_batch([chinese])
            states, final = model.encoder(source, lengths)
            hidden, hits = model.initial_state(final), 0
            for i, aligned in enumerate(alignment):
                _, hidden, weights = model.decoder(target_input[:, i], hidden, states, lengths)
                hits += int(weights[0].argmax()) in aligned
            shares.append(hits / len(alignment))
    return sum(shares) / len(shares)
''', "test-agreement"),
    "scaled dot product divided by d instead of its square root": ("multi-head", "scaled_dot_product", '''
def scaled_dot_product(queries, keys, values, mask=None):
    scores = queries @ keys.transpose(-2, -1) / queries.shape[-1]
    weights = masked_softmax(scores, mask)
    return weights @ values, weights
''', "test-scaled-dot-product"),
    "mask applied to the weights after the softmax": ("multi-head", "scaled_dot_product", '''
def scaled_dot_product(queries, keys, values, mask=None):
    weights = masked_softmax(queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1]))
    if mask is not None:
        weights = weights * mask
    return weights @ values, weights
''', "test-scaled-dot-product"),
    "heads split along the sequence axis instead of the features": ("multi-head", "MultiHeadAttention", '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values, mask=None):
        B, Q, d_model = queries.shape
        h = self.num_heads
        split = lambda x: x.reshape(B, h, x.shape[1], d_model // h)
        heads, weights = scaled_dot_product(split(self.W_q(queries)), split(self.W_k(keys)), split(self.W_v(values)), mask)
        return self.W_o(heads.transpose(1, 2).reshape(B, Q, d_model)), weights
''', "test-multi-head"),
    "key/value heads repeated in the wrong order (Tensor.repeat)": ("multi-head", "GroupedQueryAttention", '''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads):
        super().__init__()
        self.h, self.h_kv, self.d_head = num_heads, num_kv_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values, mask=None):
        B, Q, _ = queries.shape
        heads = lambda x, n: x.reshape(B, x.shape[1], n, self.d_head).transpose(1, 2)
        k = heads(self.W_k(keys), self.h_kv).repeat(1, self.h // self.h_kv, 1, 1)
        v = heads(self.W_v(values), self.h_kv).repeat(1, self.h // self.h_kv, 1, 1)
        out, weights = scaled_dot_product(heads(self.W_q(queries), self.h), k, v, mask)
        return self.W_o(out.transpose(1, 2).reshape(B, Q, -1)), weights
''', "test-grouped-query"),
    "cache appended on the head axis": ("multi-head", "CachedSelfAttention", '''
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
        heads = lambda t: t.reshape(B, T, self.num_heads, D // self.num_heads).transpose(1, 2)
        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        P = 0
        if past_keys is not None:
            P = past_keys.shape[2]
            k, v = torch.cat([past_keys, k], dim=1), torch.cat([past_values, v], dim=1)
        mask = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)
        out, _ = scaled_dot_product(q, k, v, mask)
        return self.W_o(out.transpose(1, 2).reshape(B, T, D)), k, v
''', "test-cached-attention"),
    "causal mask not shifted by the length of the cache": ("multi-head", "CachedSelfAttention", '''
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
        heads = lambda t: t.reshape(B, T, self.num_heads, D // self.num_heads).transpose(1, 2)
        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        if past_keys is not None:
            k, v = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
        mask = torch.ones(T, k.shape[2], dtype=torch.bool).tril()
        out, _ = scaled_dot_product(q, k, v, mask)
        return self.W_o(out.transpose(1, 2).reshape(B, T, D)), k, v
''', "test-cached-attention"),
}

_TILED_BODY = '''
def causal_tiled_attention(queries, keys, values, tile_size, window=None):
    B, T, d = queries.shape
    S = keys.shape[1]
    outs, lses = [], []
    for qs in range(0, T, tile_size):
        q = queries[:, qs:qs + tile_size]
        pos = torch.arange(S - T + qs, S - T + qs + q.shape[1])
        lo = 0 if window is None else max(0, int(pos[0]) - window + 1)
        m = q.new_full((B, q.shape[1], 1), -math.inf)
        l = q.new_zeros((B, q.shape[1], 1))
        o = q.new_zeros((B, q.shape[1], values.shape[-1]))
        for ks in range(lo // tile_size * tile_size, int(pos[-1]) + 1, tile_size):
            kpos = torch.arange(ks, min(ks + tile_size, S))
            keep = kpos[None] <= pos[:, None]
            if window is not None:
                keep &= kpos[None] > pos[:, None] - window
            s = (q @ keys[:, ks:ks + tile_size].transpose(1, 2) / math.sqrt(d)).masked_fill(~keep, -math.inf)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            shift = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)
            e = torch.exp(s - shift)
            scale = torch.exp(m - shift)
            l = l * scale + e.sum(-1, keepdim=True)
            o = o * scale + e @ values[:, ks:ks + tile_size]
            m = m_new
        outs.append(o / l)
        lses.append((m + l.log()).squeeze(-1))
    return torch.cat(outs, 1), torch.cat(lses, 1)
'''


def _tiled(before: str, after: str) -> str:
    assert before in _TILED_BODY, before
    return _TILED_BODY.replace(before, after)


_ROTARY_HEAD = '''
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
        heads = lambda t: t.reshape(B, T, self.num_heads, D // self.num_heads).transpose(1, 2)
        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        P = 0 if past_keys is None else past_keys.shape[2]
'''
_ROTARY_TAIL = '''        mask = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)
        w = masked_softmax(q @ k_seen.transpose(-2, -1) / math.sqrt(q.shape[-1]), mask)
        return self.W_o((w @ v).transpose(1, 2).reshape(B, T, D)), k, v
'''
_ENCODER_HEAD = '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def ff(self, h):
        return self.linear2(torch.relu(self.linear1(h)))

    def forward(self, x, mask=None):
'''

CANONICAL_BUGS.update({
    "encoder layer always post-LN, norm_first ignored": ("transformer", "EncoderLayer", _ENCODER_HEAD + '''\
        x = self.norm1(x + self.self_attention(x, x, x, mask)[0])
        return self.norm2(x + self.ff(x))
''', "test-encoder-layer"),
    "pre-LN residual added to the normalised copy": ("transformer", "EncoderLayer", _ENCODER_HEAD + '''\
        if not self.norm_first:
            x = self.norm1(x + self.self_attention(x, x, x, mask)[0])
            return self.norm2(x + self.ff(x))
        h = self.norm1(x)
        x = h + self.self_attention(h, h, h, mask)[0]
        h = self.norm2(x)
        return h + self.ff(h)
''', "test-encoder-layer"),
    "RoPE turning the two halves instead of interleaved pairs": ("transformer", "rope", '''
def rope(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.double()[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
''', "test-rope"),
    "RoPE frequencies base ** (-m / d), one per feature index": ("transformer", "rope", '''
def rope(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions.double()[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
''', "test-rope"),
    "online softmax without rescaling the running sum": ("transformer", "causal_tiled_attention", _tiled(
        "l = l * scale + e.sum(-1, keepdim=True)", "l = l + e.sum(-1, keepdim=True)"), "test-tiled-attention"),
    "online softmax NaN for a row whose first tile is wholly masked": ("transformer", "causal_tiled_attention", _tiled(
        "shift = torch.where(m_new == -math.inf, torch.zeros_like(m_new), m_new)", "shift = m_new"),
        "test-tiled-attention"),
    "log-sum-exp without the running maximum": ("transformer", "causal_tiled_attention", _tiled(
        "lses.append((m + l.log()).squeeze(-1))", "lses.append(l.log().squeeze(-1))"), "test-tiled-attention"),
    "causal mask aligned at the top left (query t sees keys 0 … t)": ("transformer", "causal_tiled_attention", _tiled(
        "pos = torch.arange(S - T + qs, S - T + qs + q.shape[1])", "pos = torch.arange(qs, qs + q.shape[1])"),
        "test-tiled-attention"),
    "every key tile read and masked, none skipped": ("transformer", "causal_tiled_attention", _tiled(
        "range(lo // tile_size * tile_size, int(pos[-1]) + 1, tile_size)", "range(0, S, tile_size)"),
        "test-tiled-attention"),
    "rotary cache without the position offset": ("transformer", "RotaryCachedSelfAttention", _ROTARY_HEAD + '''\
        new = torch.arange(T)
        q, k = rope(q, new, self.base), rope(k, new, self.base)
        if P:
            k, v = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
        k_seen = k
''' + _ROTARY_TAIL, "test-rotary-cache"),
    "rotary cache of unrotated keys, the whole cache rotated at every step": (
        "transformer", "RotaryCachedSelfAttention", _ROTARY_HEAD + '''\
        q = rope(q, torch.arange(P, P + T), self.base)
        if P:
            k, v = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
        k_seen = rope(k, torch.arange(P + T), self.base)
''' + _ROTARY_TAIL, "test-rotary-cache"),
    "rotary cache whose cached keys are rotated again": ("transformer", "RotaryCachedSelfAttention", _ROTARY_HEAD + '''\
        q = rope(q, torch.arange(P, P + T), self.base)
        if P:
            k, v = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
        k = rope(k, torch.arange(P + T), self.base)
        k_seen = k
''' + _ROTARY_TAIL, "test-rotary-cache"),
})
