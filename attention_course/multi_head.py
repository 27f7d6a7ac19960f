"""Multi-head attention (chapter 8): n_h attentions side by side, each in its own subspace of size d / n_h.

Vaswani et al. (2017), with Q, K, V the matrices of queries, keys and values:

    MultiHead(Q, K, V) = Concat(head_1, ..., head_{n_h}) W_o,   head_r = Attention(Q W_q^(r), K W_k^(r), V W_v^(r))

The n_h projections W_q^(1) … W_q^(n_h) (d -> d / n_h each) are stored side by side as one
``nn.Linear(d_model, d_model)``: its output, cut into n_h slices of d / n_h features, holds the n_h
heads' queries (``split_heads``); the same for keys and values. Each head is chapter 4's scaled
dot-product ``attention`` with its ``masked_softmax``, all heads at once by folding them into the batch;
``merge_heads`` puts the slices back side by side (the concatenation) and W_o mixes them.

``torch_twin`` gives the ``nn.MultiheadAttention`` with the same weights, for checking. The rest is the
chapter's small experiment: ``NeighbourModel``, a one-layer self-attention model asked for two words at
once (the one before and the one after each position), and ``train_neighbour_model``, which trains it
on random word sequences, where nothing but looking at the neighbours can tell what they are.

Shapes, in the book's notation (chapter 1): B batch, T queries, S keys (in self-attention S = T),
n_h heads, d = ``d_model`` features (Vaswani et al.'s d_model), d_head = d / n_h features per head.
Every function takes and returns plain ``torch.Tensor`` and does not modify its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from attention_course.attention import attention, scaled_dot_score
from attention_course.attention_variants import causal_valid_lens, sinusoidal_positions

__all__ = [
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "torch_twin",
    "NeighbourModel",
    "NeighbourHistory",
    "neighbour_batch",
    "train_neighbour_model",
]


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, S, d) -> (B, n_h, S, d / n_h): features r * d_head … (r + 1) * d_head - 1 become head r (from 0)."""
    batch, length, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
    # Cut the feature axis (not the sequence axis) into n_h pieces, then move the head axis forward.
    return x.reshape(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, n_h, S, d_head) -> (B, S, n_h * d_head): the heads side by side again, the inverse of split_heads."""
    batch, num_heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, num_heads * d_head)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention with n_h = ``num_heads`` heads of d / n_h features.

    Parameters: ``W_q``, ``W_k``, ``W_v`` (d -> d, every head's projection side by side) and
    ``W_o`` (d -> d), all ``nn.Linear`` with biases, as in ``nn.MultiheadAttention``.
    forward: queries (B, T, d), keys and values (B, S, d), valid_lens (B,) or (B, T) or None
    (as chapter 4's ``masked_softmax``), ``causal`` (self-attention only: query i sees keys 1 … i) ->
    (output (B, T, d), weights (B, n_h, T, S)). For self-attention pass the same tensor three times.
    ``score_fn`` scores each head's queries against its keys, (B · n_h, T, d_head), (B · n_h, S, d_head)
    -> (B · n_h, T, S), the heads folded into the batch (chapter 9 passes position-aware scores).
    """

    def __init__(self, d_model: int, num_heads: int,
                 score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = scaled_dot_score) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model = {d_model} is not divisible by num_heads = {num_heads}")
        self.num_heads = num_heads
        self.score_fn = score_fn
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                valid_lens: torch.Tensor | None = None, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.num_heads  # n_h
        q = split_heads(self.W_q(queries), h)  # (B, n_h, T, d_head)
        k = split_heads(self.W_k(keys), h)  # (B, n_h, S, d_head)
        v = split_heads(self.W_v(values), h)  # (B, n_h, S, d_head)
        batch, _, num_queries, d_head = q.shape
        if causal:
            if keys.shape[1] != num_queries:
                raise ValueError(f"causal attention needs as many keys as queries, got {num_queries} and {keys.shape[1]}")
            valid_lens = causal_valid_lens(num_queries, valid_lens, batch)  # (B, T): query i sees keys 1 … i
        if valid_lens is not None:
            valid_lens = valid_lens.repeat_interleave(h, dim=0)  # (B * n_h,) or (B * n_h, T): the same for every head
        # Fold the heads into the batch: chapter 4's attention runs all B * n_h heads at once.
        output, weights = attention(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1),
                                    self.score_fn, valid_lens)  # (B * n_h, T, d_head), (B * n_h, T, S)
        output = merge_heads(output.unflatten(0, (batch, h)))  # (B, T, d): the heads concatenated
        return self.W_o(output), weights.unflatten(0, (batch, h))  # (B, T, d), (B, n_h, T, S)


