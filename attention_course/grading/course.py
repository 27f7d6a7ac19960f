"""An nbgrader course directory, and the instructor's workflows on it.

Layout (nbgrader's own): ``source/<assignment>/`` (copied from the repository's ``solutions/``),
``release/``, ``submitted/<student>/<assignment>/``, ``autograded/``, ``feedback/``, ``gradebook.db``.
The grader keeps its trusted results in ``grader-results/``, which no sandbox ever sees.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import json
import os
import secrets
import re
import shutil
import sys
import threading
import traceback
import warnings
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config
from tqdm import tqdm

from attention_course.grading import sandbox
from attention_course.grading.checks import checks_for
from attention_course.grading.grade import NotebookResult, grade_notebook
from attention_course.grading.nbgrader_bridge import COURSE_ID, record_in_gradebook, results_path

REPOSITORY = Path(__file__).resolve().parents[2]
MAX_ZIP_MEMBER_BYTES = 50 << 20
MAX_ZIP_TOTAL_BYTES = 2 << 30


class GradingInterrupted(Exception):
    """Ctrl-C during a batch: ``graded`` of ``total`` submissions were graded (and recorded, if ``recorded``)."""

    def __init__(self, graded: int, total: int, recorded: bool):
        super().__init__(f"interrupted: {graded} of {total} submissions graded")
        self.graded, self.total, self.recorded = graded, total, recorded


@dataclass
class StudentSummary:
    student: str
    score: float = 0.0
    max_score: float = 0.0
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0


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
        return config

    def api(self) -> NbGraderAPI:
        config = self.config()
        return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)

    def assignments(self) -> list[str]:
        return sorted(p.name for p in self.solutions.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))

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
            self.seeds_path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.seeds_path.with_suffix(".partial")
            temporary.write_text(json.dumps(seeds, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            temporary.replace(self.seeds_path)
        return int(seeds[assignment])

    # -- release -----------------------------------------------------------------------------

    def generate(self, assignment: str) -> None:
        """Copy the solution notebooks in as nbgrader source and run ``generate_assignment``."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "nbgrader_config.py").write_text(
            "c = get_config()  # noqa: F821\n"
            f"c.CourseDirectory.course_id = {COURSE_ID!r}\n", encoding="utf-8")
        source = self.root / "source" / assignment
        shutil.rmtree(source, ignore_errors=True)
        shutil.copytree(self.solutions / assignment, source, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        result = self.api().generate_assignment(assignment, force=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result['log']}{result.get('error', '')}")
        self.seed(assignment)  # drawn at release (kept if there is one already)

    # -- submissions ---------------------------------------------------------------------------

    def students(self, assignment: str) -> list[str]:
        submitted = self.root / "submitted"
        if not submitted.is_dir():
            return []
        return sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())

    def import_zip(self, archive: Path, assignment: str) -> list[str]:
        """Unpack an LMS export (Moodle or Canvas naming) into ``submitted/<student>/<assignment>/``."""
        imported, total = [], 0
        notebook = self.notebooks(assignment)[0]
        with zipfile.ZipFile(archive) as bundle:
            for member in bundle.infolist():
                if member.is_dir() or not member.filename.endswith(".ipynb"):
                    continue
                total += member.file_size
                if member.file_size > MAX_ZIP_MEMBER_BYTES or total > MAX_ZIP_TOTAL_BYTES:
                    raise ValueError(f"{archive}: {member.filename} is too large to be a notebook submission")
                student = student_from_lms_name(member.filename)
                target = self.root / "submitted" / student / assignment / f"{notebook}.ipynb"
                target.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(member) as source, target.open("wb") as out:
                    shutil.copyfileobj(source, out)
                stamp = datetime(*member.date_time).replace(tzinfo=timezone.utc)
                (target.parent / "timestamp.txt").write_text(stamp.strftime("%Y-%m-%d %H:%M:%S.%f %Z"))
                imported.append(student)
        return sorted(set(imported))

    # -- grading -------------------------------------------------------------------------------

    def grade(self, assignment: str, *, jobs: int | None = None, sandboxed: bool = True,
              limits: sandbox.Limits = sandbox.Limits(), students: list[str] | None = None,
              progress: bool = True, force: bool = False) -> list[StudentSummary]:
        """Grade every submission of ``assignment``; one failure never stops the batch.

        A submission whose fingerprint (its notebooks' bytes, the release, the course seed, the grader's
        code) matches its last grade, and whose gradebook scores still agree with that grade, is not graded
        again unless ``force``. On Ctrl-C the queued submissions are cancelled, the running sandboxes
        stopped, nothing half-graded is saved, the ones already graded are recorded, and
        :class:`GradingInterrupted` is raised."""
        if sandboxed:
            sandbox.check_available()
        checks = checks_for(assignment)
        notebooks = self.notebooks(assignment)
        if not notebooks:
            raise RuntimeError(f"{assignment} is not released in {self.root}: run `attention-course release` first")
        released = {nb: self.released(assignment, nb) for nb in notebooks}
        seed = self.seed(assignment)
        students = students if students is not None else self.students(assignment)
        summaries = {s: StudentSummary(s) for s in students}
        release_folder = self.root / "release" / assignment
        release_print = _release_fingerprint(release_folder, seed)
        interrupted = threading.Event()
        reused: set[str] = set()

        def work(student: str) -> None:
            folder = self.root / "submitted" / student / assignment
            renamed = _adopt_renamed_notebook(folder, notebooks)
            fingerprint = _submission_fingerprint(folder, notebooks, release_print)
            paths = [results_path(self.results_dir, assignment, student, nb) for nb in notebooks]
            if not force and self._unchanged(assignment, student, paths, fingerprint, summaries[student]):
                reused.add(student)
                return
            results = []
            for nb in notebooks:
                if interrupted.is_set():
                    return
                nb_checks = {g: c for g, c in checks.items() if g in _test_ids(released[nb])}
                result = grade_notebook(folder / f"{nb}.ipynb", released[nb], nb_checks, sandboxed=sandboxed,
                                        limits=limits, release_folder=release_folder, seed=seed,
                                        fingerprint=fingerprint)
                result.flags.extend(_timestamp_flags(folder))
                result.flags.extend(_extra_files(folder, notebooks, release_folder))
                if nb in renamed:
                    result.flags.append(f"notebook renamed to {renamed[nb]}: graded as {nb}.ipynb")
                results.append(result)
            if interrupted.is_set():
                return  # a run cut short by the interrupt is no grade: save nothing
            for nb, result in zip(notebooks, results):
                result.save(results_path(self.results_dir, assignment, student, nb))

        jobs = jobs or os.cpu_count() or 1
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
            raise GradingInterrupted(len(done), len(students), recorded=True) from None
        pool.shutdown(wait=True)
        bar.close()
        self._record(assignment, students, notebooks, summaries, reused)
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
        from nbgrader.api import Gradebook, MissingEntry

        path = self.root / "gradebook.db"
        if not path.is_file():
            return None
        with Gradebook(f"sqlite:///{path}", COURSE_ID) as gradebook:
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:
                return None
            return {grade.name: float(grade.auto_score or 0.0) for notebook in submission.notebooks
                    for grade in notebook.grades if grade.cell_type == "code"}

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
        for student in students:
            paths = [results_path(self.results_dir, assignment, student, nb) for nb in notebooks]
            results = [NotebookResult.load(p) for p in paths if p.is_file()]
            expected = {g: (c["points"] if c["passed"] else 0.0) for r in results for g, c in r.checks.items()}
            if student not in reused and results:
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
            for nb, path in zip(notebooks, paths):
                if path.is_file():
                    result = NotebookResult.load(path)
                    summaries[student].score += result.score
                    summaries[student].max_score += result.max_score
                    summaries[student].seconds += result.seconds
                    summaries[student].flags.extend(f"{nb}: {flag}" for flag in result.flags)
            if student in reused:
                summaries[student].flags.append("unchanged since its last grade (not graded again; --force to regrade)")

    def _record_directly(self, assignment: str, student: str, points: dict[str, float]) -> None:
        """Write the grader's scores into the gradebook with nbgrader's own API."""
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{self.root / 'gradebook.db'}", COURSE_ID) as gradebook:
            gradebook.update_or_create_student(student)
            submission = gradebook.update_or_create_submission(assignment, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if grade.cell_type == "code":
                        grade.auto_score = points.get(grade.name, 0.0)
                        grade.needs_manual_grade = False
            gradebook.db.commit()

    def _record_missing(self, assignment: str, student: str) -> None:
        """A submission folder without notebooks: in the gradebook with zero, as nbgrader does for a missing notebook."""
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{self.root / 'gradebook.db'}", COURSE_ID) as gradebook:
            gradebook.update_or_create_student(student)
            submission = gradebook.update_or_create_submission(assignment, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    grade.auto_score = 0
                    grade.needs_manual_grade = False
            gradebook.db.commit()

    def feedback(self, assignment: str) -> Path:
        """nbgrader's feedback, with every hidden test removed whoever graded the notebooks."""
        from attention_course.grading.nbgrader_bridge import HideHiddenTests
        from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
        from nbgrader.preprocessors import GetGrades

        config = self.config()
        config.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
        api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        result = api.generate_feedback(assignment, force=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_feedback failed:\n{result['log']}")
        return self.root / "feedback"

    def export(self, destination: Path) -> Path:
        from nbgrader.apps import ExportApp

        app = ExportApp(config=self.config())
        app.coursedir = CourseDirectory(config=self.config())
        app.config.CsvExportPlugin.to = str(destination)
        app.start()
        return destination


def _adopt_renamed_notebook(folder: Path, notebooks: list[str]) -> dict[str, str]:
    """A one-notebook assignment submitted under another name ("soft-hard (1).ipynb"): copy it to the
    expected name, which nbgrader needs, keeping the student's file. Returns {expected: submitted name}."""
    if len(notebooks) != 1 or not folder.is_dir():
        return {}
    expected = folder / f"{notebooks[0]}.ipynb"
    others = [p for p in folder.glob("*.ipynb") if p != expected and p.is_file() and not p.is_symlink()]
    if expected.exists():  # graded before: the copy made then is still the student's renamed file
        same = [p for p in others if p.read_bytes() == expected.read_bytes()]
        return {notebooks[0]: same[0].name} if len(others) == 1 and same else {}
    if len(others) != 1:
        return {}
    shutil.copy2(others[0], expected)
    return {notebooks[0]: others[0].name}


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


LMS_PATTERNS = [
    # Moodle: "Jane Doe_123456_assignsubmission_file_/soft-hard.ipynb" or "..._file_soft-hard.ipynb"
    re.compile(r"^(?P<name>[^/_]+)_(?P<id>\d+)_assignsubmission_file_"),
    # Canvas: "doejane_12345_67890_soft-hard.ipynb", late ones "doejane_LATE_12345_67890_..."
    re.compile(r"^(?P<name>[a-z0-9]+)_(?:LATE_)?(?P<id>\d+)_\d+_"),
]


def student_from_lms_name(filename: str) -> str:
    """A student id from an LMS export's file name: '<name>-<number>', made safe as a folder name."""
    base = filename.replace("\\", "/")
    for pattern in LMS_PATTERNS:
        match = pattern.match(base)
        if match:
            name = re.sub(r"[^a-z0-9]+", "", match["name"].lower()) or "student"
            return f"{name}-{match['id']}"
    top = base.split("/")[0] if "/" in base else Path(base).stem
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", top).strip(".-")
    if not safe:
        raise ValueError(f"cannot tell which student submitted {filename!r}")
    return safe


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
