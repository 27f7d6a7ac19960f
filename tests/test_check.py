"""`attention-course check` is the grader minus the hidden cases: it names the check the grader will fail, and
no other, with the visible test's hint toward the fix.

The in-process tests judge each canonical bug as the grader does (all the cases of a course seed) and as
`check` does (the visible cases only), with the runner's own code; the end-to-end ones run the command on
notebooks as a student has them.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import in_process
from canonical_bugs import CANONICAL_BUGS
from test_visible_tests import PHRASES
from attention_course.grading.checks import ASSIGNMENTS, checks_for, descriptions
from attention_course.grading.grade import case_generator, visible_only
from attention_course.i18n import translator
from grading_support import filled

ROOT = Path(__file__).resolve().parents[1]
# Checks that the in-process setup itself leaves failing: their notebooks' training is skipped to keep these
# tests fast, so the trained model they measure is missing (the grader's own tests train it).
NEEDS_TRAINING = {"seq2seq-attention": {"test-translate"}, "attention-experiments": {"test-trained", "test-evidence"}}


def _answers(assignment: str, cell: str, source: str) -> dict[str, str]:
    answers = {cell: source}
    if assignment == "seq2seq-attention":
        answers.update(train="", translate="")
    if assignment == "attention-experiments":
        answers.update(train="", experiments="")
    return answers


@pytest.fixture(scope="module")
def judged(one_torch_thread):
    """{bug: (grade's failing checks, check's failing checks, check's verdicts)}, judged once for the module."""
    found = {}
    for bug, (assignment, cell, source, _) in CANONICAL_BUGS.items():
        namespace = in_process.run_notebook(assignment, _answers(assignment, cell, source))
        graded = in_process.judge(assignment, namespace, seed=7)
        checked = in_process.judge(assignment, namespace, seed=0, visible=True)
        ignored = NEEDS_TRAINING.get(assignment, set())
        found[bug] = ({g for g, v in graded.items() if not v.passed} - ignored,
                      {g for g, v in checked.items() if not v.passed} - ignored, checked)
    return found


@pytest.mark.parametrize("bug", sorted(CANONICAL_BUGS))
def test_check_names_the_check_that_grade_fails_and_no_other(judged, bug):
    expected = CANONICAL_BUGS[bug][3]
    graded, checked, _ = judged[bug]
    assert graded == {expected}, f"grade fails {sorted(graded)} for {bug!r}"
    assert checked == {expected}, f"check fails {sorted(checked)} for {bug!r}, grade fails {expected}"


@pytest.mark.parametrize("bug", sorted(PHRASES))
def test_check_gives_the_visible_tests_hint(judged, bug):
    expected = CANONICAL_BUGS[bug][3]
    message = judged[bug][2][expected].message()
    assert "hint: " in message and PHRASES[bug] in message, message


def _test_cell_strings(assignment: str, grade_id: str) -> list[str]:
    """The strings of the released notebook's visible test cell (f-strings with their fields as {…})."""
    notebook = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    [cell] = [c for c in notebook.cells if (c.metadata.get("nbgrader") or {}).get("grade_id") == grade_id]
    strings = []
    for node in ast.walk(ast.parse(cell.source)):
        if isinstance(node, ast.JoinedStr):
            strings.append("".join(part.value if isinstance(part, ast.Constant) else "{…}" for part in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.append(node.value)
    return strings


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_every_hint_is_in_the_visible_tests_words_and_names_a_visible_case(assignment):
    for grade_id, check in checks_for(assignment).items():
        labels = [case.label for case in visible_only({grade_id: check})[grade_id].make_cases(case_generator(0, grade_id))]
        strings = _test_cell_strings(assignment, grade_id)
        for part, hint in check.hints:
            assert any(part in label for label in labels), f"{grade_id}: no visible case's label holds {part!r}"
            assert any(hint in text for text in strings), f"{grade_id}: the visible test never says {hint!r}"


# --- the command, as a student runs it ----------------------------------------------------------------

def _check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_course.grading.cli", "check", str(path)],
                          capture_output=True, text=True, timeout=600)


def _solution(assignment: str) -> dict[str, str]:
    return {gid: src for gid, src in in_process.solution_cells(assignment).items()
            if any((c.metadata.get("nbgrader") or {}).get("solution") and c.metadata["nbgrader"]["grade_id"] == gid
                   for c in in_process.solution_notebook(assignment).cells)}


def test_check_charges_a_multi_head_bug_where_it_is_as_the_grader_does(tmp_path):
    # The mask applied after the softmax: the grader gives 12 of 14 (only scaled_dot_product's 2 points lost);
    # the old check, without the grader's stand-ins, failed every test that builds on scaled_dot_product.
    assignment = "multi-head"
    bug = "mask applied to the weights after the softmax"
    released = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    notebook = tmp_path / f"{assignment}.ipynb"
    nbformat.write(filled(released, {**_solution(assignment), CANONICAL_BUGS[bug][1]: CANONICAL_BUGS[bug][2]}), notebook)
    ran = _check(notebook)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    failed = re.findall(r"FAILED\s+(\S+)", ran.stdout)
    assert failed == ["test-scaled-dot-product"], ran.stdout
    assert "12 of 14 points on the visible cases" in ran.stdout
    assert PHRASES[bug] in ran.stdout  # the visible test's hint


def test_check_names_the_points_graded_by_hand(tmp_path):
    ran = _check(ROOT / "exercises" / "attention-experiments" / "attention-experiments.ipynb")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "of 16 points on the visible cases" in ran.stdout
    assert re.search(r"4 more points are graded by hand by your instructor: answer-longer \(2\), answer-alignment \(2\)",
                     ran.stdout), ran.stdout


def test_check_refuses_a_notebook_of_no_assignment(tmp_path):
    stray = tmp_path / "notes.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")]), stray)
    ran = _check(stray)
    assert ran.returncode == 2 and "not one of the course's exercises" in ran.stderr


def test_check_speaks_the_language_of_the_chinese_notebook():
    ran = _check(ROOT / "exercises" / "soft-hard" / "soft-hard.zh.ipynb")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "可见用例得分：0 / 10。" in ran.stdout and "未通过" in ran.stdout
    assert "points on the visible cases" not in ran.stdout and "failed 4 of" not in ran.stdout
    assert "softmax 结果正确" in ran.stdout and "softmax is correct" not in ran.stdout  # the check's description too
    assert "调用抛出 NotImplementedError（答案还没写）" in ran.stdout  # and the grader's common reasons


def test_every_checks_description_has_its_chinese():
    chinese = translator("zh", "grading", strict=True)
    for what in descriptions():
        assert re.search("[\u4e00-\u9fff]", chinese(what)), what
