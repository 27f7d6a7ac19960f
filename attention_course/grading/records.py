"""Records: the graded batch into nbgrader's gradebook, where formgrader, feedback and export read it.

Each finished student is handed to a :class:`Recorder`, which records on a thread of its own while the
batch grades on (the grading threads wait on sandboxes; the coordinator's Python is free for this). A
record is nbgrader's own autograde pipeline with the trusted verdicts applied (:mod:`nbgrader_bridge`),
then a check that the gradebook holds exactly the grader's scores (written directly if not), the answers
graded by hand settled (:mod:`written`), the student's name and LMS id, and formgrader's flag on a
submission with notes: all of it in one gradebook session lent to nbgrader (:mod:`recording_session`),
committed once a student.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Iterator

from attention_course.grading import lms
from attention_course.grading.grade import NotebookResult
from attention_course.grading.gradebook import each_submission, fitted, gradebook_url, open_gradebook
from attention_course.grading.intake import notes_of, people as read_people, read_intake
from attention_course.grading.layout import Layout
from attention_course.grading.nbgrader_bridge import record_in_gradebook, written_cells
from attention_course.grading.recording_session import lent_gradebook
from attention_course.grading.written import settle_written, written_grades, written_names


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


def expected_scores(results: list[NotebookResult]) -> dict[str, float]:
    """{grade id: points} as the grader's verdicts give them."""
    return {g: (c["points"] if c["passed"] else 0.0) for r in results for g, c in r.checks.items()}


def recorded_scores(gradebook, assignment: str, student: str) -> dict[str, float] | None:
    """{grade id: auto score} of the student's recorded submission (the graded tests; not the answers
    graded by hand), or None if there is none."""
    from nbgrader.api import MissingEntry

    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return None
    return _auto_scores(submission)


def all_recorded_scores(layout: Layout, assignment: str) -> dict[str, dict[str, float]]:
    """{student: their recorded auto scores} for every recorded submission of ``assignment``: one read."""
    return each_submission(layout.root, assignment, _auto_scores)


def _auto_scores(submission) -> dict[str, float]:
    return {grade.name: float(grade.auto_score or 0.0) for notebook in submission.notebooks
            for grade in notebook.grades
            if grade.cell_type == "code" and grade.name not in written_names(notebook.notebook)}


