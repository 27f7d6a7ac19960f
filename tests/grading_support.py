"""Make sample submissions from a released notebook: fill its solution cells, or tamper with it."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat


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
