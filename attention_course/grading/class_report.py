"""The class at a glance: what the graded batch says about the class, as numbers.

:func:`gather` reads every graded student's saved results (and the gradebook's hand-graded answers) once;
the CSV report (:mod:`report`) and the report page (:mod:`report_page`) are both drawn from it. The
statistics here are plain functions of it:

- :func:`check_statistics`: for each graded test, how many passed, and its **discrimination**: the
  point-biserial correlation between passing the test (1 or 0) and the student's *rest score* (the
  autograded points of every other test). It says whether the test tells strong work from weak: near 0,
  passing it says nothing of the rest; below 0, the students who pass it do worse elsewhere (look at the
  test). Undefined (None) when everyone passed, nobody did, or the rest scores do not vary.
- :func:`failure_patterns`: a test's failure messages grouped by their wording with the numbers hidden
  ("expected 2.63, got 2.01" and "expected 0.41, got 0.07" are one mistake), most common first, with
  example students.
- :func:`timing`: the CPU and wall seconds of the submissions.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from attention_course.grading.grade import NotebookResult
from attention_course.grading.intake import notes_of, people as read_people, read_intake, students as all_students
from attention_course.grading.layout import Layout
from attention_course.grading.nbgrader_bridge import written_cells
from attention_course.grading.written import WrittenGrade, all_written

EXAMPLES = 3  # students named beside each failure pattern


@dataclass
class StudentRow:
    """One graded student, as the saved results and the gradebook have them."""

    student: str
    name: str = ""
    lms: str = ""
    lms_id: str = ""
    late: bool = False
    checks: dict[str, dict] = field(default_factory=dict)  # grade id -> {"passed", "points", "message"}
    written: list[WrittenGrade] = field(default_factory=list)  # the answers graded by hand, as formgrader has them
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    auto_score: float = 0.0
    auto_max: float = 0.0
    written_max: float = 0.0

    @property
    def score(self) -> float:
        return self.auto_score + sum(g.score for g in self.written)

    @property
    def max_score(self) -> float:
        return self.auto_max + self.written_max

    @property
    def awaiting(self) -> list[str]:
        return [g.label() for g in self.written if g.awaiting]


@dataclass
class ClassData:
    assignment: str
    rows: list[StudentRow]
    tests: dict[str, float]  # grade id -> points, in the order the notebooks have them
    written: dict[str, float]  # the hand-graded cells: grade id -> points


def gather(layout: Layout, assignment: str) -> ClassData:
    """Every student with a grade, in student order (those without saved results are left out)."""
    notebooks = layout.notebooks(assignment)
    intake, people = read_intake(layout, assignment), read_people(layout, assignment)
    written = {grade_id: points for nb in notebooks
               for grade_id, points in written_cells(layout.released(assignment, nb)).items()}
    hand = all_written(layout, assignment) if written else {}
    rows, tests = [], {}
    for student in all_students(layout, assignment):
        loaded = {nb: NotebookResult.load(p) for nb in notebooks
                  if (p := layout.results_path(assignment, student, nb)).is_file()}
        results = list(loaded.values())
        if not results:
            continue
        person = people.get(student)
        checks = {}
        for result in results:
            for grade_id, check in result.checks.items():
                tests.setdefault(grade_id, check["points"])
                checks[grade_id] = check
        rows.append(StudentRow(
            student, name=person.name if person else "", lms=person.lms if person else "",
            lms_id=person.lms_id if person else "", late=bool(person and person.late), checks=checks,
            written=hand.get(student, []),
            notes=notes_of(layout, assignment, student, notebooks, intake, results=loaded),
            seconds=sum(r.seconds for r in results), cpu_seconds=sum(r.cpu_seconds for r in results),
            auto_score=sum(r.score for r in results), auto_max=sum(r.max_score for r in results),
            written_max=sum(written.values())))
    return ClassData(assignment, rows, tests, written)


# -- statistics ------------------------------------------------------------------------------------------------


def point_biserial(passed: list[bool], rest: list[float]) -> float | None:
    """The point-biserial correlation of a 0/1 variable with a score (Pearson's r with the 0/1 variable);
    None where it is undefined (one of the two groups empty, or no spread in the scores)."""
    n = len(passed)
    ones = [r for p, r in zip(passed, rest) if p]
    zeros = [r for p, r in zip(passed, rest) if not p]
    if not ones or not zeros:
        return None
    mean = sum(rest) / n
    spread = math.sqrt(sum((r - mean) ** 2 for r in rest) / n)
    if spread == 0:
        return None
    share = len(ones) / n
    return (sum(ones) / len(ones) - sum(zeros) / len(zeros)) / spread * math.sqrt(share * (1 - share))


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)


def pattern_of(message: str) -> str:
    """A failure message with its numbers hidden ("…"): the shape of the mistake, not its values."""
    return _NUMBER.sub("…", message.strip())


@dataclass
class FailurePattern:
    pattern: str  # the message with its numbers hidden
    count: int
    students: list[str]  # the first few, in student order
    example: str  # one student's whole message


@dataclass
class CheckStatistics:
    grade_id: str
    points: float
    graded: int  # students with this test graded
    passed: int
    discrimination: float | None
    failures: list[FailurePattern]

    @property
    def pass_rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


def failure_patterns(rows: list[StudentRow], grade_id: str) -> list[FailurePattern]:
    """The failures of one test, grouped by :func:`pattern_of`, most common first (then by wording)."""
    groups: dict[str, FailurePattern] = {}
    for row in rows:
        check = row.checks.get(grade_id)
        if check is None or check["passed"]:
            continue
        message = check.get("message") or "failed"
        found = groups.setdefault(pattern_of(message), FailurePattern(pattern_of(message), 0, [], message))
        found.count += 1
        if len(found.students) < EXAMPLES:
            found.students.append(row.student)
    return sorted(groups.values(), key=lambda f: (-f.count, f.pattern))


def check_statistics(data: ClassData) -> list[CheckStatistics]:
    """Pass rate, discrimination and failure patterns of every graded test, in the notebooks' order."""
    statistics = []
    for grade_id, points in data.tests.items():
        graded = [row for row in data.rows if grade_id in row.checks]
        passed = [bool(row.checks[grade_id]["passed"]) for row in graded]
        rest = [row.auto_score - (points if ok else 0.0) for row, ok in zip(graded, passed)]
        statistics.append(CheckStatistics(grade_id, points, len(graded), sum(passed),
                                          point_biserial(passed, rest), failure_patterns(data.rows, grade_id)))
    return statistics


@dataclass
class Timing:
    median_cpu: float
    p90_cpu: float
    max_cpu: float
    median_wall: float
    max_wall: float
    slowest: list[tuple[str, float]]  # (student, CPU seconds), the slowest first


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def timing(rows: list[StudentRow], slowest: int = 5) -> Timing:
    cpu = [row.cpu_seconds for row in rows]
    wall = [row.seconds for row in rows]
    ranked = sorted(rows, key=lambda row: (-row.cpu_seconds, row.student))[:slowest]
    return Timing(_quantile(cpu, 0.5), _quantile(cpu, 0.9), max(cpu, default=0.0), _quantile(wall, 0.5),
                  max(wall, default=0.0), [(row.student, row.cpu_seconds) for row in ranked])


def score_counts(rows: list[StudentRow]) -> Counter:
    """{score: how many students} (scores as the gradebook has them: hand-graded points given so far included)."""
    return Counter(round(row.score, 6) for row in rows)
