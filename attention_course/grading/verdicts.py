"""The trusted side: judge what the sandbox produced against the reference implementations.

Nothing here imports or runs student code. What the runner sends is plain data (parsed with
``ast.literal_eval``); tensors are rebuilt from raw bytes with NumPy; the reference answer of every
case is recomputed here from the same inputs.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attention_course.grading.cases import Case, Check
from attention_course.i18n import CATALOG_LANGUAGE, LOCALE_DIR, N_, language_of, po_messages, translator

FORBIDDEN_REASON = "uses a forbidden shortcut: "
_ALLOWED_DTYPES = {"<f4", "<f8", "<f2", "<i8", "<i4", "<i2", "|i1", "|u1", "|b1"}


class Reason(str):
    """What a check's compare returns, with a flag for the instructor: "" (it passed) or why it failed, and
    ``flag``, what the summary should point the instructor to (whatever the verdict), or ""."""

    flag: str

    def __new__(cls, text: str = "", flag: str = ""):
        reason = super().__new__(cls, text)
        reason.flag = flag
        return reason


@dataclass
class CaseVerdict:
    label: str
    passed: bool
    hidden: bool
    reason: str = ""
    flag: str = ""  # for the summary's flags (see Reason)
    hints: tuple[str, ...] = ()  # toward the fix, for a visible case (Check.hints: each whose part is in the label)


@dataclass
class CheckVerdict:
    grade_id: str
    points: float
    what: str
    cases: list[CaseVerdict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(case.passed for case in self.cases)

    def message(self, language: str = "en") -> str:
        """What the student reads, in ``language`` (that of the notebook submitted): the failed cases, those they
        can run themselves (the visible ones) first, each with why; then the hints of the failed cases, each once.
        (The cases' labels, and the reasons particular to one check, are the grader's English in both.)"""
        tr = translator(language, "grading")
        count = (tr("1 case") if len(self.cases) == 1 else tr("{count} cases").format(count=len(self.cases)))
        failed = sorted((c for c in self.cases if not c.passed), key=lambda c: c.hidden)
        what = tr(self.what)  # (checks.descriptions: the grading catalog has each)
        if not failed:
            return tr("passed: {what} ({count})").format(what=what, count=count)
        lines = [tr("failed {failed} of {count}: {what}").format(failed=len(failed), count=count, what=what)]
        for case in failed[:5]:
            kind = tr("- hidden case '{label}': {reason}") if case.hidden else tr("- case '{label}': {reason}")
            reason = case.reason if language_of(language) == "en" else _reason_in(tr, case.reason)
            lines.append(kind.format(label=case.label, reason=reason))
        if len(failed) > 5:
            lines.append(tr("- and {more} more").format(more=len(failed) - 5))
        lines += [tr("hint: {hint}").format(hint=_hint_in(language, hint))
                  for hint in dict.fromkeys(h for c in failed for h in c.hints)]
        return "\n".join(lines)


# The reasons verdicts.py writes, as patterns: (regex of the English, its message in the grading catalog).
_REASONS = (
    (r"result (\d+): (.*)", N_("result {0}: {1}")),
    (r"wrong values: largest difference (\S+) at index (\(.*?\)) \(expected (\S+), got (\S+)\)",
     N_("wrong values: largest difference {0} at index {1} (expected {2}, got {3})")),
    (r"expected shape (\(.*?\)), got (\(.*?\))", N_("expected shape {0}, got {1}")),
    (r"expected dtype (\S+), got (\S+)", N_("expected dtype {0}, got {1}")),
    (r"expected a tensor, got (\S+)", N_("expected a tensor, got {0}")),
    (r"the result contains NaN where the expected values are finite",
     N_("the result contains NaN where the expected values are finite")),
    (r"the result contains infinity where the expected values are finite",
     N_("the result contains infinity where the expected values are finite")),
    (r"the call raised NotImplementedError \(the answer is not written yet\)",
     N_("the call raised NotImplementedError (the answer is not written yet)")),
    (r"the call raised (.*)", N_("the call raised {0}")),
    (r"the call did not finish: (.*)", N_("the call did not finish: {0}")),
    (r"argument (\d+) was modified in place; a graded function must not change its inputs",
     N_("argument {0} was modified in place; a graded function must not change its inputs")),
    (r"no result: the notebook stopped \(crashed, exited or ran out of time\) before this call finished",
     N_("no result: the notebook stopped (crashed, exited or ran out of time) before this call finished")),
)


def _reason_in(tr, reason: str) -> str:
    """A case's reason in the translator's language, where it is one of the grader's common reasons (the
    check-specific ones stay in English); a nested one ("result 0: …") is translated inside too."""
    for pattern, message in _REASONS:
        match = re.fullmatch(pattern, reason, flags=re.S)
        if match:
            parts = [_reason_in(tr, part) if message == "result {0}: {1}" and n == 1 else part
                     for n, part in enumerate(match.groups())]
            return tr(message).format(*parts)
    return reason


@functools.lru_cache(maxsize=None)
def _exercise_messages(language: str) -> dict[str, str]:
    """The assignments' catalog (notebook_translation's, read here without importing it: it imports grade)."""
    path = LOCALE_DIR / CATALOG_LANGUAGE[language] / "LC_MESSAGES" / "exercises.po"
    return po_messages(path) if path.is_file() else {}


@functools.lru_cache(maxsize=None)
def _hint_in(language: str, hint: str) -> str:
    """A hint (words of an English visible test) as the notebook of ``language`` words it: the translation of
    that visible test's message, from the assignments' catalog, its {fields} shown as "…"."""
    if language_of(language) == "en":
        return hint
    table = _exercise_messages(language_of(language))
    holding = sorted((message for message in table if hint in message), key=len)
    return re.sub(r"\{[^{}]*\}", "…", table[holding[0]]) if holding else hint


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
# Reading what the runner sent.


@dataclass
class Outcome:
    """One graded call as the runner reported it."""

    status: str  # "ok", "error" or "timeout"
    error: str | None
    returned: tuple  # the runner's description of the returned value
    after: tuple  # per positional argument: its description after the call, or ("skip",)
    forbidden: tuple[str, ...]  # operators of the softmax family the call reached (each was refused)
    extra: tuple  # what a check asked for beyond the returned value (translate's teacher-forced pass)

    @classmethod
    def from_message(cls, message: tuple) -> "Outcome":
        """("result", case id, status, error, returned, after, forbidden, extra) as the runner sends it."""
        _, _, status, error, returned, after, forbidden, extra = message
        return cls(str(status), None if error is None else str(error), returned, tuple(after),
                   tuple(str(f) for f in forbidden), tuple(extra))


def rebuild(described: Any) -> Any:
    """A value from the runner's description; raises ValueError for anything not acceptable as a result."""
    if not isinstance(described, tuple) or not described:
        raise ValueError("the result could not be read")
    kind = described[0]
    if kind == "tensor":
        _, dtype, shape, raw = described
        if dtype not in _ALLOWED_DTYPES or not isinstance(raw, bytes) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ValueError("the result could not be read")
        array = np.frombuffer(raw, dtype=np.dtype(dtype))
        if array.size != int(np.prod(shape, dtype=np.int64)):
            raise ValueError("the result could not be read")
        return torch.from_numpy(array.reshape(shape).copy())
    if kind == "seq":
        return tuple(rebuild(item) for item in described[1])
    if kind == "scalar":
        return described[1]
    if kind == "other":
        raise ValueError(f"expected tensors, got {described[1]}")
    raise ValueError("the result could not be read")


