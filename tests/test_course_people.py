"""One person across a course's assignments, and their course total in every export.

Moodle's participant id is one per assignment, so the same student is a different nbgrader student in each
assignment; the participant lists' e-mail addresses join them into one person, and every export carries that
person's course total in a column the platform's import does not read. Canvas's user id is the same in every
assignment, and joins without a roster. Nothing is graded here: the gradebook is written with nbgrader's own
API, as the recorder leaves it, and the intakes are read from participant lists and downloads as `grade` reads
them.
"""

from __future__ import annotations

import csv
import io
import re
import warnings
import zipfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from attention_course.grading import lms
from attention_course.grading.course import Course
from attention_course.grading.export import export_grades
from attention_course.grading.gradebook import COURSE_ID, gradebook_url
from attention_course.grading.people import course_totals, join, person_keys

# Canvas's importer drops the columns whose titles contain these before it reads assignments
# (GradebookImporter::NON_ASSIGNMENT_COLUMN_HEADERS); Moodle's worksheet upload reads only these columns
# (and the feedback plugins'), by their exact titles.
CANVAS_READ_ONLY = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade")
MOODLE_READ = {"Identifier", "Grade", "Last modified (grade)", "Feedback comments"}


def _gradebook(course: Course, assignments: dict[str, tuple[float, dict[str, float]]]) -> None:
    """Each assignment with one test cell of ``points``, and each student's score on it, as recorded."""
    from sqlalchemy.exc import SAWarning

    with warnings.catch_warnings(), Gradebook(gradebook_url(course.root), COURSE_ID) as gradebook:
        warnings.filterwarnings("ignore", category=SAWarning, module=r"nbgrader\.")  # nbgrader's "not in session"
        for assignment, (points, scores) in assignments.items():
            gradebook.update_or_create_assignment(assignment)
            gradebook.update_or_create_notebook(assignment, assignment)
            gradebook.update_or_create_grade_cell("test-all", assignment, assignment, max_score=points, cell_type="code")
            for student, score in scores.items():
                gradebook.update_or_create_student(student)
                gradebook.update_or_create_submission(assignment, student)
                gradebook.find_grade("test-all", assignment, assignment, student).auto_score = score
        gradebook.db.commit()


def _worksheet(path: Path, participants: list[tuple[str, str, str]], maximum: float) -> Path:
    """Moodle's grading worksheet as downloaded: (participant id, full name, e-mail address) a row."""
    with path.open("w", newline="", encoding="utf-8-sig") as out:
        writer = csv.writer(out)
        writer.writerow(["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                         "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
                         "Feedback comments"])
        for participant, name, email in participants:
            writer.writerow([f"Participant {participant}", name, email, "Submitted for grading", "", f"{maximum:.2f}",
                             "Yes", "Monday, 30 November 2026, 9:00 AM", "-", ""])
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


# -- a Moodle course of two assignments --------------------------------------------------------------------

SOFT_HARD = [("500001", "Jane Doe", "jane.doe@example.edu"), ("500002", "Li Lei", "li.lei@example.edu"),
             ("500003", "Sam Solo", "")]
THREE_STAGES = [("731001", "Jane Q. Doe", "Jane.Doe@Example.edu"), ("731003", "Sam Solo", "")]  # Li Lei enrolled elsewhere
SCORES = {"soft-hard": (10.0, {"moodle-500001": 7.0, "moodle-500002": 10.0, "moodle-500003": 5.0}),
          "three-stages": (20.0, {"moodle-731001": 15.0, "moodle-731003": 12.0})}


@pytest.fixture(scope="module")
def moodle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("moodle-people")
    course = Course(folder / "course")
    course.root.mkdir()
    _gradebook(course, SCORES)
    course.import_roster(_worksheet(folder / "soft-hard.csv", SOFT_HARD, 100), "soft-hard")
    course.import_roster(_worksheet(folder / "three-stages.csv", THREE_STAGES, 20), "three-stages")
    exports = {"nbgrader": export_grades(course.layout, folder / "nbgrader.csv", "nbgrader")}
    for assignment in SCORES:
        exports[assignment] = export_grades(course.layout, folder / f"{assignment}-moodle.csv", "moodle", assignment)
    return course, exports


def test_one_person_across_moodle_assignments_and_the_sum_in_nbgraders_csv(moodle):
    course, exports = moodle
    assert person_keys(course.layout, list(SCORES)) == {
        "moodle-500001": "email:jane.doe@example.edu", "moodle-731001": "email:jane.doe@example.edu",
        "moodle-500002": "email:li.lei@example.edu",
        "moodle-500003": "moodle-500003", "moodle-731003": "moodle-731003"}  # no e-mail: kept per assignment
    rows = {(r["assignment"], r["student_id"]): r for r in _rows(exports["nbgrader"].path)}
    assert set(rows) == {(a, s) for a, (_, scores) in SCORES.items() for s in scores}
    for (assignment, student), row in rows.items():  # every grade stays exactly what it was
        assert float(row["score"]) == SCORES[assignment][1][student] and float(row["max_score"]) == SCORES[assignment][0]
        assert row["course_max_score"] == "30.00"
    for student in ("moodle-500001", "moodle-731001"):
        row = rows[("soft-hard" if student == "moodle-500001" else "three-stages", student)]
        assert (row["person"], row["course_score"], row["course_note"]) == ("email:jane.doe@example.edu", "22.00", "")
    li = rows[("soft-hard", "moodle-500002")]
    assert (li["course_score"], li["course_note"]) == (
        "10.00", "no grade in three-stages: counted 0 (unless they are one of its 1 student(s) kept per assignment)")


