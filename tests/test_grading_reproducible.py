"""A grade is a pure function of the submission, the release and the course seed.

- The hidden cases are stratified: for every seed, each canonical bug fails its own check and the
  solution passes every check (judged in this process, with the grader's own runner code).
- The seed is drawn once per assignment, stored in the course, and redrawn only on request.
- The same batch graded with --jobs 1, with --jobs 4 next to a CPU hog on this 2-core machine, and
  again: the same scores, the same flags, the same messages, the same gradebook. Graded again with
  nothing changed (between the first two), nobody is graded again unless forced.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from nbgrader.api import Gradebook

import in_process
from canonical_bugs import CANONICAL_BUGS
from attention_course.grading.course import Course
from attention_course.grading.grade import Conversation, NotebookResult, plan_cases
from attention_course.grading.checks import checks_for
from attention_course.grading.nbgrader_bridge import COURSE_ID, results_path
from grading_support import filled, released_copy, submit, submit_all

SEEDS = range(20)

@pytest.mark.parametrize("assignment", ["soft-hard", "three-stages", "multi-head", "transformer"])
def test_the_solution_passes_every_check_for_every_seed(assignment, one_torch_thread):
    namespace = in_process.run_notebook(assignment, {})
    full = {g: c.points for g, c in checks_for(assignment).items()}
    for seed in SEEDS:
        verdicts = in_process.judge(assignment, namespace, seed)
        assert in_process.points(verdicts) == full, (seed, {g: v.message() for g, v in verdicts.items() if not v.passed})


@pytest.mark.parametrize("bug", sorted(CANONICAL_BUGS))
def test_each_canonical_bug_fails_its_check_for_every_seed(bug, one_torch_thread):
    assignment, cell, source, grade_id = CANONICAL_BUGS[bug]
    answers = {cell: source}
    if assignment == "seq2seq-attention":
        answers.update(train="", translate="")  # no training: the check needs none
    if assignment == "attention-experiments":
        answers.update(train="", experiments="")  # the measurements are judged on the grader's models: no training
    namespace = in_process.run_notebook(assignment, answers)
    for seed in SEEDS:
        verdict = in_process.judge(assignment, namespace, seed, grade_ids={grade_id})[grade_id]
        assert not verdict.passed, f"seed {seed}: {bug} passes {grade_id}"
        hidden_failures = [case for case in verdict.cases if case.hidden and not case.passed]
        assert hidden_failures, f"seed {seed}: only the visible cases catch {bug}"


def test_the_cases_depend_on_the_seed_and_the_grade_id_only():
    checks = checks_for("three-stages")
    one = plan_cases(checks, 7)
    again = plan_cases(checks, 7)
    only_attention = plan_cases({"test-attention": checks["test-attention"]}, 7)
    other = plan_cases(checks, 8)
    labels = lambda planned, grade_id: [case.label for _, check, case in planned if check.grade_id == grade_id]
    assert labels(one, "test-attention") == labels(again, "test-attention") == labels(only_attention, "test-attention")
    assert labels(one, "test-attention") != labels(other, "test-attention")


def test_the_course_seed_is_drawn_once_stored_and_redrawn_only_on_request(tmp_path):
    course = Course(tmp_path / "course")
    course.generate("soft-hard")  # the release draws it
    stored = json.loads(course.seeds_path.read_text())["soft-hard"]
    assert course.seed("soft-hard") == stored == Course(tmp_path / "course").seed("soft-hard")
    course.generate("soft-hard")  # a new release keeps it
    assert course.seed("soft-hard") == stored
    assert course.seed("soft-hard", reseed=True) != stored
    assert json.loads(course.seeds_path.read_text())["soft-hard"] == course.seed("soft-hard")


# ---------------------------------------------------------------------------------------------
# End to end: the same batch, three ways.

SOFT_HARD = {
    "correct": {},
    "softmax-dim-0": {"softmax": CANONICAL_BUGS["softmax along dim 0 whatever dim says"][2]},
    "uses-torch-softmax": {"softmax": "def softmax(scores, dim=-1):\n    return torch.softmax(scores, dim)"},
    "no-max-subtraction": {"softmax": CANONICAL_BUGS["softmax without subtracting the largest score"][2]},
    "hard-float32": {"hard_attention": CANONICAL_BUGS["hard attention with float32 weights for any scores"][2]},
}
SEQ2SEQ = {
    "correct": {},
    "barely-trained": {"train": "torch.manual_seed(0)\nencoder = Encoder(len(source_words), 32, 64)\n"
                                "decoder = AttentionDecoder(len(target_words), 32, 64, 64, 64)\n"
                                "model = Seq2Seq(encoder, decoder)\ntrain(model, max_steps=25)"},
}


# A process that keeps a core busy until it is killed, or until this test's process is gone (a test run that is
# itself killed must not leave it spinning).
HOG = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    for _ in range(100_000):\n        pass"


def _solution_answers(assignment: str) -> dict[str, str]:
    cells = in_process.solution_cells(assignment)
    notebook = in_process.solution_notebook(assignment)
    return {cell.metadata["nbgrader"]["grade_id"]: cells[cell.metadata["nbgrader"]["grade_id"]]
            for cell in notebook.cells if (cell.metadata.get("nbgrader") or {}).get("solution")}


def _state(course: Course, assignment: str, summaries) -> dict:
    state = {}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for summary in summaries:
            result = NotebookResult.load(results_path(course.results_dir, assignment, summary.student, assignment))
            flags = [f for f in summary.flags if "unchanged since its last grade" not in f]
            state[summary.student] = (summary.score, flags, {g: c["message"] for g, c in result.checks.items()},
                                      gradebook.find_submission(assignment, summary.student).score)
    return state


def _stamps(course: Course, assignment: str, students) -> dict[str, int]:
    """When each student's saved result was last written."""
    return {s: results_path(course.results_dir, assignment, s, assignment).stat().st_mtime_ns for s in students}


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    graded = {}
    for assignment, samples in (("soft-hard", SOFT_HARD), ("seq2seq-attention", SEQ2SEQ)):
        course = released_copy(tmp_path_factory, tmp_path_factory.mktemp(assignment) / "course")
        released = course.released(assignment, assignment)
        base = _solution_answers(assignment)
        submit_all(course, assignment, {student: filled(released, {**base, **changes}) for student, changes in samples.items()})
        batch = {"sequential": _state(course, assignment, course.grade(assignment, jobs=1, progress=False))}
        stamps = [_stamps(course, assignment, samples)]
        # Graded again, nothing changed and without --force: nobody is graded again.
        batch["unchanged"] = course.grade(assignment, jobs=1, progress=False)
        stamps.append(_stamps(course, assignment, samples))
        # Two processes that keep both cores busy, and more grading jobs than cores.
        hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(2)]
        try:
            batch["forced"] = course.grade(assignment, jobs=4, progress=False, force=True)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        batch["crowded"] = _state(course, assignment, batch["forced"])
        stamps.append(_stamps(course, assignment, samples))
        batch["again"] = _state(course, assignment, course.grade(assignment, jobs=2, progress=False, force=True))
        graded[assignment] = batch | {"stamps": stamps}
    return graded


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ["soft-hard", "seq2seq-attention"])
def test_jobs_load_and_repetition_change_nothing(batches, assignment):
    batch = batches[assignment]
    assert batch["crowded"] == batch["sequential"]
    assert batch["again"] == batch["sequential"]


