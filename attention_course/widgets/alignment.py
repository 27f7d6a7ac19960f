"""An alignment explorer: choose a sentence and an output step i, see row i of the attention matrix and
how the context vector C_i = Σ_j a_ij h_j is composed from the source positions' vectors h_j.

Feed it learned attention with ``AlignedSentence`` (chapter 6)::

    explorer = AlignmentExplorer([
        AlignedSentence(source=pair.source, target=pair.target,
                        weights=attention_weights,   # (T, S): row i is output step i's a_i.
                        states=encoder_states),      # (S, d): h_j; drawn projected to 2-D. Optional.
        ...
    ])

Without ``states`` the picture uses schematic h_j (one unit direction per source word, fanned over a half
circle), and says so. ``from_pairs`` shows the corpus's true alignments (``SentencePair.alignment_matrix``);
``notes_example`` the notes' matrix for "Tom chase Jerry" → "汤姆 追逐 杰瑞".

The contexts are computed here with PyTorch when a sentence is set, and in the page by ``alignment.js``
when the reader moves (the static book has no kernel); tests/test_widgets.py pins the two together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import anywidget
import torch
import traitlets

from attention_course.corpus import SentencePair
from attention_course.i18n import N_
from attention_course.widgets import front_end
from attention_course.widgets.playground import PlaygroundInputError

__all__ = ["AlignedSentence", "AlignmentExplorer", "AlignmentInputError", "NOTES_EXAMPLE", "project_to_plane"]


# The notes' alignment of "Tom chase Jerry" with "汤姆 追逐 杰瑞": rows are output steps, columns source words.
NOTES_EXAMPLE = {
    "source": ("Tom", "Chase", "Jerry"),
    "target": ("汤姆", "追逐", "杰瑞"),
    "weights": ((0.6, 0.2, 0.2), (0.2, 0.7, 0.1), (0.3, 0.2, 0.5)),
}
ROW_SUM_TOLERANCE = 1e-3
# The labels that the book's chapters give their sentences (chapter 6's explorer), translated in the
# page's language like the widget's own text; other labels are shown as they are given.
CHAPTER_LABELS = (N_("a reordered sentence"), N_("two clauses"))


class AlignmentInputError(PlaygroundInputError):
    """Data the alignment explorer cannot show (a ValueError, and a TraitError for traitlets)."""


@dataclass(frozen=True)
class AlignedSentence:
    """One sentence pair and its attention: what the explorer shows for one choice of the sentence menu.

    source: S source tokens; target: T target tokens; weights: (T, S), row i the attention a_i of output
    step i over the source (non-negative, each row summing to 1); states: (S, d) the vectors h_j that
    C_i = Σ_j a_ij h_j adds up (encoder states), or None for schematic ones; label: the menu's text.
    """

    source: Sequence[str]
    target: Sequence[str]
    weights: torch.Tensor | Sequence[Sequence[float]]
    states: torch.Tensor | Sequence[Sequence[float]] | None = None
    label: str | None = None

    @classmethod
    def from_pair(cls, pair: SentencePair, label: str | None = None) -> AlignedSentence:
        """The corpus's true alignment of ``pair`` as attention weights (``SentencePair.alignment_matrix``)."""
        return cls(pair.source, pair.target, pair.alignment_matrix(), label=label)


def project_to_plane(states: torch.Tensor) -> torch.Tensor:
    """(S, d) vectors -> (S, 2) for drawing: the two directions along which they spread most.

    The projection is linear (no centring), so the projection of Σ_j a_ij h_j is Σ_j a_ij (projected h_j):
    the picture's sum is the picture of the sum. Each axis's sign is chosen so its coordinates sum >= 0.
    """
    states = states.to(torch.float64)
    if states.shape[1] <= 2:
        return torch.nn.functional.pad(states, (0, 2 - states.shape[1]))  # (S, 2)
    _, _, directions = torch.linalg.svd(states, full_matrices=False)  # directions: (min(S, d), d)
    plane = directions[:2].T  # (d, 2)
    if plane.shape[1] < 2:  # a single source position: one direction, and a zero axis
        plane = torch.nn.functional.pad(plane, (0, 1))
    projected = states @ plane  # (S, 2)
    signs = torch.where(projected.sum(dim=0) < 0, -1.0, 1.0).to(torch.float64)
    return projected * signs


