"""The batch: every submission of an assignment graded, on this machine's threads or a Dask cluster's
workers, with a progress bar, and Ctrl-C that stops cleanly; each student recorded as soon as they are
graded (:mod:`records`), while the others are still being graded."""

from __future__ import annotations

import concurrent.futures
import functools
import os
import sys
import threading
import traceback
from pathlib import Path

from tqdm import tqdm

from attention_course.grading import sandbox
from attention_course.grading.checks import checks_for
from attention_course.grading.errors import GradingInterrupted
from attention_course.grading.fingerprints import parts, release_digest, release_fingerprint, submission_fingerprint
from attention_course.grading.grade import NotebookResult, grade_notebook
from attention_course.grading.intake import (
    adopt_renamed_notebook, adopt_translation, folder_notes, people, students as all_students,
)
from attention_course.grading.layout import Layout, tested_ids
from attention_course.grading.records import Recorder, StudentSummary, all_recorded_scores, expected_scores
from attention_course.grading.regrade import Regrades
from attention_course.grading.report import write_reports


def grade(layout: Layout, assignment: str, *, jobs: int | None = None, sandboxed: bool = True,
          limits: sandbox.Limits = sandbox.Limits(), students: list[str] | None = None,
          progress: bool = True, force: bool = False, cluster: str | None = None,
          warm: bool = True) -> list[StudentSummary]:
    """Grade every submission of ``assignment``; one failure never stops the batch. See :meth:`Course.grade`."""
    if cluster is not None and jobs is not None:
        raise ValueError("a cluster's workers decide how many submissions are graded at once: no jobs with a cluster")
    if sandboxed and cluster is None:
        sandbox.check_available()
    checks = checks_for(assignment)
    notebooks = layout.notebooks(assignment)
    if not notebooks:
        raise RuntimeError(f"{assignment} is not released in {layout.root}: run `attention-course release` first")
    released = {nb: layout.released(assignment, nb) for nb in notebooks}
    languages = {nb: layout.released_languages(assignment, nb) for nb in notebooks}  # {nb: {language: release}}
    tested = {nb: tested_ids(released[nb]) for nb in notebooks}
    seed = layout.seed(assignment)
    students = students if students is not None else all_students(layout, assignment)
    known = people(layout, assignment)
    summaries = {s: StudentSummary(s, name=known[s].name if s in known else "") for s in students}
    release_folder = layout.release_folder(assignment)
    release_print = release_fingerprint(release_folder, seed)
    release_files = release_digest(release_folder)
    recorded = all_recorded_scores(layout, assignment) if not force else {}
    interrupted = threading.Event()
    reused: set[str] = set()
    regrades = Regrades(layout, assignment)

    def work(student: str) -> None:
        folder = layout.submission_folder(assignment, student)
        chosen = {nb: adopt_translation(folder, nb, languages[nb]) for nb in notebooks}  # {nb: (language, notes)}
        renamed = adopt_renamed_notebook(folder, notebooks, released[notebooks[0]])
        if renamed:  # (a renamed copy adopted just now: its language is the copy's)
            chosen.update({nb: adopt_translation(folder, nb, languages[nb]) for nb in renamed})
        fingerprint = submission_fingerprint(folder, notebooks, release_print)
        paths = [layout.results_path(assignment, student, nb) for nb in notebooks]
        if not force and _unchanged(paths, fingerprint, recorded.get(student), summaries[student]):
            reused.add(student)
            return
        regrades.keep(student, paths)
        made_of = parts(folder, notebooks, release_files, seed)
        grade_one = grade_notebook if remote is None else functools.partial(
            remote.grade_notebook, assignment=assignment, student=student)
        results = []
        for nb in notebooks:
            if interrupted.is_set():
                return
            nb_checks = {g: c for g, c in checks.items() if g in tested[nb]}
            language, language_notes = chosen[nb]
            # (the Chinese notebook is compared with the Chinese release: its read-only cells are translated)
            result = grade_one(folder / f"{nb}.ipynb", languages[nb].get(language, released[nb]), nb_checks,
                               sandboxed=sandboxed, limits=limits, release_folder=release_folder, seed=seed,
                               fingerprint=fingerprint, warm=warm, language=language)
            result.flags.extend(language_notes)
            result.flags.extend(folder_notes(folder, notebooks, release_folder))
            if nb in renamed:
                result.flags.append(f"notebook renamed to {renamed[nb]}: graded as {nb}.ipynb")
            result.made_of = made_of
            results.append(result)
        if interrupted.is_set():
            return  # a run cut short by the interrupt is no grade: save nothing
        for path, result in zip(paths, results):
            result.save(path)
        regrades.graded(student, results)

    remote = None
    if cluster is not None:
        from attention_course.grading.cluster import Cluster

        remote = Cluster(cluster, sandboxed=sandboxed)
        if progress:
            print(f"grading on the Dask cluster at {cluster}: {remote.workers} worker{'s' if remote.workers != 1 else ''}, "
                  f"{remote.threads} thread{'s' if remote.threads != 1 else ''}", file=sys.stderr)
    # With a cluster, twice its threads in flight: a worker finishing a notebook finds the next one queued.
    jobs = 2 * remote.threads if remote is not None else jobs or os.cpu_count() or 1
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    bar = tqdm(total=len(students), desc=f"grading {assignment}", unit="student", disable=not progress, file=sys.stderr)
    finished: set[str] = set()
    recorder = Recorder(layout, assignment, notebooks, summaries, reused)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    futures = {pool.submit(work, s): s for s in students}
    try:
        for future in concurrent.futures.as_completed(futures):
            student = futures[future]
            error = future.exception()
            if error is not None:  # the grader's own failure: no grade, and said loudly
                where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
                at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
                summaries[student].flags.append(f"grader error: {type(error).__name__}: {error}{at}")
                print(f"grader error for {student}:\n" + "".join(traceback.format_exception(error)), file=sys.stderr)
            finished.add(student)
            recorder.add(student)
            bar.update()
    except KeyboardInterrupt:
        interrupted.set()
        for future in futures:
            future.cancel()
        if remote is not None:
            remote.cancel()
        try:
            sandbox.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
        except KeyboardInterrupt:  # a second Ctrl-C: stop at once, record nothing more
            sandbox.stop_all()
            bar.close()
            raise GradingInterrupted(0, len(students), recorded=False) from None
        bar.close()
        recorder.close()
        done = [s for s in students if s in finished and (s in reused or all(
            layout.results_path(assignment, s, nb).is_file() for nb in notebooks))]
        regrades.write()
        _write_reports(layout, assignment)
        raise GradingInterrupted(len(done), len(students), recorded=True) from None
    finally:
        if remote is not None:
            remote.close()
    pool.shutdown(wait=True)
    sandbox.close_templates(of_ended_threads=True)  # the pool's threads are done, and their templates with them
    bar.close()
    recorder.close()
    regrades.write()
    _write_reports(layout, assignment)
    return [summaries[s] for s in students]


