"""A small decoder-only language model (chapter 11), and generation with and without a key/value cache.

A decoder-only model is a stack of chapter 10's ``EncoderLayer`` with a causal mask: no encoder, no
cross-attention, every position predicting the next token from the tokens up to it. It learns the
English side of the toy corpus, one sentence at a time (``<bos>`` words ``<eos>``).

Training is parallel over positions: one forward pass computes every position's prediction, because
the causal mask, not the order of the computation, keeps position i from seeing position i + 1.
Generation is not: token t + 1 needs token t. ``generate`` writes tokens one at a time, either by
running the whole model over the whole prefix at every step or, with ``use_cache=True``, by running it
on the new token only against a ``KeyValueCache`` of every earlier token's keys and values. Both give
the same tokens; ``time_generation`` measures what each costs per token.

Shapes: B batch, S positions, d = ``d_model``, n_h heads, d_head = d / n_h, P the cached positions,
vocab the vocabulary's size. Nothing here touches the global random state.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Iterator

import torch
from torch import nn

from attention_course.attention import attention
from attention_course.corpus import ToyTranslationCorpus, Vocab
from attention_course.multi_head import MultiHeadAttention, merge_heads, split_heads
from attention_course.positions import sinusoidal_positions
from attention_course.transformer import EncoderLayer

__all__ = [
    "LanguageModel",
    "build_language_model",
    "sentence_batches",
    "LanguageModelHistory",
    "train_language_model",
    "KeyValueCache",
    "cached_self_attention",
    "generate",
    "GenerationTiming",
    "time_generation",
]


class LanguageModel(nn.Module):
    """Token embeddings plus sinusoidal positions, ``num_layers`` causal pre-LN layers, a last LN, a read-out.

    forward: tokens (B, S) -> logits (B, S, vocab); position i's logits predict token i + 1 from tokens 0 … i.
    """

    def __init__(self, vocab_size: int, *, d_model: int = 64, num_heads: int = 4, num_layers: int = 2,
                 d_ff: int = 128) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, std=d_model ** -0.5)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, norm_first=True) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab_size)

    def embed(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """tokens (B, S) standing at positions start … start + S - 1 -> (B, S, d)."""
        positions = sinusoidal_positions(start + tokens.shape[1], self.d_model)[start:].to(self.output.weight)
        return self.embedding(tokens) * math.sqrt(self.d_model) + positions

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # (B, S, d)
        for layer in self.layers:
            x, _ = layer(x, causal=True)
        return self.output(self.norm(x))  # (B, S, vocab)


def build_language_model(vocab_size: int, *, seed: int = 0, **settings) -> LanguageModel:
    """A ``LanguageModel`` whose weights are drawn from ``seed`` (the global random state is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LanguageModel(vocab_size, **settings)


def sentence_batches(corpus: ToyTranslationCorpus, batch_size: int, seed: int) -> Iterator[torch.Tensor]:
    """Endless batches of the corpus's English training sentences, ``<bos>`` w_1 … w_n ``<eos>`` padded with
    ``<pad>``: (B, S) each, shuffled by ``seed`` (a new order every pass)."""
    generator = torch.Generator().manual_seed(seed)
    sentences = [corpus.source_vocab.encode(pair.source, add_bos=True, add_eos=True) for pair in corpus.train_pairs]
    while True:
        order = torch.randperm(len(sentences), generator=generator).tolist()
        for start in range(0, len(order) - batch_size + 1, batch_size):
            chosen = [sentences[i] for i in order[start:start + batch_size]]
            batch = torch.full((batch_size, max(map(len, chosen))), Vocab.pad_id)
            for row, ids in enumerate(chosen):
                batch[row, :len(ids)] = torch.tensor(ids)
            yield batch


@dataclass
class LanguageModelHistory:
    losses: list[float] = field(default_factory=list)  # training loss (nats per token) per step
    train_seconds: float = 0.0


def train_language_model(corpus: ToyTranslationCorpus, *, steps: int = 300, batch_size: int = 64, lr: float = 3e-3,
                         seed: int = 0, **settings) -> tuple[LanguageModel, LanguageModelHistory]:
    """A ``LanguageModel`` trained to predict every next token of the English training sentences.

    One forward pass per batch scores all positions at once (teacher forcing, truly parallel here).
    Adam, gradient norm clipped at 1, one thread: deterministic for a given ``seed``.
    """
    model = build_language_model(len(corpus.source_vocab), seed=seed, **settings)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    history = LanguageModelHistory()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model.train()
        for _, tokens in zip(range(steps), sentence_batches(corpus, batch_size, seed)):
            start = time.perf_counter()
            logits = model(tokens[:, :-1])  # (B, S - 1, vocab): position i predicts token i + 1
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten(),
                                               ignore_index=Vocab.pad_id)
            optimiser.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            history.train_seconds += time.perf_counter() - start
            history.losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return model, history


