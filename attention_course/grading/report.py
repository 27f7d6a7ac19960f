"""The report: ``reports/<assignment>.csv``, every graded student on one line, for the instructor's
spreadsheet (written after each batch)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from attention_course.grading.grade import NotebookResult
from attention_course.grading.intake import notes_of, people as read_people, read_intake, students as all_students
from attention_course.grading.layout import Layout, write_whole
from attention_course.grading.nbgrader_bridge import written_cells
from attention_course.grading.written import all_written

REPORT_FIELDS = ("student", "name", "lms", "lms_id", "late", "score", "max_score")


def write_report(layout: Layout, assignment: str) -> Path:
    """``reports/<assignment>.csv``: every student with a grade, each test's points, the notes and the time.

    An assignment with answers graded by hand also has a column for each (the points formgrader's manual
    grade gave, "awaiting" while it has none, "regrade" when its answer changed since), the points of
    those in the score, and ``awaiting_manual``: what still awaits a manual grade in formgrader."""
    notebooks = layout.notebooks(assignment)
    intake, people = read_intake(layout, assignment), read_people(layout, assignment)
    written = {grade_id: points for nb in notebooks for grade_id, points in written_cells(layout.released(assignment, nb)).items()}
    hand = all_written(layout, assignment) if written else {}
    rows, tests = [], {}
    for student in all_students(layout, assignment):
        loaded = {nb: NotebookResult.load(p) for nb in notebooks
                  if (p := layout.results_path(assignment, student, nb)).is_file()}
        results = list(loaded.values())
        if not results:
            continue
        person = people.get(student)
        points = {}
        for result in results:
            for grade_id, check in result.checks.items():
                tests.setdefault(grade_id, check["points"])
                points[grade_id] = f"{check['points'] if check['passed'] else 0:g}"
        given = hand.get(student, [])
        for grade in given:
            points[grade.grade_id] = ("awaiting" if grade.manual is None else "regrade") if grade.awaiting else f"{grade.score:g}"
        extra = {"awaiting_manual": "; ".join(g.label() for g in given if g.awaiting)} if written else {}
        rows.append({"student": student, "name": person.name if person else "", "lms": person.lms if person else "",
                     "lms_id": person.lms_id if person else "", "late": "yes" if person and person.late else "",
                     "score": f"{sum(r.score for r in results) + sum(g.score for g in given):g}",
                     "max_score": f"{sum(r.max_score for r in results) + sum(written.values()):g}",
                     **points, **extra,
                     "notes": " | ".join(notes_of(layout, assignment, student, notebooks, intake, results=loaded)),
                     "seconds": f"{sum(r.seconds for r in results):.1f}",
                     "cpu_seconds": f"{sum(r.cpu_seconds for r in results):.1f}"})
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*REPORT_FIELDS, *tests, *written,
                                             *(["awaiting_manual"] if written else []), "notes", "seconds", "cpu_seconds"])
    writer.writeheader()
    writer.writerows(rows)
    path = layout.root / "reports" / f"{assignment}.csv"
    write_whole(path, out.getvalue(), encoding="utf-8-sig")  # (the BOM: spreadsheets then read UTF-8)
    return path
