"""Export: the gradebook's grades in the form each platform imports (nbgrader's CSV, Moodle's grading
worksheet, Canvas's gradebook), never a grade without its answers graded by hand.

Every export also carries each person's course total over every graded assignment, the people joined across
assignments as :mod:`people` says (Moodle's participant id is one per assignment), in columns the platform's
import does not read: nbgrader's CSV ends with :data:`NBGRADER_COURSE_COLUMNS`, Moodle's worksheet with
:data:`lms.MOODLE_TOTAL_COLUMNS`, Canvas's gradebook with :data:`lms.CANVAS_TOTAL_COLUMN`. A grade itself is
never changed by the join.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from attention_course.grading import lms
from attention_course.grading.errors import CourseError
from attention_course.grading.gradebook import has_gradebook, open_gradebook
from attention_course.grading.intake import people as read_people, roster_table
from attention_course.grading.layout import Layout, write_whole
from attention_course.grading.people import course_totals, join
from attention_course.grading.written import written_names, written_of

EXPORT_FORMATS = ("nbgrader", "moodle", "canvas")
NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                    "raw_score", "late_submission_penalty", "score", "max_score"]
# After nbgrader's own columns: the person the row's student is (the same in every assignment they are joined
# in), their course total and its maximum (nbgrader points), and what to know of that total.
NBGRADER_COURSE_COLUMNS = ["person", "course_score", "course_max_score", "course_note"]


@dataclass
class Exported:
    """What :func:`export_grades` wrote, and what the instructor should read beside it (one line each)."""

    path: Path
    left_out: list[str]  # who is not in the file, and why
    course: list[str]  # what the course totals say: who counts 0 where, whose total is blank and why, joins to check


def gradebook_grades(layout: Layout) -> dict[str, list[lms.Grade]]:
    """{assignment: the gradebook's grade of every submission} for the assignments with submissions; the
    gradebook's scores, so a score changed by hand in formgrader (a written answer's above all) is the one
    exported. Each grade lists the hand-graded answers that still await a manual grade."""

    if not has_gradebook(layout.root):
        return {}
    grades: dict[str, list[lms.Grade]] = {}
    with open_gradebook(layout.root) as gradebook:
        for assignment in gradebook.assignments:
            people = read_people(layout, assignment.name)
            by_hand = any(written_names(notebook) for notebook in assignment.notebooks)
            for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                grades.setdefault(assignment.name, []).append(lms.Grade(
                    submission.student.id, after_penalty(submission), float(assignment.max_score),
                    people.get(submission.student.id),
                    awaiting=tuple(g.grade_id for g in written_of(submission) if g.awaiting) if by_hand else ()))
    return grades


def export(layout: Layout, destination: Path, fmt: str = "nbgrader", assignment: str | None = None,
           leave_out_ungraded: bool = False) -> tuple[Path, list[str]]:
    """Write the grades for an LMS to import; returns the file and what was left out (one line each). See
    :func:`export_grades`, which also returns what the course totals say."""
    exported = export_grades(layout, destination, fmt, assignment, leave_out_ungraded)
    return exported.path, exported.left_out


def export_grades(layout: Layout, destination: Path, fmt: str = "nbgrader", assignment: str | None = None,
                  leave_out_ungraded: bool = False) -> Exported:
    """Write the grades for an LMS to import, each with its person's course total (see the module's docstring).

    A grade is never exported without its written answers: while any answer graded by hand awaits a
    manual grade (never graded, or marked for regrading after a resubmission), the export is refused, naming
    who and what; with ``leave_out_ungraded`` the others are exported and those students are left out (and
    listed). The course total spans every graded assignment, also with ``assignment`` (Moodle takes one
    worksheet per assignment, and its total is still the course's)."""
    if fmt not in EXPORT_FORMATS:
        raise CourseError(f"unknown format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}")
    if destination.is_dir():
        raise CourseError(f"{destination} is a folder: give a file name, e.g. {destination / 'grades.csv'}")
    if not destination.parent.is_dir():
        raise CourseError(f"no folder {destination.parent} to write {destination.name} in")
    grades = everything = gradebook_grades(layout)
    if assignment is not None:
        if assignment not in grades:
            raise CourseError(f"nothing graded for {assignment!r}; graded: {', '.join(grades) or 'nothing yet'}")
        grades = {assignment: grades[assignment]}
    if not grades:
        raise CourseError(f"nothing graded yet in {layout.root}: run `attention-course grade` first")
    ungraded = [(name, g) for name, assignment_grades in grades.items() for g in assignment_grades if g.awaiting]
    if ungraded and not leave_out_ungraded:
        named = [f"{g.student} ({name}: {', '.join(g.awaiting)})" for name, g in ungraded]
        listed = ", ".join(named[:10]) + (f" and {len(named) - 10} more" if len(named) > 10 else "")
        raise CourseError(f"not exported: {len(named)} grade{'s' if len(named) != 1 else ''} would lack written "
                          f"answers that await a manual grade: {listed}. Grade them in formgrader (Manual "
                          "Grading), then export again; or add --leave-out-ungraded to export the others without "
                          "these students")
    skipped: list[str] = [f"{g.student} ({name}: written answers await a manual grade: {', '.join(g.awaiting)})"
                          for name, g in ungraded]
    grades = {name: [g for g in assignment_grades if not g.awaiting] for name, assignment_grades in grades.items()}
    everything = dict(sorted(everything.items()))  # the course's order (as `release` lists the assignments)
    people = join({name: {g.student: g.person for g in assignment_grades} for name, assignment_grades in everything.items()})
    totals, course = course_totals(everything, people)
    if fmt == "moodle":
        if len(grades) > 1:
            raise CourseError("Moodle takes one grading worksheet per assignment: add --assignment, one of "
                              + ", ".join(grades))
        [(name, assignment_grades)] = grades.items()
        text, left_out = lms.moodle_worksheet(assignment_grades, roster_table(layout, name), totals)
        skipped += left_out
    elif fmt == "canvas":
        if not any(g.student.startswith("canvas-") for assignment_grades in grades.values() for g in assignment_grades):
            graded = sorted({g.student for assignment_grades in grades.values() for g in assignment_grades})
            raise CourseError(
                f"not exported: none of the {len(graded)} graded students came from Canvas (they were graded from "
                f"{layout.root / 'submitted'}, e.g. {graded[0] if graded else '?'}), so a Canvas gradebook would have no "
                "one in it. Grade a Canvas submissions download instead (`attention-course grade ASSIGNMENT --zip "
                "submissions.zip --roster gradebook-export.csv`), or export with `--format nbgrader`")
        identities: dict[str, lms.Student] = {}
        for name in grades:
            identities.update(read_people(layout, name))
        tables = [t for t in (roster_table(layout, name) for name in grades) if t and t[0] == "canvas"]
        text, left_out = lms.canvas_gradebook(grades, identities, tables[0] if tables else None, totals)
        skipped += left_out
    else:
        text = _nbgrader_csv(layout, grades, totals)
    write_whole(destination, text)
    return Exported(destination, skipped, course)


def _nbgrader_csv(layout: Layout, grades: dict[str, list[lms.Grade]], totals: dict[str, lms.CourseTotal]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=NBGRADER_COLUMNS + NBGRADER_COURSE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    with open_gradebook(layout.root) as gradebook:
        for name in grades:
            assignment = gradebook.find_assignment(name)
            included = {g.student for g in grades[name]}
            for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                student = submission.student
                if student.id not in included:
                    continue
                writer.writerow({"assignment": name, "duedate": assignment.duedate or "",
                                 "timestamp": submission.timestamp or "", "student_id": student.id,
                                 "last_name": student.last_name or "", "first_name": student.first_name or "",
                                 "email": student.email or "", "raw_score": float(submission.score),
                                 "late_submission_penalty": float(submission.late_submission_penalty or 0),
                                 "score": after_penalty(submission), "max_score": float(assignment.max_score),
                                 **dict(zip(NBGRADER_COURSE_COLUMNS, [totals[student.id].person, *totals[student.id].cells()]))})
    return out.getvalue()


def after_penalty(submission) -> float:
    """A submission's score as nbgrader exports it: less its late penalty (if the course sets one), never below 0."""
    return max(0.0, float(submission.score) - float(submission.late_submission_penalty or 0))