def test_the_moodle_worksheet_carries_the_course_total_in_columns_the_upload_ignores(moodle):
    _, exports = moodle
    soft_hard = _rows(exports["soft-hard"].path)
    header = list(soft_hard[0])
    assert header[:10] == ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                           "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
                           "Feedback comments"]  # the downloaded worksheet, as it was
    assert header[10:] == lms.MOODLE_TOTAL_COLUMNS and not set(header[10:]) & MOODLE_READ
    total, maximum, note = lms.MOODLE_TOTAL_COLUMNS
    by_id = {row["Identifier"]: row for row in soft_hard}
    assert by_id["Participant 500001"]["Grade"] == "70.00"  # 7 of 10, scaled to the worksheet's 100, as before
    assert (by_id["Participant 500001"][total], by_id["Participant 500001"][maximum]) == ("22.00", "30.00")
    assert by_id["Participant 500002"][total] == "10.00" and "counted 0" in by_id["Participant 500002"][note]
    three = {row["Identifier"]: row for row in _rows(exports["three-stages"].path)}
    assert three["Participant 731001"]["Grade"] == "15.00" and three["Participant 731001"][total] == "22.00"


def test_a_student_without_an_e_mail_stays_separate_and_every_export_says_so(moodle):
    _, exports = moodle
    for exported in exports.values():
        assert exported.left_out == []  # nobody is left out of the file: the total is what is missing
        kept = [line for line in exported.course if line.startswith("kept per assignment")]
        assert len(kept) == 1 and "moodle-500003 (Sam Solo, soft-hard)" in kept[0] and "moodle-731003" in kept[0]
        assert "--roster" in kept[0]
        assert any(line.startswith("no grade in three-stages, counted 0") and "Li Lei (email:li.lei@example.edu)" in line
                   for line in exported.course)
        assert any("named differently" in line and "'Jane Doe' in soft-hard" in line and "'Jane Q. Doe' in three-stages"
                   in line for line in exported.course)
    sam = next(r for r in _rows(exports["nbgrader"].path) if r["student_id"] == "moodle-500003")
    assert sam["course_score"] == "" and "kept per assignment (no e-mail address or username on any roster)" in sam["course_note"]
    worksheet = {row["Identifier"]: row for row in _rows(exports["soft-hard"].path)}
    assert worksheet["Participant 500003"]["Grade"] == "50.00"
    assert worksheet["Participant 500003"][lms.MOODLE_TOTAL_COLUMNS[0]] == ""
    assert "kept per assignment" in worksheet["Participant 500003"][lms.MOODLE_TOTAL_COLUMNS[2]]


def test_one_assignment_needs_no_roster_and_the_worksheet_made_without_one_carries_the_total_too(tmp_path):
    course = Course(tmp_path / "course")
    course.root.mkdir()
    _gradebook(course, {"soft-hard": (10.0, {"moodle-500001": 6.5})})
    with zipfile.ZipFile(tmp_path / "download.zip", "w") as bundle:
        bundle.writestr("Jane Doe_500001_assignsubmission_file/soft-hard.ipynb", b"{}")
    course.import_zip(tmp_path / "download.zip", "soft-hard")
    exported = export_grades(course.layout, tmp_path / "worksheet.csv", "moodle", "soft-hard")
    [row] = _rows(exported.path)
    assert list(row) == lms.MOODLE_COLUMNS + lms.MOODLE_TOTAL_COLUMNS
    assert (row["Identifier"], row["Grade"]) == ("Participant 500001", "6.50")
    assert [row[c] for c in lms.MOODLE_TOTAL_COLUMNS] == ["6.50", "10.00", ""]  # nothing to join, nothing to say
    assert exported.course == [] and exported.left_out == []


# -- a Canvas course of two assignments --------------------------------------------------------------------

def _canvas_download(path: Path, students: list[tuple[str, str]], first_attachment: int) -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        for number, (name, user) in enumerate(students):
            bundle.writestr(f"{name}_{user}_{first_attachment + number}_notebook.ipynb", b"{}")
    return path


