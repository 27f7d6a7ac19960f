"""Answers graded by hand (written answers, free-form code, tasks): what formgrader holds of them, and
whether each awaits a (new) manual grade after a record.

nbgrader's own autograde marks every cell with a manual score for review on every run; here an answer
graded by hand awaits a new grade only when it changed since (a resubmission), or was already marked."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from attention_course.grading.gradebook import each_submission, has_gradebook, open_gradebook
from attention_course.grading.layout import Layout, write_json
from attention_course.grading.nbgrader_bridge import written_answers


@dataclass
class WrittenGrade:
    """A hand-graded cell of one submission (a written answer, a free-form code answer, a task), as the
    gradebook holds it: formgrader's manual score, and whether it awaits a (new) manual grade."""

    notebook: str
    grade_id: str
    points: float
    score: float  # nbgrader's: the manual score if given, else the auto score (0 for an unanswered cell), else 0
    manual: float | None
    awaiting: bool  # nbgrader's needs_manual_grade

    def label(self) -> str:
        if self.manual is None:
            return f"{self.grade_id} ({self.points:g} points)"
        return f"{self.grade_id} ({self.points:g} points; its grade of {self.manual:g} is marked for regrading)"


def written_names(notebook) -> set[str]:
    """The hand-graded cells of a gradebook notebook (``nbgrader.api.Notebook``): graded answer cells and tasks."""
    answers = {cell.name for cell in notebook.solution_cells}
    return {cell.name for cell in notebook.grade_cells if cell.name in answers} | {cell.name for cell in notebook.task_cells}


def written_of(submission) -> list[WrittenGrade]:
    """The hand-graded cells of a gradebook submission (``nbgrader.api.SubmittedAssignment``)."""
    found = []
    for notebook in sorted(submission.notebooks, key=lambda n: n.name):
        names = written_names(notebook.notebook)
        for grade in sorted(notebook.grades, key=lambda g: g.name):
            if grade.name in names:
                found.append(WrittenGrade(notebook.name, grade.name, float(grade.max_score or 0), float(grade.score or 0),
                                          None if grade.manual_score is None else float(grade.manual_score),
                                          bool(grade.needs_manual_grade)))
    return found


def written_grades(layout: Layout, assignment: str, student: str, gradebook=None) -> list[WrittenGrade]:
    """The hand-graded cells of the student's recorded submission, as the gradebook holds them (formgrader's
    scores and comments); empty if there is no recorded submission or nothing is graded by hand.
    ``gradebook``: an open one to read from (else the course's is opened)."""
    from nbgrader.api import MissingEntry

    if gradebook is None:
        if not has_gradebook(layout.root):
            return []
        with open_gradebook(layout.root) as opened:
            return written_grades(layout, assignment, student, opened)
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return []
    return written_of(submission)


def all_written(layout: Layout, assignment: str) -> dict[str, list[WrittenGrade]]:
    """{student: their hand-graded cells} of every recorded submission of ``assignment``."""
    return each_submission(layout.root, assignment, written_of)


def _store(layout: Layout, assignment: str, student: str) -> Path:
    """{notebook: {grade id: digest}}: the hand-graded answers as they were when last recorded."""
    return layout.results_dir / assignment / student / ".written-answers.json"


def settle_written(layout: Layout, gradebook, assignment: str, student: str, released: dict,
                   before: dict[tuple[str, str], bool], flags: list[str]) -> None:
    """After a record: whether each hand-graded answer awaits a manual grade. One never graded by hand
    awaits one if answered (nbgrader: no auto score), not if left as the release's stub (0, "No response.").
    One graded by hand keeps its manual score and comment, and awaits no new grade while its answer is the
    one graded (nbgrader's autograde would mark it for review on every run); an answer that changed since
    (a resubmission), or whose grade was already marked for regrading, is marked for regrading (and said in
    ``flags``). ``before``: {(notebook, grade id): needs_manual_grade} of the cells with a manual score
    before the record. The caller commits."""
    from nbgrader.api import MissingEntry

    store = _store(layout, assignment, student)
    try:
        previous = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else {}
    except ValueError:
        previous = {}
    folder = layout.submission_folder(assignment, student)
    current = {nb: written_answers(folder / f"{nb}.ipynb", notebook) for nb, notebook in released.items()}
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return
    for notebook in submission.notebooks:
        names = written_names(notebook.notebook)
        for grade in notebook.grades:
            if grade.name not in names:
                continue
            if grade.manual_score is None:
                grade.needs_manual_grade = grade.auto_score is None
                continue
            key = (notebook.name, grade.name)
            changed = (previous.get(notebook.name) or {}).get(grade.name) != current[notebook.name].get(grade.name)
            grade.needs_manual_grade = bool(before.get(key, True) or changed)
            if changed and not before.get(key, True):
                flags.append(f"{notebook.name}: written answer {grade.name} changed since it was graded "
                             f"by hand ({grade.manual_score:g} of {grade.max_score:g} points): regrade "
                             "it in formgrader")
    write_json(store, current)
