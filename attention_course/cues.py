"""Attention in everyday life: a child on a playroom floor, and the two kinds of cue that steer its eyes.

Chapter 3 redraws the notes' fig. 8-1 as a seeded scene of toys. Every toy is described by the same
named features (``FEATURE_NAMES``): its colour, how fast it moves, how visible it is from where the
child sits, and what kind of thing it is (wheels, legs, round). Two attention maps over the same toys:

- *non-volitional* cues (非自主性提示): a toy catches the eye when it stands out from the rest — its
  colour, its motion, its visibility. :func:`salience_scores` measures that contrast; what the toy is
  plays no part.
- *volitional* cues (自主性提示): the child wants something, a query, and each toy's description is its
  key. :func:`interest_scores` compares the query with every key.

A softmax over the toys turns either set of scores into weights that sum to 1, and
:func:`attention_over_time` lets the first fade while the second grows, as the child's eyes move from
the moving animals to the toy car.

Shapes: N toys, F = len(FEATURE_NAMES) features, T time points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attention_course.attention import dot_score, softmax

__all__ = [
    "FEATURE_NAMES",
    "SALIENCE_WEIGHTS",
    "ToyScene",
    "make_toy_scene",
    "describe",
    "salience_scores",
    "interest_scores",
    "attention_over_time",
]

FEATURE_NAMES = ("red", "green", "blue", "speed", "visibility", "wheels", "legs", "round")

# What grabs the eye unbidden is how a thing looks (colour), what it does (motion) and how much of it
# can be seen; motion counts double, since a moving thing pulls the eye hardest. What a thing *is*
# (wheels, legs, round) needs an interest to matter, so its weight here is 0.
SALIENCE_WEIGHTS = torch.tensor([1.0, 1.0, 1.0, 2.0, 1.0, 0.0, 0.0, 0.0])

# The toys of the scene, in order: (English name, Chinese name, kind, base colour RGB).
_TOYS = (
    ("car", "小汽车", "car", (0.30, 0.36, 0.52)),
    ("ball", "皮球", "ball", (0.36, 0.62, 0.64)),
    ("block A", "积木 A", "block", (0.80, 0.66, 0.46)),
    ("block B", "积木 B", "block", (0.74, 0.60, 0.42)),
    ("block C", "积木 C", "block", (0.70, 0.56, 0.38)),
    ("dog", "小狗", "animal", (0.96, 0.52, 0.10)),
    ("cat", "小猫", "animal", (0.98, 0.84, 0.12)),
    ("rabbit", "小兔", "animal", (0.96, 0.42, 0.70)),
)
# What each kind of toy is, as the features wheels, legs, round.
_KIND_FEATURES = {
    "car": (1.0, 0.0, 0.0),
    "ball": (0.0, 0.0, 1.0),
    "block": (0.0, 0.0, 0.0),
    "animal": (0.0, 1.0, 0.0),
}
# The floor is FLOOR_WIDTH x FLOOR_DEPTH; the child sits at its front edge, in the middle.
FLOOR_WIDTH, FLOOR_DEPTH = 10.0, 7.0
CHILD = (5.0, -0.6)


@dataclass(frozen=True)
class ToyScene:
    """Toys on a floor, seen by a child.

    names, names_zh, kinds: N strings each. positions (N, 2) and velocities (N, 2) on the floor
    (units per second); colours (N, 3), RGB in [0, 1]; sizes (N,), each toy's radius; child (2,),
    where the child sits.
    """

    names: tuple[str, ...]
    names_zh: tuple[str, ...]
    kinds: tuple[str, ...]
    positions: torch.Tensor
    velocities: torch.Tensor
    colours: torch.Tensor
    sizes: torch.Tensor
    child: torch.Tensor

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """The position of the toy called ``name`` in every per-toy tensor."""
        return self.names.index(name)

    def features(self) -> torch.Tensor:
        """Each toy's description, (N, F), in the order of ``FEATURE_NAMES``.

        speed is in units per second; visibility is the toy's apparent size from where the child
        sits (radius / distance), divided by the largest in the scene so that it lies in (0, 1].
        """
        speed = self.velocities.norm(dim=-1, keepdim=True)  # (N, 1)
        distance = (self.positions - self.child).norm(dim=-1, keepdim=True)  # (N, 1)
        apparent = self.sizes.unsqueeze(-1) / distance  # (N, 1)
        visibility = apparent / apparent.max()
        kind = torch.tensor([_KIND_FEATURES[k] for k in self.kinds], dtype=self.colours.dtype)  # (N, 3)
        return torch.cat([self.colours, speed, visibility, kind], dim=-1)  # (N, F)


def make_toy_scene(seed: int = 0) -> ToyScene:
    """A seeded playroom: the toy car parked in a far corner, a ball and three building blocks lying
    still, and three toy animals (dog, cat, rabbit) walking about in the middle of the floor.

    Positions, headings, speeds and shades vary with ``seed``; no two toys overlap.
    """
    generator = torch.Generator().manual_seed(seed)

    def uniform(low: float, high: float, *shape: int) -> torch.Tensor:
        return low + (high - low) * torch.rand(*shape, generator=generator)

    names, names_zh, kinds, base = zip(*_TOYS)
    n = len(names)
    sizes = torch.tensor([0.55 if k == "car" else 0.45 if k == "ball" else 0.5 for k in kinds])
    sizes = sizes + uniform(-0.04, 0.04, n)
    colours = (torch.tensor(base) + uniform(-0.04, 0.04, n, 3)).clamp(0.0, 1.0)

    # Where each kind may lie: (x range, y range). The car, in a back corner, is the farthest toy
    # (at least 7.57 from the child; nothing else can be farther than 7.49).
    corner = 0.7 if torch.rand(1, generator=generator).item() < 0.5 else 8.7  # left or right
    regions = {
        "car": ((corner, corner + 0.6), (6.0, 6.4)),
        "animal": ((2.4, 7.6), (1.6, 4.6)),
        "ball": ((0.8, 9.2), (0.8, 5.0)),
        "block": ((0.8, 9.2), (0.8, 5.6)),
    }
    # Place the toys with the smallest regions first, so that they always find room.
    order = sorted(range(n), key=lambda i: ["car", "animal", "ball", "block"].index(kinds[i]))
    positions = torch.zeros(n, 2)
    for placed, i in enumerate(order):
        (x0, x1), (y0, y1) = regions[kinds[i]]
        others = order[:placed]
        for _ in range(1000):
            candidate = torch.cat([uniform(x0, x1, 1), uniform(y0, y1, 1)])
            gaps = (positions[others] - candidate).norm(dim=-1) - sizes[others] - sizes[i]
            if placed == 0 or gaps.min() > 0.5:
                break
        else:  # pragma: no cover - the floor has room to spare for eight toys
            raise RuntimeError(f"no room on the floor for toy {names[i]!r}")
        positions[i] = candidate

    moving = torch.tensor([k == "animal" for k in kinds])
    heading = uniform(0.0, 2 * math.pi, n)
    speed = uniform(0.9, 1.1, n) * moving
    velocities = speed.unsqueeze(-1) * torch.stack([heading.cos(), heading.sin()], dim=-1)
    return ToyScene(names, names_zh, kinds, positions, velocities, colours, sizes, torch.tensor(CHILD))


def describe(**features: float) -> torch.Tensor:
    """A feature vector (F,) from named features, the rest 0: ``describe(wheels=1.0)`` is "a thing with wheels"."""
    unknown = set(features) - set(FEATURE_NAMES)
    if unknown:
        raise ValueError(f"unknown feature(s) {sorted(unknown)}; the features are {FEATURE_NAMES}")
    return torch.tensor([float(features.get(name, 0.0)) for name in FEATURE_NAMES])


def _check_features(features: torch.Tensor, other: torch.Tensor, other_name: str) -> None:
    """features (N, F) with N >= 2 toys, and ``other`` (F,): one number per feature."""
    if features.ndim != 2 or features.shape[0] < 2:
        raise ValueError(f"features must have shape (N, F) with N >= 2 toys, got {tuple(features.shape)}")
    if other.shape != features.shape[-1:]:
        raise ValueError(f"{other_name} must have shape (F,) = ({features.shape[-1]},) to match features "
                         f"{tuple(features.shape)}, got {tuple(other.shape)}")


def _check_over_time(salience: torch.Tensor, interest: torch.Tensor, habituation: float, onset: float) -> None:
    if salience.ndim != 1 or salience.shape != interest.shape:
        raise ValueError(f"salience and interest must both have shape (N,), got {tuple(salience.shape)} "
                         f"and {tuple(interest.shape)}")
    if not (habituation > 0 and onset > 0):
        raise ValueError(f"habituation and onset must be > 0, got {habituation} and {onset}")


def salience_scores(
    features: torch.Tensor, weights: torch.Tensor = SALIENCE_WEIGHTS
) -> torch.Tensor:
    """How much each toy stands out: || weights * (x_i - others' mean) ||.

    features (N, F), weights (F,) -> scores (N,), all >= 0.
    A toy just like the others scores 0.
    """
    _check_features(features, weights, "weights")
    n = features.shape[0]
    # Row i of others_mean leaves toy i out: (sum of all rows - row i) / (N-1).
    totals = features.sum(dim=0, keepdim=True)  # (1, F)
    others_mean = (totals - features) / (n - 1)  # (N, F)
    return (weights * (features - others_mean)).norm(dim=-1)  # (N,)


def interest_scores(
    features: torch.Tensor, query: torch.Tensor
) -> torch.Tensor:
    """How well each toy's key (a row of features) matches the query: q . k_i.

    features (N, F), query (F,) -> scores (N,).
    """
    _check_features(features, query, "query")
    # dot_score takes batches of queries and keys: 1 batch, 1 query, N keys.
    queries = query.reshape(1, 1, -1)  # (1, 1, F)
    keys = features.unsqueeze(0)  # (1, N, F)
    return dot_score(queries, keys).reshape(-1)  # (1, 1, N) -> (N,)


def attention_over_time(
    salience: torch.Tensor,
    interest: torch.Tensor,
    times: torch.Tensor,
    habituation: float = 10.0,
    onset: float = 12.0,
) -> torch.Tensor:
    """Weights over the toys as time passes: salience fades, interest grows.

    Score of toy i at time t: exp(-t / habituation) * salience_i
                              + (1 - exp(-t / onset)) * interest_i,
    then a softmax over the toys. salience (N,) and interest (N,) come
    already scaled (by 1 / temperature and by the interest's strength);
    times (T,) in seconds -> weights (T, N), each row summing to 1.
    """
    _check_over_time(salience, interest, habituation, onset)
    # (T, 1) each: novelty wears off, interest forms.
    fading = torch.exp(-times / habituation).unsqueeze(-1)
    growing = 1 - torch.exp(-times / onset).unsqueeze(-1)
    scores = fading * salience + growing * interest  # (T, N)
    return softmax(scores, dim=-1)
