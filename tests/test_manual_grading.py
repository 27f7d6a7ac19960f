"""Answers graded by hand, end to end, with real nbgrader, a real gradebook and the real sandbox.

A throwaway assignment (the course's soft-hard with one written answer worth 2 points, a markdown cell
that nbgrader grades by hand) is released and three students are graded: two who answered and one who
left the answer blank. Then scores and comments are entered in the gradebook as formgrader enters them,
one student resubmits a changed answer, and the class is graded again with a new seed. What an instructor
must be able to rely on:

- an answer nobody has graded is *awaiting* (never 0, never full points), and `grade` says how many and
  where to grade them; a blank answer is 0 ("No response."), as nbgrader has it;
- a manual score and its comment survive grading again, unless the answer changed since: then it is
  marked for regrading and said so;
- feedback shows the manual score and the comment (and no hidden test); nobody gets a page, and no export
  is written, with an answer still awaiting its grade (the export names who, or leaves them out on request);
- `release` verifies only the autograded points, and says that the written ones are not verified.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from attention_course.grading import cli
from attention_course.grading.checks import checks_for
from attention_course.grading.course import Course, CourseError
from attention_course.grading.nbgrader_bridge import COURSE_ID
from grading_support import grade_id, submit

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "soft-hard"
ANSWER = "why-temperature"  # the written answer's grade id
QUESTION = ("## 4. In your own words (2 points, graded by hand)\n\n"
            "Why does a very low temperature turn soft attention into hard attention?")
MODEL_ANSWER = ("### BEGIN SOLUTION\nDividing the scores by a small temperature magnifies their differences, so the "
                "softmax puts almost all of its weight on the largest score: a one-hot choice.\n### END SOLUTION")
ALICE, BOB, CAROL = "moodle-500001", "canvas-4711", "carol"  # a Moodle student, a Canvas student, a folder
COMMENT = "Right, and well put: the differences of the scores grow as the temperature falls."


def _with_written_answer(solutions: Path) -> Path:
    """A copy of the course's soft-hard solution with one written answer (2 points) at its end."""
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, solutions / ASSIGNMENT)
    path = solutions / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    question = nbformat.v4.new_markdown_cell(QUESTION)
    question.metadata["nbgrader"] = {"grade": False, "grade_id": "task-why-temperature", "locked": True,
                                     "schema_version": 3, "solution": False, "task": False}
    answer = nbformat.v4.new_markdown_cell(MODEL_ANSWER)
    answer.metadata["nbgrader"] = {"grade": True, "grade_id": ANSWER, "locked": False, "points": 2,
                                   "schema_version": 3, "solution": True, "task": False}
    notebook.cells += [question, answer]
    nbformat.write(notebook, path)
    return solutions


def _submission(released, solution, written: str | None):
    """The release with every code answer taken from the solution and ``written`` as the written answer
    (None: left as the release's stub)."""
    code = {grade_id(c): re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n?", "", c.source) for c in solution.cells
            if c.cell_type == "code" and (c.metadata.get("nbgrader") or {}).get("solution")}
    notebook = copy.deepcopy(released)
    for cell in notebook.cells:
        if grade_id(cell) in code:
            cell.source = code[grade_id(cell)]
        elif grade_id(cell) == ANSWER and written is not None:
            cell.source = written
    return notebook


