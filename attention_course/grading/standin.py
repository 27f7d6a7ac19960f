"""A stand-in translation model: the interface of the notebook's trained ``model``, with random weights.

The grader calls the student's ``translate(model, sentences)`` with this model as well as with the
student's own: greedy decoding of a model whose outputs nobody can guess (random weights drawn from
the course seed) checks that ``translate`` decodes the model it is given, and not, say, a rule
book of the grammar. The weights a step reports are a sharp random attention over the source's real
positions (H_{i-1} against each state), which its context does not use (its translations are those of
the plain average): ``attention-experiments`` checks that a measurement of alignment reads the weights
of the model it is given. It is not a solution of anything graded (no attention is learned here: the
context is a plain average), so it may travel into the sandbox next to the runner; the grader
computes the expected translations outside the sandbox with the same class and :func:`greedy`.

Only PyTorch is imported: this file runs inside the sandbox, where the course package is absent.
"""

from __future__ import annotations

import torch
from torch import nn

PAD, BOS, EOS, UNK = 0, 1, 2, 3


class _Encoder(nn.Module):
    def __init__(self, embedding: torch.Tensor):
        super().__init__()
        self.register_buffer("embedding", embedding)

    def forward(self, source: torch.Tensor, lengths: torch.Tensor):
        real = (torch.arange(source.shape[1])[None, :] < lengths[:, None]).to(self.embedding.dtype)  # (B, S)
        states = self.embedding[source] * real[:, :, None]  # (B, S, size)
        final = states[torch.arange(source.shape[0]), lengths - 1]  # (B, size)
        return states, final


class _Decoder(nn.Module):
    def __init__(self, embedding, recurrent, read, output):
        super().__init__()
        for name, value in (("embedding", embedding), ("recurrent", recurrent), ("read", read), ("output", output)):
            self.register_buffer(name, value)

    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):
        """Returns (logits (B, V), hidden (B, 1 + size), weights (B, S)). hidden[:, 0] counts the steps,
        so that every sentence ends (EOS becomes likely after about 0.7 times its source length)."""
        steps, state = previous_hidden[:, :1] + 1, previous_hidden[:, 1:]
        real = (torch.arange(encoder_states.shape[1])[None, :] < source_lengths[:, None]).to(state.dtype)
        average = real / real.sum(dim=1, keepdim=True)
        context = (average[:, :, None] * encoder_states).sum(dim=1)
        scores = ((state @ self.look)[:, None, :] * encoder_states).sum(dim=2)  # (B, S): H_{i-1} against each h_j
        scores = torch.where(real > 0, scores, torch.full_like(scores, -torch.inf))
        weights = torch.exp(scores - scores.amax(dim=1, keepdim=True))
        weights = weights / weights.sum(dim=1, keepdim=True)  # reported, not used: see the module's docstring
        state = torch.tanh(state @ self.recurrent + self.embedding[previous_tokens] + context @ self.read)
        logits = state @ self.output
        logits[:, EOS] += 4.0 * (steps[:, 0] - 0.7 * source_lengths.to(state.dtype))
        logits[:, [PAD, BOS, UNK]] = -1e9  # never a special id but EOS: how ids become words is not what is tested
        return logits, torch.cat([steps, state], dim=1), weights


class Translator(nn.Module):
    """``encoder(source, lengths)``, ``initial_state(final)`` and ``decoder(previous, hidden, states, lengths)``
    as in the notebook's ``Seq2Seq``; float64 throughout, so that no argmax is a near tie."""

    def __init__(self, seed: int, source_vocab_size: int, target_vocab_size: int, size: int = 8):
        super().__init__()
        g = torch.Generator().manual_seed(seed)

        def draw(*shape, scale=1.0):
            return torch.randn(shape, generator=g, dtype=torch.float64) * scale

        self.encoder = _Encoder(draw(source_vocab_size, size))
        self.decoder = _Decoder(draw(target_vocab_size, size), draw(size, size, scale=0.8), draw(size, size),
                                draw(size, target_vocab_size, scale=2.0))
        self.register_buffer("bridge", draw(size, size))
        self.decoder.register_buffer("look", draw(size, size, scale=2.0))  # drawn last: the draws above are as before

    def initial_state(self, final: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.zeros(final.shape[0], 1, dtype=final.dtype), torch.tanh(final @ self.bridge)], dim=1)

    def forward(self, source: torch.Tensor, lengths: torch.Tensor, target_input: torch.Tensor):
        """Teacher forcing, as the notebooks' ``Seq2Seq.forward``: (logits (B, T, V), weights (B, T, S))."""
        states, final = self.encoder(source, lengths)
        hidden, all_logits, all_weights = self.initial_state(final), [], []
        for i in range(target_input.shape[1]):
            logits, hidden, weights = self.decoder(target_input[:, i], hidden, states, lengths)
            all_logits.append(logits)
            all_weights.append(weights)
        return torch.stack(all_logits, 1), torch.stack(all_weights, 1)


def greedy(model: Translator, source: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """Greedy decoding as the assignment specifies it: one batch, at most 2 S + 2 steps (S the longest
    source), each row's ids up to (not including) its first EOS."""
    with torch.no_grad():
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        previous = torch.full((source.shape[0],), BOS)
        rows: list[list[int]] = [[] for _ in range(source.shape[0])]
        finished = [False] * source.shape[0]
        for _ in range(2 * source.shape[1] + 2):
            logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
            previous = logits.argmax(-1)
            for row, token in enumerate(previous.tolist()):
                if token == EOS:
                    finished[row] = True
                elif not finished[row] and token not in (PAD, BOS):
                    rows[row].append(token)
            if all(finished):
                break
    return rows