def _write_reports(layout: Layout, assignment: str) -> None:
    """The reports after a batch (``report.write_reports``). The grades are recorded by now: should the class
    report fail, it is said (and ``attention-course report`` can write it later), never a lost batch."""
    try:
        write_reports(layout, assignment)
    except Exception as error:  # (not KeyboardInterrupt)
        where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
        print(f"the class report could not be written ({type(error).__name__}: {error}"
              + (f", at {Path(where.filename).name}:{where.lineno}" if where else "") + "); the grades are recorded. "
              f"Run `attention-course report {assignment}` to try again, and please report this.", file=sys.stderr)


def _unchanged(paths: list[Path], fingerprint: str, recorded: dict[str, float] | None, summary: StudentSummary) -> bool:
    """Whether the saved grade is still this submission's, and the gradebook still holds it (``recorded``:
    the gradebook's scores of the student when the batch began)."""
    try:
        results = [NotebookResult.load(p) for p in paths]
    except (OSError, ValueError, TypeError):
        return False
    if not all(r.fingerprint == fingerprint for r in results):
        return False
    if recorded is not None and recorded == expected_scores(results):
        return True
    if recorded is not None:
        summary.flags.append("the gradebook no longer held the sandboxed grade (stock nbgrader autograde "
                             "overwrote it?): graded again")
    return False
