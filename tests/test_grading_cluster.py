"""`attention-course grade --cluster`: grading through a real Dask scheduler and real workers.

A scheduler and two workers run as separate processes on 127.0.0.1. A mixed batch of the soft-hard
assignment (correct, buggy and hostile submissions, and a missing notebook) is graded through them
while one worker is killed (SIGKILL) in the middle of a sandboxed run; the gradebook, the saved
results and the report must then equal those of a local ``jobs=1`` run of the same batch, bit for
bit (less the seconds, which are measurements). Workers that would grade differently (other grader
code, no bubblewrap) are refused by name, and an unreachable scheduler gets one line.

The workers run without a nanny (``--no-nanny``): the process the test starts is the worker itself,
so killing it takes the worker off the cluster for good, as when a machine dies; with a nanny, a
killed worker would be restarted in its place.

The workers' temp dir (TMPDIR) is a folder of the test's own: once every worker is gone, the killed
one included, it must be empty again (nothing the grader made there, such as a warm template's
spool, is left behind).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest
from nbgrader.api import Gradebook

from adversarial_corpus import ATTACKS, WRONG
from attention_course.grading import sandbox
from attention_course.grading.course import Course
from attention_course.grading.nbgrader_bridge import COURSE_ID
from grading_support import files_left, filled, released_copy, submit, submit_all
from test_grading_soft_hard import SAMPLES

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "soft-hard"
LIMITS = sandbox.Limits(cell_cpu_s=15, case_cpu_s=5, idle_s=20)
DASK = Path(sys.executable).with_name("dask")
STARTUP_S = 180  # a guard against a process that never comes up, not a measurement
MEASURED = {"seconds", "cpu_seconds"}  # timings: of a NotebookResult, of each of its cells, of the report
# student -> (solution cells, other edits, how the file is handed in)
BATCH = {
    "correct": (SAMPLES["correct-other-style"][0], {}, None),
    "buggy-no-max-subtraction": (SAMPLES["no-max-subtraction"][0], {}, None),
    "buggy-wrong-axis": (SAMPLES["softmax-wrong-axis"][0], {}, None),
    "hostile-always-equal": (ATTACKS["always-equal"]["answers"], {}, None),
    "hostile-forbidden-getattr": (ATTACKS["forbidden-getattr"]["answers"], {}, None),
    "hostile-os-exit": (WRONG, {"extra_cells": ATTACKS["os-exit"]["extra"]}, None),
    "missing-notebook": (WRONG, {}, "missing"),
}
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class DaskProcesses:
    """A scheduler and workers, each a process of its own (in its own process group), all stopped by ``close``."""

    def __init__(self, folder: Path):
        from distributed import Client

        self.folder = folder
        self.tmp = folder / "tmp"  # the workers' TMPDIR
        self.tmp.mkdir()
        self.processes: dict[str, subprocess.Popen] = {}
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self._start("scheduler", [str(DASK), "scheduler", "--host", "127.0.0.1", "--port",
                                  self.address.rsplit(":", 1)[1], "--no-dashboard"])
        deadline = time.monotonic() + STARTUP_S
        while True:  # the scheduler listens once it is up
            self._alive("scheduler")
            try:
                self.client = Client(self.address, timeout=5, set_as_default=False)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
        self.killed: set[str] = set()

    def _start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = (self.folder / f"{name}.log").open("wb")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, cwd=self.folder, env={**os.environ, **(env or {})})
        log.close()
        self.processes[name] = process
        return process

    def _alive(self, name: str) -> None:
        process = self.processes[name]
        if process.poll() is not None:
            log = (self.folder / f"{name}.log").read_text(errors="replace")
            pytest.fail(f"{name} exited with status {process.returncode}:\n{log[-3000:]}")

    def start_workers(self, *names: str, env: dict[str, str] | None = None) -> None:
        """Workers with one thread each, no nanny (see the module's docstring); returns once all are registered."""
        for name in names:
            (self.folder / name).mkdir()
            self._start(name, [str(DASK), "worker", self.address, "--name", name, "--nthreads", "1", "--no-nanny",
                               "--no-dashboard", "--local-directory", str(self.folder / name)],
                        {"TMPDIR": str(self.tmp), **(env or {})})
        deadline = time.monotonic() + STARTUP_S
        while not set(names) <= self.worker_names():
            for name in names:
                self._alive(name)
            assert time.monotonic() < deadline, f"workers {names} did not register with the scheduler"
            time.sleep(0.2)

    def worker_names(self) -> set[str]:
        return {str(info["name"]) for info in self.client.scheduler_info()["workers"].values()}

    def executing(self) -> set[str]:
        """The workers running a task now (asked of each worker)."""
        running = self.client.run(lambda dask_worker: (str(dask_worker.name), dask_worker.state.executing_count),
                                  on_error="return")
        return {report[0] for report in running.values() if isinstance(report, tuple) and report[1]}

    def sandboxes_of(self, name: str) -> list[psutil.Process]:
        """The bubblewrap sandboxes that worker ``name`` is running now."""
        try:
            children = psutil.Process(self.processes[name].pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        found = []
        for child in children:
            try:
                if child.name() == "bwrap":
                    found.append(child)
            except psutil.NoSuchProcess:
                continue
        return found

    def kill(self, name: str) -> None:
        """SIGKILL to the worker's process group: it dies mid-task, as with a machine that fails."""
        os.killpg(self.processes[name].pid, signal.SIGKILL)
        self.processes[name].wait()
        self.killed.add(name)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass
        for name, process in reversed(list(self.processes.items())):
            try:
                descendants = psutil.Process(process.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                descendants = []
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            for child in descendants:  # a sandbox in a session of its own
                try:
                    child.kill()
                except psutil.NoSuchProcess:
                    pass
            process.wait()

    def left_in_tmp(self, wait_s: float = 30) -> list[str]:
        """What the workers left in their TMPDIR, once every worker is gone (given ``wait_s`` to be cleaned up)."""
        deadline = time.monotonic() + wait_s
        while (left := files_left(self.tmp)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left


@pytest.fixture
def dask_processes(tmp_path_factory):
    processes = DaskProcesses(tmp_path_factory.mktemp("dask"))
    yield processes
    processes.close()
    left = processes.left_in_tmp()
    assert left == [], f"the workers left in their TMPDIR: {left}"


def _make_course(tmp_path_factory, root: Path) -> Course:
    course = released_copy(tmp_path_factory, root)
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    submit_all(course, ASSIGNMENT, {student: None if how == "missing" else filled(released, solution, **changes)
                                    for student, (solution, changes, how) in BATCH.items()})
    return course


def _gradebook(course: Course) -> dict:
    """Every student's record in nbgrader's gradebook: scores, grades, comments, flags (no timestamps)."""
    state = {}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for submission in gradebook.find_assignment(ASSIGNMENT).submissions:
            notebooks = {}
            for notebook in submission.notebooks:
                notebooks[notebook.name] = {
                    "flagged": notebook.flagged,
                    "grades": sorted((g.name, g.auto_score, g.manual_score, g.extra_credit, g.max_score,
                                      g.needs_manual_grade) for g in notebook.grades),
                    "comments": sorted((c.name, c.auto_comment, c.manual_comment) for c in notebook.comments),
                }
            state[submission.student.id] = {"score": submission.score, "max_score": submission.max_score,
                                            "needs_manual_grade": submission.needs_manual_grade, "notebooks": notebooks}
    return state


def _submission_rows(course: Course) -> list[tuple[str, int]]:
    """(student, how many submission records) for every student the gradebook has a submission of."""
    with closing(sqlite3.connect(course.root / "gradebook.db")) as db:
        return sorted(db.execute("SELECT student_id, COUNT(*) FROM submitted_assignment GROUP BY student_id"))


def _unmeasured(data):
    """``data`` (JSON) less every timing in it, at any depth (the result's and each cell's)."""
    if isinstance(data, dict):
        return {k: _unmeasured(v) for k, v in data.items() if k not in MEASURED}
    if isinstance(data, list):
        return [_unmeasured(v) for v in data]
    return data


def _results(course: Course) -> dict:
    """Every saved NotebookResult, as stored, less its timings."""
    return {path.relative_to(course.results_dir).as_posix(): _unmeasured(json.loads(path.read_text(encoding="utf-8")))
            for path in sorted(course.results_dir.rglob("*.json"))}


def _autograded(course: Course) -> dict[str, bytes]:
    """The notebooks nbgrader wrote with the grades in them (what formgrader and the feedback show)."""
    folder = course.root / "autograded"
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _report(course: Course) -> list[dict]:
    with (course.root / "reports" / f"{ASSIGNMENT}.csv").open(encoding="utf-8-sig") as table:
        return [{k: v for k, v in row.items() if k not in MEASURED} for row in csv.DictReader(table)]


def test_a_cluster_that_loses_a_worker_mid_batch_grades_as_a_local_run(dask_processes, tmp_path_factory, tmp_path):
    local = _make_course(tmp_path_factory, tmp_path / "local")
    # The same course and batch, byte for byte (the course seed included), graded through the cluster.
    shutil.copytree(local.root, tmp_path / "cluster")
    remote = Course(tmp_path / "cluster")
    dask_processes.start_workers("worker-1", "worker-2")

    expected = {s.student: (s.score, s.flags) for s in local.grade(ASSIGNMENT, jobs=1, progress=False, limits=LIMITS)}

    killed: list[tuple[str, int]] = []  # (worker, pid of a sandbox process it had)
    finished = threading.Event()

    def kill_a_busy_worker() -> None:  # once a worker runs a task and a sandbox (the check before the batch is no task)
        while not finished.is_set() and not killed:
            for name in sorted(dask_processes.executing()):
                running = dask_processes.sandboxes_of(name)
                if running:
                    dask_processes.kill(name)
                    killed.append((name, running[0].pid))
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
    killer.start()
    try:
        summaries = remote.grade(ASSIGNMENT, cluster=dask_processes.address, progress=False, limits=LIMITS)
    finally:
        finished.set()
        killer.join()

    assert killed, "no worker was seen running a sandbox before the batch ended"
    [(victim, sandbox_pid)] = killed
    assert victim not in dask_processes.worker_names()  # it is gone: its task ran again on the other worker
    assert _gone(sandbox_pid)  # the sandbox died with its worker
    got = {s.student: (s.score, s.flags) for s in summaries}
    assert got == expected
    assert sorted(got) == sorted(BATCH)
    assert not any("grader error" in flag for _, flags in got.values() for flag in flags), got
    assert expected["correct"][0] == 10 and expected["hostile-always-equal"][0] == 0  # (the batch is the mix it claims)

    assert _gradebook(remote) == _gradebook(local)
    assert sorted(_gradebook(remote)) == sorted(BATCH)
    assert _submission_rows(remote) == _submission_rows(local) == [(s, 1) for s in sorted(BATCH)]
    assert _results(remote) == _results(local)
    assert len(_results(remote)) == len(BATCH)
    assert _report(remote) == _report(local)
    assert _autograded(remote) == _autograded(local)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_course.grading.cli", *args],
                          capture_output=True, text=True, timeout=600)


def _one_line(ran: subprocess.CompletedProcess) -> str:
    assert ran.returncode == 2, (ran.returncode, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    return lines[0]


@pytest.fixture(scope="module")
def released_course(tmp_path_factory) -> Course:
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp("released") / "course")
    submit(course.root, "someone", ASSIGNMENT, ASSIGNMENT, filled(course.released(ASSIGNMENT, ASSIGNMENT), WRONG))
    return course


def test_workers_that_would_grade_differently_are_refused_by_name(dask_processes, released_course, tmp_path):
    from attention_course.grading.cluster import Cluster, ClusterError

    with pytest.raises(ClusterError, match="has no workers"):
        Cluster(dask_processes.address, timeout=1)
    # Another version of the grader: this package with one of its files changed, first on the worker's path.
    other = tmp_path / "other-version"
    shutil.copytree(ROOT / "attention_course", other / "attention_course",
                    ignore=shutil.ignore_patterns("__pycache__"))
    verdicts = other / "attention_course" / "grading" / "verdicts.py"
    verdicts.write_text(verdicts.read_text(encoding="utf-8") + "\n# a different grader\n", encoding="utf-8")
    dask_processes.start_workers("same-grader")
    dask_processes.start_workers("other-grader", env={"PYTHONPATH": str(other)})
    # A machine without bubblewrap: nothing on its PATH but the Python environment.
    dask_processes.start_workers("no-bubblewrap", env={"PATH": str(Path(sys.executable).parent)})

    with pytest.raises(ClusterError) as refused:
        Cluster(dask_processes.address)
    message = str(refused.value)
    assert "\n" not in message
    assert "worker other-grader at tcp://" in message and "other grader code" in message
    assert "worker no-bubblewrap at tcp://" in message and "bubblewrap" in message.split("no-bubblewrap", 1)[1]
    assert "same-grader" not in message

    ran = _cli("grade", ASSIGNMENT, "--course", str(released_course.root), "--cluster", dask_processes.address)
    line = _one_line(ran)
    assert "other-grader" in line and "no-bubblewrap" in line
    assert not (released_course.root / "grader-results").exists()  # nothing graded, nothing recorded


def test_an_unreachable_scheduler_gets_one_line(released_course):
    address = f"tcp://127.0.0.1:{_free_port()}"
    line = _one_line(_cli("grade", ASSIGNMENT, "--course", str(released_course.root), "--cluster", address))
    assert f"cannot reach a Dask scheduler at {address}" in line


@pytest.mark.parametrize("args, says", [
    (["--cluster", "scheduler:port"], "is not a Dask scheduler's address"),
    (["--cluster", "tcp://127.0.0.1:8786", "--jobs", "2"], "--cluster and --jobs do not go together"),
])
def test_a_mistyped_cluster_gets_one_line(released_course, capsys, args, says):
    from attention_course.grading.cli import main

    assert main(["grade", ASSIGNMENT, "--course", str(released_course.root), *args]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], lines


def test_a_task_sees_the_submission_as_the_coordinator_does(released_course, tmp_path):
    """What a worker rebuilds from a task (no Dask here): the same result as grading the file in place, for files
    that never reach a sandbox (missing, empty, too large, not JSON); and a worker that would grade otherwise
    refuses the task."""
    from attention_course.grading.checks import checks_for
    from attention_course.grading.cluster import WorkerUnfit, _environment, _grade_on_worker, data_files, make_job
    from attention_course.grading.grade import grade_notebook
    from attention_course.grading.submission import MAX_NOTEBOOK_BYTES

    released = released_course.released(ASSIGNMENT, ASSIGNMENT)
    release_folder = released_course.root / "release" / ASSIGNMENT
    checks = checks_for(ASSIGNMENT)
    files = {"missing": None, "empty": b"", "not JSON": b"{ not a notebook", "too large": MAX_NOTEBOOK_BYTES + 1}
    for what, content in files.items():
        path = tmp_path / what.replace(" ", "-") / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir()
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, int):
            with path.open("wb") as sparse:
                sparse.truncate(content)
        arguments = dict(seed=7, sandboxed=True, limits=LIMITS, fingerprint=f"print of {what}")
        job = make_job(path, released, checks, assignment=ASSIGNMENT, data_files=data_files(release_folder),
                       here=_environment(), **arguments)
        local = grade_notebook(path, released, checks, release_folder=release_folder, **arguments)
        assert _grade_on_worker(job) == local, what
        assert not local.readable and local.flags, what

    job["here"] = {**job["here"], "grader": "another grader"}
    with pytest.raises(WorkerUnfit, match="runs other grader code"):
        _grade_on_worker(job)


def test_a_task_carries_the_data_files_that_grading_copies(tmp_path):
    from attention_course.grading.cluster import data_files

    for name in ("corpus.json", "table.csv", "weights.pt", "timestamp.txt", "soft-hard.ipynb", "notes.md"):
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "folder.json").mkdir()
    assert data_files(tmp_path) == {"corpus.json": b"corpus.json", "table.csv": b"table.csv", "weights.pt": b"weights.pt"}
