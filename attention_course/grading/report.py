"""The reports, written after each batch: ``reports/<assignment>.csv``, every graded student on one line,
for the instructor's spreadsheet; and the class report page (:mod:`report_page`) beside it."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from attention_course.grading.class_report import ClassData, gather
from attention_course.grading.layout import Layout, write_whole

REPORT_FIELDS = ("student", "name", "lms", "lms_id", "late", "score", "max_score")


def write_report(layout: Layout, assignment: str, data: ClassData | None = None) -> Path:
    """``reports/<assignment>.csv``: every student with a grade, each test's points, the notes and the time.

    An assignment with answers graded by hand also has a column for each (the points formgrader's manual
    grade gave, "awaiting" while it has none, "regrade" when its answer changed since), the points of
    those in the score, and ``awaiting_manual``: what still awaits a manual grade in formgrader.
    ``data``: the class as :func:`class_report.gather` read it, if the caller has it."""
    data = data if data is not None else gather(layout, assignment)
    written = data.written
    rows = []
    for row in data.rows:
        points = {grade_id: f"{check['points'] if check['passed'] else 0:g}" for grade_id, check in row.checks.items()}
        for grade in row.written:
            points[grade.grade_id] = ("awaiting" if grade.manual is None else "regrade") if grade.awaiting else f"{grade.score:g}"
        extra = {"awaiting_manual": "; ".join(row.awaiting)} if written else {}
        rows.append({"student": row.student, "name": row.name, "lms": row.lms, "lms_id": row.lms_id,
                     "late": "yes" if row.late else "", "score": f"{row.score:g}", "max_score": f"{row.max_score:g}",
                     **points, **extra, "notes": " | ".join(row.notes),
                     "seconds": f"{row.seconds:.1f}", "cpu_seconds": f"{row.cpu_seconds:.1f}"})
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*REPORT_FIELDS, *data.tests, *written,
                                             *(["awaiting_manual"] if written else []), "notes", "seconds", "cpu_seconds"])
    writer.writeheader()
    writer.writerows(rows)
    path = layout.root / "reports" / f"{assignment}.csv"
    write_whole(path, out.getvalue(), encoding="utf-8-sig")  # (the BOM: spreadsheets then read UTF-8)
    return path


def write_reports(layout: Layout, assignment: str, *, language: str | None = None, against: Path | None = None) -> Path:
    """Everything the instructor reads after a batch, from one reading of the class: the CSV above, and the
    report page ``reports/<assignment>/index.html`` with its CSV files (see :mod:`report_page`). Returns the page."""
    from attention_course.grading.report_page import write_report_page

    data = gather(layout, assignment)
    write_report(layout, assignment, data)
    return write_report_page(layout, assignment, data, language=language, against=against)
