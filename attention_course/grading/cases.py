"""What a check asks of a submission, and how the question travels into the sandbox as data only.

A :class:`Case` is one call: a name the student's notebook defines (a function, or a class to
construct with given weights and then call), with inputs drawn at grading time from the course
seed. A :class:`Check` scores one test cell of an assignment (its nbgrader grade id and points):
it draws its cases from a generator and knows the reference answer for each. Cases reach the
runner as ``marshal`` data (plain tuples, raw tensor bytes), one case at a time, only when the
runner's graded child asks for it after the student's cells have run; nothing in them is executable.

Phases: ``sealed`` cases run after the softmax family is sealed off in the dispatcher (a call that
reaches it is refused); ``open`` cases run before, for checks whose subject may legitimately sit
on top of code that uses it (``translate`` drives the student's whole model).
"""

from __future__ import annotations

import marshal
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

# Shortcuts that would make an exercise trivial, as the notebooks name them (DESIGN.md § Graded
# functions). What the grader refuses is wider: every operator of the family, whatever its name
# (runner.FAMILY); the course package is never in the sandbox at all.
FORBIDDEN_CALLS = (
    "softmax",
    "log_softmax",
    "_softmax",
    "_log_softmax",
    "cosine_similarity",
    "scaled_dot_product_attention",
    "MultiheadAttention",
    "multi_head_attention_forward",
)
PHASES = ("open", "sealed")

Scalar = int | float | bool | str | None


@dataclass(frozen=True)
class NotebookName:
    """An argument that is the notebook's own object of that name (a given score function, the trained model)."""

    name: str


@dataclass(frozen=True)
class StandInTranslator:
    """An argument that is a :class:`attention_course.grading.standin.Translator` built in the sandbox."""

    seed: int
    source_vocab_size: int
    target_vocab_size: int


@dataclass(frozen=True)
class StandIn:
    """While a call runs, the notebook's ``name`` (``kind="global"``) or the constructed object's attribute
    ``name`` (``kind="attribute"``) answers ``answer`` when called with arguments accepted by ``matchers``
    (one per parameter in ``params``; missing ones take ``defaults``), and defers to the student's own
    otherwise. Matchers: ("any",), ("none",), ("last_dim",), ("scalar", number), ("equal", tensor),
    ("close", tensor, rtol, atol). Several global stand-ins of one name (a function the graded call uses on
    different arguments) chain: each answers its own call and defers the others to the one before it."""

    kind: str
    name: str
    params: tuple[str, ...]
    defaults: tuple[tuple[str, Any], ...]
    matchers: tuple[tuple, ...]
    answer: Any
    # (output position, parameter name, Jacobian of shape output.shape + parameter.shape): the answer then
    # carries the correct gradient with respect to that parameter, for a caller that back-propagates
    # through it (runner._linearised). Position 0 for an answer that is a single tensor.
    derivatives: tuple[tuple[int, str, torch.Tensor], ...] = ()


@dataclass(frozen=True)
class Case:
    """One call the runner makes on the student's code, and how its answer is judged."""

    grade_id: str
    label: str  # what the student reads in feedback, e.g. "float64 scores of shape (3, 5), dim=0"
    call: str  # a name the student's notebook defines
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    # If set, ``call`` names a class: instance = cls(**construct); instance.load_state_dict(state); instance(*args)
    construct: dict[str, Scalar] | None = None
    state: dict[str, torch.Tensor] | None = None
    stand_ins: tuple[StandIn, ...] = ()
    # (source vocabulary, target vocabulary, recipe): before ``translate(model, sentences)`` runs, the runner
    # rebuilds the model from the notebook's classes as the recipe says ((encoder class, args), (decoder
    # class, args), model class), loads the model's weights and decodes the sentences greedily itself.
    consistency: tuple | None = None
    hidden: bool = True
    atol: float = 1e-5
    rtol: float = 1e-4
    # A gradient case: the positional arguments at ``grad_args`` require grad; after the call the runner
    # back-propagates sum_i <result_i, grad_outputs_i> (inside the graded call, under its limits) and sends the
    # gradients of those arguments as the outcome's ``extra``: ("gradients", (one per argument, None where no
    # gradient reached it)), or ("no-gradients", why). The check's ``compare`` judges them.
    grad_args: tuple[int, ...] = ()
    grad_outputs: tuple[torch.Tensor, ...] = ()


