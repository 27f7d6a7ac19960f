"""Released courses, sample submissions and graded batches for the end-to-end grading tests.

A course is released once per test session (``attention-course release --no-verify``, every assignment)
and each test that needs a course gets a copy of it with seeds of its own (:func:`released_copy`):
the release's nbgrader run and the new gradebook's migration (an ``alembic`` subprocess) are paid once,
not once per course. Submissions are made from a released notebook (:func:`filled`) and graded in one
batch (:func:`graded_batch`).
"""

from __future__ import annotations

import copy
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from attention_course.grading.course import Course
from attention_course.grading.grade import NotebookResult
from attention_course.grading.nbgrader_bridge import results_path

_RELEASED: dict[Path, Path] = {}  # the session's folder -> its released course


def _session_folder(tmp_path_factory) -> Path:
    """A folder of this test session that every process of it shares: under pytest-xdist each worker's
    base folder is one of the session's, inside it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _released(tmp_path_factory) -> Path:
    """The session's released course: made by the first process that asks (the others wait for it)."""
    session = _session_folder(tmp_path_factory)
    if session not in _RELEASED:
        folder = session / "released-course"
        folder.mkdir(exist_ok=True)
        course = folder / "course"
        with (folder / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not course.is_dir():
                building = folder / f"building-{os.getpid()}"
                made = subprocess.run([sys.executable, "-m", "attention_course.grading.cli", "release", "--course",
                                       str(building), "--no-verify"], capture_output=True, text=True, timeout=900)
                assert made.returncode == 0, made.stdout + made.stderr
                building.rename(course)
        _RELEASED[session] = course
    return _RELEASED[session]


def released_copy(tmp_path_factory, root: Path) -> Course:
    """A course at ``root`` (which must not exist) as ``attention-course release --no-verify`` makes it: every
    assignment released, with a course seed of its own for each (drawn afresh, as a release draws it). A copy
    of the session's one release."""
    shutil.copytree(_released(tmp_path_factory), root)
    course = Course(root)
    for assignment in course.assignments():
        course.seed(assignment, reseed=True)
    return course


def released_notebook(tmp_path_factory, assignment: str, notebook: str | None = None):
    """The released notebook (``notebook``, by default the assignment's own) as students receive it."""
    path = _released(tmp_path_factory) / "release" / assignment / f"{notebook or assignment}.ipynb"
    return nbformat.read(path, as_version=4)


def grade_id(cell) -> str | None:
    return (cell.metadata.get("nbgrader") or {}).get("grade_id")


def filled(released, answers: dict[str, str], edits: dict[str, str] | None = None, delete: set[str] = frozenset(),
           extra_cells: list[str] = ()):
    """A copy of ``released`` with solution cells replaced by ``answers`` (by grade id), other cells
    replaced by ``edits``, cells in ``delete`` removed, and ``extra_cells`` appended."""
    notebook = copy.deepcopy(released)
    cells = []
    for cell in notebook.cells:
        gid = grade_id(cell)
        if gid in delete:
            continue
        if gid in answers:
            cell.source = answers[gid]
        if edits and gid in edits:
            cell.source = edits[gid]
        cells.append(cell)
    cells.extend(nbformat.v4.new_code_cell(source) for source in extra_cells)
    notebook.cells = cells
    return notebook


def submit(course_root: Path, student: str, assignment: str, notebook_name: str, notebook) -> Path:
    folder = course_root / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{notebook_name}.ipynb"
    nbformat.write(notebook, path)
    return path


def submit_all(course: Course, assignment: str, notebooks: dict, files: dict[str, dict[str, str | bytes]] | None = None) -> None:
    """Each student's submission of ``assignment`` (whose notebook has the assignment's name): a notebook, the
    bytes of a file in its place, or None for a folder without it; ``files``: {student: {name: content}} put
    next to it."""
    for student, notebook in notebooks.items():
        folder = course.root / "submitted" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        if isinstance(notebook, bytes):
            (folder / f"{assignment}.ipynb").write_bytes(notebook)
        elif notebook is not None:
            submit(course.root, student, assignment, assignment, notebook)
    for student, extra in (files or {}).items():
        folder = course.root / "submitted" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in extra.items():
            (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def grade_all(course: Course, assignment: str, *, jobs: int = 2, **options) -> tuple[dict, dict]:
    """Every submission of ``assignment`` graded in one batch: ({student: summary}, {student: saved result})."""
    summaries = {s.student: s for s in course.grade(assignment, jobs=jobs, progress=False, **options)}
    paths = {student: results_path(course.results_dir, assignment, student, assignment) for student in summaries}
    return summaries, {student: NotebookResult.load(path) for student, path in paths.items() if path.is_file()}


def graded_batch(tmp_path_factory, assignment: str, notebooks: dict, files: dict | None = None, *, jobs: int = 2,
                 **options) -> tuple[Course, dict, dict]:
    """A released course of its own with ``notebooks`` submitted (see :func:`submit_all`), graded in one batch:
    (course, {student: summary}, {student: saved result})."""
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp(assignment) / "course")
    submit_all(course, assignment, notebooks, files)
    return (course, *grade_all(course, assignment, jobs=jobs, **options))


def assert_points_and_flags(result, flags: list[str], expected_points: dict[str, float], expected_flags: list[str]) -> None:
    """Each test cell earned exactly ``expected_points``; the summary names every expected flag, and no other when none is expected."""
    got = {grade_id: (check["points"] if check["passed"] else 0) for grade_id, check in result.checks.items()}
    assert got == expected_points, {g: c["message"] for g, c in result.checks.items()}
    for fragment in expected_flags:
        assert any(fragment in flag for flag in flags), flags
    if not expected_flags:
        assert flags == []


def assert_only_these_checks_failed(result, summary, points: dict[str, float], failures: dict[str, str]) -> None:
    """Every test cell kept its points; exactly the cells of ``failures`` failed, each with its phrase in its
    message; and the score, in the result and in the batch's summary, is the total less exactly those cells."""
    assert {g: c["points"] for g, c in result.checks.items()} == points
    failed = {g for g, c in result.checks.items() if not c["passed"]}
    assert failed == set(failures), {g: result.checks[g]["message"] for g in failed}
    for grade_id, phrase in failures.items():
        assert phrase in result.checks[grade_id]["message"]
    expected_score = sum(points.values()) - sum(points[g] for g in failures)
    assert (result.score, summary.score) == (expected_score, expected_score)


def assert_gradebook_holds_the_results(course_root: Path, course_id: str, assignment: str, notebook_name: str,
                                       results: dict, max_score: float) -> None:
    """nbgrader's gradebook holds, for every student in ``results``, each test cell's points as graded and the
    notebook's score out of ``max_score``."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_root / 'gradebook.db'}", course_id) as gradebook:
        for student, result in results.items():
            notebook = gradebook.find_submission_notebook(notebook_name, assignment, student)
            cells = {grade.name: grade.score for grade in notebook.grades}
            assert cells == {g: (c["points"] if c["passed"] else 0) for g, c in result.checks.items()}
            assert (notebook.score, notebook.max_score) == (result.score, max_score)


def command(*args: str) -> subprocess.CompletedProcess:
    """``attention-course ARGS`` run by its own ``main`` in this process (what the console script calls, with the
    same exit status, output and messages), so a test that runs many commands pays the interpreter's start and
    PyTorch's import once, not once a command. Tests of the command line itself run it as a subprocess
    (test_grading_cli.cli)."""
    import contextlib
    import io

    from attention_course.grading.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if stop.code is not None and not isinstance(stop.code, int):
                print(stop.code, file=sys.stderr)
    return subprocess.CompletedProcess(["attention-course", *args], status or 0, out.getvalue(), err.getvalue())


def files_left(folder: Path) -> list[str]:
    """Every path under ``folder`` (relative), sorted; a folder removed while it is being listed (a cleanup
    under way) gives ["(being removed)"], so that a caller polling until nothing is left looks again."""
    try:
        return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
    except FileNotFoundError:
        return ["(being removed)"]
