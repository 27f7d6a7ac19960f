"""Grading on many machines through a Dask distributed cluster (``attention-course grade --cluster``).

The one module that knows Dask. The coordinating machine (the one with the course directory) keeps
everything it does locally: which submissions to grade, the fingerprints, saving results, the
gradebook, the report, the progress bar and the summary. Only the sandboxed grading of one notebook,
:func:`grade.grade_notebook`, runs on a worker, as one Dask task per submitted notebook.

A task carries everything it needs by value (the notebook's bytes, the released notebook, the
assignment's data files, the grade ids, the seed, the limits), so a worker needs neither the course
directory nor a shared file system: only this package at the same version, the pinned requirements
and, unless grading unsandboxed, bubblewrap. Before the batch every worker is asked what grader it
runs and whether its sandbox starts; a worker that differs is refused by name.

A task's key is a function of what it grades (assignment, student, notebook, the submission's
fingerprint, the limits), so a task that was running on a worker that died is the same task when the
scheduler runs it again elsewhere: its result reaches the coordinator once, and only the coordinator
writes the gradebook.
"""

from __future__ import annotations

import hashlib
import json
import platform
import socket
import tempfile
import threading
from concurrent.futures import CancelledError
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path

from attention_course.grading import sandbox
from attention_course.grading.errors import CourseError

CONNECT_SECONDS = 15  # to reach the scheduler, and then for its first worker to show up
RETRIES = 1  # a task that raised (a worker's full disk, say) runs once more; a dead worker's task always reruns
# Packages whose version can change a grade (the references compute with them on the worker).
GRADING_PACKAGES = ("torch", "numpy", "nbformat")


class ClusterError(CourseError):
    """The cluster cannot grade: unreachable, no workers, or a worker that would grade differently."""


class WorkerUnfit(RuntimeError):
    """Raised by a task on a worker that would grade differently (one that joined after the check): no grade."""


