"""The gradebook on a PostgreSQL server that instructors and TAs share: the same grades as SQLite.

One class of the soft-hard assignment (with a written answer graded by hand) goes through everything the
grader does with the gradebook, twice: with nbgrader's SQLite file in the course folder, and with a course
whose ``nbgrader_config.py`` says ``c.CourseDirectory.db_url = "postgresql+psycopg://..."`` on a throwaway
server from Debian's postgresql package (``postgres_server``). ``release`` records the assignment,
``attention-course grade`` records the grades (nbgrader's autograde pipeline, and the grader's direct
writes for a submission nbgrader cannot read), the written answers are graded as formgrader grades them,
then ``feedback`` and ``export``. Every cell's score, every total, the exports (byte for byte) and the
feedback pages must be the same; and the grades must be in the server's database, not in a file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from attention_course.grading import cli
from attention_course.grading.course import Course
from attention_course.grading.gradebook import fitted, gradebook_location, gradebook_url, open_gradebook
from grading_support import filled, grade_id, submit
from postgres_server import binaries, postgres_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "soft-hard"
ANSWER = "why-temperature"  # the written answer (2 points, graded by hand)
RIGHT, BUGGY, MISSING = "moodle-500001", "canvas-4711", "moodle-500002"
NO_MAX_SUBTRACTION = "def softmax(scores, dim=-1):\n    e = scores.exp()\n    return e / e.sum(dim=dim, keepdim=True)"
# Longer than nbgrader's name columns (128 characters): PostgreSQL refuses what SQLite keeps whole.
LONG_NAME = "Featherstonehaugh-Cholmondeley-" * 5 + "Brown, Bob"
MANUAL = {RIGHT: (2.0, "Right: a small temperature magnifies the differences of the scores."),
          BUGGY: (0.5, "Temperature is not heat: say what it does to the scores.")}


def test_the_printed_location_never_shows_a_password(tmp_path):
    assert gradebook_location(tmp_path) == str(tmp_path.resolve() / "gradebook.db")
    (tmp_path / "nbgrader_config.py").write_text(
        "c.CourseDirectory.db_url = 'postgresql+psycopg://ta:s3cr%40t@db.example.org:5432/grades'\n")
    assert gradebook_location(tmp_path) == "postgresql+psycopg://ta:***@db.example.org:5432/grades"
    assert (fitted(""), fitted("x" * 200)) == (None, "x" * 128)


@pytest.fixture(scope="module")
def server():
    if binaries() is None:
        message = "no PostgreSQL server: install Debian's postgresql (scripts/system-packages.sh test)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with postgres_server() as running:
        yield running


@pytest.fixture(scope="module")
def solutions(tmp_path_factory) -> Path:
    """The course's soft-hard solution with one written answer (a markdown cell graded by hand) at its end."""
    folder = tmp_path_factory.mktemp("solutions")
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, folder / ASSIGNMENT)
    path = folder / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    answer = nbformat.v4.new_markdown_cell("### BEGIN SOLUTION\nIt magnifies the differences of the scores.\n"
                                           "### END SOLUTION")
    answer.metadata["nbgrader"] = {"grade": True, "grade_id": ANSWER, "locked": False, "points": 2,
                                   "schema_version": 3, "solution": True, "task": False}
    notebook.cells.append(answer)
    nbformat.write(notebook, path)
    return folder


