"""End to end, with real nbgrader, a real SQLite gradebook and the real sandbox: the soft-hard assignment.

Sample submissions (a correct one in another style, one per typical bug, an infinite loop, tampered
test cells, broken files) are graded in one batch; each must get its exact score and flags, the
gradebook must agree, feedback must show no hidden test, and the batch must complete.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from attention_course.grading.course import Course, CourseError
from attention_course.grading.grade import NotebookResult
from attention_course.grading.nbgrader_bridge import COURSE_ID, GRADER_NOTE, results_path
from grading_support import assert_points_and_flags, filled, graded_batch, released_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "soft-hard"
pytestmark = pytest.mark.slow

CORRECT = {
    # Not the solution's style: max via .max().values, einsum, scatter.
    "softmax": (
        "def softmax(scores, dim=-1):\n"
        "    top = scores.max(dim=dim, keepdim=True).values\n"
        "    e = (scores - top).exp()\n"
        "    return e / e.sum(dim=dim, keepdim=True)"
    ),
    "soft_attention": (
        "def soft_attention(scores, values, temperature=1.0):\n"
        "    w = softmax(scores / temperature)\n"
        "    return torch.einsum('...k,...kd->...d', w, values), w"
    ),
    "hard_attention": (
        "def hard_attention(scores, values):\n"
        "    w = torch.zeros_like(scores).scatter(-1, scores.argmax(-1, keepdim=True), 1.0)\n"
        "    return (w.unsqueeze(-1) * values).sum(-2), w"
    ),
    # The new work, built on the warm-ups (the stand-ins give them correct values and gradients).
    "sample_hard_attention": (
        "def sample_hard_attention(scores, values, uniform):\n"
        "    return hard_attention(scores - (-uniform.log()).log(), values)"
    ),
    "straight_through_attention": (
        "def straight_through_attention(scores, values, temperature=1.0):\n"
        "    _, soft = soft_attention(scores, values, temperature)\n"
        "    w = hard_attention(scores, values)[1] - soft.detach() + soft\n"
        "    return torch.einsum('...k,...kd->...d', w, values), w"
    ),
}
FULL = {"test-softmax": 2, "test-soft-attention": 1, "test-hard-attention": 2, "test-sample-hard-attention": 2,
        "test-straight-through": 3}


def answers(**changes: str) -> dict[str, str]:
    return {**CORRECT, **changes}


# student -> (solution cells, other changes, expected points per test cell, expected flag fragments)
def points(*lost: str) -> dict[str, float]:
    return {grade_id: 0 if grade_id in lost else full for grade_id, full in FULL.items()}


SAMPLES = {
    "correct-other-style": (answers(), {}, points(), []),
    # soft_attention's bug costs its point only: straight_through_attention calls it, and gets a stand-in
    # with the correct weights and the correct gradient.
    "softmax-wrong-axis": (
        answers(soft_attention="def soft_attention(scores, values, temperature=1.0):\n"
                               "    w = softmax(scores / temperature, dim=0)\n"
                               "    return (w.unsqueeze(-1) * values).sum(-2), w"),
        {}, points("test-soft-attention"), []),
    "no-max-subtraction": (
        answers(softmax="def softmax(scores, dim=-1):\n    e = scores.exp()\n    return e / e.sum(dim=dim, keepdim=True)"),
        {}, points("test-softmax"), []),
    "modifies-input": (
        answers(soft_attention="def soft_attention(scores, values, temperature=1.0):\n"
                               "    scores /= temperature\n"
                               "    w = softmax(scores)\n"
                               "    return (w.unsqueeze(-1) * values).sum(-2), w"),
        {}, points("test-soft-attention"), []),
    # hard_attention's bug costs its points only, not those of the two functions built on it.
    "last-index-on-ties": (
        answers(hard_attention="def hard_attention(scores, values):\n"
                               "    k = scores.shape[-1] - 1 - scores.flip(-1).argmax(-1, keepdim=True)\n"
                               "    w = torch.zeros_like(scores).scatter(-1, k, 1.0)\n"
                               "    return (w.unsqueeze(-1) * values).sum(-2), w"),
        {}, points("test-hard-attention"), []),
    # The shortcut costs softmax's points only: soft_attention gets the correct weights from a stand-in.
    "uses-torch-softmax": (
        answers(softmax="def softmax(scores, dim=-1):\n    return torch.softmax(scores, dim)"),
        {}, points("test-softmax"),
        ["forbidden shortcuts: softmax uses softmax (torch.softmax, F.softmax"]),
    "gumbel-wrong-sign": (
        answers(sample_hard_attention="def sample_hard_attention(scores, values, uniform):\n"
                                      "    return hard_attention(scores + (-uniform.log()).log(), values)"),
        {}, points("test-sample-hard-attention"), []),
    # Only the chosen value may get a gradient: the output must come from the straight-through weights.
    "straight-through-soft-output": (
        answers(straight_through_attention="def straight_through_attention(scores, values, temperature=1.0):\n"
                                           "    soft_out, soft = soft_attention(scores, values, temperature)\n"
                                           "    hard_out, hard = hard_attention(scores, values)\n"
                                           "    return hard_out + soft_out - soft_out.detach(), hard + soft - soft.detach()"),
        {}, points("test-straight-through"), []),
    "straight-through-uses-torch-softmax": (
        answers(straight_through_attention="def straight_through_attention(scores, values, temperature=1.0):\n"
                                           "    soft = torch.softmax(scores / temperature, dim=-1)\n"
                                           "    w = hard_attention(scores, values)[1] + soft - soft.detach()\n"
                                           "    return (w.unsqueeze(-1) * values).sum(-2), w"),
        {}, points("test-straight-through"), ["forbidden shortcuts: straight_through_attention uses softmax"]),
    "infinite-loop": (
        answers(hard_attention="def hard_attention(scores, values):\n    while True:\n        pass"),
        {}, points("test-hard-attention"), ["timed out in hard_attention"]),
    "harmless-warning": (
        answers(softmax="import warnings\nwarnings.warn('a harmless UserWarning', UserWarning)\n" + CORRECT["softmax"]),
        {}, points(), []),
    "deleted-test-cell": (answers(), {"delete": {"test-soft-attention"}}, points(),
                          ["test cell test-soft-attention: deleted"]),
    "edited-test-cell": (answers(), {"edits": {"test-softmax": "print('all tests passed')"}}, points(),
                         ["test cell test-softmax: edited"]),
    "edited-test-cell-wrong-code": (
        answers(softmax="def softmax(scores, dim=-1):\n    return scores"),
        {"edits": {"test-softmax": "pass"}}, points("test-softmax"), ["test cell test-softmax: edited"]),
    "unanswered": ({}, {}, points(*FULL), []),
    # two scratch cells comparing with torch's own softmax (refused while the grader grades): no cost, and the
    # feedback page explains the refusal once, in plain view
    "scratch-cells-use-torch-softmax": (answers(), {"extra_cells": [
        "print(torch.softmax(torch.tensor([1.0, 2.0, 3.0]), dim=-1))",
        "print(torch.allclose(softmax(torch.tensor([1.0, 2.0])), torch.softmax(torch.tensor([1.0, 2.0]), -1)))"]},
        points(), []),
}
BROKEN_FILES = {"empty-file": b"", "not-a-notebook": b"{this is not json", "missing-notebook": None}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    released = released_notebook(tmp_path_factory, ASSIGNMENT)
    notebooks = {student: filled(released, solution, **changes) for student, (solution, changes, _, _) in SAMPLES.items()}
    # A duplicated test cell and a test cell whose grade id was stripped: both restored and flagged.
    duplicated = filled(released, CORRECT)
    duplicated.cells.append(next(c for c in duplicated.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test-softmax"))
    stripped = filled(released, CORRECT)
    for cell in stripped.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test-hard-attention":
            del cell.metadata["nbgrader"]
    notebooks |= {"duplicated-grade-id": duplicated, "stripped-grade-id": stripped, **BROKEN_FILES}
    course, summaries, _ = graded_batch(tmp_path_factory, ASSIGNMENT, notebooks)
    return course, summaries


def _result(course: Course, student: str) -> NotebookResult:
    return NotebookResult.load(results_path(course.results_dir, ASSIGNMENT, student, ASSIGNMENT))


@pytest.mark.parametrize("student", sorted(SAMPLES))
def test_each_sample_gets_exactly_its_points_and_flags(graded, student):
    course, summaries = graded
    _, _, expected_points, expected_flags = SAMPLES[student]
    assert_points_and_flags(_result(course, student), summaries[student].flags, expected_points, expected_flags)


def test_the_gradebook_holds_the_same_scores(graded):
    course, summaries = graded
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for student, (_, _, expected_points, _) in SAMPLES.items():
            submission = gradebook.find_submission(ASSIGNMENT, student)
            assert submission.score == sum(expected_points.values()), student
            assert summaries[student].score == submission.score


@pytest.mark.parametrize("student, fragment", [
    ("duplicated-grade-id", "test cell test-softmax: duplicated"),
    ("stripped-grade-id", "test cell test-hard-attention: grade id stripped"),
    ("empty-file", "empty notebook file"),
    ("not-a-notebook", "unreadable notebook"),
    ("missing-notebook", "missing notebook"),
])
def test_broken_submissions_are_flagged_and_do_not_stop_the_batch(graded, student, fragment):
    course, summaries = graded
    assert any(fragment in flag for flag in summaries[student].flags), summaries[student].flags
    expected = 10 if student in {"duplicated-grade-id", "stripped-grade-id"} else 0
    assert summaries[student].score == expected


def test_feedback_never_shows_hidden_tests(graded):
    course, _ = graded
    feedback = course.feedback(ASSIGNMENT).folder
    pages = list(feedback.rglob("*.html"))
    assert len(pages) >= len(SAMPLES)
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in html and "attention_course.grading.stock" not in html, page
    # and it does show the student why a test failed
    bug = (feedback / "no-max-subtraction" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    assert "NaN" in bug or "infinity" in bug
    assert "hint: subtract the largest score" in bug  # and how to fix it: the visible test's hint


def test_feedback_explains_a_refused_scratch_cell_once_in_plain_view(graded):
    course, _ = graded
    course.feedback(ASSIGNMENT)
    page = (course.root / "feedback" / "scratch-cells-use-torch-softmax" / ASSIGNMENT / f"{ASSIGNMENT}.html")
    html = page.read_text(encoding="utf-8")
    assert html.count("ForbiddenOperation") == 2  # both scratch cells' errors are shown
    assert html.count("the error below costs no points by itself") == 1  # the why, once
    note = html.index("the error below costs no points by itself")
    assert note < html.index("ForbiddenOperation")  # before the first refusal, not after it off-screen
    assert max(len(line) for line in GRADER_NOTE.splitlines()) <= 72  # lines a phone shows whole
    assert "white-space: pre-wrap" in html  # and an error's long line wraps instead of scrolling sideways


def test_grades_export_to_csv(graded, tmp_path):
    course, _ = graded
    csv = course.export(tmp_path / "grades.csv")[0].read_text()
    assert "correct-other-style" in csv and ",10.0," in csv


def test_a_canvas_export_of_a_class_not_from_canvas_says_how_to_get_one(graded, tmp_path):
    course, _ = graded  # (graded from nbgrader's layout, submitted/<student>/: nobody in it is a Canvas student)
    with pytest.raises(CourseError, match=r"none of the \d+ graded students came from Canvas.*--zip.*--format nbgrader"):
        course.export(tmp_path / "canvas.csv", fmt="canvas")
    assert not (tmp_path / "canvas.csv").exists()


def test_solutions_never_reach_the_sandbox_program(graded):
    # The graded notebooks are built from the release: no solution code and no hidden test in them.
    course, _ = graded
    autograded = (course.root / "autograded" / "unanswered" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in autograded and "run_hidden_check" not in autograded


def test_every_readable_submission_is_recorded_in_the_gradebook(graded):
    course, summaries = graded
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for student in ("duplicated-grade-id", "stripped-grade-id"):
            assert gradebook.find_submission(ASSIGNMENT, student).score == 10
    assert not any("nbgrader could not record" in f for s in summaries.values() for f in s.flags)


# ---------------------------------------------------------------------------------------------
# Gradient cases, in this process with the runner's own run_case (cheap: no sandbox, no nbgrader).

LOOPING_BACKWARD = '''
class Forever(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores):
        return torch.zeros_like(scores).scatter(-1, scores.argmax(-1, keepdim=True), 1.0)

    @staticmethod
    def backward(ctx, grad):
        while True:
            pass


def straight_through_attention(scores, values, temperature=1.0):
    w = Forever.apply(scores)
    return (w.unsqueeze(-1) * values).sum(-2), w
'''


def _run_straight_through_case(answer: str, case_cpu_s: float = 30.0) -> tuple:
    import marshal

    import torch

    import in_process
    from attention_course.grading import runner
    from attention_course.grading.cases import encode_case
    from attention_course.grading.checks import checks_for
    from attention_course.grading.verdicts import Outcome, judge_case

    namespace = in_process.run_notebook(ASSIGNMENT, {"straight_through_attention": answer})
    check = checks_for(ASSIGNMENT)["test-straight-through"]
    case = check.make_cases(torch.Generator().manual_seed(0))[0]
    threads = torch.get_num_threads()
    try:
        raw = runner.run_case(marshal.loads(encode_case("case0", case)), namespace, None, [], case_cpu_s,
                              runner._snapshot())
    finally:
        torch.set_num_threads(threads)
    return raw, judge_case(check, case, Outcome(*raw[1:]))


def test_the_students_backward_runs_inside_the_graded_call_under_its_cpu_limit():
    raw, verdict = _run_straight_through_case(LOOPING_BACKWARD, case_cpu_s=1.0)
    assert raw[1] == "timeout" and not verdict.passed, raw[:3]


def test_gradients_come_back_as_data_and_a_detached_answer_is_told_why():
    detached = ("def straight_through_attention(scores, values, temperature=1.0):\n"
                "    w = hard_attention(scores.detach(), values)[1]\n"
                "    return (w.unsqueeze(-1) * values).sum(-2), w")
    raw, verdict = _run_straight_through_case(detached)
    assert raw[1] == "ok" and raw[6][0] == "gradients" and raw[6][1][0] == ("scalar", None)  # none reached the scores
    assert not verdict.passed and "no gradient reached the scores" in verdict.reason
    raw, verdict = _run_straight_through_case(CORRECT["straight_through_attention"])
    assert verdict.passed, verdict.reason