def schematic_vectors(count: int) -> torch.Tensor:
    """(count, 2) unit vectors fanned over the upper half circle, one direction per source word."""
    angles = math.pi * (torch.arange(count, dtype=torch.float64) + 0.5) / count
    return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)


def _tokens(name: str, tokens: object) -> list[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Iterable):
        raise AlignmentInputError(f"{name} must be a sequence of tokens (strings), got {tokens!r}")
    tokens = list(tokens)
    if not tokens or not all(isinstance(token, str) and token for token in tokens):
        raise AlignmentInputError(f"{name} must be a non-empty sequence of non-empty strings, got {tokens!r}")
    return tokens


def _record(sentence: AlignedSentence | dict, index: int) -> dict[str, Any]:
    """The checked, JSON-ready form of one sentence that the page receives, contexts computed with PyTorch."""
    if isinstance(sentence, dict):
        fields = {k: v for k, v in sentence.items() if k in {"source", "target", "weights", "states", "label"}}
        if "states" not in fields and "vectors" in sentence and not sentence.get("schematic", False):
            fields["states"] = sentence["vectors"]  # a record this class wrote: keep its projected vectors
        sentence = AlignedSentence(**fields)
    where = f"sentence {index}"
    source = _tokens(f"{where}: source", sentence.source)
    target = _tokens(f"{where}: target", sentence.target)
    weights = torch.as_tensor(
        sentence.weights.detach() if isinstance(sentence.weights, torch.Tensor) else sentence.weights,
        dtype=torch.float64,
    )
    if weights.shape != (len(target), len(source)):
        raise AlignmentInputError(
            f"{where}: weights must have shape (T, S) = ({len(target)}, {len(source)}) for {len(target)} target "
            f"and {len(source)} source tokens, got {tuple(weights.shape)}"
        )
    if not torch.isfinite(weights).all() or (weights < 0).any():
        raise AlignmentInputError(f"{where}: weights must be finite and non-negative")
    row_sums = weights.sum(dim=1)  # (T,)
    worst = int((row_sums - 1).abs().argmax())
    if abs(float(row_sums[worst]) - 1) > ROW_SUM_TOLERANCE:
        raise AlignmentInputError(
            f"{where}: each row of weights is one output step's attention and must sum to 1; "
            f"row {worst} ({target[worst]}) sums to {float(row_sums[worst]):.6f}"
        )
    if sentence.states is None:
        vectors, schematic = schematic_vectors(len(source)), True
    else:
        states = torch.as_tensor(
            sentence.states.detach() if isinstance(sentence.states, torch.Tensor) else sentence.states,
            dtype=torch.float64,
        )
        if states.ndim != 2 or states.shape[0] != len(source) or states.shape[1] < 1:
            raise AlignmentInputError(
                f"{where}: states must have shape (S, d) = ({len(source)}, d), one vector h_j per source "
                f"token, got {tuple(states.shape)}"
            )
        if not torch.isfinite(states).all():
            raise AlignmentInputError(f"{where}: states must be finite")
        vectors, schematic = project_to_plane(states), False
    contexts = weights @ vectors  # (T, S) @ (S, 2) -> (T, 2): row i is C_i = Σ_j a_ij h_j
    return {
        "source": source,
        "target": target,
        "weights": weights.tolist(),
        "vectors": vectors.tolist(),
        "schematic": schematic,
        "contexts": contexts.tolist(),
        "label": sentence.label or f"{' '.join(source)} → {' '.join(target)}",
    }


