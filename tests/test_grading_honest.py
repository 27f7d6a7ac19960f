"""Honest work never loses points: every submission of tests/honest_corpus.py gets full marks and no flag.

The corpus holds correct answers in the styles real students write (d2l.ai, the UvA tutorials, the
PyTorch docs, Stack Overflow; prints, warnings, asserts, helpers, scratch cells that use torch.softmax,
plots). Two layers:

- fast, in this process (tests/in_process.py): the grader's own cases and verdicts for several course
  seeds, without the sandbox. For seq2seq-attention the three sealed checks run on the untrained
  notebook over the seeds; ``translate`` needs the trained model, and is judged end to end.
- end to end (slow): per assignment, one throwaway course, every honest submission of it submitted and
  graded in one batch with the real sandbox, real nbgrader and a real gradebook.

Some submissions first showed a problem of the grader, since fixed (their ``guards`` in
tests/honest_corpus.py): a failure on one of them names the problem that came back.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

import in_process
from attention_course.grading.checks import checks_for
from attention_course.grading.grade import NotebookResult
from attention_course.grading.nbgrader_bridge import COURSE_ID, results_path
from grading_support import filled, graded_batch, released_notebook
from honest_corpus import CORPUS

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (1, 2, 3)
SEQ2SEQ = "seq2seq-attention"
TRANSLATE = "test-translate"


def full_points(assignment: str, grade_ids: set[str] | None = None) -> dict[str, float]:
    return {g: c.points for g, c in checks_for(assignment).items() if grade_ids is None or g in grade_ids}


def _explain(verdicts) -> dict[str, str]:
    return {g: v.message() for g, v in verdicts.items() if not v.passed}


def _why(assignment: str, student: str) -> str:
    guards = CORPUS[assignment][student].guards
    return f"a grader problem is back: {guards}" if guards else "an honest submission, correct by the task's text"


# ---------------------------------------------------------------------------------------------
# Fast: the grader's cases and verdicts, in this process.


@pytest.fixture(scope="module")
def scratch_root(tmp_path_factory):
    """A copy of solutions/ for in_process to run the notebooks in: the honest scratch cells save their
    plots in the working folder, and that must not be the repository's."""
    root = tmp_path_factory.mktemp("honest-in-process")
    shutil.copytree(ROOT / "solutions", root / "solutions")
    return root


@pytest.fixture(scope="module")
def run_honest(scratch_root):
    """run(assignment, student, train=True) -> the notebook's namespace, computed once per submission."""
    cache: dict = {}

    def run(assignment: str, student: str, train: bool = True) -> dict:
        key = (assignment, student, train)
        if key not in cache:
            submission = CORPUS[assignment][student]
            answers = dict(submission.answers)
            if not train:
                answers["train"] = ""
            # A cell may set an environment variable (the KMP_DUPLICATE_LIB_OK fix) or configure logging
            # (logging.basicConfig): neither may outlive the notebook in this process.
            environment = dict(os.environ)
            root_logger = logging.getLogger()
            handlers, level = list(root_logger.handlers), root_logger.level
            try:
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(in_process, "ROOT", scratch_root)
                    cache[key] = in_process.run_notebook(assignment, answers, tuple(submission.extra_cells))
            finally:
                if dict(os.environ) != environment:
                    os.environ.clear()
                    os.environ.update(environment)
                root_logger.handlers[:] = handlers
                root_logger.setLevel(level)
        return cache[key]

    return run


def _judge(assignment: str, namespace: dict, seed: int, grade_ids: set[str] | None = None):
    return in_process.judge(assignment, namespace, seed, grade_ids)


@pytest.mark.parametrize("assignment, student, seed", [
    (assignment, student, seed)
    for assignment in ("soft-hard", "three-stages", "transformer") for student in CORPUS[assignment] for seed in SEEDS])
def test_honest_submission_gets_full_points_in_process(one_torch_thread, run_honest, assignment, student, seed):
    verdicts = _judge(assignment, run_honest(assignment, student), seed)
    assert in_process.points(verdicts) == full_points(assignment), (_why(assignment, student), _explain(verdicts))


SEQ2SEQ_SEALED = set(checks_for(SEQ2SEQ)) - {TRANSLATE}


@pytest.mark.parametrize("student, seed", [(student, seed) for student in CORPUS[SEQ2SEQ] for seed in SEEDS])
def test_honest_seq2seq_parts_get_full_points_in_process(one_torch_thread, run_honest, student, seed):
    namespace = run_honest(SEQ2SEQ, student, train=False)  # the parts are judged on their own: no training needed
    verdicts = _judge(SEQ2SEQ, namespace, seed, SEQ2SEQ_SEALED)
    assert in_process.points(verdicts) == full_points(SEQ2SEQ, SEQ2SEQ_SEALED), (
        _why(SEQ2SEQ, student), _explain(verdicts))


# ---------------------------------------------------------------------------------------------
# End to end: one course per assignment, all its honest submissions graded in one batch.


def _grade_all(assignment: str, tmp_path_factory):
    released = released_notebook(tmp_path_factory, assignment)
    course, summaries, _ = graded_batch(tmp_path_factory, assignment, {
        student: filled(released, submission.answers, extra_cells=list(submission.extra_cells))
        for student, submission in CORPUS[assignment].items()})
    return course, summaries


@pytest.fixture(scope="module")
def graded_soft_hard(tmp_path_factory):
    return _grade_all("soft-hard", tmp_path_factory)


@pytest.fixture(scope="module")
def graded_three_stages(tmp_path_factory):
    return _grade_all("three-stages", tmp_path_factory)


@pytest.fixture(scope="module")
def graded_seq2seq_attention(tmp_path_factory):
    return _grade_all(SEQ2SEQ, tmp_path_factory)


@pytest.fixture(scope="module")
def graded_transformer(tmp_path_factory):
    return _grade_all("transformer", tmp_path_factory)


def _graded(request, assignment: str):
    return request.getfixturevalue(f"graded_{assignment.replace('-', '_')}")


@pytest.mark.slow
@pytest.mark.parametrize("assignment, student", [
    (assignment, student) for assignment, submissions in CORPUS.items() for student in submissions])
def test_honest_submission_gets_full_marks_and_no_flags(request, assignment, student):
    course, summaries = _graded(request, assignment)
    summary = summaries[student]
    result = NotebookResult.load(results_path(course.results_dir, assignment, student, assignment))
    failed = {g: c["message"] for g, c in result.checks.items() if not c["passed"]}
    why = _why(assignment, student)
    assert set(result.checks) == set(checks_for(assignment))
    assert summary.max_score == sum(full_points(assignment).values())
    assert (summary.score, failed) == (summary.max_score, {}), (why, summary.flags)
    assert (summary.flags, result.flags) == ([], []), (why, failed)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", list(CORPUS))
def test_the_gradebook_holds_the_same_scores(request, assignment):
    course, summaries = _graded(request, assignment)
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for student in CORPUS[assignment]:
            submission = gradebook.find_submission(assignment, student)
            assert submission.score == summaries[student].score, student
            assert submission.max_score == summaries[student].max_score, student
