"""The trusted side: judge what the sandbox produced against the reference implementations.

Nothing here imports or runs student code. Outputs are read with ``numpy.load(allow_pickle=False)``
and JSON; the reference answer of every case is recomputed here from the same inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attention_course.grading.cases import Case, Check

MAX_RESULT_FILE_BYTES = 16 << 20  # a case's outputs are small tensors; anything larger is not trusted
FORBIDDEN_REASON = "uses a forbidden shortcut: "


@dataclass
class CaseVerdict:
    label: str
    passed: bool
    hidden: bool
    reason: str = ""


@dataclass
class CheckVerdict:
    grade_id: str
    points: float
    what: str
    cases: list[CaseVerdict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(case.passed for case in self.cases)

    def message(self) -> str:
        failed = [c for c in self.cases if not c.passed]
        if not failed:
            return f"passed: {self.what} ({len(self.cases)} cases)"
        lines = [f"failed {len(failed)} of {len(self.cases)} cases: {self.what}"]
        for case in failed[:5]:
            kind = "hidden case" if case.hidden else "case"
            lines.append(f"- {kind} '{case.label}': {case.reason}")
        if len(failed) > 5:
            lines.append(f"- and {len(failed) - 5} more")
        return "\n".join(lines)


def _describe_difference(got: torch.Tensor, expected: torch.Tensor) -> str:
    if got.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    if torch.isnan(got).any() and not torch.isnan(expected).any():
        return "the result contains NaN where the expected values are finite"
    if torch.isinf(got).any() and not torch.isinf(expected).any():
        return "the result contains infinity where the expected values are finite"
    difference = (got.double() - expected.double()).abs()
    worst = int(difference.argmax())
    index = tuple(int(i) for i in np.unravel_index(worst, tuple(got.shape))) if got.ndim else ()
    return (f"wrong values: largest difference {difference.max().item():.3g} at index {index} "
            f"(expected {expected.reshape(-1)[worst].item():.6g}, got {got.reshape(-1)[worst].item():.6g})")


def compare(got: Any, expected: Any, case: Case) -> str:
    """An empty string if ``got`` matches ``expected`` for this case, else the reason in a student's words."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected {len(expected)} results, got {'one result' if not isinstance(got, (tuple, list)) else len(got)}"
        for position, (g, e) in enumerate(zip(got, expected)):
            reason = compare(g, e, case)
            if reason:
                return f"result {position}: {reason}"
        return ""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor, got {type(got).__name__}"
        if got.dtype != expected.dtype:
            return f"expected dtype {expected.dtype}, got {got.dtype}"
        if got.shape != expected.shape or not torch.allclose(got, expected, atol=case.atol, rtol=case.rtol, equal_nan=False):
            return _describe_difference(got, expected)
        return ""
    return "" if got == expected else f"expected {expected!r}, got {got!r}"


def reference_output(check: Check, case: Case) -> Any:
    with torch.no_grad():
        return check.reference(case)


# ---------------------------------------------------------------------------------------------
# Reading what the runner wrote.


def _load_json(path: Path) -> Any | None:
    if not path.is_file() or path.stat().st_size > MAX_RESULT_FILE_BYTES:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def _load_arrays(path: Path) -> dict[str, np.ndarray] | None:
    if not path.is_file() or path.stat().st_size > MAX_RESULT_FILE_BYTES:
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except Exception:  # a malformed file is a failed case, whatever numpy raises
        return None


def _rebuild(described: list[dict], arrays: dict[str, np.ndarray]) -> tuple[Any, str]:
    """The returned value from the runner's description; a reason instead where it is not acceptable."""
    items = iter(described)

    def take():
        entry = next(items)
        if entry["kind"] == "tensor":
            if entry.get("type") != "torch.Tensor":
                raise ValueError(f"expected a plain torch.Tensor, got {entry.get('type')}")
            if entry["key"] not in arrays:
                raise ValueError("a returned tensor is missing from the results")
            return torch.from_numpy(arrays[entry["key"]])
        if entry["kind"] == "sequence":
            return tuple(take() for _ in range(int(entry["length"])))
        if entry["kind"] == "scalar":
            return entry["value"]
        raise ValueError(f"expected tensors, got {entry.get('type')}")

    try:
        return take(), ""
    except (StopIteration, KeyError, ValueError, TypeError) as problem:
        return None, str(problem) or "the result could not be read"


def judge_case(check: Check, case: Case, case_id: str, out: Path, static_forbidden: set[str]) -> CaseVerdict:
    verdict = CaseVerdict(label=case.label, passed=False, hidden=case.hidden)
    record = _load_json(out / f"{case_id}.json")
    arrays = _load_arrays(out / f"{case_id}.npz")
    if record is None or arrays is None:
        verdict.reason = "no result: the notebook stopped (crashed, exited or ran out of time) before this call finished"
        return verdict
    if record.get("status") == "timeout":
        verdict.reason = f"the call did not finish: {record.get('error')}"
        return verdict
    if record.get("status") != "ok":
        verdict.reason = f"the call raised {record.get('error')}"
        return verdict
    forbidden = sorted(set(record.get("forbidden") or []) | static_forbidden)
    if forbidden:
        verdict.reason = FORBIDDEN_REASON + ", ".join(forbidden)
        return verdict
    got, reason = _rebuild(record.get("returned") or [], arrays)
    if reason:
        verdict.reason = reason
        return verdict
    for position, arg in enumerate(case.args):
        if isinstance(arg, torch.Tensor):
            after = arrays.get(f"after.arg{position}")
            if after is None or not torch.equal(torch.from_numpy(after), arg):
                verdict.reason = f"argument {position} was modified in place; a graded function must not change its inputs"
                return verdict
    verdict.reason = (check.compare or compare)(got, reference_output(check, case), case)
    verdict.passed = not verdict.reason
    return verdict
