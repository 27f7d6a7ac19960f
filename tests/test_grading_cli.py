"""The instructor's commands, as an instructor types them: grade an LMS export, then feedback and export."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from attention_course.grading.course import student_from_lms_name
from grading_support import filled
from test_grading_soft_hard import CORRECT, answers

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name, student", [
    ("Jane Doe_123456_assignsubmission_file_/soft-hard.ipynb", "janedoe-123456"),
    ("Jane Doe_123456_assignsubmission_file_soft-hard.ipynb", "janedoe-123456"),
    ("doejane_12345_67890_soft-hard.ipynb", "doejane-12345"),
    ("doejane_LATE_12345_67890_soft-hard-1.ipynb", "doejane-12345"),
    ("alice/soft-hard.ipynb", "alice"),
])
def test_student_ids_come_from_moodle_and_canvas_file_names(name, student):
    assert student_from_lms_name(name) == student


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_course.grading.cli", *args],
                          capture_output=True, text=True, timeout=900)


def test_grade_an_lms_export_then_return_feedback_and_export_grades(tmp_path):
    released = nbformat.read(ROOT / "exercises" / "soft-hard" / "soft-hard.ipynb", as_version=4)
    export = tmp_path / "moodle-export.zip"
    with zipfile.ZipFile(export, "w") as bundle:
        bundle.writestr("Jane Doe_123456_assignsubmission_file_/soft-hard.ipynb",
                        nbformat.writes(filled(released, CORRECT)))
        bundle.writestr("Max Mustermann_654321_assignsubmission_file_/soft-hard (1).ipynb",
                        nbformat.writes(filled(released, answers(softmax="def softmax(scores, dim=-1):\n"
                                                                         "    e = scores.exp()\n"
                                                                         "    return e / e.sum(dim=dim, keepdim=True)"))))
        bundle.writestr("Jane Doe_123456_assignsubmission_file_/notes.txt", "not a notebook: ignored")
    course = tmp_path / "course"

    graded = _cli("grade", "soft-hard", "--course", str(course), "--zip", str(export), "--jobs", "2")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "imported 2 submissions" in graded.stdout
    lines = {line.split()[0]: line for line in graded.stdout.splitlines() if line.startswith(("janedoe", "maxmustermann"))}
    assert "10/10" in lines["janedoe-123456"]
    assert "6/10" in lines["maxmustermann-654321"]
    assert "grading soft-hard" in graded.stderr  # the progress bar

    feedback = _cli("feedback", "soft-hard", "--course", str(course))
    assert feedback.returncode == 0, feedback.stderr
    assert (course / "feedback" / "janedoe-123456" / "soft-hard" / "soft-hard.html").is_file()

    grades = tmp_path / "grades.csv"
    exported = _cli("export", "--course", str(course), "--to", str(grades))
    assert exported.returncode == 0, exported.stderr
    rows = grades.read_text().splitlines()
    assert any(row.startswith("soft-hard,") and "janedoe-123456" in row and ",10.0," in row for row in rows)
    assert any("maxmustermann-654321" in row and ",6.0," in row for row in rows)
