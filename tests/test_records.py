"""Records: the batch's gradebook and autograded notebooks are exactly what nbgrader's own pipeline writes.

The recorder lends one gradebook session to nbgrader's autograde (``grading/recording_session.py``) and
holds its commits until a student is whole. One class of soft-hard submissions with a written answer
(correct, buggy, a deleted and an edited test cell, the written answer left unanswered, late, with extra
files, not a notebook) is recorded twice from the same saved grades: by the recorder, and by nbgrader's
pipeline with gradebooks of its own, as before. Every autograded file (bytes and permissions) and every
row the gradebook holds of the submissions must be the same.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from attention_course.grading import records
from attention_course.grading.course import Course
from attention_course.grading.gradebook import open_gradebook
from grading_support import filled, submit
from test_grading_soft_hard import SAMPLES
from test_manual_grading import MODEL_ANSWER, _submission, _with_written_answer

ASSIGNMENT = "soft-hard"
pytestmark = pytest.mark.slow


def _class(course: Course) -> None:
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    solution = __import__("nbformat").read(course.solutions / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    answered = MODEL_ANSWER.replace("### BEGIN SOLUTION\n", "").replace("\n### END SOLUTION", "")
    samples = {"correct": _submission(released, solution, answered),
               "stub": _submission(released, solution, None)}
    for name in ("no-max-subtraction", "deleted-test-cell", "edited-test-cell", "unanswered"):
        code, changes, _, _ = SAMPLES[name]
        samples[name] = filled(released, code, **changes)
    for student, notebook in samples.items():
        submit(course.root, student, ASSIGNMENT, ASSIGNMENT, notebook)
    late = submit(course.root, "late", ASSIGNMENT, ASSIGNMENT, samples["correct"]).parent
    (late / "timestamp.txt").write_text("2026-01-02 03:04:05.000000 UTC")
    extra = submit(course.root, "extra-files", ASSIGNMENT, ASSIGNMENT, samples["correct"]).parent
    (extra / "notes.txt").write_text("my notes")
    broken = course.root / "submitted" / "not-a-notebook" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / f"{ASSIGNMENT}.ipynb").write_text("{ not JSON")


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """{path: (bytes, mode)} of the autograded files. A test cell the student deleted is put back by nbgrader
    with a fresh random cell id (on every run of its own pipeline too): that id, and only that one, is masked."""
    folder = root / "autograded"
    found = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.suffix == ".ipynb":
            submitted = root / "submitted" / path.relative_to(folder)
            own_ids = {c.get("id") for c in json.loads(submitted.read_text())["cells"]}
            for cell in json.loads(data)["cells"]:
                if cell.get("id") not in own_ids:
                    data = data.replace(f'"id": "{cell["id"]}"'.encode(), b'"id": "<put back>"')
        found[path.relative_to(folder).as_posix()] = (data, path.stat().st_mode)
    return found


def _rows(root: Path) -> dict:
    """What the gradebook holds of every submission of the assignment, with nothing that names a row id."""
    with open_gradebook(root) as gradebook:
        found = {}
        for submission in gradebook.find_assignment(ASSIGNMENT).submissions:
            student = submission.student
            found[student.id] = {
                "student": (student.first_name, student.last_name, student.email, student.lms_user_id),
                "timestamp": submission.timestamp, "late": submission.total_seconds_late,
                "notebooks": {notebook.name: {
                    "flagged": notebook.flagged, "penalty": notebook.late_submission_penalty,
                    "grades": {g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade)
                               for g in notebook.grades},
                    "comments": {c.name: (c.auto_comment, c.manual_comment) for c in notebook.comments}}
                    for notebook in submission.notebooks}}
        return found


@pytest.fixture(scope="module")
def recorded_twice(tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    course = Course(folder / "lent", solutions=_with_written_answer(folder / "solutions"))
    course.generate(ASSIGNMENT)
    _class(course)
    shutil.copytree(course.root, folder / "own")  # the same release, seed and submissions, nothing graded
    summaries = course.grade(ASSIGNMENT, jobs=2, progress=False)
    own = Course(folder / "own", solutions=course.solutions)
    shutil.copytree(course.results_dir, own.results_dir)  # the same saved grades: only the recording differs
    with pytest.MonkeyPatch.context() as patch:  # nbgrader's pipeline opening gradebooks of its own, as before
        patch.setattr(records, "lent_gradebook", lambda gradebook, url: contextlib.nullcontext(gradebook))
        own_summaries = own.grade(ASSIGNMENT, jobs=2, progress=False)
    return course, own, summaries, own_summaries


def test_the_recorder_writes_the_autograded_notebooks_nbgrader_writes(recorded_twice):
    course, own, _, _ = recorded_twice
    lent, before = _files(course.root), _files(own.root)
    assert sorted(lent) == sorted(before)
    assert len([name for name in lent if name.endswith(".ipynb")]) == 8  # (not-a-notebook has none)
    assert {name for name in lent if lent[name] != before[name]} == set()


def test_the_recorder_writes_the_gradebook_rows_nbgrader_writes(recorded_twice):
    course, own, _, _ = recorded_twice
    lent, before = _rows(course.root), _rows(own.root)
    assert sorted(lent) == sorted(["correct", "stub", "no-max-subtraction", "deleted-test-cell", "edited-test-cell",
                                   "unanswered", "late", "extra-files", "not-a-notebook"])
    assert lent == before
    # and the rows say what they should: the written answer awaits a grade where answered, not where not
    grades = {s: lent[s]["notebooks"][ASSIGNMENT]["grades"] for s in lent}
    assert grades["correct"]["why-temperature"][3] is True and grades["stub"]["why-temperature"][:1] == (0.0,)
    assert lent["late"]["timestamp"] is not None


def test_the_summaries_and_report_are_the_same_either_way(recorded_twice):
    course, own, summaries, own_summaries = recorded_twice
    assert [(s.student, s.score, s.max_score, s.flags, s.awaiting) for s in summaries] == \
        [(s.student, s.score, s.max_score, s.flags, s.awaiting) for s in own_summaries]
    report = (course.root / "reports" / f"{ASSIGNMENT}.csv").read_text(encoding="utf-8-sig").splitlines()
    own_report = (own.root / "reports" / f"{ASSIGNMENT}.csv").read_text(encoding="utf-8-sig").splitlines()
    without_time = [line.rsplit(",", 2)[0] for line in report]  # (the seconds columns are each run's own)
    assert without_time == [line.rsplit(",", 2)[0] for line in own_report]
