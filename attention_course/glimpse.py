"""A glance at a scene: the first chapter's picture of attention as "focus on a part, suppress the rest".

A scene is a grid of coloured patches. Looking for a colour (the query) scores every patch by how
well its colour (its key) matches; softmax turns the scores into weights that sum to 1; what we
take in is the weighted average of the patches (their values). With focused weights the result
is the colour we were looking for; the plain average of everything is a muddy mix.
"""

from __future__ import annotations

import torch

from attention_course.attention import softmax

# Bright, well-separated colours (RGB in [0, 1]); the scene is drawn from them.
PALETTE = torch.tensor(
    [
        [0.86, 0.15, 0.15],  # red
        [0.15, 0.55, 0.85],  # blue
        [0.20, 0.65, 0.30],  # green
        [0.95, 0.75, 0.10],  # yellow
        [0.55, 0.35, 0.70],  # purple
    ]
)
COLOUR_NAMES = ("red", "blue", "green", "yellow", "purple")


def make_scene(rows: int = 6, cols: int = 8, seed: int = 0, noise: float = 0.05) -> torch.Tensor:
    """A seeded grid of coloured patches, shape (rows, cols, 3), values in [0, 1].

    Exactly one patch is red, so that a query for red has one clear target among distractors.
    """
    if rows < 1 or cols < 1 or rows * cols < 2:
        raise ValueError(f"a scene needs at least two patches, got rows={rows}, cols={cols}")
    generator = torch.Generator().manual_seed(seed)
    # Every patch takes one of the non-red colours, then one random patch turns red.
    choice = torch.randint(1, len(PALETTE), (rows, cols), generator=generator)
    target = torch.randint(0, rows * cols, (1,), generator=generator).item()
    choice.view(-1)[target] = 0
    scene = PALETTE[choice] + noise * torch.randn(rows, cols, 3, generator=generator)
    return scene.clamp(0.0, 1.0)


def glimpse(scene: torch.Tensor, query: torch.Tensor, temperature: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """Attend to the patches of ``scene`` (rows, cols, 3) that match ``query`` (3,).

    Scores are negative squared colour distances divided by ``temperature``. Returns
    ``(seen, weights)``: the attention-weighted colour (3,) and the weights (rows, cols), which sum to 1.
    """
    if scene.ndim != 3 or scene.shape[-1] != 3:
        raise ValueError(f"scene must have shape (rows, cols, 3), got {tuple(scene.shape)}")
    if query.shape != (3,):
        raise ValueError(f"query must be one colour of shape (3,), got {tuple(query.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    keys = scene.reshape(-1, 3)  # (S, 3), S = rows * cols patches: a patch's colour is its key ...
    values = keys  # ... and also what we take in from it
    scores = -((keys - query) ** 2).sum(dim=-1) / temperature  # (S,)
    weights = softmax(scores, dim=0)  # (S,), sums to 1
    seen = weights @ values  # (3,)
    return seen, weights.reshape(scene.shape[:2])
