"""Hostile submissions cannot forge a grade, escape the sandbox or break the batch.

The adversarial corpus (tests/adversarial_corpus.py) is graded in one batch with two honest students,
through the real sandbox, real nbgrader and a real gradebook. Every attack must earn 0 points and be
named in the summary; nothing outside the sandbox may change; the honest students must get the grade
they get when graded alone; and a parallel run must agree with a sequential one.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from adversarial_corpus import ATTACKS, WRONG
from attention_course.grading import sandbox
from attention_course.grading.checks import checks_for
from attention_course.grading.course import Course
from attention_course.grading.grade import NotebookResult
from attention_course.grading.nbgrader_bridge import COURSE_ID, results_path
from grading_support import filled, released_copy, submit
from test_grading_soft_hard import CORRECT, answers

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "soft-hard"
LIMITS = sandbox.Limits(cell_cpu_s=15, case_cpu_s=5, idle_s=20)
HONEST = {
    "honest-correct": (answers(), 10),
    "honest-buggy": (answers(softmax="def softmax(scores, dim=-1):\n    e = scores.exp()\n"
                                     "    return e / e.sum(dim=dim, keepdim=True)"), 8),
}
pytestmark = pytest.mark.slow


class CountingServer:
    """A TCP server on loopback that counts the connections it receives (there must be none)."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        self.socket.settimeout(0.5)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                connection, _ = self.socket.accept()
                self.connections += 1
                connection.close()
            except OSError:
                continue

    def close(self):
        self.running = False
        self.thread.join(timeout=2)
        self.socket.close()


def _snapshot(paths: list[Path]) -> dict[str, str]:
    digest = {}
    for base in paths:
        for path in sorted(base.rglob("*")) if base.is_dir() else [base]:
            if path.is_file():
                digest[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def _submit_attack(course: Course, name: str, attack: dict, placeholders: dict) -> None:
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    extra = [cell.format(**placeholders) for cell in attack.get("extra", [])]
    notebook = filled(released, attack.get("answers", WRONG), extra_cells=extra)
    kind = attack.get("file")
    folder = course.root / "submitted" / name / ASSIGNMENT
    if kind == "missing":
        folder.mkdir(parents=True)
    elif kind == "empty":
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_bytes(b"")
    elif kind == "renamed":
        path = submit(course.root, name, ASSIGNMENT, ASSIGNMENT, notebook)
        path.rename(folder / "my soft-hard (final).ipynb")
    else:
        submit(course.root, name, ASSIGNMENT, ASSIGNMENT, notebook)
        if kind == "timestamp":
            (folder / "timestamp.txt").write_text("2099-01-01 00:00:00.000000 UTC")


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """The honest students, graded on their own, one at a time."""
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp("alone") / "course")
    for student, (solution, _) in HONEST.items():
        submit(course.root, student, ASSIGNMENT, ASSIGNMENT, filled(course.released(ASSIGNMENT, ASSIGNMENT), solution))
    return {s.student: s.score for s in course.grade(ASSIGNMENT, jobs=1, progress=False, limits=LIMITS)}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp("batch") / "course")
    canary = tmp_path_factory.mktemp("outside") / "canary.txt"
    server = CountingServer()
    placeholders = {"gradebook": course.root / "gradebook.db", "course": course.root,
                    "solutions": ROOT / "solutions", "canary": canary, "port": server.port}
    for student, (solution, _) in HONEST.items():
        submit(course.root, student, ASSIGNMENT, ASSIGNMENT, filled(course.released(ASSIGNMENT, ASSIGNMENT), solution))
    for name, attack in ATTACKS.items():
        _submit_attack(course, name, attack, placeholders)
    honest_folders = [course.root / "submitted" / s for s in HONEST]
    watched = [ROOT / "solutions" / ASSIGNMENT, course.root / "source", course.root / "release", *honest_folders]
    before = _snapshot(watched)
    summaries = {s.student: s for s in course.grade(ASSIGNMENT, jobs=2, progress=False, limits=LIMITS)}
    after = _snapshot(watched)
    server.close()
    yield dict(course=course, summaries=summaries, before=before, after=after, canary=canary, server=server)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_every_attack_gains_nothing_and_is_named_in_the_summary(batch, attack):
    summary = batch["summaries"][attack]
    assert summary.score == ATTACKS[attack].get("score", 0), summary
    expected = ATTACKS[attack]["flag"].split("|")
    assert any(fragment in flag for fragment in expected for flag in summary.flags), summary.flags