@dataclass(frozen=True)
class Check:
    """Scores one test cell: every case must pass for its points."""

    grade_id: str
    points: float
    what: str  # one sentence: what this check establishes, for feedback
    make_cases: Callable[[torch.Generator], list[Case]]
    reference: Callable[[Case], Any]  # the expected output of a case, computed in the trusted process
    # compare(got, expected, case) -> "" when acceptable, else the reason in a student's words.
    # None means verdicts.compare: tensors close to the reference, same shape and dtype.
    compare: Callable[[Any, Any, Case], str] | None = None
    phase: str = "sealed"
    # True when the check grades work the book does not print (a variant or an extension of what the chapter
    # showed); then ``solution_cells`` names the solution cells (grade ids) that hold that work, and no line of
    # their solutions may appear in the built book (tests/test_new_work.py). At least half of each assignment's
    # points are on such checks (DESIGN.md § Assignments).
    new: bool = False
    solution_cells: tuple[str, ...] = ()
    # (part of a visible case's label, what to look at when that case fails): the hints of the visible test
    # the case mirrors, in the notebook's words (tests/test_check.py holds the two to the same words); a failed
    # case shows every hint whose part its label holds (one case may fail for several reasons). Only visible
    # cases get hints: a hint never speaks of a hidden case's inputs.
    hints: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------------------------------------
# Into the sandbox.


def encode(value: Any) -> Any:
    """A case's value as marshal-able plain data."""
    if isinstance(value, torch.Tensor):
        array = value.detach().cpu().contiguous().numpy()
        return ("tensor", array.dtype.str, tuple(array.shape), array.tobytes())
    if isinstance(value, NotebookName):
        return ("ns", value.name)
    if isinstance(value, StandInTranslator):
        return ("translator", value.seed, value.source_vocab_size, value.target_vocab_size)
    if isinstance(value, list):
        return ("list", tuple(encode(v) for v in value))
    if isinstance(value, tuple):
        return ("tuple", tuple(encode(v) for v in value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return ("value", value)
    raise TypeError(f"a case argument must be a tensor, a scalar, a string or a list of them, got {type(value).__name__}")


def _encode_matcher(matcher: tuple) -> tuple:
    if matcher[0] in ("equal", "close"):
        return (matcher[0], encode(matcher[1]), *matcher[2:])
    return tuple(matcher)


def _encode_stand_in(stand_in: StandIn) -> tuple:
    return (stand_in.kind, stand_in.name, tuple(stand_in.params), tuple(stand_in.defaults),
            tuple(_encode_matcher(m) for m in stand_in.matchers), encode(stand_in.answer),
            tuple((position, name, encode(jacobian)) for position, name, jacobian in stand_in.derivatives))


def encode_case(case_id: str, case: Case) -> bytes:
    """One case, as the runner receives it: marshal bytes of a dict of plain data."""
    return marshal.dumps({
        "id": case_id,
        "call": case.call,
        "args": tuple(encode(a) for a in case.args),
        "kwargs": tuple((k, encode(v)) for k, v in case.kwargs.items()),
        "construct": None if case.construct is None else tuple(case.construct.items()),
        "state": () if case.state is None else tuple((k, encode(v)) for k, v in case.state.items()),
        "stand_ins": tuple(_encode_stand_in(s) for s in case.stand_ins),
        "consistency": None if case.consistency is None else tuple(case.consistency),
        "grad_args": tuple(case.grad_args),
        "grad_outputs": tuple(encode(g) for g in case.grad_outputs),
    })