def test_canvas_user_ids_join_without_a_roster_and_the_total_is_a_column_canvas_drops(tmp_path):
    course = Course(tmp_path / "course")
    course.root.mkdir()
    _gradebook(course, {"soft-hard": (10.0, {"canvas-4711": 8.0, "canvas-4712": 6.0}),
                        "three-stages": (20.0, {"canvas-4711": 19.5})})
    course.import_zip(_canvas_download(tmp_path / "a.zip", [("doejane", "4711"), ("müllerzoë", "4712")], 9000), "soft-hard")
    course.import_zip(_canvas_download(tmp_path / "b.zip", [("doejane", "4711")], 9500), "three-stages")
    exported = export_grades(course.layout, tmp_path / "canvas.csv", "canvas")
    rows = list(csv.reader(io.StringIO(exported.path.read_text(encoding="utf-8"))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "soft-hard", "three-stages",
                       lms.CANVAS_TOTAL_COLUMN]
    assert CANVAS_READ_ONLY.search(lms.CANVAS_TOTAL_COLUMN) and "Override" not in lms.CANVAS_TOTAL_COLUMN
    assert rows[1] == ["Points Possible", "", "", "", "", "10.00", "20.00", "30.00"]
    by_id = {row[1]: row for row in rows[2:]}
    assert by_id["4711"][5:] == ["8.00", "19.50", "27.50"]  # one person, both grades as they were, their sum
    assert by_id["4712"][5:] == ["6.00", "", "6.00"]
    assert exported.left_out == []
    assert "no grade in three-stages, counted 0 in the course total: müllerzoë (canvas-4712)" in exported.course
    nbgrader = _rows(export_grades(course.layout, tmp_path / "nbgrader.csv").path)
    assert {(r["student_id"], r["person"], r["course_score"]) for r in nbgrader} == {
        ("canvas-4711", "canvas-4711", "27.50"), ("canvas-4712", "canvas-4712", "6.00")}


# -- the join's rules, on what the intakes say ------------------------------------------------------------

def _moodle(participant: str, name: str = "", email: str = "", username: str = "") -> lms.Student:
    return lms.Student(key=f"moodle-{participant}", lms="moodle", lms_id=participant, name=name, email=email,
                       username=username)


def test_an_address_two_participants_share_joins_nobody():
    people = join({"soft-hard": {"moodle-1": _moodle("1", "Pat", "family@example.edu"),
                                 "moodle-2": _moodle("2", "Kim", "family@example.edu")},
                   "three-stages": {"moodle-9": _moodle("9", "Pat", "family@example.edu")}})
    assert people.of == {"moodle-1": "moodle-1", "moodle-2": "moodle-2", "moodle-9": "moodle-9"}
    assert all(person.apart for person in people.persons.values())
    assert people.notes == ["soft-hard: moodle-1 and moodle-2 share the e-mail family@example.edu, which therefore joins "
                            "none of them to their other assignments"]
    assert "shared with another student" in people.persons["moodle-9"].apart_because


def test_a_username_joins_where_the_worksheet_shows_it_and_a_contradiction_joins_nobody():
    people = join({"a": {"moodle-1": _moodle("1", "Ann", username="ann")},
                   "b": {"moodle-7": _moodle("7", "Ann", email="ann@example.edu", username="ANN")}})
    assert people.of == {"moodle-1": "email:ann@example.edu", "moodle-7": "email:ann@example.edu"}
    chained = join({"a": {"moodle-1": _moodle("1", email="x@example.edu"), "moodle-2": _moodle("2", email="y@example.edu")},
                    "b": {"moodle-5": _moodle("5", email="x@example.edu", username="u")},
                    "c": {"moodle-6": _moodle("6", email="y@example.edu", username="u")}})
    assert set(chained.of.values()) == {"moodle-1", "moodle-2", "moodle-5", "moodle-6"}
    assert any("a has more than one of them" in note for note in chained.notes)


def test_a_total_waits_for_the_manual_grades_and_one_assignment_needs_no_join():
    people = join({"a": {"moodle-1": _moodle("1", "Ann", "ann@example.edu"), "moodle-3": _moodle("3", "Bo")},
                   "b": {"moodle-2": _moodle("2", "Ann", "ann@example.edu")}})
    grades = {"a": [lms.Grade("moodle-1", 4, 10), lms.Grade("moodle-3", 9, 10)],
              "b": [lms.Grade("moodle-2", 5, 10, awaiting=("answer-why",))]}
    totals, said = course_totals(grades, people)
    assert totals["moodle-1"] is totals["moodle-2"] and totals["moodle-1"].score is None
    assert "await a manual grade in b" in totals["moodle-1"].note
    assert any(line.startswith("no course total while written answers await") for line in said)
    alone, _ = course_totals({"a": [lms.Grade("moodle-3", 9, 10)]}, join({"a": {"moodle-3": _moodle("3", "Bo")}}))
    assert alone["moodle-3"].cells() == ["9.00", "10.00", ""]  # one assignment: its grade is the course's


def test_the_export_command_prints_what_the_course_totals_say(moodle, tmp_path, capsys):
    from attention_course.grading.cli import main as cli

    course, _ = moodle
    (course.root / "nbgrader_config.py").touch()  # (a course as `release` leaves it has one)
    assert cli(["export", "--course", str(course.root), "--format", "moodle", "--assignment", "soft-hard",
                "--to", str(tmp_path / "worksheet.csv")]) == 0
    said = capsys.readouterr().out
    assert "each with its student's course total" in said
    assert "course total: kept per assignment" in said and "moodle-500003 (Sam Solo, soft-hard)" in said
    assert "course total: no grade in three-stages, counted 0" in said