class Recorder:
    """Records students into the gradebook as they are handed to it (:meth:`add`), on its own thread, one
    at a time (the gradebook has one writer); :meth:`close` waits for all of them. ``summaries`` get each
    student's notes, scores and time; ``reused``: students whose saved grade was kept (not graded again),
    whose gradebook entry is left as it is."""

    def __init__(self, layout: Layout, assignment: str, notebooks: list[str],
                 summaries: dict[str, StudentSummary], reused: set[str]):
        self.layout, self.assignment, self.notebooks = layout, assignment, notebooks
        self.summaries, self.reused = summaries, reused
        self.intake, self.people = read_intake(layout, assignment), read_people(layout, assignment)
        self.released = {nb: layout.released(assignment, nb) for nb in notebooks}
        self.written = {nb: written_cells(self.released[nb]) for nb in notebooks}
        self.recorded: list[str] = []
        self.cpu_seconds = 0.0  # the recorder thread's own CPU time: its cost, whatever else the machine does
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"record {assignment}", daemon=True)
        self._thread.start()

    def add(self, student: str) -> None:
        self._queue.put(student)

    def close(self) -> None:
        """Wait until every student handed in is recorded; raise what stopped the recorder, if anything did."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        root = self.layout.root
        started = time.thread_time()
        try:
            with (_quiet_nbgrader(), open_gradebook(root) as gradebook,
                  lent_gradebook(gradebook, gradebook_url(root)) as held):
                while (student := self._queue.get()) is not None:
                    try:
                        self.record(held, student)
                        gradebook.db.commit()
                    except BaseException:
                        gradebook.db.rollback()
                        raise
                    self.recorded.append(student)
        except BaseException as error:  # (said by close, on the coordinating thread)
            self._error = error
            while self._queue.get() is not None:  # let close() return
                pass
        finally:
            self.cpu_seconds = time.thread_time() - started

    def record(self, gradebook, student: str) -> None:
        """One student's record, in ``gradebook`` (the recorder's, lent to nbgrader's pipeline, its commits
        held); the caller commits it, or rolls it back."""
        layout, assignment, notebooks = self.layout, self.assignment, self.notebooks
        summary = self.summaries[student]
        loaded = {nb: NotebookResult.load(p) for nb in notebooks
                  if (p := layout.results_path(assignment, student, nb)).is_file()}
        results = list(loaded.values())
        by_hand = any(self.written.values())
        if student not in self.reused and results:
            expected = expected_scores(results)
            before = {(g.notebook, g.grade_id): g.awaiting for g in written_grades(layout, assignment, student, gradebook)
                      if g.manual is not None} if by_hand else {}
            try:
                if not any(r.readable for r in results):
                    record_missing(gradebook, assignment, student)  # nbgrader itself cannot read these
                else:
                    record_in_gradebook(layout.root, layout.results_dir, assignment, student)
            except BaseException as error:  # nbgrader exits via SystemExit on some errors
                if isinstance(error, KeyboardInterrupt):
                    raise
                gradebook.db.rollback()  # (what nbgrader wrote of this student before it failed)
                summary.flags.append(f"nbgrader's autograde could not record this submission "
                                     f"({type(error).__name__}: {str(error)[:200]}): recorded directly")
            if recorded_scores(gradebook, assignment, student) != expected:
                record_directly(gradebook, assignment, student, expected)
                if recorded_scores(gradebook, assignment, student) != expected:
                    summary.flags.append("THE GRADEBOOK DOES NOT HOLD THIS GRADE: record it by hand")
            if by_hand:
                settle_written(layout, gradebook, assignment, student, self.released, before, summary.flags)
        summary.flags[:0] = notes_of(layout, assignment, student, notebooks, self.intake, results=loaded)
        summary.auto_score, summary.auto_max, summary.seconds = (sum(getattr(r, name) for r in results)
                                                                 for name in ("score", "max_score", "seconds"))
        hand = written_grades(layout, assignment, student, gradebook) if results and by_hand else []
        summary.score = summary.auto_score + sum(g.score for g in hand)
        summary.max_score = summary.auto_max + (sum(sum(w.values()) for w in self.written.values()) if results else 0.0)
        summary.awaiting = [g.label() for g in hand if g.awaiting]
        if results:
            update_student(gradebook, assignment, student, self.people.get(student), flagged=bool(summary.flags))
        if student in self.reused:
            summary.flags.append("unchanged since its last grade (not graded again; --force to regrade)")


def record_directly(gradebook, assignment: str, student: str, points: dict[str, float]) -> None:
    """Write the grader's scores into the gradebook with nbgrader's own API (the caller commits)."""
    gradebook.update_or_create_student(student)
    submission = gradebook.update_or_create_submission(assignment, student)
    for notebook in submission.notebooks:
        written = written_names(notebook.notebook)
        for grade in notebook.grades:
            if grade.cell_type == "code" and grade.name not in written:
                grade.auto_score = points.get(grade.name, 0.0)
                grade.needs_manual_grade = False
    gradebook.db.flush()


def record_missing(gradebook, assignment: str, student: str) -> None:
    """A submission folder without notebooks: in the gradebook with zero, as nbgrader does for a missing
    notebook (the caller commits)."""
    gradebook.update_or_create_student(student)
    submission = gradebook.update_or_create_submission(assignment, student)
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            grade.auto_score = 0
            grade.needs_manual_grade = False
    gradebook.db.flush()


def update_student(gradebook, assignment: str, student: str, person: "lms.Student | None", flagged: bool) -> None:
    """The student's name and LMS id in nbgrader's gradebook, and formgrader's flag on a submission with
    notes (the caller commits)."""
    from nbgrader.api import MissingEntry

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
        gradebook.db.flush()


@contextlib.contextmanager
def _quiet_nbgrader() -> Iterator[None]:
    from sqlalchemy.exc import SAWarning

    with warnings.catch_warnings():
        # nbgrader's gradebook code warns "not in session" on every record: harmless, and nothing the
        # instructor could act on, it would bury the summary.
        warnings.filterwarnings("ignore", category=SAWarning, module=r"nbgrader\.")
        yield
