"""An attention playground: one query and a few keys in a plane, each key carrying a number as its value.

The reader moves the vectors, picks the score function and the temperature, and sees every score, the
weights as bars and the output. Vectors are given by an angle (degrees) and a length, the way the
sliders move them; ``AttentionPlayground.from_vectors`` takes them as (x, y) instead.

Two sides compute the same numbers. In a live kernel, an observer recomputes the result traits
(``scores``, ``weights``, ``output``) with ``attention_course.attention`` in float64 whenever an input
trait changes. In the page, ``playground.js`` computes them itself on every move, so the widget still
responds in the static book where there is no kernel; when the kernel's results arrive and belong to
what is on screen, the page shows those. tests/test_widgets.py pins the two together.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import anywidget
import torch
import traitlets

from attention_course.attention import AdditiveScore, attention, cosine_score, dot_score, scaled_dot_score
from attention_course.widgets import front_end

__all__ = ["AttentionPlayground", "PlaygroundInputError", "SCORE_NAMES", "playground_attention", "polar"]

SCORE_NAMES = ("dot", "scaled_dot", "cosine", "additive")
# Chapter 4's hand-set additive weights: W_q = W_k = I/2, w_v = (1, 1).
DEFAULT_ADDITIVE_WEIGHTS = {"W_q": [[0.5, 0.0], [0.0, 0.5]], "W_k": [[0.5, 0.0], [0.0, 0.5]], "w_v": [1.0, 1.0]}


class PlaygroundInputError(traitlets.TraitError, ValueError):
    """An input the playground cannot compute with (a ValueError, and a TraitError for traitlets)."""


def polar(x: float, y: float) -> dict[str, float]:
    """The vector (x, y) as the playground stores it: {"angle": degrees, "length": ...}."""
    return {"angle": math.degrees(math.atan2(y, x)), "length": math.hypot(x, y)}


def _xy(vectors: Sequence[dict[str, float]]) -> torch.Tensor:
    """[{angle, length}, ...] -> (n, 2) float64, computed as playground.js computes it."""
    angles = torch.tensor([v["angle"] for v in vectors], dtype=torch.float64) * (math.pi / 180)
    lengths = torch.tensor([v["length"] for v in vectors], dtype=torch.float64)
    return torch.stack([lengths * torch.cos(angles), lengths * torch.sin(angles)], dim=-1)


def _additive(weights: dict[str, list]) -> AdditiveScore:
    hidden = len(weights["w_v"])
    module = AdditiveScore(query_dim=2, key_dim=2, hidden_dim=hidden).double()
    with torch.no_grad():
        module.W_q.weight.copy_(torch.tensor(weights["W_q"], dtype=torch.float64))  # (hidden, 2)
        module.W_k.weight.copy_(torch.tensor(weights["W_k"], dtype=torch.float64))  # (hidden, 2)
        module.w_v.weight.copy_(torch.tensor([weights["w_v"]], dtype=torch.float64))  # (1, hidden)
    return module


def playground_attention(
    query: dict[str, float],
    keys: Sequence[dict[str, float]],
    values: Sequence[float],
    score: str = "dot",
    temperature: float = 1.0,
    additive_weights: dict[str, list] | None = None,
) -> dict[str, Any]:
    """Scores, weights and output of one playground setting, with the course's ``attention`` (float64).

    query {angle, length}; keys [{angle, length}] * K; values K numbers. Returns {"scores": K floats
    (before the temperature), "weights": K floats = softmax(scores / temperature), "output": float}.
    """
    if not keys:
        raise PlaygroundInputError("the playground needs at least one key, got none")
    if len(keys) != len(values):
        raise PlaygroundInputError(
            f"every key needs a value: got {len(keys)} keys and {len(values)} values "
            "(change both at once with `with widget.hold_trait_notifications(): ...`)"
        )
    if score not in SCORE_NAMES:
        raise PlaygroundInputError(f"score must be one of {SCORE_NAMES}, got {score!r}")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise PlaygroundInputError(f"temperature must be a finite number > 0, got {temperature}")
    score_fn = {
        "dot": dot_score,
        "scaled_dot": scaled_dot_score,
        "cosine": cosine_score,
        "additive": _additive(additive_weights or DEFAULT_ADDITIVE_WEIGHTS),
    }[score]

    def tempered_score(queries: torch.Tensor, keys_: torch.Tensor) -> torch.Tensor:
        return score_fn(queries, keys_) / temperature  # (B, Q, K): the temperature divides the scores

    queries_t = _xy([query]).reshape(1, 1, 2)  # (B=1, Q=1, d=2)
    keys_t = _xy(keys).unsqueeze(0)  # (B=1, K, d=2)
    values_t = torch.tensor(list(values), dtype=torch.float64).reshape(1, -1, 1)  # (B=1, K, d_v=1)
    with torch.no_grad():
        scores = score_fn(queries_t, keys_t)  # (1, 1, K)
        output, weights = attention(queries_t, keys_t, values_t, tempered_score)  # (1, 1, 1), (1, 1, K)
    return {"scores": scores[0, 0].tolist(), "weights": weights[0, 0].tolist(), "output": output.item()}


def _clean_vector(name: str, vector: object) -> dict[str, float]:
    if not isinstance(vector, dict) or set(vector) != {"angle", "length"}:
        raise PlaygroundInputError(
            f"{name} must be a dict {{'angle': degrees, 'length': number}} (or use AttentionPlayground.from_vectors "
            f"for (x, y) vectors), got {vector!r}"
        )
    try:
        angle, length = float(vector["angle"]), float(vector["length"])
    except (TypeError, ValueError):
        raise PlaygroundInputError(f"{name} needs numbers for its angle and length, got {vector!r}") from None
    if not (math.isfinite(angle) and math.isfinite(length)) or length < 0:
        raise PlaygroundInputError(f"{name} needs a finite angle and a finite length >= 0, got {vector!r}")
    return {"angle": angle, "length": length}


class AttentionPlayground(anywidget.AnyWidget):
    """One query, K keys with a value each, a score function and a temperature; shows scores, weights, output.

    Inputs (synced with the page): ``query`` {angle, length}; ``key_vectors`` [{angle, length}] * K (not
    ``keys``: ipywidgets uses that name for the list of synced traits); ``values``
    K numbers; ``score`` one of ``SCORE_NAMES``; ``temperature`` > 0; ``additive_weights`` {W_q (h, 2),
    W_k (h, 2), w_v (h,)} for the additive score; ``language`` of the interface, "auto" (the page's), "en"
    or "zh". Results (read-only, computed here with PyTorch):
    ``scores`` K floats, ``weights`` K floats, ``output`` a float. The default setting is chapter 4's
    worked example: q = (1, 2), keys (1, 0), (0, 1), (1, 1), values 10, 20, 30.
    """

    # Its front end, with what both widgets share inlined (front_end.py).
    _esm = front_end.module("playground.js")
    _css = front_end.stylesheet("a11y.css", "playground.css")

    query = traitlets.Dict(polar(1.0, 2.0)).tag(sync=True)
    key_vectors = traitlets.List([polar(1.0, 0.0), polar(0.0, 1.0), polar(1.0, 1.0)]).tag(sync=True)
    values = traitlets.List([10.0, 20.0, 30.0]).tag(sync=True)
    score = traitlets.Unicode("dot").tag(sync=True)
    temperature = traitlets.Float(1.0).tag(sync=True)
    additive_weights = traitlets.Dict(DEFAULT_ADDITIVE_WEIGHTS).tag(sync=True)

    scores = traitlets.List(read_only=True).tag(sync=True)
    weights = traitlets.List(read_only=True).tag(sync=True)
    output = traitlets.Float(0.0, read_only=True).tag(sync=True)

    # The interface's language: "auto" (the page's: Chinese in the book's 中文 edition), "en" or "zh";
    # the front end's messages in every language but English (front_end.messages).
    language = traitlets.Unicode("auto").tag(sync=True)
    messages = traitlets.Dict(read_only=True).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.set_trait("messages", front_end.messages("playground.js"))
        self._recompute()

    @classmethod
    def from_vectors(
        cls, query: Sequence[float], keys: Sequence[Sequence[float]], values: Sequence[float], **kwargs: Any
    ) -> AttentionPlayground:
        """A playground from (x, y) vectors: query (2,), keys (K, 2), values (K,); other traits as keywords."""
        return cls(query=polar(*query), key_vectors=[polar(*key) for key in keys], values=list(values), **kwargs)

    # ---- Checks: a bad input fails where it is set, with a message that names it.

    @traitlets.validate("language")
    def _check_language(self, proposal):
        return front_end.check_language(proposal["value"], PlaygroundInputError)

    @traitlets.validate("query")
    def _check_query(self, proposal):
        return _clean_vector("query", proposal["value"])

    @traitlets.validate("key_vectors")
    def _check_keys(self, proposal):
        keys = proposal["value"]
        if not isinstance(keys, (list, tuple)) or len(keys) == 0:
            raise PlaygroundInputError(f"the playground needs at least one key, got {keys!r}")
        return [_clean_vector(f"key_vectors[{i}]", key) for i, key in enumerate(keys)]

    @traitlets.validate("values")
    def _check_values(self, proposal):
        values = list(proposal["value"])
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            raise PlaygroundInputError(f"values must be finite numbers, one per key, got {values!r}")
        return [float(v) for v in values]

    @traitlets.validate("score")
    def _check_score(self, proposal):
        if proposal["value"] not in SCORE_NAMES:
            raise PlaygroundInputError(f"score must be one of {SCORE_NAMES}, got {proposal['value']!r}")
        return proposal["value"]

    @traitlets.validate("temperature")
    def _check_temperature(self, proposal):
        temperature = proposal["value"]
        if not (temperature > 0 and math.isfinite(temperature)):
            raise PlaygroundInputError(f"temperature must be a finite number > 0, got {temperature}")
        return temperature

    @traitlets.validate("additive_weights")
    def _check_additive_weights(self, proposal):
        weights = proposal["value"]
        if not isinstance(weights, dict) or set(weights) != {"W_q", "W_k", "w_v"}:
            raise PlaygroundInputError(f"additive_weights must be a dict with W_q, W_k and w_v, got {weights!r}")
        try:
            w_q = torch.tensor(weights["W_q"], dtype=torch.float64)
            w_k = torch.tensor(weights["W_k"], dtype=torch.float64)
            w_v = torch.tensor(weights["w_v"], dtype=torch.float64)
        except (TypeError, ValueError) as error:
            raise PlaygroundInputError(f"additive_weights must hold lists of numbers: {error}") from None
        hidden = w_v.shape[0] if w_v.ndim == 1 else -1
        if w_v.ndim != 1 or hidden < 1 or w_q.shape != (hidden, 2) or w_k.shape != (hidden, 2):
            raise PlaygroundInputError(
                "additive_weights must have W_q (h, 2), W_k (h, 2) and w_v (h,) for one hidden size h >= 1, got "
                f"W_q {tuple(w_q.shape)}, W_k {tuple(w_k.shape)}, w_v {tuple(w_v.shape)}"
            )
        if not all(torch.isfinite(t).all() for t in (w_q, w_k, w_v)):
            raise PlaygroundInputError("additive_weights must be finite")
        return {"W_q": w_q.tolist(), "W_k": w_k.tolist(), "w_v": w_v.tolist()}

    # ---- The kernel's side of the computation.

    @traitlets.observe("query", "key_vectors", "values", "score", "temperature", "additive_weights")
    def _inputs_changed(self, change) -> None:
        self._recompute()

    def _recompute(self) -> None:
        results = playground_attention(
            self.query, self.key_vectors, self.values, self.score, self.temperature, self.additive_weights
        )
        with self.hold_sync():  # one message to the page with all three
            for name, value in results.items():
                self.set_trait(name, value)
