"""The Transformer (chapter 10), built from the book's own pieces and checked against PyTorch's.

A Transformer layer is chapter 8's ``MultiHeadAttention`` and a position-wise ``FeedForward``
network, each wrapped in a residual connection and a layer normalisation:

- ``EncoderLayer``: self-attention over the source, then the feed-forward network;
- ``DecoderLayer``: causal self-attention over the target written so far, attention over the
  encoder's output (cross-attention, the Transformer's form of chapter 6's C_i), then the
  feed-forward network.

``norm_first=False`` normalises after each residual sum, x ← LN(x + F(x)) (post-LN, Vaswani et al.,
2017); ``norm_first=True`` normalises the sublayer's input, x ← x + F(LN(x)) (pre-LN, Xiong et al.,
2020), and the stack then ends with one more LN. ``Transformer`` stacks the layers into an
encoder–decoder for the toy corpus with one of chapter 9's position schemes; it has the interface of
chapters 5 and 6's ``Seq2Seq`` (``forward(batch)``, ``greedy_decode``), so ``seq2seq.train`` trains
it and ``length_experiment``'s scores read it. ``torch_encoder_twin`` and ``torch_decoder_twin`` give
PyTorch's ``nn.TransformerEncoder`` and ``nn.TransformerDecoder`` with the same weights, for checking.

Shapes: B batch, S source positions, T target positions, d = ``d_model``, n_h heads, d_ff the
feed-forward network's hidden size, vocab a vocabulary's size. Nothing here touches the global random
state: ``build_transformer`` draws the weights from its own seed.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from attention_course.attention import scaled_dot_score
from attention_course.corpus import Batch, ToyTranslationCorpus, Vocab
from attention_course.multi_head import MultiHeadAttention, torch_twin
from attention_course.positions import (
    POSITION_SCHEMES, ALiBiScore, LearnedPositions, RotaryScore, sinusoidal_positions,
)

__all__ = [
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Transformer",
    "build_transformer",
    "translate_with_maps",
    "torch_encoder_twin",
    "torch_decoder_twin",
]

ScoreFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class FeedForward(nn.Module):
    """The position-wise feed-forward network, the same two-layer MLP at every position.

    FFN(x) = W_2 ReLU(W_1 x + b_1) + b_2, with W_1: d -> d_ff and W_2: d_ff -> d (``linear1``, ``linear2``,
    PyTorch's names). forward: x (..., d) -> (..., d).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class _Residual(nn.Module):
    """x + F(x) with a layer normalisation: after the sum (post-LN) or on F's input (pre-LN)."""

    def __init__(self, d_model: int, norm_first: bool, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.norm_first = norm_first
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))  # pre-LN: x + F(LN(x))
        return self.norm(x + self.dropout(sublayer(x)))  # post-LN: LN(x + F(x))


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each in a residual connection with a layer norm.

    forward: x (B, S, d), valid_lens (B,) or None, ``causal`` -> (x (B, S, d), self-attention weights
    (B, n_h, S, S)). ``score_fn`` is the self-attention's score (chapter 9: RoPE and ALiBi live there). With
    ``causal=True`` position i sees positions ≤ i only: the layer of a decoder-only model (chapter 11).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, *, norm_first: bool = False,
                 dropout: float = 0.0, score_fn: ScoreFn = scaled_dot_score) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads, score_fn)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.attention_block = _Residual(d_model, norm_first, dropout)
        self.feed_forward_block = _Residual(d_model, norm_first, dropout)

    def forward(self, x: torch.Tensor, valid_lens: torch.Tensor | None = None,
                causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        weights = []

        def attend(h: torch.Tensor) -> torch.Tensor:  # every position looks at every real (or earlier) position
            output, w = self.self_attention(h, h, h, valid_lens, causal=causal)
            weights.append(w)
            return output

        x = self.attention_block(x, attend)
        x = self.feed_forward_block(x, self.feed_forward)
        return x, weights[0]


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the encoder's output, then the feed-forward network.

    forward: x (B, T, d), memory (B, S, d) (the encoder's output), memory_lens (B,) or None ->
    (x (B, T, d), self-attention weights (B, n_h, T, T), cross-attention weights (B, n_h, T, S)).
    Position i of the target sees target positions ≤ i and every real source position.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, *, norm_first: bool = False,
                 dropout: float = 0.0, score_fn: ScoreFn = scaled_dot_score) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads, score_fn)
        self.cross_attention = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.self_attention_block = _Residual(d_model, norm_first, dropout)
        self.cross_attention_block = _Residual(d_model, norm_first, dropout)
        self.feed_forward_block = _Residual(d_model, norm_first, dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor,
                memory_lens: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        weights = {}

        def attend_to_past(h: torch.Tensor) -> torch.Tensor:
            output, weights["self"] = self.self_attention(h, h, h, causal=True)
            return output

        def attend_to_source(h: torch.Tensor) -> torch.Tensor:  # queries from the target, keys and values from the source
            output, weights["cross"] = self.cross_attention(h, memory, memory, memory_lens)
            return output

        x = self.self_attention_block(x, attend_to_past)
        x = self.cross_attention_block(x, attend_to_source)
        x = self.feed_forward_block(x, self.feed_forward)
        return x, weights["self"], weights["cross"]


class Transformer(nn.Module):
    """An encoder–decoder Transformer for translation, with one of chapter 9's position schemes.

    ``positions``: ``"sinusoidal"`` or ``"learned"`` (added to the embeddings, ``max_length`` positions for
    the learned table), ``"rope"`` or ``"alibi"`` (in every self-attention's scores; cross-attention has
    none), or ``"none"``. Token embeddings are scaled by √d, as in Vaswani et al.

    forward(batch) -> (logits (B, T, vocab), weights (B, T, S)): teacher forcing, as ``Seq2Seq``; the weights
    are the last decoder layer's cross-attention, averaged over its heads. ``attention_maps`` gives every
    layer's and head's.
    """

    def __init__(self, source_vocab_size: int, target_vocab_size: int, *, d_model: int = 64, num_heads: int = 4,
                 num_layers: int = 2, d_ff: int = 128, positions: str = "sinusoidal", norm_first: bool = True,
                 dropout: float = 0.0, max_length: int = 128) -> None:
        super().__init__()
        if positions not in POSITION_SCHEMES:
            raise ValueError(f"positions must be one of {', '.join(POSITION_SCHEMES)}; got {positions!r}")
        self.d_model, self.positions, self.norm_first = d_model, positions, norm_first
        score_fn: ScoreFn = {"rope": RotaryScore(), "alibi": ALiBiScore(num_heads)}.get(positions, scaled_dot_score)
        self.source_embedding = nn.Embedding(source_vocab_size, d_model)
        self.target_embedding = nn.Embedding(target_vocab_size, d_model)
        for embedding in (self.source_embedding, self.target_embedding):
            nn.init.normal_(embedding.weight, std=d_model ** -0.5)  # × √d below: features of unit size
        if positions == "learned":
            self.source_positions = LearnedPositions(max_length, d_model)
            self.target_positions = LearnedPositions(max_length, d_model)
        layer_settings = {"norm_first": norm_first, "dropout": dropout, "score_fn": score_fn}
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, **layer_settings) for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, **layer_settings) for _ in range(num_layers))
        # Pre-LN leaves the residual stream unnormalised: one last LN closes each stack (as nn.Transformer).
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.output = nn.Linear(d_model, target_vocab_size)

    def _embed(self, tokens: torch.Tensor, embedding: nn.Embedding, side: str) -> torch.Tensor:
        """tokens (B, L) -> (B, L, d): scaled embeddings, plus positions for the additive schemes."""
        x = embedding(tokens) * math.sqrt(self.d_model)
        length = tokens.shape[1]
        if self.positions == "sinusoidal":
            x = x + sinusoidal_positions(length, self.d_model).to(x)
        elif self.positions == "learned":
            x = x + getattr(self, f"{side}_positions")(length)
        return x

    def encode(self, source: torch.Tensor, source_lengths: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """source (B, S), source_lengths (B,) -> (memory (B, S, d), each layer's self-attention weights)."""
        x = self._embed(source, self.source_embedding, "source")
        maps = []
        for layer in self.encoder_layers:
            x, weights = layer(x, source_lengths)
            maps.append(weights)
        return self.encoder_norm(x), maps

    def decode(self, target_input: torch.Tensor, memory: torch.Tensor, source_lengths: torch.Tensor
               ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """target_input (B, T), memory (B, S, d) -> (logits (B, T, vocab), self- and cross-attention weights per layer)."""
        x = self._embed(target_input, self.target_embedding, "target")
        self_maps, cross_maps = [], []
        for layer in self.decoder_layers:
            x, self_weights, cross_weights = layer(x, memory, source_lengths)
            self_maps.append(self_weights)
            cross_maps.append(cross_weights)
        return self.output(self.decoder_norm(x)), self_maps, cross_maps

    def forward(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        memory, _ = self.encode(batch.source, batch.source_lengths)
        logits, _, cross_maps = self.decode(batch.target_input, memory, batch.source_lengths)
        return logits, cross_maps[-1].mean(dim=1)  # (B, T, vocab), (B, T, S)

    def attention_maps(self, batch: Batch) -> dict[str, list[torch.Tensor]]:
        """Every attention weight of a teacher-forced pass: ``"encoder"`` (B, n_h, S, S), ``"decoder"``
        (B, n_h, T, T) and ``"cross"`` (B, n_h, T, S), one tensor per layer."""
        with torch.no_grad():
            memory, encoder_maps = self.encode(batch.source, batch.source_lengths)
            _, decoder_maps, cross_maps = self.decode(batch.target_input, memory, batch.source_lengths)
        return {"encoder": encoder_maps, "decoder": decoder_maps, "cross": cross_maps}

    @torch.no_grad()
    def greedy_decode(self, source: torch.Tensor, source_lengths: torch.Tensor,
                      max_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Translate by always taking the most likely next word, as ``Seq2Seq.greedy_decode``.

        source (B, S), source_lengths (B,) -> (tokens (B, T), weights (B, T, S)), T ≤ ``max_len`` (default
        2 S + 2); each row holds its words, its ``<eos>``, then ``<pad>``, with weights 0 after its ``<eos>``.
        The encoder runs once; the decoder runs again over the whole prefix at every step (chapter 11 shows
        how a key/value cache avoids that).
        """
        if max_len is None:
            max_len = 2 * source.shape[1] + 2
        was_training = self.training
        self.eval()
        try:
            memory, _ = self.encode(source, source_lengths)
            batch_size = source.shape[0]
            written = torch.full((batch_size, 1), Vocab.bos_id, dtype=torch.long, device=source.device)
            finished = torch.zeros(batch_size, dtype=torch.bool, device=source.device)
            weights = memory.new_zeros((batch_size, 0, source.shape[1]))
            while written.shape[1] <= max_len and not bool(finished.all()):
                logits, _, cross_maps = self.decode(written, memory, source_lengths)
                step = logits[:, -1].argmax(-1).masked_fill(finished, Vocab.pad_id)  # (B,)
                step_weights = cross_maps[-1][:, :, -1].mean(dim=1).masked_fill(finished[:, None], 0.0)  # (B, S)
                written = torch.cat([written, step[:, None]], dim=1)
                weights = torch.cat([weights, step_weights[:, None]], dim=1)
                finished = finished | (step == Vocab.eos_id)
        finally:
            self.train(was_training)
        return written[:, 1:], weights


def translate_with_maps(model: Transformer, corpus: ToyTranslationCorpus, sentence: str
                        ) -> tuple[list[str], dict[str, list[torch.Tensor]]]:
    """Translate one English sentence greedily and return (the Chinese words, ``<eos>`` not included, and every
    attention map of the model reading its own translation: ``"encoder"`` (n_h, S, S), ``"decoder"`` (n_h, T, T),
    ``"cross"`` (n_h, T, S) per layer, T counting the words and ``<eos>``)."""
    ids = corpus.source_vocab.encode(sentence)
    source, lengths = torch.tensor([ids]), torch.tensor([len(ids)])
    tokens, _ = model.greedy_decode(source, lengths)
    written = tokens[0].tolist()
    end = written.index(Vocab.eos_id) + 1 if Vocab.eos_id in written else len(written)
    target_input = torch.tensor([[Vocab.bos_id] + written[:end - 1]])  # what the decoder read at each step
    batch = Batch(source, lengths, target_input, torch.tensor([written[:end]]), torch.tensor([end]), ())
    maps = {name: [weights[0] for weights in per_layer] for name, per_layer in model.attention_maps(batch).items()}
    words = corpus.target_vocab.decode(written[:end], keep_special=True).split()
    return words[:-1] if words and words[-1] == "<eos>" else words, maps


def build_transformer(corpus: ToyTranslationCorpus, *, seed: int = 0, **settings) -> Transformer:
    """A ``Transformer`` sized for ``corpus``'s vocabularies; ``settings`` are ``Transformer``'s keyword arguments.

    The weights are drawn from ``seed`` (the global random state is left as it was).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Transformer(len(corpus.source_vocab), len(corpus.target_vocab), **settings)


# ---------------------------------------------------------------------------------------------
# PyTorch's layers with the same weights.


def _copy_residual(ours: _Residual, norm: nn.LayerNorm) -> None:
    norm.load_state_dict(ours.norm.state_dict())


def _copy_feed_forward(ours: FeedForward, theirs: nn.Module) -> None:
    theirs.linear1.load_state_dict(ours.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.linear2.state_dict())


def torch_encoder_twin(model: Transformer) -> nn.TransformerEncoder:
    """``nn.TransformerEncoder`` (batch first, ReLU, no dropout) holding ``model``'s encoder layers' weights.

    It computes what ``model.encode`` computes after the embeddings: pass it the embedded source and
    ``src_key_padding_mask`` = True at padding (PyTorch's masks mark what is hidden).
    """
    first = model.encoder_layers[0]
    d_model, num_heads = model.d_model, first.self_attention.num_heads
    d_ff = first.feed_forward.linear1.out_features
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True,
                                       norm_first=model.norm_first)
    twin = nn.TransformerEncoder(layer, len(model.encoder_layers), enable_nested_tensor=False,
                                 norm=nn.LayerNorm(d_model) if model.norm_first else None)
    for ours, theirs in zip(model.encoder_layers, twin.layers):
        theirs.self_attn.load_state_dict(torch_twin(ours.self_attention).state_dict())
        _copy_feed_forward(ours.feed_forward, theirs)
        _copy_residual(ours.attention_block, theirs.norm1)
        _copy_residual(ours.feed_forward_block, theirs.norm2)
    if model.norm_first:
        twin.norm.load_state_dict(model.encoder_norm.state_dict())
    return twin.eval()


def torch_decoder_twin(model: Transformer) -> nn.TransformerDecoder:
    """``nn.TransformerDecoder`` holding ``model``'s decoder layers' weights (the output layer not included).

    Pass it the embedded target, the memory, ``tgt_mask`` = True above the diagonal and
    ``memory_key_padding_mask`` = True at the source's padding.
    """
    first = model.decoder_layers[0]
    d_model, num_heads = model.d_model, first.self_attention.num_heads
    d_ff = first.feed_forward.linear1.out_features
    layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True,
                                       norm_first=model.norm_first)
    twin = nn.TransformerDecoder(layer, len(model.decoder_layers),
                                 norm=nn.LayerNorm(d_model) if model.norm_first else None)
    for ours, theirs in zip(model.decoder_layers, twin.layers):
        theirs.self_attn.load_state_dict(torch_twin(ours.self_attention).state_dict())
        theirs.multihead_attn.load_state_dict(torch_twin(ours.cross_attention).state_dict())
        _copy_feed_forward(ours.feed_forward, theirs)
        _copy_residual(ours.self_attention_block, theirs.norm1)
        _copy_residual(ours.cross_attention_block, theirs.norm2)
        _copy_residual(ours.feed_forward_block, theirs.norm3)
    if model.norm_first:
        twin.norm.load_state_dict(model.decoder_norm.state_dict())
    return twin.eval()