def _grade_class(root: Path, solutions: Path, db_url: str | None, seed: int | None = None) -> dict:
    """Release, grade, grade by hand, feedback and export one class in a course at ``root``; what came out."""
    course = Course(root, solutions=solutions)
    root.mkdir(parents=True)
    if db_url is not None:  # all an instructor writes to share the gradebook
        (root / "nbgrader_config.py").write_text(f"c = get_config()  # noqa: F821\nc.CourseDirectory.db_url = {db_url!r}\n")
    if seed is not None:  # the same hidden cases as the other class
        course.seeds_path.parent.mkdir(parents=True)
        course.seeds_path.write_text(json.dumps({ASSIGNMENT: seed}))
    course.generate(ASSIGNMENT)
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    solution = nbformat.read(solutions / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    code = {grade_id(c): re.sub(r"[ \t]*### (BEGIN|END) SOLUTION\n?", "", c.source) for c in solution.cells
            if c.cell_type == "code" and (c.metadata.get("nbgrader") or {}).get("solution")}
    written = {ANSWER: "A low temperature makes the largest score win the softmax."}
    submit(root, RIGHT, ASSIGNMENT, ASSIGNMENT, filled(released, {**code, **written}))
    submit(root, BUGGY, ASSIGNMENT, ASSIGNMENT, filled(released, {**code, "softmax": NO_MAX_SUBTRACTION, **written}))
    (root / "submitted" / RIGHT / ASSIGNMENT / "timestamp.txt").write_text("2025-03-01 12:34:56.789000 UTC")
    (root / "submitted" / MISSING / ASSIGNMENT).mkdir(parents=True)  # a submission without its notebook
    roster = root.parent / "canvas-gradebook.csv"  # the Canvas student's identity, for the Canvas export
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,soft-hard (3301)\n"
                      f"    Points Possible,,,,,12.00\n\"{LONG_NAME}\",4711,S4711,bob,Section A,\n", encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = cli.main(["grade", ASSIGNMENT, "--course", str(root), "--roster", str(roster), "--jobs", "2"])
    assert status == 0, out.getvalue()
    with open_gradebook(root) as gradebook:  # what formgrader's Manual Grading saves
        for student, (score, comment) in MANUAL.items():
            grade = gradebook.find_grade(ANSWER, ASSIGNMENT, ASSIGNMENT, student)
            grade.manual_score = score
            grade.needs_manual_grade = False
            gradebook.find_comment(ANSWER, ASSIGNMENT, ASSIGNMENT, student).manual_comment = comment
        gradebook.db.commit()
    feedback = course.feedback(ASSIGNMENT)
    exports = {fmt: course.export(root / f"grades-{fmt}.csv", fmt, ASSIGNMENT)[0].read_bytes()
               for fmt in Course.EXPORT_FORMATS}
    with open_gradebook(root) as gradebook:
        cells = {(s.student.id, g.name): (g.auto_score, g.manual_score, g.score, g.needs_manual_grade)
                 for s in gradebook.find_assignment(ASSIGNMENT).submissions for n in s.notebooks for g in n.grades}
        totals = {s.student.id: (s.score, s.max_score, str(s.timestamp))
                  for s in gradebook.find_assignment(ASSIGNMENT).submissions}
    pages = {p.relative_to(feedback.folder).as_posix(): _page_text(p) for p in sorted(feedback.folder.rglob("*.html"))}
    return {"course": course, "summary": out.getvalue(), "seed": course.seed(ASSIGNMENT), "cells": cells,
            "totals": totals, "exports": exports, "pages": pages, "zips": sorted(p.name for p in feedback.zips)}


def _page_text(page: Path) -> str:
    """A feedback page's text as a student reads it (the page's own markup aside)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    for tag in soup(["script", "style"]):
        tag.decompose()
    return " ".join(soup.get_text(" ").split())


@pytest.fixture(scope="module")
def both(server, solutions, tmp_path_factory):
    folder = tmp_path_factory.mktemp("gradebooks")
    sqlite = _grade_class(folder / "sqlite" / "course", solutions, None)
    url = server.create_database("gradebook")
    postgres = _grade_class(folder / "postgres" / "course", solutions, url, seed=sqlite["seed"])
    return {"sqlite": sqlite, "postgres": postgres, "url": url}


def test_the_course_config_points_the_grader_at_the_server(both):
    course = both["postgres"]["course"]
    assert gradebook_url(course.root) == both["url"]
    assert not list(course.root.rglob("*.db")) and (both["sqlite"]["course"].root / "gradebook.db").is_file()
    assert f"Gradebook: {both['url']}" in both["postgres"]["summary"]


def test_every_cell_and_every_total_is_the_same_as_with_sqlite(both):
    sqlite, postgres = both["sqlite"], both["postgres"]
    assert postgres["cells"] == sqlite["cells"]
    assert postgres["totals"] == sqlite["totals"]
    # and they are the grades the class deserves: the bug costs softmax's 2 points, the missing notebook all
    auto = 10.0
    assert {s: t[:2] for s, t in postgres["totals"].items()} == {
        RIGHT: (auto + 2, auto + 2), BUGGY: (auto - 2 + 0.5, auto + 2), MISSING: (0.0, auto + 2)}
    assert postgres["cells"][(BUGGY, "test-softmax")][2] == 0 and postgres["cells"][(RIGHT, ANSWER)] == (None, 2.0, 2.0, False)
    assert postgres["totals"][RIGHT][2] == "2025-03-01 12:34:56.789000"
    with open_gradebook(both["postgres"]["course"].root) as gradebook:
        assert gradebook.find_student(BUGGY).last_name == LONG_NAME.partition(", ")[0][:128]


@pytest.mark.parametrize("fmt", Course.EXPORT_FORMATS)
def test_the_exports_are_byte_identical(both, fmt):
    assert both["postgres"]["exports"][fmt] == both["sqlite"]["exports"][fmt]
    assert RIGHT.encode() in both["postgres"]["exports"]["nbgrader"]


def test_feedback_is_the_same(both):
    sqlite, postgres = both["sqlite"], both["postgres"]
    assert postgres["pages"] == sqlite["pages"] and postgres["zips"] == sqlite["zips"]
    assert MANUAL[BUGGY][1] in postgres["pages"][f"{BUGGY}/{ASSIGNMENT}/{ASSIGNMENT}.html"]


def test_the_server_holds_the_grades(both, server):
    """Read straight from PostgreSQL, not through nbgrader: every student's score of every cell."""
    with server.connect("gradebook") as connection:
        rows = connection.execute(
            "SELECT sa.student_id, bc.name, g.auto_score, g.manual_score FROM grade g "
            "JOIN base_cell bc ON bc.id = g.cell_id JOIN submitted_notebook sn ON sn.id = g.notebook_id "
            "JOIN submitted_assignment sa ON sa.id = sn.assignment_id "
            "JOIN assignment a ON a.id = sa.assignment_id WHERE a.name = %s", (ASSIGNMENT,)).fetchall()
        comment = connection.execute("SELECT manual_comment FROM comment WHERE manual_comment IS NOT NULL "
                                     "ORDER BY manual_comment").fetchall()
    assert {(student, cell): (auto, manual) for student, cell, auto, manual in rows} == {
        key: value[:2] for key, value in both["sqlite"]["cells"].items()}
    assert sorted(c for (c,) in comment) == sorted(c for _, c in MANUAL.values())