# ---------------------------------------------------------------------------------------------
# Generation, with and without a key/value cache.


@dataclass
class KeyValueCache:
    """Every layer's keys and values of the P positions processed so far, (B, n_h, P, d_head) each."""

    keys: list[torch.Tensor | None]
    values: list[torch.Tensor | None]

    @classmethod
    def empty(cls, num_layers: int) -> KeyValueCache:
        return cls([None] * num_layers, [None] * num_layers)

    @property
    def length(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[2]


def cached_self_attention(layer: MultiHeadAttention, x: torch.Tensor, cache: KeyValueCache, index: int) -> torch.Tensor:
    """Causal self-attention of T new positions (B, T, d) against the P cached ones and themselves -> (B, T, d).

    Appends the new positions' keys and values to layer ``index`` of ``cache``.
    """
    h = layer.num_heads
    queries = split_heads(layer.W_q(x), h)  # (B, n_h, T, d_head): the new positions only
    keys, values = split_heads(layer.W_k(x), h), split_heads(layer.W_v(x), h)
    if cache.keys[index] is not None:  # the earlier positions' keys and values are not computed again
        keys = torch.cat([cache.keys[index], keys], dim=2)  # (B, n_h, P + T, d_head)
        values = torch.cat([cache.values[index], values], dim=2)
    cache.keys[index], cache.values[index] = keys, values
    batch, _, num_new, _ = queries.shape
    past = keys.shape[2] - num_new
    valid_lens = (past + 1 + torch.arange(num_new)).expand(batch * h, num_new)  # new position t sees P + t + 1 keys
    output, _ = attention(queries.flatten(0, 1), keys.flatten(0, 1), values.flatten(0, 1), layer.score_fn, valid_lens)
    return layer.W_o(merge_heads(output.unflatten(0, (batch, h))))


def _cached_forward(model: LanguageModel, tokens: torch.Tensor, cache: KeyValueCache) -> torch.Tensor:
    """The model on new tokens (B, T) after the cache's P positions -> logits (B, T, vocab); fills the cache."""
    x = model.embed(tokens, start=cache.length)
    for index, layer in enumerate(model.layers):
        x = layer.attention_block(x, lambda h, layer=layer, index=index:
                                  cached_self_attention(layer.self_attention, h, cache, index))
        x = layer.feed_forward_block(x, layer.feed_forward)
    return model.output(model.norm(x))


@torch.no_grad()
def generate(model: LanguageModel, prompt: torch.Tensor, num_tokens: int, *, use_cache: bool,
             stop_at_eos: bool = True) -> tuple[torch.Tensor, list[float]]:
    """Greedy generation: prompt (B, P) -> (prompt and up to ``num_tokens`` new tokens (B, P + n), seconds per new token).

    Without the cache, step t runs the model over all P + t tokens so far; with it, over the new token
    only. ``stop_at_eos`` stops once every row has written ``<eos>``.
    """
    model.eval()
    tokens, seconds = prompt, []
    cache = KeyValueCache.empty(len(model.layers))
    pending = prompt  # what the model has not read yet: the whole prompt, then one token a step
    for _ in range(num_tokens):
        start = time.perf_counter()
        logits = _cached_forward(model, pending, cache) if use_cache else model(tokens)
        next_token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        seconds.append(time.perf_counter() - start)
        tokens, pending = torch.cat([tokens, next_token], dim=1), next_token
        if stop_at_eos and bool((tokens[:, prompt.shape[1]:] == Vocab.eos_id).any(dim=1).all()):
            break
    return tokens, seconds


@dataclass(frozen=True)
class GenerationTiming:
    """Seconds to generate the token at each position (the least of ``repeats`` runs), with and without a cache."""

    positions: list[int]
    uncached: list[float]
    cached: list[float]


def time_generation(model: LanguageModel, length: int, *, repeats: int = 3, every: int = 16) -> GenerationTiming:
    """Generate ``length`` tokens after ``<bos>`` (not stopping at ``<eos>``) both ways, one thread, and
    time every ``every``-th token, keeping the least time of ``repeats`` runs (whatever else runs on the
    machine can only add time). The first token of each run also reads the prompt and is left out."""
    prompt = torch.tensor([[Vocab.bos_id]])
    runs = {True: [], False: []}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(repeats):
            for use_cache in (False, True):
                runs[use_cache].append(generate(model, prompt, length, use_cache=use_cache, stop_at_eos=False)[1])
    finally:
        torch.set_num_threads(threads)
    positions = list(range(every, length, every))

    def least(use_cache: bool) -> list[float]:
        return [min(run[p] for run in runs[use_cache]) for p in positions]

    return GenerationTiming(positions, least(False), least(True))
