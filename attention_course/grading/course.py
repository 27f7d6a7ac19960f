"""An nbgrader course directory, and the instructor's workflows on it: a thin façade.

Each workflow lives in a room of its own; :class:`Course` only holds the course folder and hands each
call to its room (``docs/architecture.md`` follows one submission through them):

- :mod:`release`: the solutions become nbgrader's source and the students' release;
- :mod:`intake`: LMS exports and participant lists, into ``submitted/``; the notes beside each grade;
- :mod:`batch`: threads or a Dask cluster (:mod:`cluster`), Ctrl-C, progress; :mod:`fingerprints` says
  what need not be graded again; :mod:`grade` grades one notebook in the sandbox (:mod:`sandbox`,
  :mod:`runner`) with the assignment's checks (:mod:`checks`);
- :mod:`records`: the gradebook (:mod:`gradebook`, :mod:`nbgrader_bridge`), with the answers graded by
  hand (:mod:`written`);
- :mod:`report`, :mod:`feedback`, :mod:`export`: what the instructor reads, returns and uploads.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from attention_course.grading import batch, export, feedback, intake, lms, release, report, sandbox
from attention_course.grading.errors import CourseError, GradingInterrupted
from attention_course.grading.feedback import AWAITING_FEEDBACK, FeedbackReport
from attention_course.grading.layout import REPOSITORY, Layout, assignments_in
from attention_course.grading.records import StudentSummary
from attention_course.grading.written import WrittenGrade

__all__ = ["AWAITING_FEEDBACK", "Course", "CourseError", "FeedbackReport", "GradingInterrupted", "StudentSummary",
           "WrittenGrade", "assignments_in"]


class Course:
    EXPORT_FORMATS = export.EXPORT_FORMATS

    def __init__(self, root: Path, solutions: Path = REPOSITORY / "solutions"):
        self.layout = Layout(root.resolve(), solutions)
        # nbgrader runs the `alembic` command of its own environment to migrate the gradebook.
        scripts = str(Path(sys.executable).parent)
        if scripts not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")

    # -- the course folder ---------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return self.layout.root

    @property
    def solutions(self) -> Path:
        return self.layout.solutions

    @property
    def results_dir(self) -> Path:
        return self.layout.results_dir

    @property
    def seeds_path(self) -> Path:
        return self.layout.seeds_path

    def assignments(self) -> list[str]:
        return self.layout.assignments()

    def notebooks(self, assignment: str) -> list[str]:
        return self.layout.notebooks(assignment)

    def released(self, assignment: str, notebook: str):
        return self.layout.released(assignment, notebook)

    def seed(self, assignment: str, *, reseed: bool = False) -> int:
        """The assignment's course seed: drawn once (at release or first grade), stored, redrawn only on request."""
        return self.layout.seed(assignment, reseed=reseed)

    def exists(self) -> bool:
        """Whether this is a course (made by ``release``), not a mistyped path."""
        return self.layout.exists()

    def require(self, assignment: str | None = None) -> None:
        """Raise :class:`CourseError` for a missing course or an assignment the course does not have."""
        self.layout.require(assignment)

    # -- release -------------------------------------------------------------------------------

    def generate(self, assignment: str, *, force: bool = False) -> None:
        """Copy the solution notebooks in as nbgrader source and run ``generate_assignment`` (see :func:`release.generate`)."""
        release.generate(self.layout, assignment, force=force)

    # -- intake --------------------------------------------------------------------------------

    def students(self, assignment: str) -> list[str]:
        """Everyone with a submission folder, and everyone on the participant list given for this assignment."""
        return intake.students(self.layout, assignment)

    def import_roster(self, path: Path, assignment: str) -> list[lms.Student]:
        """Read a participant list (Moodle grading worksheet, Canvas gradebook export) for ``assignment``."""
        return intake.import_roster(self.layout, path, assignment)

    def import_zip(self, archive: Path, assignment: str) -> lms.Export:
        """Unpack an LMS export into ``submitted/<student>/<assignment>/`` (see :func:`intake.import_zip`)."""
        return intake.import_zip(self.layout, archive, assignment)

    # -- grading -------------------------------------------------------------------------------

    def grade(self, assignment: str, *, jobs: int | None = None, sandboxed: bool = True,
              limits: sandbox.Limits = sandbox.Limits(), students: list[str] | None = None,
              progress: bool = True, force: bool = False, cluster: str | None = None,
              warm: bool = True) -> list[StudentSummary]:
        """Grade every submission of ``assignment``; one failure never stops the batch.

        A submission whose fingerprint (its notebooks' bytes, the release, the course seed, the grader's
        code) matches its last grade, and whose gradebook scores still agree with that grade, is not graded
        again unless ``force``. Each graded student is recorded in the gradebook while the others are graded.
        On Ctrl-C the queued submissions are cancelled, the running sandboxes stopped, nothing half-graded is
        saved, the ones already graded are recorded, and :class:`GradingInterrupted` is raised.

        ``warm``: fork each sandboxed run from a warm template (one per grading thread, with PyTorch already
        imported) instead of starting a fresh interpreter; the grades are the same.

        With ``cluster`` (a Dask scheduler's address) each notebook is graded on the cluster's workers
        (see :mod:`cluster`); everything else, the gradebook above all, happens here as without one."""
        return batch.grade(self.layout, assignment, jobs=jobs, sandboxed=sandboxed, limits=limits, students=students,
                           progress=progress, force=force, cluster=cluster, warm=warm)

    # -- what the instructor reads, returns and uploads ------------------------------------------

    def write_report(self, assignment: str) -> Path:
        """``reports/<assignment>.csv`` (see :func:`report.write_report`)."""
        return report.write_report(self.layout, assignment)

    def write_reports(self, assignment: str, *, language: str | None = None, against: Path | None = None) -> Path:
        """The CSV report and the class report page, ``reports/<assignment>/index.html`` (see :mod:`report_page`)."""
        return report.write_reports(self.layout, assignment, language=language, against=against)

    def feedback(self, assignment: str) -> FeedbackReport:
        """Feedback pages for every graded student, and a zip for each platform (see :func:`feedback.feedback`)."""
        return feedback.feedback(self.layout, assignment)

    def export(self, destination: Path, fmt: str = "nbgrader", assignment: str | None = None,
               leave_out_ungraded: bool = False) -> tuple[Path, list[str]]:
        """Write the grades for an LMS to import; returns the file and what was left out (see :func:`export.export`)."""
        return export.export(self.layout, destination, fmt, assignment, leave_out_ungraded)

    def export_grades(self, destination: Path, fmt: str = "nbgrader", assignment: str | None = None,
                      leave_out_ungraded: bool = False) -> export.Exported:
        """:meth:`export`, and what the course totals say beside it (see :func:`export.export_grades`)."""
        return export.export_grades(self.layout, destination, fmt, assignment, leave_out_ungraded)