@pytest.mark.slow
def test_the_batch_grades_what_each_sample_deserves(batches):
    soft_hard = batches["soft-hard"]["sequential"]
    assert {student: score for student, (score, *_rest) in soft_hard.items()} == {
        "correct": 10, "softmax-dim-0": 8, "uses-torch-softmax": 8, "no-max-subtraction": 8, "hard-float32": 8}
    seq2seq = batches["seq2seq-attention"]["sequential"]
    assert {student: score for student, (score, *_rest) in seq2seq.items()} == {"correct": 19, "barely-trained": 15}
    assert any("step budget" in flag for flag in seq2seq["barely-trained"][1])


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ["soft-hard", "seq2seq-attention"])
def test_an_unchanged_submission_is_not_graded_again_unless_forced(batches, assignment):
    batch = batches[assignment]
    graded, unchanged, forced = batch["stamps"]  # when each result was written: graded, graded again, forced
    scores = {student: score for student, (score, *_rest) in batch["sequential"].items()}
    assert unchanged == graded  # no result written again
    assert {s.student: s.score for s in batch["unchanged"]} == scores
    for summary in batch["unchanged"]:
        assert any("unchanged since its last grade" in flag for flag in summary.flags), summary
    assert all(forced[student] != graded[student] for student in graded)  # --force: every one graded again
    assert {s.student: s.score for s in batch["forced"]} == scores
    assert not any("unchanged" in flag for summary in batch["forced"] for flag in summary.flags)


@pytest.mark.slow
def test_a_failure_on_the_graders_side_is_a_grader_error_and_never_a_grade(tmp_path_factory, tmp_path, monkeypatch):
    # Two parses at once in the grader's threads (CPython 3.11, gh-106905) once broke a run's channel under
    # load, and the student was graded 9/15 as "crashed". Whatever fails on the grader's side: no grade.
    course = released_copy(tmp_path_factory, tmp_path / "course")
    submit(course.root, "student", "soft-hard", "soft-hard",
           filled(course.released("soft-hard", "soft-hard"), _solution_answers("soft-hard")))

    def broken(self, message, signed=True):
        raise SystemError("AST constructor recursion depth mismatch (before=18, after=12)")

    monkeypatch.setattr(Conversation, "__call__", broken)
    [summary] = course.grade("soft-hard", jobs=1, progress=False)
    assert any(flag.startswith("grader error") and "recursion depth mismatch" in flag for flag in summary.flags)
    assert not results_path(course.results_dir, "soft-hard", "student", "soft-hard").exists()
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        assert [s.student.id for s in gradebook.assignment_submissions("soft-hard")] == []