def test_no_attack_costs_the_grader_more_than_the_limits_allow(batch):
    # A hostile cell is stopped by its CPU limit and reported at once: a recursion 10**8 frames deep took
    # 15 minutes of CPU to unwind and format before the recursion limit was bounded.
    course = batch["course"]
    costs = {attack: NotebookResult.load(results_path(course.results_dir, ASSIGNMENT, attack, ASSIGNMENT)).cpu_seconds
             for attack, details in ATTACKS.items() if details.get("file") not in ("missing", "empty")}
    assert {attack: cost for attack, cost in costs.items() if cost > 2 * LIMITS.cell_cpu_s} == {}


def test_the_gradebook_agrees_that_attacks_earned_nothing(batch):
    course = batch["course"]
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for attack, details in ATTACKS.items():
            assert gradebook.find_submission(ASSIGNMENT, attack).score == details.get("score", 0), attack
        for student, (_, points) in HONEST.items():
            assert gradebook.find_submission(ASSIGNMENT, student).score == points


def test_honest_students_get_the_grade_they_get_alone(batch, alone):
    assert {s: batch["summaries"][s].score for s in HONEST} == alone == {s: p for s, (_, p) in HONEST.items()}
    assert all(batch["summaries"][s].flags == [] for s in HONEST)


def test_nothing_outside_the_sandbox_changed(batch):
    assert batch["after"] == batch["before"]
    assert not batch["canary"].exists()
    assert batch["server"].connections == 0


def test_the_results_file_holds_the_grader_verdict_not_the_attackers(batch):
    result = NotebookResult.load(results_path(batch["course"].results_dir, ASSIGNMENT, "writes-results-file", ASSIGNMENT))
    assert set(result.checks) == set(checks_for(ASSIGNMENT))  # every check of the assignment, as the grader judged it
    assert result.score == 0


@pytest.mark.parametrize("attack", ["huge-single-line", "many-lines"])
def test_graded_notebooks_of_huge_outputs_stay_small(batch, attack):
    graded = batch["course"].root / "autograded" / attack / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert graded.is_file()
    assert graded.stat().st_size <= 1 << 20


def test_feedback_of_the_batch_shows_no_hidden_test(batch):
    feedback = batch["course"].feedback(ASSIGNMENT).folder
    for page in feedback.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        # The hidden block's own lines (an attacker may well name a function run_hidden_check).
        assert "BEGIN HIDDEN TESTS" not in text and "attention_course.grading.stock" not in text, page


def test_a_sequential_cold_run_gives_the_same_scores_and_notes(batch, tmp_path_factory, tmp_path):
    # (The batch ran in parallel, each run forked from a warm template; these, one at a time, each in a fresh
    # interpreter.)
    subset = ["honest-correct", "honest-buggy", "always-equal", "forbidden-aten", "os-exit", "tensor-subclass",
              "fork-bomb", "memory-bomb", "segfault", "network", "writes-canary"]
    subset = [name for name in subset if name in batch["summaries"]]
    course = released_copy(tmp_path_factory, tmp_path / "course")
    for name in subset:
        source = batch["course"].root / "submitted" / name
        target = course.root / "submitted" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", str(source), str(target)], check=True)
    sequential = {s.student: (s.score, s.flags) for s in course.grade(ASSIGNMENT, jobs=1, progress=False,
                                                                       limits=LIMITS, warm=False)}
    assert sequential == {name: (batch["summaries"][name].score, batch["summaries"][name].flags) for name in subset}


def test_grading_refuses_to_run_unsandboxed_unless_asked(tmp_path_factory, tmp_path):
    # With bubblewrap out of reach, `grade` must stop before running any submission.
    released_copy(tmp_path_factory, tmp_path / "course")
    environment = {**os.environ, "PATH": "/nonexistent"}
    result = subprocess.run([sys.executable, "-m", "attention_course.grading.cli", "grade", ASSIGNMENT,
                             "--course", str(tmp_path / "course")], capture_output=True, text=True, env=environment,
                            timeout=300)
    assert result.returncode == 3
    assert "Refusing to run submissions unsandboxed" in result.stderr
