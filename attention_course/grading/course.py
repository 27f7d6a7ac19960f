"""An nbgrader course directory, and the instructor's workflows on it.

Layout (nbgrader's own): ``source/<assignment>/`` (copied from the repository's ``solutions/``),
``release/``, ``submitted/<student>/<assignment>/``, ``autograded/``, ``feedback/``, ``gradebook.db``.
The grader keeps its trusted results in ``grader-results/``, which no sandbox ever sees.
"""

from __future__ import annotations

import concurrent.futures
import csv
import functools
import hashlib
import io
import json
import os
import secrets
import shutil
import sys
import threading
import traceback
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config
from tqdm import tqdm

from attention_course.grading import lms, sandbox
from attention_course.grading.checks import checks_for
from attention_course.grading.grade import NotebookResult, grade_notebook
from attention_course.grading.gradebook import fitted, gradebook_url, has_gradebook, open_gradebook
from attention_course.grading.nbgrader_bridge import (
    COURSE_ID, record_in_gradebook, results_path, written_answers, written_cells,
)

REPOSITORY = Path(__file__).resolve().parents[2]
class CourseError(Exception):
    """An ordinary mistake (a missing course, a mistyped assignment, a file that is not what it should be):
    its message says what to do, in one line."""


class GradingInterrupted(Exception):
    """Ctrl-C during a batch: ``graded`` of ``total`` submissions were graded (and recorded, if ``recorded``)."""

    def __init__(self, graded: int, total: int, recorded: bool):
        super().__init__(f"interrupted: {graded} of {total} submissions graded")
        self.graded, self.total, self.recorded = graded, total, recorded


AWAITING_FEEDBACK = "written answers await a manual grade in formgrader (feedback once they are graded)"


@dataclass
class FeedbackReport:
    folder: Path
    written: int = 0
    skipped: Counter = field(default_factory=Counter)  # why -> how many students
    zips: list[Path] = field(default_factory=list)  # one per platform, for its feedback upload
    not_zipped: Counter = field(default_factory=Counter)  # why -> how many pages are in no zip
    math_inlined: int = 0  # pages whose math could not be typeset (no Node?): MathJax inlined instead


@dataclass
class StudentSummary:
    student: str
    name: str = ""
    score: float = 0.0  # as the gradebook has it: the autograded points and the hand-graded points given so far
    max_score: float = 0.0  # every point of the assignment, the hand-graded ones included
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    auto_score: float = 0.0  # the points of the tests the grader ran
    auto_max: float = 0.0
    awaiting: list[str] = field(default_factory=list)  # hand-graded answers with no grade yet (or to regrade)


@dataclass
class WrittenGrade:
    """A hand-graded cell of one submission (a written answer, a free-form code answer, a task), as the
    gradebook holds it: formgrader's manual score, and whether it awaits a (new) manual grade."""

    notebook: str
    grade_id: str
    points: float
    score: float  # nbgrader's: the manual score if given, else the auto score (0 for an unanswered cell), else 0
    manual: float | None
    awaiting: bool  # nbgrader's needs_manual_grade

    def label(self) -> str:
        if self.manual is None:
            return f"{self.grade_id} ({self.points:g} points)"
        return f"{self.grade_id} ({self.points:g} points; its grade of {self.manual:g} is marked for regrading)"


