"""The student side: exercises/ is what nbgrader makes of solutions/, and `attention-course check` is honest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grading_support import filled, released_copy

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"


def _assignments() -> list[str]:
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir())


def _comparable(path: Path) -> dict:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        cell.pop("id", None)  # nbgrader keeps ids; compare content, not identity
    return notebook


@pytest.mark.slow
def test_exercises_are_generated_from_the_current_solutions(tmp_path_factory, tmp_path):
    course = released_copy(tmp_path_factory, tmp_path / "course")  # (`attention-course release`: every assignment)
    assert course.assignments() == _assignments()
    stale = []
    for assignment in _assignments():
        for fresh in sorted((course.root / "release" / assignment).glob("*.ipynb")):
            committed = EXERCISES / assignment / fresh.name
            if not committed.is_file() or _comparable(committed) != _comparable(fresh):
                stale.append(f"{assignment}/{fresh.name}")
    assert not stale, f"exercises/ is out of date for {stale}: run `make exercises` and commit the result"


@pytest.mark.parametrize("folder", [SOLUTIONS, EXERCISES])
def test_notebook_sources_carry_no_outputs(folder):
    for path in folder.rglob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        with_outputs = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not with_outputs, f"{path.relative_to(ROOT)} has outputs in cells {with_outputs}"


def test_exercises_hold_no_solution_and_no_hidden_test():
    for path in EXERCISES.rglob("*.ipynb"):
        text = path.read_text(encoding="utf-8")
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "run_hidden_check"):
            assert marker not in text, f"{path.relative_to(ROOT)} contains {marker!r}"


def test_every_assignment_states_its_total_points_at_the_top():
    for path in EXERCISES.rglob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        points = sum(float(c.metadata["nbgrader"]["points"]) for c in notebook.cells
                     if c.metadata.get("nbgrader", {}).get("grade") and "points" in c.metadata["nbgrader"])
        total = f"总分：{points:g} 分" if path.name.endswith(".zh.ipynb") else f"Total: {points:g} points"
        assert total in notebook.cells[0].source, path


def _check(notebook_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_course.grading.cli", "check", str(notebook_path)],
                          capture_output=True, text=True, timeout=300)


def test_check_passes_a_correct_notebook_and_fails_a_wrong_one(tmp_path):
    released = nbformat.read(EXERCISES / "soft-hard" / "soft-hard.ipynb", as_version=4)
    source = nbformat.read(SOLUTIONS / "soft-hard" / "soft-hard.ipynb", as_version=4)
    # The solution cells' code, with the nbgrader markers removed.
    answers = {c.metadata["nbgrader"]["grade_id"]: "\n".join(line for line in c.source.splitlines() if "### " not in line)
               for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    good, bad = tmp_path / "good.ipynb", tmp_path / "bad.ipynb"
    nbformat.write(filled(released, answers), good)
    broken = dict(answers, softmax="def softmax(scores, dim=-1):\n    e = scores.exp()\n    return e / e.sum(dim=dim, keepdim=True)")
    nbformat.write(filled(released, broken), bad)

    passed = _check(good)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "10 of 10 points on the visible cases" in passed.stdout

    failed = _check(bad)
    assert failed.returncode == 1
    assert "FAILED  test-softmax" in failed.stdout
    assert "subtract the largest score" in failed.stdout  # the visible test says what to do


def test_check_fails_the_untouched_exercise():
    result = _check(EXERCISES / "soft-hard" / "soft-hard.ipynb")
    assert result.returncode == 1
    assert "0 of 10 points" in result.stdout