def shortcut_names(operators: tuple[str, ...]) -> str:
    """Operators of the family, as the student knows them."""
    names = []
    for op in operators:
        if "log_softmax" in op:
            name = "log_softmax (torch.log_softmax, F.log_softmax, Tensor.log_softmax or a relative)"
        elif "softmax" in op or "softmin" in op:
            name = "softmax (torch.softmax, F.softmax, Tensor.softmax, nn.Softmax or a relative)"
        elif "cosine" in op:
            name = "cosine similarity (F.cosine_similarity or a relative)"
        elif re.search(r"multi_head|transformer", op):
            name = "nn.MultiheadAttention (or a relative)"
        else:
            name = "F.scaled_dot_product_attention (or a relative)"
        if name not in names:
            names.append(name)
    return "; ".join(names) + f" [{', '.join(sorted(set(operators)))[:200]}]"


def judge_case(check: Check, case: Case, outcome: Outcome | None) -> CaseVerdict:
    hints = () if case.hidden else tuple(dict.fromkeys(hint for part, hint in check.hints if part in case.label))
    verdict = CaseVerdict(label=case.label, passed=False, hidden=case.hidden, hints=hints)
    if outcome is None:
        verdict.reason = "no result: the notebook stopped (crashed, exited or ran out of time) before this call finished"
        return verdict
    if outcome.forbidden:
        verdict.reason = FORBIDDEN_REASON + shortcut_names(outcome.forbidden) + ": write this step yourself"
        return verdict
    if outcome.status == "timeout":
        verdict.reason = f"the call did not finish: {outcome.error}"
        return verdict
    if outcome.status != "ok":
        error = (outcome.error or "").strip().rstrip(":")
        verdict.reason = f"the call raised {error}" + (" (the answer is not written yet)"
                                                       if error == "NotImplementedError" else "")
        return verdict
    try:
        got = rebuild(outcome.returned)
    except ValueError as problem:
        verdict.reason = str(problem)
        return verdict
    for position, arg in enumerate(case.args):
        if isinstance(arg, torch.Tensor):
            try:
                after = rebuild(outcome.after[position]) if position < len(outcome.after) else None
            except ValueError:
                after = None
            if not isinstance(after, torch.Tensor) or after.shape != arg.shape or not torch.equal(after, arg.to(after.dtype)):
                verdict.reason = f"argument {position} was modified in place; a graded function must not change its inputs"
                return verdict
    comparison = check.compare or compare
    expected = reference_output(check, case)
    if len(inspect.signature(comparison).parameters) >= 4:
        reason = comparison(got, expected, case, outcome.extra)
    else:
        reason = comparison(got, expected, case)
    verdict.reason, verdict.flag = str(reason), str(getattr(reason, "flag", ""))
    verdict.passed = not verdict.reason
    return verdict
