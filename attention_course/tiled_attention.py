"""Attention's memory (chapter 11), and attention computed in tiles with an online softmax.

Chapter 4's ``attention`` computes the whole (T, S) matrix of scores and then its weights: memory that
grows as T · S, S² in self-attention, for every head of every sequence. ``tiled_attention`` computes
the same output without ever holding that matrix: it reads the keys and values a tile at a time and
keeps, for every query, a running maximum m, a running sum l of exp(score - m) and a running weighted
sum of values, rescaling both whenever a new tile raises the maximum (Milakov and Gimelshein, 2018;
the idea inside FlashAttention, Dao et al., 2022). Its memory grows as T · tile.

``peak_memory`` measures what a computation allocates: it follows every tensor that PyTorch's operations
create while the call runs and reports the most bytes alive at once (inputs that existed before the
call not counted). The figure is a count of bytes the code asks for, so it is the same on every
machine and under any load.

Shapes: B batch, T queries, S keys, d query and key size, d_v value size.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["tiled_attention", "peak_memory"]


def tiled_attention(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, tile_size: int) -> torch.Tensor:
    """softmax(Q Kᵀ / √d) V, reading ``tile_size`` keys and values at a time: (B, T, d), (B, S, d), (B, S, d_v) -> (B, T, d_v)."""
    if tile_size < 1:
        raise ValueError(f"tile_size must be at least 1, got {tile_size}")
    batch, num_queries, d = queries.shape
    running_max = queries.new_full((batch, num_queries, 1), -math.inf)  # m: the largest score so far, per query
    running_sum = queries.new_zeros((batch, num_queries, 1))  # l: the sum of exp(score - m) so far
    output = queries.new_zeros((batch, num_queries, values.shape[-1]))  # the sum of exp(score - m) v so far
    for start in range(0, keys.shape[1], tile_size):
        scores = queries @ keys[:, start:start + tile_size].transpose(1, 2) / math.sqrt(d)  # (B, T, tile)
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(running_max - new_max)  # what the old terms were summed with, made relative to the new max
        exps = torch.exp(scores - new_max)  # (B, T, tile)
        running_sum = running_sum * rescale + exps.sum(dim=-1, keepdim=True)
        output = output * rescale + exps @ values[:, start:start + tile_size]
        running_max = new_max
    return output / running_sum  # divide once, at the end: the softmax's denominator


class _AllocationTracker(TorchDispatchMode):
    """Counts the bytes of every tensor storage that PyTorch's operations create, while they stay alive."""

    def __init__(self) -> None:
        super().__init__()
        self.alive: dict[int, list[int]] = {}  # storage address -> [bytes, tensors that hold it]
        self.known: set[int] = set()  # storages that existed before, or were already counted
        self.current = self.peak = 0

    def note_existing(self, tensors: Any) -> None:
        for tensor in tree_leaves(tensors):
            if isinstance(tensor, torch.Tensor):
                self.known.add(tensor.untyped_storage().data_ptr())

    def _release(self, address: int) -> None:
        entry = self.alive.get(address)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.alive[address]
            self.known.discard(address)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(result):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            address = storage.data_ptr()
            if address in self.alive:  # a view, or an in-place result: one more holder of a counted storage
                self.alive[address][1] += 1
            elif address not in self.known and storage.nbytes() > 0:
                self.alive[address] = [storage.nbytes(), 1]
                self.current += storage.nbytes()
                self.peak = max(self.peak, self.current)
            else:
                continue
            weakref.finalize(tensor, self._release, address)
        return result


def peak_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Call ``fn(*args, **kwargs)`` and return (its result, the most bytes of new tensors alive at once during it)."""
    tracker = _AllocationTracker()
    tracker.note_existing((args, kwargs))
    with torch.no_grad(), tracker:
        result = fn(*args, **kwargs)
    return result, tracker.peak
