"""What a regrade changed: who, by how much, in which test, and why.

A batch that grades a student again (``--force``, ``--reseed``, a changed submission, release or check)
keeps the student's previous results until the new ones are saved; :class:`Regrades` compares the two and
``grader/regrades/<assignment>.json`` keeps the comparison of the last batch, for the report
(:mod:`report_page`) and for ``attention-course report``. *Why* compares what each grade was made of
(:func:`fingerprints.parts`): the submitted notebooks, the release, the course seed, the grader's code. A
grade that changed though none of them did would break the course's first rule (a grade is a pure
function of the submission, the release and the seed): it is listed, and said loudly.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attention_course.grading.grade import NotebookResult
from attention_course.grading.layout import Layout, write_json

# The parts of a grade (fingerprints.parts), and what a change in each means, for the report.
WHY = {"submission": "the submission changed", "seed": "a new course seed (--reseed): new hidden cases",
       "release": "the release changed", "grader": "the grader's code changed (its checks among it)"}
SAME_INPUTS = "SAME SUBMISSION, RELEASE, SEED AND GRADER: a grade must not change so; please report it"
UNKNOWN = "unknown (the previous grade was made before the grader kept what it was made of)"


@dataclass
class CheckChange:
    grade_id: str
    before: float  # points earned
    after: float
    message: str  # the new result's message (why it fails now, or that it passes)


@dataclass
class StudentChange:
    student: str
    before: float
    after: float
    why: list[str]
    checks: list[CheckChange] = field(default_factory=list)

    @property
    def change(self) -> float:
        return self.after - self.before


@dataclass
class RegradeReport:
    assignment: str
    regraded: int = 0  # students graded again in the last batch
    changed: list[StudentChange] = field(default_factory=list)  # those whose points changed, by student

    @classmethod
    def load(cls, layout: Layout, assignment: str) -> "RegradeReport | None":
        path = path_of(layout, assignment)
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["assignment"], data["regraded"],
                   [StudentChange(**{**s, "checks": [CheckChange(**c) for c in s["checks"]]}) for s in data["changed"]])


def path_of(layout: Layout, assignment: str) -> Path:
    return layout.root / "grader" / "regrades" / f"{assignment}.json"


def _earned(results: list[NotebookResult]) -> dict[str, tuple[float, str]]:
    return {grade_id: (check["points"] if check["passed"] else 0.0, check.get("message", ""))
            for result in results for grade_id, check in result.checks.items()}


def compare(student: str, before: list[NotebookResult], after: list[NotebookResult]) -> StudentChange:
    """How ``student``'s grade changed from the results ``before`` to ``after`` (each test, and why)."""
    old, new = _earned(before), _earned(after)
    checks = [CheckChange(grade_id, old.get(grade_id, (0.0, ""))[0], points, message)
              for grade_id, (points, message) in new.items() if old.get(grade_id, (0.0, ""))[0] != points]
    checks += [CheckChange(grade_id, points, 0.0, "no longer graded") for grade_id, (points, _) in old.items()
               if grade_id not in new and points]
    made_before = [r.made_of for r in before]
    made_after = [r.made_of for r in after]
    if not all(made_before) or len(made_before) != len(made_after):
        why = [UNKNOWN]
    else:
        why = [text for part, text in WHY.items() if any(b.get(part) != a.get(part) for b, a in zip(made_before, made_after))]
    changed = sum(c.after - c.before for c in checks)
    if not why:
        why = [SAME_INPUTS] if changed or checks else []
    return StudentChange(student, sum(p for p, _ in old.values()), sum(p for p, _ in new.values()), why, checks)


class Regrades:
    """The batch's regrades: :meth:`keep` the previous results of a student about to be graded again, then
    :meth:`graded` with the new ones; :meth:`write` the comparison once the batch is done (threads may call
    ``keep`` and ``graded`` at once)."""

    def __init__(self, layout: Layout, assignment: str):
        self.layout, self.assignment = layout, assignment
        self._before: dict[str, list[NotebookResult]] = {}
        self._changes: dict[str, StudentChange] = {}
        self._lock = threading.Lock()

    def keep(self, student: str, paths: list[Path]) -> None:
        try:
            before = [NotebookResult.load(p) for p in paths if p.is_file()]
        except (OSError, ValueError, TypeError):
            return
        if before:
            with self._lock:
                self._before[student] = before

    def graded(self, student: str, after: list[NotebookResult]) -> None:
        with self._lock:
            before = self._before.pop(student, None)
        if before is not None:
            change = compare(student, before, after)
            with self._lock:
                self._changes[student] = change

    def write(self) -> RegradeReport:
        report = RegradeReport(self.assignment, len(self._changes),
                               [self._changes[s] for s in sorted(self._changes)
                                if self._changes[s].checks or self._changes[s].change])
        data = asdict(report)
        write_json(path_of(self.layout, self.assignment), data)
        return report
