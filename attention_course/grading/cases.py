"""What a check asks of a submission, and how the question travels into the sandbox as data only.

A :class:`Case` is one call: a name the student's notebook defines (a function, or a class to
construct with given weights and then call), with inputs drawn at grading time. A :class:`Check`
scores one test cell of an assignment (its nbgrader grade id and points): it draws its cases from a
fresh generator and knows the reference answer for each. Cases are written to ``program.json`` and
``inputs.npz`` for the runner; nothing in them is executable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

# Shortcuts that would make an exercise trivial (DESIGN.md § Graded functions). The course package
# itself is never visible inside the sandbox, so its reference implementations cannot be called there.
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

Scalar = int | float | bool | str | None


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
    hidden: bool = True
    atol: float = 1e-5
    rtol: float = 1e-4


@dataclass(frozen=True)
class Check:
    """Scores one test cell: every case must pass for its points."""

    grade_id: str
    points: float
    what: str  # one sentence: what this check establishes, for feedback
    make_cases: Callable[[torch.Generator], list[Case]]
    reference: Callable[[Case], Any]  # the expected output of a case, computed in the trusted process
    forbidden: tuple[str, ...] = FORBIDDEN_CALLS
    # compare(got, expected, case) -> "" when acceptable, else the reason in a student's words.
    # None means verdicts.compare: tensors close to the reference, same shape and dtype.
    compare: Callable[[Any, Any, Case], str] | None = None


# ---------------------------------------------------------------------------------------------
# Into the sandbox: a JSON description with tensors replaced by references into an .npz file.


def _encode(value: Any, key: str, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, torch.Tensor):
        arrays[key] = value.detach().cpu().numpy()
        return {"tensor": key}
    if isinstance(value, (list, tuple)):
        return {"list": [_encode(v, f"{key}.{i}", arrays) for i, v in enumerate(value)]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a case argument must be a tensor, a scalar, a string or a list of them, got {type(value).__name__}")


def write_program(folder: Path, cells: list[str], cases: list[Case]) -> None:
    """Write ``program.json`` (the cells to run and the calls to make) and ``inputs.npz`` into ``folder``."""
    arrays: dict[str, np.ndarray] = {}
    described = []
    for number, case in enumerate(cases):
        key = f"case{number}"
        described.append(
            {
                "id": key,
                "call": case.call,
                "args": [_encode(a, f"{key}.arg{i}", arrays) for i, a in enumerate(case.args)],
                "kwargs": {k: _encode(v, f"{key}.kw.{k}", arrays) for k, v in case.kwargs.items()},
                "construct": case.construct,
                "state": None if case.state is None else {k: _encode(v, f"{key}.state.{k}", arrays)
                                                           for k, v in case.state.items()},
            }
        )
    (folder / "program.json").write_text(json.dumps({"cells": cells, "cases": described}), encoding="utf-8")
    np.savez(folder / "inputs.npz", **arrays)