class Course:
    def __init__(self, root: Path, solutions: Path = REPOSITORY / "solutions"):
        self.root = root.resolve()
        self.solutions = solutions
        # nbgrader runs the `alembic` command of its own environment to migrate the gradebook.
        scripts = str(Path(sys.executable).parent)
        if scripts not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")

    # -- nbgrader plumbing -------------------------------------------------------------------

    @property
    def results_dir(self) -> Path:
        return self.root / "grader-results"

    def config(self) -> Config:
        config = Config()
        config.CourseDirectory.root = str(self.root)
        config.CourseDirectory.course_id = COURSE_ID
        config.CourseDirectory.db_url = gradebook_url(self.root)
        return config

    def api(self) -> NbGraderAPI:
        config = self.config()
        return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)

    def assignments(self) -> list[str]:
        return assignments_in(self.solutions)

    def notebooks(self, assignment: str) -> list[str]:
        return sorted(p.stem for p in (self.root / "release" / assignment).glob("*.ipynb"))

    def released(self, assignment: str, notebook: str):
        return nbformat.read(self.root / "release" / assignment / f"{notebook}.ipynb", as_version=4)

    # -- the course seed ---------------------------------------------------------------------

    @property
    def seeds_path(self) -> Path:
        return self.root / "grader" / "seeds.json"

    def seed(self, assignment: str, *, reseed: bool = False) -> int:
        """The assignment's course seed: drawn once (at release or first grade), stored, redrawn only on request."""
        seeds = json.loads(self.seeds_path.read_text(encoding="utf-8")) if self.seeds_path.is_file() else {}
        if reseed or assignment not in seeds:
            seeds[assignment] = secrets.randbits(62)
            _write_json(self.seeds_path, seeds)
        return int(seeds[assignment])

    # -- release -----------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether this is a course (made by ``release``), not a mistyped path."""
        return (self.root / "nbgrader_config.py").is_file()

    def require(self, assignment: str | None = None) -> None:
        """Raise :class:`CourseError` for a missing course or an assignment the course does not have."""
        if not self.exists():
            raise CourseError(f"no course at {self.root} (is --course mistyped?); create one with "
                              f"`attention-course release --course {self.root}`")
        if assignment is not None:
            self._require_assignment(assignment)

    def _require_assignment(self, assignment: str) -> None:
        if assignment not in self.assignments():
            raise CourseError(f"no assignment {assignment!r}; this course has: {', '.join(self.assignments())}")

    def generate(self, assignment: str, *, force: bool = False) -> None:
        """Copy the solution notebooks in as nbgrader source and run ``generate_assignment``.

        The instructor's files are kept: the course id is added to an existing ``nbgrader_config.py``
        (nothing else in it changes), and a ``source/<assignment>/`` edited since the grader wrote it is
        replaced only with ``force``."""
        self._require_assignment(assignment)
        self.root.mkdir(parents=True, exist_ok=True)
        self._merge_config()
        source = self.root / "source" / assignment
        wanted = _folder_digest(self.solutions / assignment)
        if source.is_dir() and not force:
            current = _folder_digest(source)
            if current not in (wanted, self._written_sources().get(assignment)):
                raise CourseError(f"{source} was edited since the grader wrote it: not replaced "
                                  f"(`attention-course release --force` replaces it with the course's {assignment})")
        shutil.rmtree(source, ignore_errors=True)
        shutil.copytree(self.solutions / assignment, source, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        written = self._written_sources()
        written[assignment] = _folder_digest(source)
        _write_json(self._sources_path, written)
        result = self.api().generate_assignment(assignment, force=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result['log']}{result.get('error', '')}")
        self.seed(assignment)  # drawn at release (kept if there is one already)

    @property
    def _sources_path(self) -> Path:  # {assignment: digest of source/<assignment>/ as the grader last wrote it}
        return self.root / "grader" / "sources.json"

    def _written_sources(self) -> dict[str, str]:
        path = self._sources_path
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def _merge_config(self) -> None:
        path = self.root / "nbgrader_config.py"
        line = f"c.CourseDirectory.course_id = {COURSE_ID!r}"
        if not path.is_file():
            path.write_text(f"c = get_config()  # noqa: F821\n{line}\n", encoding="utf-8")
            return
        text = path.read_text(encoding="utf-8")
        if line not in text:
            path.write_text(text.rstrip("\n") + f"\n\n# added by attention-course: the grader's gradebook course\n{line}\n",
                            encoding="utf-8")

    # -- submissions ---------------------------------------------------------------------------

    def students(self, assignment: str) -> list[str]:
        """Everyone with a submission folder, and everyone on the participant list given for this assignment."""
        submitted = self.root / "submitted"
        folders = {p.name for p in submitted.iterdir() if (p / assignment).is_dir()} if submitted.is_dir() else set()
        return sorted(folders | set(self.intake(assignment).get("roster", {})))

    def intake_path(self, assignment: str) -> Path:
        return self.root / "grader" / "intake" / f"{assignment}.json"

    def intake(self, assignment: str) -> dict:
        """What the LMS exports and participant lists said of each student: {"students": {key: …}, "roster": {key: …}}."""
        path = self.intake_path(assignment)
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        return {"students": data.get("students", {}), "roster": data.get("roster", {}),
                "roster_table": data.get("roster_table")}

    def people(self, assignment: str) -> dict[str, lms.Student]:
        """Every known student's LMS identity (the participant list's details over the export's)."""
        intake = self.intake(assignment)
        people = {key: lms.student_from_record(record) for key, record in intake["students"].items()}
        for key, record in intake["roster"].items():
            listed = lms.student_from_record(record)
            known = people.setdefault(key, listed)
            for name in ("name", "email", "sis_user_id", "sis_login_id", "section"):
                if getattr(listed, name):
                    setattr(known, name, getattr(listed, name))
        return people

    def import_roster(self, path: Path, assignment: str) -> list[lms.Student]:
        """Read a participant list (Moodle grading worksheet, Canvas gradebook export) for ``assignment``."""
        table = lms.read_roster_table(path)
        listed = lms.roster_students(table)
        intake = self.intake(assignment)
        intake["roster"] = {s.key: lms.student_record(s) for s in listed}
        intake["roster_table"] = list(table)
        _write_json(self.intake_path(assignment), intake)
        return listed

    def import_zip(self, archive: Path, assignment: str) -> "lms.Export":
        """Unpack an LMS export (Moodle or Canvas naming) into ``submitted/<student>/<assignment>/``.

        Each student's folder is replaced by what the export holds: the notebook chosen to grade (see
        :func:`lms.choose`), saved under the release's name, and its time. What else was submitted, why a
        file was chosen and why nothing was, are kept for the summary and the report."""
        export = lms.read_export(archive)
        notebooks = self.notebooks(assignment)
        released = {nb: self.released(assignment, nb) for nb in notebooks}
        intake = self.intake(assignment)
        roster = {key: lms.student_from_record(record) for key, record in intake["roster"].items()}
        for key, student in sorted(export.students.items()):
            record = lms.student_record(student)
            record.update(graded={}, others=[], problems=[])
            chosen: dict[str, lms.Received] = {}
            remaining = list(student.files)
            for nb in notebooks:
                choice = lms.choose(remaining if len(notebooks) > 1 else student.files, nb, _test_ids(released[nb]))
                if choice.file is None:
                    record["problems"].append(choice.problem)
                    continue
                remaining = [f for f in remaining if f is not choice.file]
                chosen[nb] = choice.file
                record["graded"][nb] = choice.why
                record["attachment"] = choice.file.order if student.lms == "canvas" else 0
            if len(notebooks) == 1:
                record["others"] = choice.others if choice.file is not None else []
            else:
                record["others"] = sorted(f"{f.name} (in {f.inside})" if f.inside else f.name for f in remaining)
            group, members = lms.group_of(student, roster)
            if group:  # graded for each member, each with their own identity (and feedback entry)
                for member in members:
                    entry = {**record, **lms.student_record(roster[member]), "group": group,
                             "group_submitted_as": student.submitted_as, "submitted_as": "", "late": student.late}
                    self._store_submission(assignment, member, chosen)
                    intake["students"][member] = entry
                continue
            self._store_submission(assignment, key, chosen)
            intake["students"][key] = record
        _write_json(self.intake_path(assignment), intake)
        return export

    def _store_submission(self, assignment: str, student: str, chosen: dict[str, "lms.Received"]) -> None:
        """A student's folder, replaced by the notebooks chosen from an export (each under the release's name)."""
        folder = self.root / "submitted" / student / assignment
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for nb, received in chosen.items():
            (folder / f"{nb}.ipynb").write_bytes(received.data)
            (folder / "timestamp.txt").write_text(received.when.strftime("%Y-%m-%d %H:%M:%S.%f %Z"))

    def _intake_flags(self, assignment: str, student: str, intake: dict) -> list[str]:
        record = intake["students"].get(student)
        if record is None:
            if student in intake["roster"] and not (self.root / "submitted" / student / assignment).is_dir():
                return ["no submission (on the participant list, not in any export)"]
            return []
        flags = []
        if record.get("group"):
            flags.append(f"group submission of {record['group']} (downloaded as {record.get('group_submitted_as', '')}), "
                         "graded for each member")
        if record.get("late"):
            flags.append("late (the LMS marked the submission LATE)")
        flags.extend(f"{nb}.ipynb: graded the file {why}" for nb, why in record.get("graded", {}).items() if why)
        flags.extend(f"nothing gradable: {problem}" for problem in record.get("problems", []))
        if record.get("others"):
            others = record["others"]
            flags.append(f"also submitted, not graded: {', '.join(others[:8])}"
                         + (f" and {len(others) - 8} more" if len(others) > 8 else ""))
        return flags

    # -- grading -------------------------------------------------------------------------------

    def grade(self, assignment: str, *, jobs: int | None = None, sandboxed: bool = True,
              limits: sandbox.Limits = sandbox.Limits(), students: list[str] | None = None,
              progress: bool = True, force: bool = False, cluster: str | None = None,
              warm: bool = True) -> list[StudentSummary]:
        """Grade every submission of ``assignment``; one failure never stops the batch.

        A submission whose fingerprint (its notebooks' bytes, the release, the course seed, the grader's
        code) matches its last grade, and whose gradebook scores still agree with that grade, is not graded
        again unless ``force``. On Ctrl-C the queued submissions are cancelled, the running sandboxes
        stopped, nothing half-graded is saved, the ones already graded are recorded, and
        :class:`GradingInterrupted` is raised.

        ``warm``: fork each sandboxed run from a warm template (one per grading thread, with PyTorch already
        imported) instead of starting a fresh interpreter; the grades are the same.

        With ``cluster`` (a Dask scheduler's address) each notebook is graded on the cluster's workers
        (see :mod:`cluster`); everything else, the gradebook above all, happens here as without one."""
        if cluster is not None and jobs is not None:
            raise ValueError("a cluster's workers decide how many submissions are graded at once: no jobs with a cluster")
        if sandboxed and cluster is None:
            sandbox.check_available()
        checks = checks_for(assignment)
        notebooks = self.notebooks(assignment)
        if not notebooks:
            raise RuntimeError(f"{assignment} is not released in {self.root}: run `attention-course release` first")
        released = {nb: self.released(assignment, nb) for nb in notebooks}
        seed = self.seed(assignment)
        students = students if students is not None else self.students(assignment)
        people = self.people(assignment)
        summaries = {s: StudentSummary(s, name=people[s].name if s in people else "") for s in students}
        release_folder = self.root / "release" / assignment
        release_print = _release_fingerprint(release_folder, seed)
        interrupted = threading.Event()
        reused: set[str] = set()

        def work(student: str) -> None:
            folder = self.root / "submitted" / student / assignment
            renamed = _adopt_renamed_notebook(folder, notebooks, released[notebooks[0]])
            fingerprint = _submission_fingerprint(folder, notebooks, release_print)
            paths = [results_path(self.results_dir, assignment, student, nb) for nb in notebooks]
            if not force and self._unchanged(assignment, student, paths, fingerprint, summaries[student]):
                reused.add(student)
                return
            grade_one = grade_notebook if remote is None else functools.partial(
                remote.grade_notebook, assignment=assignment, student=student)
            results = []
            for nb in notebooks:
                if interrupted.is_set():
                    return
                nb_checks = {g: c for g, c in checks.items() if g in _test_ids(released[nb])}
                result = grade_one(folder / f"{nb}.ipynb", released[nb], nb_checks, sandboxed=sandboxed,
                                   limits=limits, release_folder=release_folder, seed=seed,
                                   fingerprint=fingerprint, warm=warm)
                result.flags.extend(_timestamp_flags(folder))
                result.flags.extend(_extra_files(folder, notebooks, release_folder))
                if nb in renamed:
                    result.flags.append(f"notebook renamed to {renamed[nb]}: graded as {nb}.ipynb")
                results.append(result)
            if interrupted.is_set():
                return  # a run cut short by the interrupt is no grade: save nothing
            for nb, result in zip(notebooks, results):
                result.save(results_path(self.results_dir, assignment, student, nb))

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
            except KeyboardInterrupt:  # a second Ctrl-C: stop at once, record nothing
                sandbox.stop_all()
                bar.close()
                raise GradingInterrupted(0, len(students), recorded=False) from None
            bar.close()
            done = [s for s in students if s in finished and (s in reused or all(
                results_path(self.results_dir, assignment, s, nb).is_file() for nb in notebooks))]
            self._record(assignment, done, notebooks, summaries, reused)
            self.write_report(assignment)
            raise GradingInterrupted(len(done), len(students), recorded=True) from None
        finally:
            if remote is not None:
                remote.close()
        pool.shutdown(wait=True)
        sandbox.close_templates(of_ended_threads=True)  # the pool's threads are done, and their templates with them
        bar.close()
        self._record(assignment, students, notebooks, summaries, reused)
        self.write_report(assignment)
        return [summaries[s] for s in students]

    def _unchanged(self, assignment: str, student: str, paths: list[Path], fingerprint: str,
                   summary: "StudentSummary") -> bool:
        """Whether the saved grade is still this submission's, and the gradebook still holds it."""
        try:
            results = [NotebookResult.load(p) for p in paths]
        except (OSError, ValueError, TypeError):
            return False
        if not all(r.fingerprint == fingerprint for r in results):
            return False
        recorded = self._gradebook_scores(assignment, student)
        expected = {g: (c["points"] if c["passed"] else 0.0) for r in results for g, c in r.checks.items()}
        if recorded is not None and recorded == expected:
            return True
        if recorded is not None:
            summary.flags.append("the gradebook no longer held the sandboxed grade (stock nbgrader autograde "
                                 "overwrote it?): graded again")
        return False

    def _gradebook_scores(self, assignment: str, student: str) -> dict[str, float] | None:
        """{grade id: auto score} of the student's recorded submission, or None if there is none."""
        from nbgrader.api import MissingEntry

        if not has_gradebook(self.root):
            return None
        with open_gradebook(self.root) as gradebook:
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:
                return None
            return {grade.name: float(grade.auto_score or 0.0) for notebook in submission.notebooks
                    for grade in notebook.grades
                    if grade.cell_type == "code" and grade.name not in _written_names(notebook.notebook)}

    def written_grades(self, assignment: str, student: str) -> list[WrittenGrade]:
        """The hand-graded cells of the student's recorded submission, as the gradebook holds them (formgrader's
        scores and comments); empty if there is no recorded submission or nothing is graded by hand."""
        from nbgrader.api import MissingEntry

        if not has_gradebook(self.root):
            return []
        with open_gradebook(self.root) as gradebook:
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:
                return []
            return _written_of(submission)

    def _record(self, assignment: str, students: list[str], notebooks: list[str],
                summaries: dict[str, "StudentSummary"], reused: set[str]) -> None:
        """Gradebook writes, one student at a time (SQLite): nbgrader's pipeline with the verdicts applied,
        then a check that the gradebook holds exactly the grader's scores (written directly if not)."""
        from sqlalchemy.exc import SAWarning

        with warnings.catch_warnings():
            # nbgrader's gradebook code warns "not in session" on every record: harmless, and nothing the
            # instructor could act on, it would bury the summary.
            warnings.filterwarnings("ignore", category=SAWarning, module=r"nbgrader\.")
            self._record_each(assignment, students, notebooks, summaries, reused)

    def _record_each(self, assignment: str, students: list[str], notebooks: list[str],
                     summaries: dict[str, "StudentSummary"], reused: set[str]) -> None:
        intake, people = self.intake(assignment), self.people(assignment)
        released = {nb: self.released(assignment, nb) for nb in notebooks}
        written = {nb: written_cells(released[nb]) for nb in notebooks}
        for student in students:
            paths = [results_path(self.results_dir, assignment, student, nb) for nb in notebooks]
            results = [NotebookResult.load(p) for p in paths if p.is_file()]
            expected = {g: (c["points"] if c["passed"] else 0.0) for r in results for g, c in r.checks.items()}
            if student not in reused and results:
                before = {(g.notebook, g.grade_id): g.awaiting for g in self.written_grades(assignment, student)
                          if g.manual is not None} if any(written.values()) else {}
                try:
                    if not any(r.readable for r in results):
                        self._record_missing(assignment, student)  # nbgrader itself cannot read these
                    else:
                        record_in_gradebook(self.root, self.results_dir, assignment, student)
                except BaseException as error:  # nbgrader exits via SystemExit on some errors
                    if isinstance(error, KeyboardInterrupt):
                        raise
                    summaries[student].flags.append(f"nbgrader's autograde could not record this submission "
                                                    f"({type(error).__name__}: {str(error)[:200]}): recorded directly")
                if results and self._gradebook_scores(assignment, student) != expected:
                    self._record_directly(assignment, student, expected)
                    if self._gradebook_scores(assignment, student) != expected:
                        summaries[student].flags.append("THE GRADEBOOK DOES NOT HOLD THIS GRADE: record it by hand")
                if any(written.values()):
                    self._settle_written(assignment, student, released, before, summaries[student])
            summary = summaries[student]
            summary.flags[:0] = self.flags_of(assignment, student, notebooks, intake)
            summary.auto_score, summary.auto_max, summary.seconds = (sum(getattr(r, name) for r in results)
                                                                     for name in ("score", "max_score", "seconds"))
            hand = self.written_grades(assignment, student) if results and any(written.values()) else []
            summary.score = summary.auto_score + sum(g.score for g in hand)
            summary.max_score = summary.auto_max + (sum(sum(w.values()) for w in written.values()) if results else 0.0)
            summary.awaiting = [g.label() for g in hand if g.awaiting]
            if results:
                self._update_gradebook_student(assignment, student, people.get(student), flagged=bool(summary.flags))
            if student in reused:
                summary.flags.append("unchanged since its last grade (not graded again; --force to regrade)")

    def _written_store(self, assignment: str, student: str) -> Path:
        """{notebook: {grade id: digest}}: the hand-graded answers as they were when last recorded."""
        return self.results_dir / assignment / student / ".written-answers.json"

    def _settle_written(self, assignment: str, student: str, released: dict, before: dict[tuple[str, str], bool],
                        summary: "StudentSummary") -> None:
        """After a record: whether each hand-graded answer awaits a manual grade. One never graded by hand
        awaits one if answered (nbgrader: no auto score), not if left as the release's stub (0, "No response.").
        One graded by hand keeps its manual score and comment, and awaits no new grade while its answer is the
        one graded (nbgrader's autograde would mark it for review on every run); an answer that changed since
        (a resubmission), or whose grade was already marked for regrading, is marked for regrading.
        ``before``: {(notebook, grade id): needs_manual_grade} of the cells with a manual score before the record."""
        from nbgrader.api import MissingEntry

        store = self._written_store(assignment, student)
        try:
            previous = json.loads(store.read_text(encoding="utf-8")) if store.is_file() else {}
        except ValueError:
            previous = {}
        folder = self.root / "submitted" / student / assignment
        current = {nb: written_answers(folder / f"{nb}.ipynb", notebook) for nb, notebook in released.items()}
        with open_gradebook(self.root) as gradebook:
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:
                return
            for notebook in submission.notebooks:
                names = _written_names(notebook.notebook)
                for grade in notebook.grades:
                    if grade.name not in names:
                        continue
                    if grade.manual_score is None:
                        grade.needs_manual_grade = grade.auto_score is None
                        continue
                    key = (notebook.name, grade.name)
                    changed = (previous.get(notebook.name) or {}).get(grade.name) != current[notebook.name].get(grade.name)
                    grade.needs_manual_grade = bool(before.get(key, True) or changed)
                    if changed and not before.get(key, True):
                        summary.flags.append(f"{notebook.name}: written answer {grade.name} changed since it was graded "
                                             f"by hand ({grade.manual_score:g} of {grade.max_score:g} points): regrade "
                                             "it in formgrader")
            gradebook.db.commit()
        _write_json(store, current)

    def flags_of(self, assignment: str, student: str, notebooks: list[str], intake: dict | None = None) -> list[str]:
        """What the instructor should know of a student's submission: the intake's notes, then each notebook's."""
        intake = intake if intake is not None else self.intake(assignment)
        flags = self._intake_flags(assignment, student, intake)
        explained = {"missing notebook"} if flags else set()  # the intake's notes say why there is none
        for nb in notebooks:
            path = results_path(self.results_dir, assignment, student, nb)
            if path.is_file():
                flags.extend(f"{nb}: {flag}" for flag in NotebookResult.load(path).flags if flag not in explained)
        return flags

    def _update_gradebook_student(self, assignment: str, student: str, person: "lms.Student | None", flagged: bool) -> None:
        """The student's name and LMS id in nbgrader's gradebook, and formgrader's flag on a submission with notes."""
        from nbgrader.api import MissingEntry

        with open_gradebook(self.root) as gradebook:
            if person is not None:
                last, _, first = person.name.partition(", ") if ", " in person.name else ("", "", person.name)
                gradebook.update_or_create_student(student, first_name=fitted(first), last_name=fitted(last),
                                                   email=fitted(person.email), lms_user_id=fitted(person.lms_id))
            if flagged:
                try:
                    submission = gradebook.find_submission(assignment, student)
                except MissingEntry:
                    return
                for notebook in submission.notebooks:
                    notebook.flagged = True
                gradebook.db.commit()

    REPORT_FIELDS = ("student", "name", "lms", "lms_id", "late", "score", "max_score")

    def write_report(self, assignment: str) -> Path:
        """``reports/<assignment>.csv``: every student with a grade, each test's points, the notes and the time.

        An assignment with answers graded by hand also has a column for each (the points formgrader's manual
        grade gave, "awaiting" while it has none, "regrade" when its answer changed since), the points of
        those in the score, and ``awaiting_manual``: what still awaits a manual grade in formgrader."""
        notebooks = self.notebooks(assignment)
        intake, people = self.intake(assignment), self.people(assignment)
        written = {grade_id: points for nb in notebooks for grade_id, points in written_cells(self.released(assignment, nb)).items()}
        hand = self._all_written(assignment) if written else {}
        rows, tests = [], {}
        for student in self.students(assignment):
            paths = [results_path(self.results_dir, assignment, student, nb) for nb in notebooks]
            results = [NotebookResult.load(p) for p in paths if p.is_file()]
            if not results:
                continue
            person = people.get(student)
            points = {}
            for result in results:
                for grade_id, check in result.checks.items():
                    tests.setdefault(grade_id, check["points"])
                    points[grade_id] = f"{check['points'] if check['passed'] else 0:g}"
            given = hand.get(student, [])
            for grade in given:
                points[grade.grade_id] = ("awaiting" if grade.manual is None else "regrade") if grade.awaiting else f"{grade.score:g}"
            extra = {"awaiting_manual": "; ".join(g.label() for g in given if g.awaiting)} if written else {}
            rows.append({"student": student, "name": person.name if person else "", "lms": person.lms if person else "",
                         "lms_id": person.lms_id if person else "", "late": "yes" if person and person.late else "",
                         "score": f"{sum(r.score for r in results) + sum(g.score for g in given):g}",
                         "max_score": f"{sum(r.max_score for r in results) + sum(written.values()):g}",
                         **points, **extra, "notes": " | ".join(self.flags_of(assignment, student, notebooks, intake)),
                         "seconds": f"{sum(r.seconds for r in results):.1f}",
                         "cpu_seconds": f"{sum(r.cpu_seconds for r in results):.1f}"})
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=[*self.REPORT_FIELDS, *tests, *written,
                                                 *(["awaiting_manual"] if written else []), "notes", "seconds", "cpu_seconds"])
        writer.writeheader()
        writer.writerows(rows)
        path = self.root / "reports" / f"{assignment}.csv"
        _write_whole(path, out.getvalue(), encoding="utf-8-sig")  # (the BOM: spreadsheets then read UTF-8)
        return path

    def _all_written(self, assignment: str) -> dict[str, list[WrittenGrade]]:
        """{student: their hand-graded cells} of every recorded submission of ``assignment``."""
        from nbgrader.api import MissingEntry

        if not has_gradebook(self.root):
            return {}
        with open_gradebook(self.root) as gradebook:
            try:
                submissions = gradebook.find_assignment(assignment).submissions
            except MissingEntry:
                return {}
            return {submission.student.id: _written_of(submission) for submission in submissions}

    def _record_directly(self, assignment: str, student: str, points: dict[str, float]) -> None:
        """Write the grader's scores into the gradebook with nbgrader's own API."""

        with open_gradebook(self.root) as gradebook:
            gradebook.update_or_create_student(student)
            submission = gradebook.update_or_create_submission(assignment, student)
            for notebook in submission.notebooks:
                written = _written_names(notebook.notebook)
                for grade in notebook.grades:
                    if grade.cell_type == "code" and grade.name not in written:
                        grade.auto_score = points.get(grade.name, 0.0)
                        grade.needs_manual_grade = False
            gradebook.db.commit()

    def _record_missing(self, assignment: str, student: str) -> None:
        """A submission folder without notebooks: in the gradebook with zero, as nbgrader does for a missing notebook."""

        with open_gradebook(self.root) as gradebook:
            gradebook.update_or_create_student(student)
            submission = gradebook.update_or_create_submission(assignment, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    grade.auto_score = 0
                    grade.needs_manual_grade = False
            gradebook.db.commit()

    def feedback(self, assignment: str) -> "FeedbackReport":
        """Feedback for every graded student: nbgrader's page (no hidden tests in it, whoever graded the
        notebooks; its math typeset into the page; the points and comments of the answers graded by hand in
        formgrader), or a page that says why the submission could not be graded; and
        ``feedback/<assignment>-<platform>.zip`` laid out for each platform's feedback upload. A student with an
        answer that awaits a manual grade gets no page (nor a place in the zip) until it has one."""
        from attention_course.grading import feedback_pages
        from attention_course.grading.nbgrader_bridge import HideHiddenTests
        from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
        from nbgrader.preprocessors import GetGrades

        self.require(assignment)
        notebooks = self.notebooks(assignment)
        graded = [s for s in self.students(assignment)
                  if all(results_path(self.results_dir, assignment, s, nb).is_file() for nb in notebooks)]
        if not graded:
            raise CourseError(f"nothing graded yet for {assignment}: run `attention-course grade {assignment}` first")
        try:
            feedback_pages.mathjax_script()  # (fails early, with what to do, if the MathJax files are missing)
        except FileNotFoundError as missing:
            raise CourseError(str(missing)) from None
        nbgrader_pages: list[Path] = []
        if (self.root / "autograded").is_dir() and any((self.root / "autograded").glob(f"*/{assignment}")):
            config = self.config()
            config.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
            api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
            result = api.generate_feedback(assignment, force=True)
            if not result["success"]:
                raise RuntimeError(f"nbgrader generate_feedback failed:\n{result['log']}")
        people, intake = self.people(assignment), self.intake(assignment)
        awaiting = {student for student, grades in self._all_written(assignment).items() if any(g.awaiting for g in grades)
                    } if any(written_cells(self.released(assignment, nb)) for nb in notebooks) else set()
        report = FeedbackReport(folder=self.root / "feedback")
        zips: dict[str, zipfile.ZipFile] = {}
        written: list[tuple[str, list[Path]]] = []
        try:
            for student in self.students(assignment):
                if student not in graded:
                    report.skipped["never graded"] += 1
                    continue
                folder = self.root / "feedback" / student / assignment
                pages = [folder / f"{nb}.html" for nb in notebooks]
                if student in awaiting:  # a page now would show 0 for an answer nobody has graded yet: none, until it is
                    for page in pages:
                        page.unlink(missing_ok=True)
                    report.skipped[AWAITING_FEEDBACK] += 1
                    continue
                results = [NotebookResult.load(results_path(self.results_dir, assignment, student, nb)) for nb in notebooks]
                if any(r.readable and not p.is_file() for p, r in zip(pages, results)):
                    report.skipped["nbgrader wrote no page (it could not record the notebook; its score is in the report)"] += 1
                    continue
                for page, result, nb in zip(pages, results, notebooks):
                    if result.readable:
                        nbgrader_pages.append(page)
                    else:  # nbgrader writes nothing for a notebook it could not read: say what was wrong
                        folder.mkdir(parents=True, exist_ok=True)
                        person = people.get(student)
                        reasons = [f for f in self._intake_flags(assignment, student, intake) if not f.startswith("late")]
                        reasons += [f for f in result.flags if not reasons or f != "missing notebook"]
                        received = (intake["students"].get(student) or {}).get("others", [])
                        page.write_text(feedback_pages.problem_page(f"{assignment} ({nb}.ipynb)",
                                                                    (person.name if person else "") or student,
                                                                    reasons or ["no notebook was received"], received),
                                        encoding="utf-8")
                report.written += 1
                written.append((student, pages))
            # The math of nbgrader's pages, typeset where they are (no script, no network); inlined MathJax
            # for any page that could not be typeset.
            for page in feedback_pages.typeset(nbgrader_pages):
                page.write_text(feedback_pages.offline_math(page.read_text(encoding="utf-8")), encoding="utf-8")
                report.math_inlined += 1
            for student, pages in written:
                person = people.get(student) or lms.Student(key=student, lms="folder", lms_id=student)
                entry = lms.feedback_entry(person, assignment)
                if entry is None:
                    report.not_zipped["no uploaded file on the platform to attach it to"] += 1
                    continue
                if person.lms not in zips:
                    path = self.root / "feedback" / f"{assignment}-{person.lms}.zip"
                    zips[person.lms] = zipfile.ZipFile(path.with_name(path.name + ".partial"), "w", zipfile.ZIP_DEFLATED)
                    report.zips.append(path)
                for page, nb in zip(pages, notebooks):
                    name = entry if len(notebooks) == 1 else entry.replace(f"{assignment}-feedback", f"{nb}-feedback")
                    zips[person.lms].write(page, name)
        finally:
            for bundle in zips.values():
                bundle.close()
        for path in report.zips:
            path.with_name(path.name + ".partial").replace(path)
        return report

    EXPORT_FORMATS = ("nbgrader", "moodle", "canvas")
    NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                        "raw_score", "late_submission_penalty", "score", "max_score"]

    def gradebook_grades(self) -> dict[str, list[lms.Grade]]:
        """{assignment: the gradebook's grade of every submission} for the assignments with submissions; the
        gradebook's scores, so a score changed by hand in formgrader (a written answer's above all) is the one
        exported. Each grade lists the hand-graded answers that still await a manual grade."""

        if not has_gradebook(self.root):
            return {}
        grades: dict[str, list[lms.Grade]] = {}
        with open_gradebook(self.root) as gradebook:
            for assignment in gradebook.assignments:
                people = self.people(assignment.name)
                by_hand = any(_written_names(notebook) for notebook in assignment.notebooks)
                for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                    grades.setdefault(assignment.name, []).append(lms.Grade(
                        submission.student.id, _after_penalty(submission), float(assignment.max_score),
                        people.get(submission.student.id),
                        awaiting=tuple(g.grade_id for g in _written_of(submission) if g.awaiting) if by_hand else ()))
        return grades

    def export(self, destination: Path, fmt: str = "nbgrader", assignment: str | None = None,
               leave_out_ungraded: bool = False) -> tuple[Path, list[str]]:
        """Write the grades for an LMS to import; returns the file and what was left out (one line each).

        A grade is never exported without its written answers: while any answer graded by hand awaits a
        manual grade (never graded, or marked for regrading after a resubmission), the export is refused, naming
        who and what; with ``leave_out_ungraded`` the others are exported and those students are left out (and
        listed)."""
        if fmt not in self.EXPORT_FORMATS:
            raise CourseError(f"unknown format {fmt!r}: choose one of {', '.join(self.EXPORT_FORMATS)}")
        if destination.is_dir():
            raise CourseError(f"{destination} is a folder: give a file name, e.g. {destination / 'grades.csv'}")
        if not destination.parent.is_dir():
            raise CourseError(f"no folder {destination.parent} to write {destination.name} in")
        grades = self.gradebook_grades()
        if assignment is not None:
            if assignment not in grades:
                raise CourseError(f"nothing graded for {assignment!r}; graded: {', '.join(grades) or 'nothing yet'}")
            grades = {assignment: grades[assignment]}
        if not grades:
            raise CourseError(f"nothing graded yet in {self.root}: run `attention-course grade` first")
        ungraded = [(name, g) for name, assignment_grades in grades.items() for g in assignment_grades if g.awaiting]
        if ungraded and not leave_out_ungraded:
            named = [f"{g.student} ({name}: {', '.join(g.awaiting)})" for name, g in ungraded]
            listed = ", ".join(named[:10]) + (f" and {len(named) - 10} more" if len(named) > 10 else "")
            raise CourseError(f"not exported: {len(named)} grade{'s' if len(named) != 1 else ''} would lack written "
                              f"answers that await a manual grade: {listed}. Grade them in formgrader (Manual "
                              "Grading), then export again; or add --leave-out-ungraded to export the others without "
                              "these students")
        skipped: list[str] = [f"{g.student} ({name}: written answers await a manual grade: {', '.join(g.awaiting)})"
                              for name, g in ungraded]
        grades = {name: [g for g in assignment_grades if not g.awaiting] for name, assignment_grades in grades.items()}
        if fmt == "moodle":
            if len(grades) > 1:
                raise CourseError("Moodle takes one grading worksheet per assignment: add --assignment, one of "
                                  + ", ".join(grades))
            [(name, assignment_grades)] = grades.items()
            text, left_out = lms.moodle_worksheet(assignment_grades, self._roster_table(name))
            skipped += left_out
        elif fmt == "canvas":
            people: dict[str, lms.Student] = {}
            for name in grades:
                people.update(self.people(name))
            tables = [t for t in (self._roster_table(name) for name in grades) if t and t[0] == "canvas"]
            text, left_out = lms.canvas_gradebook(grades, people, tables[0] if tables else None)
            skipped += left_out
        else:
            text = self._nbgrader_csv(grades)
        _write_whole(destination, text)
        return destination, skipped

    def _roster_table(self, assignment: str):
        table = self.intake(assignment).get("roster_table")
        return tuple(table) if table else None

    def _nbgrader_csv(self, grades: dict[str, list[lms.Grade]]) -> str:

        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=self.NBGRADER_COLUMNS, lineterminator="\n")
        writer.writeheader()
        with open_gradebook(self.root) as gradebook:
            for name in grades:
                assignment = gradebook.find_assignment(name)
                included = {g.student for g in grades[name]}
                for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
                    student = submission.student
                    if student.id not in included:
                        continue
                    writer.writerow({"assignment": name, "duedate": assignment.duedate or "",
                                     "timestamp": submission.timestamp or "", "student_id": student.id,
                                     "last_name": student.last_name or "", "first_name": student.first_name or "",
                                     "email": student.email or "", "raw_score": float(submission.score),
                                     "late_submission_penalty": float(submission.late_submission_penalty or 0),
                                     "score": _after_penalty(submission), "max_score": float(assignment.max_score)})
        return out.getvalue()


