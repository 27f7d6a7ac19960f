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
}