def _grade(course: Course, *options: str) -> str:
    """`attention-course grade` as an instructor runs it; its printed summary."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = cli.main(["grade", ASSIGNMENT, "--course", str(course.root), "--jobs", "2", *options])
    assert status == 0, out.getvalue()
    return out.getvalue()


def _written(course: Course) -> dict[str, tuple]:
    """student -> (auto score, manual score, needs manual grade, comment) of the written answer, as stored."""
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        found = {}
        for student in (ALICE, BOB, CAROL):
            grade = gradebook.find_grade(ANSWER, ASSIGNMENT, ASSIGNMENT, student)
            comment = gradebook.find_comment(ANSWER, ASSIGNMENT, ASSIGNMENT, student)
            found[student] = (grade.auto_score, grade.manual_score, grade.needs_manual_grade, comment.comment)
        return found


def _formgrader(course: Course, student: str, score: float, comment: str | None = None) -> None:
    """What formgrader's Manual Grading does when the instructor saves a score and a comment
    (nbgrader/server_extensions/formgrader/apihandlers.py: GradeHandler.put, CommentHandler.put)."""
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        grade = gradebook.find_grade(ANSWER, ASSIGNMENT, ASSIGNMENT, student)
        grade.manual_score = score
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        if comment is not None:
            gradebook.find_comment(ANSWER, ASSIGNMENT, ASSIGNMENT, student).manual_comment = comment
        gradebook.db.commit()


def _report(course: Course) -> dict[str, dict[str, str]]:
    text = (course.root / "reports" / f"{ASSIGNMENT}.csv").read_text(encoding="utf-8-sig")
    return {row["student"]: row for row in csv.DictReader(io.StringIO(text))}


def _export(course: Course, fmt: str, **options) -> tuple[dict[str, dict[str, str]], list[str]]:
    path, skipped = course.export(course.root / f"{fmt}.csv", fmt, ASSIGNMENT, **options)
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    key = {"nbgrader": "student_id", "moodle": "Identifier", "canvas": "ID"}[fmt]
    return {row[key]: row for row in rows if row.get("Student") != "Points Possible"}, skipped


@pytest.fixture(scope="module")
def auto_points(graded) -> float:
    """The points of the assignment's test cells (the grader's checks for them)."""
    released = graded["course"].released(ASSIGNMENT, ASSIGNMENT)
    tests = {grade_id(c) for c in released.cells
             if (c.metadata.get("nbgrader") or {}).get("grade") and not c.metadata["nbgrader"].get("solution")}
    assert tests <= set(checks_for(ASSIGNMENT))
    return sum(check.points for g, check in checks_for(ASSIGNMENT).items() if g in tests)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("manual")
    course = Course(folder / "course", solutions=_with_written_answer(folder / "solutions"))
    course.generate(ASSIGNMENT)
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    solution = nbformat.read(course.solutions / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    roster = folder / "canvas-gradebook.csv"  # Canvas's gradebook export, for the Canvas student's identity
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,soft-hard (3301)\n"
                      "    Points Possible,,,,,12.00\n"
                      "\"Brown, Bob\",4711,S4711,bob,Section A,\n", encoding="utf-8")
    course.import_roster(roster, ASSIGNMENT)
    submit(course.root, ALICE, ASSIGNMENT, ASSIGNMENT, _submission(released, solution, "Small temperatures make "
                                                                   "the largest score dominate the softmax."))
    submit(course.root, BOB, ASSIGNMENT, ASSIGNMENT, _submission(released, solution, "Because it is colder."))
    submit(course.root, CAROL, ASSIGNMENT, ASSIGNMENT, _submission(released, solution, None))
    state = {"course": course, "first": _grade(course), "written_first": _written(course),
             "report_first": _report(course)}
    refused = {}
    for fmt in Course.EXPORT_FORMATS:
        with pytest.raises(CourseError) as refusal:
            course.export(folder / f"refused-{fmt}.csv", fmt, ASSIGNMENT)
        refused[fmt] = (str(refusal.value), (folder / f"refused-{fmt}.csv").exists())
    state["refused"] = refused
    state["left_out"] = _export(course, "nbgrader", leave_out_ungraded=True)
    # The instructor grades both answers in formgrader; then Bob resubmits with a changed answer, and the
    # class is graded again with a new seed.
    _formgrader(course, ALICE, 2, COMMENT)
    _formgrader(course, BOB, 0.5, "Temperature is not heat: say what it does to the scores.")
    submit(course.root, BOB, ASSIGNMENT, ASSIGNMENT, _submission(
        released, solution, "Dividing by a small temperature makes the gaps between scores huge: one-hot weights."))
    course.seed(ASSIGNMENT, reseed=True)  # `grade --reseed`, for the two who have a manual grade
    state["summaries"] = {s.student: s for s in course.grade(ASSIGNMENT, students=[ALICE, BOB], force=True,
                                                             progress=False, jobs=2)}
    state["written_again"], state["report_again"] = _written(course), _report(course)
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        state["recorded"] = {s: gradebook.find_submission(ASSIGNMENT, s).score for s in (ALICE, BOB, CAROL)}
    state["again"] = _grade(course)  # nothing changed since: nobody graded again, nothing lost
    state["feedback"] = course.feedback(ASSIGNMENT)
    with pytest.raises(CourseError) as refusal:
        course.export(folder / "still.csv", "nbgrader", ASSIGNMENT)
    state["still_refused"] = str(refusal.value)
    _formgrader(course, BOB, 1.5)  # the regrade, in formgrader
    state["exports"] = {fmt: _export(course, fmt) for fmt in Course.EXPORT_FORMATS}
    return state


def _line(summary: str, student: str) -> str:
    return next(line for line in summary.splitlines() if line.startswith(student))


def test_an_answer_nobody_graded_awaits_a_grade_and_the_summary_says_where(graded, auto_points):
    first = graded["written_first"]
    assert first[ALICE][:3] == first[BOB][:3] == (None, None, True)  # no score: neither 0 nor full points
    assert first[CAROL][:3] == (0, None, False) and first[CAROL][3] == "No response."  # blank: nbgrader's 0
    summary = graded["first"]
    assert "2 written answers of 2 students await manual grading" in summary and "Formgrader > Manual Grading" in summary
    for student in (ALICE, BOB):
        assert f"{auto_points:g}/{auto_points + 2:g}" in _line(summary, student)
        assert f"awaiting manual grading: {ANSWER} (2 points)" in _line(summary, student)
    assert "awaiting" not in _line(summary, CAROL)
    report = graded["report_first"]
    assert (report[ALICE][ANSWER], report[ALICE]["awaiting_manual"]) == ("awaiting", f"{ANSWER} (2 points)")
    assert (report[CAROL][ANSWER], report[CAROL]["awaiting_manual"], report[CAROL]["score"]) == ("0", "", f"{auto_points:g}")
    assert report[ALICE]["max_score"] == f"{auto_points + 2:g}"


def test_no_export_lacks_the_written_answers(graded):
    for fmt, (message, written) in graded["refused"].items():
        assert not written, fmt  # no file an instructor could upload by mistake
        assert ALICE in message and BOB in message and CAROL not in message and ANSWER in message, message
        assert "--leave-out-ungraded" in message and "formgrader" in message
    rows, skipped = graded["left_out"]
    assert set(rows) == {CAROL}
    assert any(ALICE in line and "await a manual grade" in line for line in skipped), skipped
    assert any(BOB in line for line in skipped), skipped


def test_a_manual_grade_survives_grading_again_unless_the_answer_changed(graded, auto_points):
    again = graded["written_again"]
    assert again[ALICE] == (None, 2, False, COMMENT)  # kept, and not marked for review: the same answer
    assert again[BOB][1:3] == (0.5, True)  # kept for the instructor to see, but marked for regrading
    assert again[CAROL][:3] == (0, None, False)
    summaries = graded["summaries"]
    alice, bob = summaries[ALICE], summaries[BOB]
    assert (alice.score, alice.max_score, alice.awaiting, alice.flags) == (auto_points + 2, auto_points + 2, [], [])
    assert (bob.auto_score, bob.score) == (auto_points, auto_points + 0.5)
    assert bob.flags == [f"{ASSIGNMENT}: written answer {ANSWER} changed since it was graded by hand (0.5 of 2 points): "
                         "regrade it in formgrader"]
    assert bob.awaiting == [f"{ANSWER} (2 points; its grade of 0.5 is marked for regrading)"]
    assert graded["recorded"] == {ALICE: alice.score, BOB: bob.score, CAROL: auto_points}  # the summary is the gradebook's
    report = graded["report_again"]
    assert (report[ALICE][ANSWER], report[ALICE]["score"], report[BOB][ANSWER]) == ("2", f"{auto_points + 2:g}", "regrade")
    # Graded again with nothing changed: the regrade still awaits, and the summary still says so.
    summary = graded["again"]
    assert f"{auto_points + 2:g}/{auto_points + 2:g}" in _line(summary, ALICE) and "awaiting" not in _line(summary, ALICE)
    assert "marked for regrading" in _line(summary, BOB) and "1 written answer of 1 student awaits manual grading" in summary


def test_feedback_shows_the_manual_grade_and_comment_and_waits_for_the_regrade(graded, auto_points):
    report, course = graded["feedback"], graded["course"]
    assert report.written == 2 and sum(report.skipped.values()) == 1
    assert any("await a manual grade" in why for why in report.skipped)
    assert not (course.root / "feedback" / BOB / ASSIGNMENT / f"{ASSIGNMENT}.html").exists()
    alice = (course.root / "feedback" / ALICE / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    assert "the differences of the scores grow" in alice  # the instructor's comment
    assert f"Score: {auto_points + 2:.1f} / {auto_points + 2:.1f}" in alice
    carol = (course.root / "feedback" / CAROL / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    assert "No response." in carol
    for page in (alice, carol):
        assert "BEGIN HIDDEN TESTS" not in page and "run_hidden_check" not in page and "BEGIN SOLUTION" not in page
    import zipfile

    for bundle in report.zips:
        assert not any("4711" in name for name in zipfile.ZipFile(bundle).namelist())  # nothing for Bob yet


def test_every_export_carries_the_manual_grades_once_all_are_given(graded, auto_points):
    assert BOB in graded["still_refused"] and ALICE not in graded["still_refused"]
    nbgrader_rows, _ = graded["exports"]["nbgrader"]
    assert {s: float(r["score"]) for s, r in nbgrader_rows.items()} == {
        ALICE: auto_points + 2, BOB: auto_points + 1.5, CAROL: auto_points}
    assert {float(r["max_score"]) for r in nbgrader_rows.values()} == {auto_points + 2}
    moodle, skipped = graded["exports"]["moodle"]
    assert moodle["Participant 500001"]["Grade"] == f"{auto_points + 2:.2f}" and len(moodle) == 1, skipped
    canvas, _ = graded["exports"]["canvas"]
    assert canvas["4711"]["soft-hard (3301)"] == f"{auto_points + 1.5:.2f}"


def test_release_verifies_only_the_autograded_points(graded, auto_points):
    # What `release` says of a solution graded like Alice's notebook (the solution's code, a written answer).
    full, line = cli.verification(ASSIGNMENT, graded["summaries"][ALICE])
    assert full, line
    assert line == (f"{ASSIGNMENT}: the solution scores {auto_points:g} of {auto_points:g} autograded points (2 more "
                    "points are graded by hand in formgrader: not verified here)")