def _written_names(notebook) -> set[str]:
    """The hand-graded cells of a gradebook notebook (``nbgrader.api.Notebook``): graded answer cells and tasks."""
    answers = {cell.name for cell in notebook.solution_cells}
    return {cell.name for cell in notebook.grade_cells if cell.name in answers} | {cell.name for cell in notebook.task_cells}


def _written_of(submission) -> list[WrittenGrade]:
    """The hand-graded cells of a gradebook submission (``nbgrader.api.SubmittedAssignment``)."""
    found = []
    for notebook in sorted(submission.notebooks, key=lambda n: n.name):
        names = _written_names(notebook.notebook)
        for grade in sorted(notebook.grades, key=lambda g: g.name):
            if grade.name in names:
                found.append(WrittenGrade(notebook.name, grade.name, float(grade.max_score or 0), float(grade.score or 0),
                                          None if grade.manual_score is None else float(grade.manual_score),
                                          bool(grade.needs_manual_grade)))
    return found


def assignments_in(solutions: Path) -> list[str]:
    """The assignments of a solutions folder: its subfolders that hold a notebook."""
    return sorted(p.name for p in solutions.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if solutions.is_dir() else []


def _after_penalty(submission) -> float:
    """A submission's score as nbgrader exports it: less its late penalty (if the course sets one), never below 0."""
    return max(0.0, float(submission.score) - float(submission.late_submission_penalty or 0))


def _folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and ".ipynb_checkpoints" not in path.parts:
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _write_whole(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` whole or not at all (through a temporary file beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(text, encoding=encoding)
    temporary.replace(path)


def _write_json(path: Path, data) -> None:
    _write_whole(path, json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")


def _adopt_renamed_notebook(folder: Path, notebooks: list[str], released) -> dict[str, str]:
    """A one-notebook assignment in nbgrader's layout without the notebook under its own name: the file
    :func:`lms.choose` picks ("soft-hard (1).ipynb", "soft-hard.IPYNB", the one notebook with the
    assignment's cells …) is copied to the expected name, which nbgrader needs, keeping the student's
    file. Returns {expected: submitted name}."""
    if len(notebooks) != 1 or not folder.is_dir():
        return {}
    expected = folder / f"{notebooks[0]}.ipynb"
    others = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".ipynb" and p != expected
                    and p.is_file() and not p.is_symlink())
    if expected.exists():  # graded before: the copy made then is still the student's renamed file
        same = [p for p in others if p.read_bytes() == expected.read_bytes()]
        return {notebooks[0]: same[0].name} if len(others) == 1 and same else {}
    files = [lms.Received(p.name, p.read_bytes(), when=datetime.fromtimestamp(p.stat().st_mtime, timezone.utc),
                          order=0) for p in others]
    choice = lms.choose(files, notebooks[0], _test_ids(released))
    if choice.file is None:
        return {}
    shutil.copy2(folder / choice.file.name, expected)
    return {notebooks[0]: choice.file.name}


GRADER_SOURCES = Path(__file__).resolve().parents[1]  # the course package: the grader and its references


@functools.lru_cache(maxsize=1)
def _grader_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(GRADER_SOURCES.rglob("*.py")):
        digest.update(path.relative_to(GRADER_SOURCES).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _release_fingerprint(release_folder: Path, seed: int) -> str:
    digest = hashlib.sha256(f"seed {seed}\0grader {_grader_fingerprint()}\0".encode())
    for path in sorted(release_folder.iterdir()) if release_folder.is_dir() else []:
        if path.is_file() and path.name != "timestamp.txt":
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _submission_fingerprint(folder: Path, notebooks: list[str], release_print: str) -> str:
    digest = hashlib.sha256(release_print.encode())
    for nb in notebooks:
        path = folder / f"{nb}.ipynb"
        digest.update(nb.encode() + b"\0" + (path.read_bytes() if path.is_file() and not path.is_symlink() else b"<none>"))
    return digest.hexdigest()


IGNORED_FILES = {"timestamp.txt", ".DS_Store", "Thumbs.db"}


def _extra_files(folder: Path, notebooks: list[str], release_folder: Path) -> list[str]:
    """Files in the submission that the grader does not use (the release's own data files are expected)."""
    if not folder.is_dir():
        return []
    known = {f"{nb}.ipynb" for nb in notebooks} | IGNORED_FILES | (
        {p.name for p in release_folder.iterdir()} if release_folder.is_dir() else set())
    extra = sorted(p.name for p in folder.iterdir() if p.name not in known and p.name != ".ipynb_checkpoints"
                   and not (p.suffix == ".ipynb" and p.is_file()))
    if not extra:
        return []
    return [f"extra files in the submission, not used by the grader: {', '.join(extra[:10])}"
            + (f" and {len(extra) - 10} more" if len(extra) > 10 else "")]


def _test_ids(notebook) -> set[str]:
    return {c.metadata["nbgrader"]["grade_id"] for c in notebook.cells
            if (c.metadata.get("nbgrader") or {}).get("grade") and not c.metadata["nbgrader"].get("solution")}


def _timestamp_flags(folder: Path) -> list[str]:
    stamp = folder / "timestamp.txt"
    if not stamp.exists():
        return []
    if stamp.is_symlink() or stamp.stat().st_size > 100:
        return ["timestamp.txt is not a plain short file: ignored"]
    text = stamp.read_text(errors="replace").strip()
    try:
        from dateutil.parser import parse

        when = parse(text)
    except (ValueError, OverflowError):
        return [f"timestamp.txt unreadable ({text[:40]!r})"]
    now = datetime.now(when.tzinfo or None)
    if when > now:
        return [f"timestamp.txt is in the future ({text[:40]})"]
    return []