def torch_twin(layer: MultiHeadAttention) -> nn.MultiheadAttention:
    """PyTorch's ``nn.MultiheadAttention`` (batch first) with exactly ``layer``'s weights.

    PyTorch keeps W_q, W_k and W_v stacked in one ``in_proj_weight`` (3 d, d) and calls W_o
    ``out_proj``; the computation is the same.
    """
    if layer.score_fn is not scaled_dot_score:
        raise ValueError(f"nn.MultiheadAttention scores with the scaled dot product only, this layer with {layer.score_fn!r}")
    d_model = layer.W_q.in_features
    twin = nn.MultiheadAttention(d_model, layer.num_heads, batch_first=True).to(layer.W_q.weight.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([layer.W_q.weight, layer.W_k.weight, layer.W_v.weight]))
        twin.in_proj_bias.copy_(torch.cat([layer.W_q.bias, layer.W_k.bias, layer.W_v.bias]))
        twin.out_proj.weight.copy_(layer.W_o.weight)
        twin.out_proj.bias.copy_(layer.W_o.bias)
    return twin


# ---------------------------------------------------------------------------------------------
# The chapter's experiment: a task that needs two places at once.


class NeighbourModel(nn.Module):
    """Embeddings plus positions, one multi-head self-attention layer, and two read-outs.

    forward: tokens (B, S) -> (logits of the previous word (B, S, vocab), logits of the next word
    (B, S, vocab), weights (B, n_h, S, S)). Position 0 has no previous word and position S - 1 no next one; ``neighbour_batch``
    gives them the target ``ignore``.
    """

    def __init__(self, vocab_size: int, d_model: int = 32, num_heads: int = 2, max_length: int = 16) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.register_buffer("positions", sinusoidal_positions(max_length, d_model))  # (max_length, d)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.previous_word = nn.Linear(d_model, vocab_size)
        self.next_word = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.embedding(tokens) + self.positions[: tokens.shape[1]]  # (B, S, d)
        mixed, weights = self.attention(x, x, x)  # self-attention: (B, S, d), (B, n_h, S, S)
        return self.previous_word(mixed), self.next_word(mixed), weights


IGNORE = -100  # the target of a position that has no neighbour on that side (cross_entropy's ignore_index)


def neighbour_batch(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens (B, S) -> (previous word (B, S), next word (B, S)), IGNORE where there is none."""
    previous = torch.full_like(tokens, IGNORE)
    following = torch.full_like(tokens, IGNORE)
    previous[:, 1:] = tokens[:, :-1]
    following[:, :-1] = tokens[:, 1:]
    return previous, following


@dataclass
class NeighbourHistory:
    losses: list[float]  # training loss per step
    previous_accuracy: float  # share of held-out previous words predicted right after training
    next_accuracy: float  # the same for the next words


def train_neighbour_model(vocab_size: int, num_heads: int = 2, steps: int = 200, seed: int = 0, length: int = 7,
                          d_model: int = 32, batch_size: int = 32) -> tuple[NeighbourModel, NeighbourHistory]:
    """Train a ``NeighbourModel`` on random sequences of ``length`` words (ids 4 … vocab_size - 1, no special token).

    In a random sequence a word says nothing about its neighbours: the only way to name them is to look
    at them. Accuracies are measured on 500 new random sequences. Deterministic for a given seed.
    """
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the model's initial weights
    model = NeighbourModel(vocab_size, d_model, num_heads)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)

    def loss_and_hits(tokens):
        previous, following = neighbour_batch(tokens)  # (B, S) each
        previous_logits, next_logits, _ = model(tokens)  # (B, S, vocab) each
        loss = (nn.functional.cross_entropy(previous_logits.flatten(0, 1), previous.flatten(), ignore_index=IGNORE)
                + nn.functional.cross_entropy(next_logits.flatten(0, 1), following.flatten(), ignore_index=IGNORE))
        hits = [((logits.argmax(-1) == target).sum() / (target != IGNORE).sum()).item()
                for logits, target in ((previous_logits, previous), (next_logits, following))]
        return loss, hits

    losses = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors this small train faster on one thread than on several
    try:
        for _ in range(steps):
            loss, _ = loss_and_hits(torch.randint(4, vocab_size, (batch_size, length), generator=generator))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        _, (previous_accuracy, next_accuracy) = loss_and_hits(torch.randint(4, vocab_size, (500, length),
                                                                            generator=generator))
    return model, NeighbourHistory(losses, previous_accuracy, next_accuracy)