class AlignmentExplorer(anywidget.AnyWidget):
    """A menu of sentences, each with its attention matrix; the reader picks a sentence and an output step i.

    Synced with the page: ``sentences`` (the checked records, built from ``AlignedSentence`` objects or
    dicts with the same fields), ``sentence`` (an index into them) and ``step`` (an output step of that
    sentence). Read-only, computed here with PyTorch: ``context``, C_i of the chosen sentence and step,
    as drawn (2 numbers).
    """

    # Its front end, with what both widgets share inlined (front_end.py).
    _esm = front_end.module("alignment.js")
    _css = front_end.stylesheet("a11y.css", "alignment.css")

    sentences = traitlets.List().tag(sync=True)
    sentence = traitlets.Int(0).tag(sync=True)
    step = traitlets.Int(0).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    context = traitlets.List(read_only=True).tag(sync=True)
    # The interface's language: "auto" (the page's: Chinese in the book's 中文 edition), "en" or "zh";
    # the front end's messages, the sentences' labels and the title in every language but English.
    language = traitlets.Unicode("auto").tag(sync=True)
    messages = traitlets.Dict(read_only=True).tag(sync=True)

    def __init__(self, sentences: Sequence[AlignedSentence | dict] = (), **kwargs: Any) -> None:
        if not sentences:
            raise AlignmentInputError("the alignment explorer needs at least one sentence")
        super().__init__(sentences=list(sentences), **kwargs)
        self._translate()
        self._recompute()

    @classmethod
    def from_pairs(cls, pairs: Iterable[SentencePair], **kwargs: Any) -> AlignmentExplorer:
        """The corpus's true alignments (``SentencePair.alignment_matrix``) of ``pairs``, schematic h_j."""
        return cls([AlignedSentence.from_pair(pair) for pair in pairs], **kwargs)

    @classmethod
    def notes_example(cls, **kwargs: Any) -> AlignmentExplorer:
        """The notes' matrix: 汤姆 0.6 0.2 0.2 · 追逐 0.2 0.7 0.1 · 杰瑞 0.3 0.2 0.5 over Tom, Chase, Jerry."""
        return cls([AlignedSentence(**NOTES_EXAMPLE, label=N_("the notes' example: Tom Chase Jerry → 汤姆 追逐 杰瑞"))],
                   **kwargs)

    @traitlets.validate("language")
    def _check_language(self, proposal):
        return front_end.check_language(proposal["value"], AlignmentInputError)

    @traitlets.observe("title")
    def _title_changed(self, change) -> None:
        self._translate()

    def _translate(self) -> None:
        labels = tuple(record["label"] for record in self.sentences)
        self.set_trait("messages", front_end.messages("alignment.js", extra=(self.title, *labels)))

    @traitlets.validate("sentences")
    def _check_sentences(self, proposal):
        sentences = proposal["value"]
        if not sentences:
            raise AlignmentInputError("the alignment explorer needs at least one sentence")
        return [_record(sentence, index) for index, sentence in enumerate(sentences)]

    @traitlets.validate("sentence")
    def _check_sentence(self, proposal):
        index = proposal["value"]
        if not 0 <= index < len(self.sentences):
            raise AlignmentInputError(f"sentence must be an index in 0..{len(self.sentences) - 1}, got {index}")
        return index

    @traitlets.validate("step")
    def _check_step(self, proposal):
        step = proposal["value"]
        steps = len(self.sentences[self.sentence]["target"])
        if not 0 <= step < steps:
            raise AlignmentInputError(
                f"step must be an output step of sentence {self.sentence}, in 0..{steps - 1}, got {step}"
            )
        return step

    @traitlets.observe("sentences", "sentence")
    def _sentence_changed(self, change) -> None:
        # A shorter sentence (or a new list) may not have the current step, or the current sentence.
        if self.sentence >= len(self.sentences):
            self.sentence = 0
        if self.step >= len(self.sentences[self.sentence]["target"]):
            self.step = 0
        if change["name"] == "sentences":
            self._translate()
        self._recompute()

    @traitlets.observe("step")
    def _step_changed(self, change) -> None:
        self._recompute()

    def _recompute(self) -> None:
        record = self.sentences[self.sentence]
        row = torch.tensor(record["weights"][self.step], dtype=torch.float64)  # (S,): a_i
        vectors = torch.tensor(record["vectors"], dtype=torch.float64)  # (S, 2): h_j as drawn
        self.set_trait("context", (row @ vectors).tolist())  # C_i = Σ_j a_ij h_j
