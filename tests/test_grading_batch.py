"""Safe batches: Ctrl-C, re-runs, and stock nbgrader touching the sandboxed grades.

- Ctrl-C during ``attention-course grade`` cancels the queue, stops the running sandbox, saves nothing
  half-graded, records what was graded, says how many, and exits 130; the next run grades the rest
  and does not grade again what it already graded.
- Stock ``nbgrader autograde`` (formgrader's button) replaces a sandboxed grade with one the
  student's kernel decided: ``grade`` notices, says so, and puts the sandboxed grade back; and
  ``feedback`` never shows hidden tests, whoever graded the notebook.
"""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from attention_course.grading.course import Course
from attention_course.grading.nbgrader_bridge import COURSE_ID, results_path
from grading_support import filled, released_copy, submit_all
from in_process import solution_cells, solution_notebook

ASSIGNMENT = "soft-hard"
pytestmark = pytest.mark.slow

# Seconds of CPU in a cell of the student's own: long enough to be interrupted in the middle of.
SLOW_CELL = "total = 0\nfor number in range(60_000_000):\n    total += number"
# A softmax that gives float32 for float64 scores (the visible tests use float32 only), and a cell that
# switches off stock nbgrader's hidden tests in the student's own kernel: stock gives 10, the grader 8.
FLOAT32_SOFTMAX = ("def softmax(scores, dim=-1):\n    e = (scores - scores.amax(dim=dim, keepdim=True)).exp()\n"
                   "    return (e / e.sum(dim=dim, keepdim=True)).float()")
FORGES_STOCK = ("try:\n    import attention_course.grading.stock as stock\n    stock.run_hidden_check = lambda *args: None\n"
                "except ImportError:\n    pass")


def _solution() -> dict[str, str]:
    cells = solution_cells(ASSIGNMENT)
    return {c.metadata["nbgrader"]["grade_id"]: cells[c.metadata["nbgrader"]["grade_id"]]
            for c in solution_notebook(ASSIGNMENT).cells if (c.metadata.get("nbgrader") or {}).get("solution")}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "attention_course.grading.cli", *args]


MARK = f"ATTENTION_COURSE_TEST_BATCH={os.getpid()}"