class Cluster:
    """A connection to a Dask scheduler whose every worker has been checked to grade as this machine does."""

    def __init__(self, address: str, *, sandboxed: bool = True, timeout: float = CONNECT_SECONDS):
        from distributed import Client

        self.address = address
        _check_address(address)
        try:
            self.client = Client(address, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as error:
            reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
            raise ClusterError(f"cannot reach a Dask scheduler at {address} ({reason}): is `dask scheduler` "
                               "running there, and is the address tcp://HOST:PORT?") from None
        self._lock = threading.Lock()
        self._running: set = set()
        self._cancelled = False
        self._release_files: dict[str, dict[str, bytes]] = {}
        self._here = _environment()  # what every worker must grade with
        try:
            try:
                self.client.wait_for_workers(1, timeout=timeout)
            except TimeoutError:
                raise ClusterError(f"the Dask scheduler at {address} has no workers: start some with "
                                   f"`dask worker {address}`") from None
            self._check_workers(sandboxed)
        except BaseException:
            self.close()
            raise

    # -- the checks before a batch ----------------------------------------------------------

    def _check_workers(self, sandboxed: bool) -> None:
        from distributed.comm.core import CommClosedError

        reports = self.client.run(_worker_report, sandboxed, on_error="return")
        present = set(self.client.nthreads())
        problems, checked = [], 0
        for address, report in sorted(reports.items()):
            if isinstance(report, BaseException) and (isinstance(report, CommClosedError) or address not in present):
                continue  # it left during the check (the scheduler gives it no tasks)
            if isinstance(report, BaseException):
                problems.append(f"worker at {address} cannot run the grader ({type(report).__name__}: "
                                f"{str(report)[:200]}): install this package there")
                continue
            checked += 1
            worker = f"worker {report['name']} at {address}" if report["name"] != address else f"worker at {address}"
            problems.extend(f"{worker} {why}" for why in _unfit(report, self._here))
        if problems:
            raise ClusterError("refusing to grade on this cluster: " + "; ".join(problems))
        if not checked:
            raise ClusterError(f"the Dask scheduler at {self.address} has no workers left: start some with "
                               f"`dask worker {self.address}`")

    @property
    def threads(self) -> int:
        """The worker threads of the whole cluster: how many notebooks it grades at once."""
        return sum(self.client.nthreads().values())

    @property
    def workers(self) -> int:
        return len(self.client.nthreads())

    # -- grading ---------------------------------------------------------------------------

    def grade_notebook(self, submitted: Path, released, checks: dict, *, seed: int, release_folder: Path,
                       assignment: str, student: str, **options):
        """:func:`grade.grade_notebook` on a worker: the same arguments (and the assignment and student, which
        name the task), the same :class:`NotebookResult`. Its other keyword arguments (``sandboxed``,
        ``limits``, ``fingerprint`` …) go to the worker's ``grade_notebook`` as they are. Raises
        ``CancelledError`` once :meth:`cancel` was called."""
        from distributed import Future

        job = make_job(submitted, released, checks, assignment=assignment, seed=seed,
                       data_files=self._data_files(release_folder), here=self._here, **options)
        key = task_key(assignment, student, submitted.stem, seed, options)
        with self._lock:
            if self._cancelled:
                raise CancelledError()
            future: Future = self.client.submit(_grade_on_worker, job, key=key, retries=RETRIES, pure=False)
            self._running.add(future)
        try:
            return future.result()
        finally:
            with self._lock:
                self._running.discard(future)
            future.release()

    def _data_files(self, release_folder: Path) -> dict[str, bytes]:
        """:func:`data_files`, read once per release."""
        with self._lock:
            cached = self._release_files.get(str(release_folder))
        if cached is None:
            cached = data_files(release_folder)
            with self._lock:
                self._release_files[str(release_folder)] = cached
        return cached

    def cancel(self) -> None:
        """Ctrl-C: cancel every task in flight (their results are dropped) and submit no more."""
        with self._lock:
            self._cancelled = True
            running = list(self._running)
        if running:
            try:
                self.client.cancel(running)
            except Exception:  # the scheduler may be gone already; the futures end either way
                pass

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass


def _check_address(address: str) -> None:
    """A scheduler address Dask can connect to (``tcp://HOST:PORT``), or a :class:`ClusterError` saying so."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        protocol, location = parse_address(address)
        host, _ = parse_host_port(location, 8786)
    except (ValueError, TypeError):
        protocol, host = "", ""
    if protocol not in registry.backends or not host:
        raise ClusterError(f"{address!r} is not a Dask scheduler's address: give tcp://HOST:PORT (the scheduler "
                           "prints it when it starts; the port is 8786 unless chosen otherwise)")


def task_key(assignment: str, student: str, notebook: str, seed: int, options: dict) -> str:
    """The Dask key of grading one notebook: the same for the same work (the options carry the submission's
    fingerprint, which covers its bytes, the release, the seed and the grader), whichever worker runs it."""
    described = {name: asdict(value) if is_dataclass(value) else value for name, value in options.items()}
    digest = hashlib.sha256(json.dumps([assignment, student, notebook, seed, described], sort_keys=True,
                                       default=repr).encode()).hexdigest()
    return f"grade-{assignment}-{digest[:40]}"


def make_job(submitted: Path, released, checks: dict, *, assignment: str, seed: int, data_files: dict[str, bytes],
             here: dict, **options) -> dict:
    """Everything a worker needs to grade one notebook, by value (see :func:`_grade_on_worker`); ``options`` are
    grade_notebook's keyword arguments other than the seed and the release folder."""
    import nbformat

    from attention_course.grading.submission import MAX_NOTEBOOK_BYTES

    return {
        "assignment": assignment,
        "notebook_name": submitted.name,
        "submitted": _submitted_bytes(submitted, MAX_NOTEBOOK_BYTES),
        "released": nbformat.writes(released),
        "grade_ids": list(checks),  # the worker rebuilds the checks, in this order (it numbers the cases)
        "data_files": data_files,
        "seed": seed,
        "options": options,
        "here": here,
    }


def data_files(release_folder: Path) -> dict[str, bytes]:
    """The release's data files that grading copies next to the notebook, chosen by grade's own rule."""
    from attention_course.grading import grade

    return {path.name: path.read_bytes() for path in grade.data_files(release_folder)}


def _submitted_bytes(path: Path, largest: int):
    """What the worker needs to see the submitted file as this machine would: its bytes, None when there is no
    file, or only its size for a file too large to be read (the worker makes a sparse file of that size)."""
    if not path.is_file():
        return None
    size = path.stat().st_size
    return {"size": size} if size > largest else path.read_bytes()


# -- on the workers ------------------------------------------------------------------------------


def _environment() -> dict:
    """What a grade depends on besides its inputs: the grader's code and the versions of what it computes with."""
    from attention_course.grading.fingerprints import grader_fingerprint

    versions = {"python": platform.python_version()}
    for package in GRADING_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "missing"
    return {"grader": grader_fingerprint(), "versions": versions}


_SANDBOX_STARTS = threading.Event()  # set once this process has started a sandbox (a failure is probed again)


def _sandbox_problem() -> str:
    if not _SANDBOX_STARTS.is_set():
        try:
            sandbox.check_available()
        except (sandbox.SandboxUnavailable, OSError) as error:
            return str(error).splitlines()[0][:300] if str(error) else f"bubblewrap could not start ({type(error).__name__})"
        _SANDBOX_STARTS.set()
    return ""


def _worker_report(sandboxed: bool, dask_worker=None) -> dict:
    """On a worker: its environment, its name, and why its sandbox cannot start ("" when it can). (Dask passes
    ``dask_worker`` to a function that ``Client.run`` runs on every worker.)"""
    if dask_worker is None:
        from distributed import get_worker

        try:
            dask_worker = get_worker()
        except ValueError:
            pass
    name = str(dask_worker.name) if dask_worker is not None else socket.gethostname()
    return {**_environment(), "sandbox": _sandbox_problem() if sandboxed else "", "name": name}


def _unfit(report: dict, here: dict) -> list[str]:
    """Why a worker would grade otherwise than the coordinator (nothing when it would not)."""
    if report["grader"] != here["grader"]:
        return ["runs other grader code than the coordinator (it would give other grades): install the same "
                "version of this package there"]
    reasons = []
    differ = [f"{package} {report['versions'].get(package)} (the coordinator has {version})"
              for package, version in here["versions"].items() if report["versions"].get(package) != version]
    if differ:
        reasons.append(f"has other versions of {', '.join(differ)}: install the pinned requirements.txt there")
    if report["sandbox"]:
        reasons.append(f"cannot start the grader's sandbox ({report['sandbox']}): it needs bubblewrap, on Linux "
                       "with unprivileged user namespaces")
    return reasons


def _grade_on_worker(job: dict):
    """One Dask task: rebuild the submission and release in a private folder and grade it there."""
    import nbformat

    from attention_course.grading.checks import checks_for
    from attention_course.grading.grade import grade_notebook

    options = job["options"]
    report = _worker_report(options.get("sandboxed", True))
    reasons = _unfit(report, job["here"])
    if reasons:  # a worker that joined the cluster after the check
        raise WorkerUnfit(f"worker {report['name']} " + "; ".join(reasons))
    every_check = checks_for(job["assignment"])
    checks = {grade_id: every_check[grade_id] for grade_id in job["grade_ids"]}
    with tempfile.TemporaryDirectory(prefix="grade-remote-", dir=sandbox.scratch_folder()) as folder:
        submitted = Path(folder) / "submitted" / job["notebook_name"]
        release = Path(folder) / "release"
        submitted.parent.mkdir()
        release.mkdir()
        content = job["submitted"]
        if isinstance(content, bytes):
            submitted.write_bytes(content)
        elif isinstance(content, dict):
            with submitted.open("wb") as sparse:
                sparse.truncate(int(content["size"]))
        for name, data in job["data_files"].items():
            (release / Path(name).name).write_bytes(data)
        return grade_notebook(submitted, nbformat.reads(job["released"], as_version=4), checks,
                              seed=job["seed"], release_folder=release, **options)
