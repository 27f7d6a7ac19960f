"""Random inputs for hidden cases, drawn from the generator a grading run is given."""

from __future__ import annotations

import torch


def integer(generator: torch.Generator, low: int, high: int) -> int:
    """A uniform integer in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=generator))


def shape(generator: torch.Generator, ndim_low: int, ndim_high: int, size_low: int = 1, size_high: int = 6) -> tuple[int, ...]:
    return tuple(integer(generator, size_low, size_high) for _ in range(integer(generator, ndim_low, ndim_high)))


def normal(generator: torch.Generator, *size: int, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(size, generator=generator, dtype=torch.float64) * scale).to(dtype)


def describe(tensor: torch.Tensor, name: str) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')} {name} of shape {tuple(tensor.shape)}"