def _marked_processes() -> set[int]:
    """Processes started by the graders this test runs (they inherit MARK in their environment)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if MARK.encode() in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.add(int(entry))
            except OSError:
                pass
    return found


def _score(course: Course, student: str) -> float | None:
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        try:
            return gradebook.find_submission(ASSIGNMENT, student).score
        except Exception:
            return None


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp("batch") / "course")
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    submit_all(course, ASSIGNMENT, {
        "a-quick": filled(released, _solution()),
        **{student: filled(released, _solution(), extra_cells=[SLOW_CELL]) for student in ("b-slow", "c-slow", "d-slow")},
        "e-forges-stock": filled(released, {**_solution(), "softmax": FLOAT32_SOFTMAX + "\n\n" + FORGES_STOCK})})
    return course


def _left_in(folder: Path, wait_s: float = 30) -> list[str]:
    """What is in ``folder`` (a temp dir whose grader is gone), given ``wait_s`` for it to be cleaned up."""
    deadline = time.monotonic() + wait_s
    while (left := sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture(scope="module")
def interrupted(course, tmp_path_factory):
    name, value = MARK.split("=")
    tmp = tmp_path_factory.mktemp("grader-tmp")  # the grader's TMPDIR
    # As from a terminal: Ctrl-C's default action, even when this suite runs in the background of a
    # script (where SIGINT is inherited as ignored, and Python then installs no handler for it).
    process = subprocess.Popen(_cli("grade", ASSIGNMENT, "--course", str(course.root), "--jobs", "1"),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, name: value, "TMPDIR": str(tmp)},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = results_path(course.results_dir, ASSIGNMENT, "a-quick", ASSIGNMENT)
    deadline = time.monotonic() + 300
    while not first.is_file() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    time.sleep(2)  # b-slow's sandbox is running now
    running = _marked_processes() - {process.pid}
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    stdout, stderr = process.communicate(timeout=120)
    return dict(returncode=process.returncode, stdout=stdout, stderr=stderr, seconds=time.monotonic() - started,
                running=running, leftover=_marked_processes(), left_in_tmp=_left_in(tmp))


def test_ctrl_c_stops_the_batch_says_how_far_it_got_and_exits_130(interrupted):
    assert interrupted["returncode"] == 130, interrupted["stderr"][-2000:]
    assert "interrupted: 1 of 5 submissions graded and recorded" in interrupted["stderr"]
    assert interrupted["seconds"] < 30
    assert interrupted["running"], "no sandbox was running when Ctrl-C came: the test proves nothing"
    assert interrupted["leftover"] == set()
    assert interrupted["left_in_tmp"] == []  # no warm template's spool, no run's folder


def test_ctrl_c_records_what_was_graded_and_nothing_half_graded(course, interrupted):
    assert _score(course, "a-quick") == 10
    for student in ("b-slow", "c-slow", "d-slow", "e-forges-stock"):
        assert not results_path(course.results_dir, ASSIGNMENT, student, ASSIGNMENT).exists()
        assert _score(course, student) is None


@pytest.fixture(scope="module")
def resumed(course, interrupted):
    result = subprocess.run(_cli("grade", ASSIGNMENT, "--course", str(course.root), "--jobs", "2"),
                            capture_output=True, text=True, timeout=900)
    return result


def test_the_next_run_grades_the_rest_and_not_again_what_was_graded(course, resumed):
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    lines = {line.split()[0]: line for line in resumed.stdout.splitlines() if line.strip() and line.split()[0] in
             {"a-quick", "b-slow", "c-slow", "d-slow", "e-forges-stock"}}
    assert "unchanged since its last grade" in lines["a-quick"]
    assert all("unchanged" not in lines[s] for s in ("b-slow", "c-slow", "d-slow", "e-forges-stock"))
    assert [_score(course, s) for s in ("a-quick", "b-slow", "c-slow", "d-slow", "e-forges-stock")] == [10, 10, 10, 10, 8]


@pytest.fixture(scope="module")
def after_stock_autograde(course, resumed):
    """Formgrader's "autograde" button on one student: stock nbgrader, the student's kernel deciding."""
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", ASSIGNMENT, "--force",
                    "--student", "e-forges-stock", f"--CourseDirectory.root={course.root}",
                    f"--CourseDirectory.course_id={COURSE_ID}"], capture_output=True, text=True, cwd=course.root,
                   env=environment, timeout=600, check=True)
    return _score(course, "e-forges-stock")


def test_feedback_hides_the_hidden_tests_even_of_a_stock_autograded_notebook(course, after_stock_autograde):
    assert after_stock_autograde == 10  # the forged stock grade
    graded = (course.root / "autograded" / "e-forges-stock" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    assert "run_hidden_check" in graded  # stock nbgrader kept the hidden tests in the autograded notebook
    feedback = course.feedback(ASSIGNMENT).folder
    pages = list(feedback.rglob("*.html"))
    assert len(pages) == 5
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        assert "HIDDEN TESTS" not in text, page
        # (e-forges-stock's own code names run_hidden_check; the hidden tests import it and call it with the
        # assignment's name)
        assert f'run_hidden_check("{ASSIGNMENT}"' not in text, page
        assert "from attention_course.grading.stock import" not in text, page


def test_grade_notices_a_stock_autograde_and_puts_the_sandboxed_grade_back(course, after_stock_autograde):
    result = subprocess.run(_cli("grade", ASSIGNMENT, "--course", str(course.root), "--jobs", "2"),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("e-forges-stock"))
    assert "the gradebook no longer held the sandboxed grade" in line
    assert _score(course, "e-forges-stock") == 8
    assert "unchanged since its last grade" in next(l for l in result.stdout.splitlines() if l.startswith("a-quick"))
