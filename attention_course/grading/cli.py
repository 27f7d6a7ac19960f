"""``attention-course``: one command for each student and instructor workflow.

Students:
  attention-course check NOTEBOOK          check the notebook as the grader will (its runner, stand-ins, rules
                                           and limits), on the visible cases; names the points graded by hand;
                                           exit 1 when a check fails

Instructors (COURSE is an nbgrader course directory, default ./course; `release` creates it):
  attention-course release [--course COURSE] [--exercises DIR] [--assignment A] [--force]
                                           generate the student notebooks, and prove every solution
                                           scores full marks (hidden tests included; answers graded by
                                           hand in formgrader cannot be, and are not counted)
  attention-course grade ASSIGNMENT [--zip DOWNLOAD.zip] [--roster LIST.csv] [--student ID]
                                    [--jobs N | --cluster tcp://HOST:8786] [--force] [--reseed] [--cold]
                                           grade submitted/<student>/<ASSIGNMENT>/ (or a Moodle/Canvas
                                           download), sandboxed, into the gradebook; prints a summary and
                                           writes COURSE/reports/<ASSIGNMENT>.csv and the class report
  attention-course report ASSIGNMENT [--against DIR] [--language en|zh]
                                           the class at a glance: COURSE/reports/<ASSIGNMENT>/index.html
                                           (scores, each test's pass rate, discrimination and common
                                           failures, time, flags, alike work, the last regrade), with CSV
                                           beside it; also written after each `grade`
  attention-course feedback ASSIGNMENT     a feedback page for every graded student (no hidden tests in
                                           it), and a zip for the LMS's feedback upload
  attention-course export [--format nbgrader|moodle|canvas] [--assignment A] [--to FILE] [--leave-out-ungraded]
                                           grades for the LMS, each with the student's course total (joined
                                           across assignments by the roster's e-mail where the LMS id is per
                                           assignment); refused while written answers await a manual grade in
                                           formgrader (or, with the flag, those students left out)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from attention_course.grading import sandbox


def release(course_dir: Path, exercises: Path | None, verify: bool, force: bool = False,
            only: str | None = None) -> int:
    from attention_course.grading.course import Course

    course = Course(course_dir)
    if only is not None and only not in course.assignments():
        raise UsageError(f"no assignment {only!r}; the assignments are: {', '.join(course.assignments())}")
    status = 0
    for assignment in [only] if only is not None else course.assignments():
        course.generate(assignment, force=force)
        if exercises is not None:
            target = exercises / assignment
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(course.root / "release" / assignment, target)
            print(f"released {assignment} -> {target}")
        if verify:
            status |= _verify_solutions(course, assignment)
    return status


def _verify_solutions(course, assignment: str) -> int:
    """Grade the solution notebooks themselves, through the full sandboxed pipeline: all points or fail."""
    from attention_course.grading.course import Course

    with tempfile.TemporaryDirectory(prefix="verify-") as folder:
        scratch = Course(Path(folder) / "course", course.solutions)
        scratch.generate(assignment)
        submitted = scratch.root / "submitted" / "solution-check" / assignment
        submitted.mkdir(parents=True)
        for notebook in (course.solutions / assignment).glob("*.ipynb"):
            shutil.copy2(notebook, submitted / notebook.name)
        [summary] = scratch.grade(assignment, progress=False)
    full, line = verification(assignment, summary)
    print(line)
    return 0 if full else 1


def verification(assignment: str, summary) -> tuple[bool, str]:
    """Whether the solution's grade (a StudentSummary) is full marks, and the line that says so. Only the
    autograded points can be verified: answers graded by hand await the instructor in formgrader."""
    full = summary.auto_score == summary.auto_max > 0 and not summary.flags
    by_hand = summary.max_score - summary.auto_max
    return full, (f"{assignment}: the solution scores {summary.auto_score:g} of {summary.auto_max:g}"
                  + (" autograded points" if by_hand else "")
                  + ("" if full else f"  <- NOT FULL MARKS {summary.flags}")
                  + (f" ({by_hand:g} more points are graded by hand in formgrader: not verified here)" if by_hand else ""))


def grade(course_dir: Path, assignment: str, zip_path: Path | None, jobs: int | None, unsafe: bool, wall: float,
          force: bool = False, reseed: bool = False, roster: Path | None = None, student: str | None = None,
          cluster: str | None = None, cold: bool = False) -> int:
    from attention_course.grading.course import Course, GradingInterrupted
    from attention_course.grading.gradebook import gradebook_location

    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    if cluster is not None and jobs is not None:
        raise UsageError("--cluster and --jobs do not go together: with a cluster, its workers' threads decide "
                         "how many submissions are graded at once")
    course = Course(course_dir)
    course.require(assignment)
    if not (course.root / "release" / assignment).is_dir():
        course.generate(assignment)
    if roster is not None:
        listed = course.import_roster(roster, assignment)
        print(f"participant list: {len(listed)} students from {roster}")
    if zip_path is not None:
        export = course.import_zip(zip_path, assignment)
        late = sum(1 for s in export.students.values() if s.late)
        ignored = "; ".join(f"{what} ({n})" for what, n in sorted(export.ignored.items()))
        print(f"imported {len(export.students)} students from {zip_path} ({export.lms})"
              + (f", {late} marked late" if late else "") + (f"; ignored: {ignored}" if ignored else ""))
    students = None
    if student is not None:
        known = course.students(assignment)
        if student not in known:
            raise UsageError(f"no submission of {assignment} from {student!r}"
                             + (f"; students: {', '.join(known[:10])}" + (" …" if len(known) > 10 else "") if known else ""))
        students = [student]
    if unsafe:
        print("WARNING: grading WITHOUT the sandbox (--unsafe-no-sandbox): submissions run with your rights.",
              file=sys.stderr)
    if reseed:
        print(f"new course seed for {assignment}: every submission's hidden cases change; all are graded again")
        course.seed(assignment, reseed=True)
    try:
        summaries = course.grade(assignment, jobs=jobs, sandboxed=not unsafe, limits=sandbox.Limits(wall_s=wall),
                                 force=force or reseed, students=students, cluster=cluster, warm=not cold)
    except sandbox.SandboxUnavailable as error:
        print(f"cannot grade safely: {error}\nRefusing to run submissions unsandboxed; "
              "pass --unsafe-no-sandbox to do so anyway.", file=sys.stderr)
        return 3
    except GradingInterrupted as stop:
        print(f"\ninterrupted: {stop.graded} of {stop.total} submissions graded"
              + (" and recorded in the gradebook; run the same command again to grade the rest"
                 if stop.recorded else "; nothing recorded"), file=sys.stderr)
        return 130
    if not summaries:
        print(f"no submissions for {assignment} under {course.root / 'submitted'}")
        return 1
    width = max(len(s.student) for s in summaries)
    names = max(4, *(_columns(s.name) for s in summaries))
    print(f"\n{'student':<{width}}  {'name' + ' ' * (names - 4)}  score      seconds  notes")
    for s in summaries:
        notes = "; ".join(s.flags + ([f"awaiting manual grading: {', '.join(s.awaiting)}"] if s.awaiting else []))
        name = s.name + " " * (names - _columns(s.name))
        print(f"{s.student:<{width}}  {name}  {s.score:>4g}/{s.max_score:<4g}  {s.seconds:7.1f}  {notes}")
    flagged = [s for s in summaries if any(not f.startswith("unchanged since") for f in s.flags)]
    unchanged = sum(1 for s in summaries if any(f.startswith("unchanged since") for f in s.flags))
    mean = sum(s.score for s in summaries) / len(summaries)
    print(f"\n{len(summaries)} student{'s' if len(summaries) != 1 else ''} graded, mean {mean:.2f}; "
          + (f"{len(flagged)} flagged for a look (their notes above; flagged in formgrader)" if flagged else "none flagged")
          + (f"; {unchanged} not graded again (unchanged since the last grade)" if unchanged else "")
          + f". Gradebook: {gradebook_location(course.root)}; "
          f"report: {course.root / 'reports' / assignment / 'index.html'} (and {assignment}.csv beside it)")
    awaiting = [s for s in summaries if s.awaiting]
    if awaiting:
        answers = sum(len(s.awaiting) for s in awaiting)
        print(f"{answers} written answer{'s' if answers != 1 else ''} of {len(awaiting)} student{'s' if len(awaiting) != 1 else ''} "
              f"await{'s' if answers == 1 else ''} manual grading (the scores above count only the points given so far): grade them in "
              f"formgrader (`jupyter lab` in {course.root}, then Nbgrader > Formgrader > Manual Grading > {assignment}); "
              "`feedback` and `export` wait for them")
    failed = [s.student for s in summaries if any(f.startswith("grader error") for f in s.flags)]
    if failed:
        print(f"the grader itself failed on {len(failed)} submission(s) ({', '.join(failed[:5])}): they have no grade; "
              "run the same command again", file=sys.stderr)
        return 1
    return 0


def _columns(text: str) -> int:
    """How many terminal columns ``text`` takes (a Chinese character takes two)."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in text)


def report(course_dir: Path, assignment: str, against: Path | None = None, language: str | None = None) -> int:
    from attention_course.grading.course import Course

    course = Course(course_dir)
    course.require(assignment)
    if against is not None and not against.is_dir():
        raise UsageError(f"--against {against}: no such folder (give the folder of earlier classes' submissions)")
    page = course.write_reports(assignment, language=language, against=against)
    print(f"the class report: {page}")
    print(f"  with {', '.join(p.name for p in sorted(page.parent.glob('*.csv')))} beside it, and "
          f"{course.root / 'reports' / (assignment + '.csv')} (one line a student)")
    return 0


def feedback(course_dir: Path, assignment: str) -> int:
    from attention_course.grading.course import Course
    from attention_course.grading.feedback_pages import count_line

    report = Course(course_dir).feedback(assignment)
    print(f"{count_line(report.written, report.skipped)}: {report.folder}")
    for path in report.zips:
        print(f"for the platform's feedback upload: {path}")
    if report.math_inlined:
        print(f"  {report.math_inlined} page(s) carry MathJax itself (2 MB each): Node.js could not typeset their "
              "math (is `node` on PATH? `make book` installs it)")
    for why, count in sorted(report.not_zipped.items()):
        print(f"  not in the zip: {count} ({why}); their pages are in {report.folder}")
    return 0


def export(course_dir: Path, destination: Path, fmt: str, assignment: str | None, leave_out_ungraded: bool = False) -> int:
    from attention_course.grading.course import Course

    course = Course(course_dir)
    course.require(assignment)
    exported = course.export_grades(destination, fmt, assignment, leave_out_ungraded=leave_out_ungraded)
    print(f"grades written to {exported.path} ({fmt}), each with its student's course total")
    for line in exported.left_out:
        print(f"  not in it: {line}")
    for line in exported.course:
        print(f"  course total: {line}")
    return 0


class UsageError(Exception):
    """An ordinary mistake on the command line: one line, exit status 2."""


def _quiet_nbgrader_internals() -> None:
    # nbgrader's gradebook code triggers SQLAlchemy warnings that say nothing to an instructor.
    import warnings

    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", message=".*not in session.*")


def main(argv: list[str] | None = None) -> int:
    from attention_course.grading.course import Course
    from attention_course.grading.layout import REPOSITORY, assignments_in

    _quiet_nbgrader_internals()
    assignments = ", ".join(assignments_in(REPOSITORY / "solutions"))
    parser = argparse.ArgumentParser(prog="attention-course", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("check", help="check a notebook as the grader will, on the visible cases")
    p.add_argument("notebook", type=Path)
    p.add_argument("--cell-cpu-seconds", type=float, default=None,
                   help="CPU seconds a cell may use (default: the grader's own limit)")
    p = commands.add_parser("release", help="create the course (or update it): generate the exercises, verify the solutions")
    p.add_argument("--course", type=Path, default=Path("course"))
    p.add_argument("--exercises", type=Path, default=None, help="also copy the student notebooks here")
    p.add_argument("--no-verify", action="store_true", help="skip grading the solutions")
    p.add_argument("--force", action="store_true", help="replace a source/<assignment>/ edited by hand")
    p.add_argument("--assignment", default=None, help=f"only this assignment ({assignments}); default: all")
    p = commands.add_parser("grade", help="grade submissions into the gradebook",
                            description=f"Grade the submissions of one assignment ({assignments}).")
    p.add_argument("assignment", help=f"one of: {assignments}")
    p.add_argument("--course", type=Path, default=Path("course"))
    p.add_argument("--zip", type=Path, default=None, help="a submissions download from Moodle or Canvas")
    p.add_argument("--roster", type=Path, default=None,
                   help="the participant list: Moodle's grading worksheet or Canvas's gradebook export (CSV); "
                        "who is on it and submitted nothing is graded 0 as missing")
    p.add_argument("--student", default=None, help="grade this student only (a student id from the summary)")
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: all cores)")
    p.add_argument("--cold", action="store_true",
                   help="start every sandboxed run from a fresh interpreter instead of forking it from a warm "
                        "template that has PyTorch imported (slower; the grades are the same)")
    p.add_argument("--cluster", default=None, metavar="tcp://HOST:8786",
                   help="grade on the workers of this Dask scheduler instead of here; each worker needs this "
                        "package at the same version with the pinned requirements, and bubblewrap (Linux with user "
                        "namespaces), but not the course directory; this machine alone writes the gradebook")
    p.add_argument("--wall-seconds", type=float, default=sandbox.Limits.wall_s,
                   help="wall-clock backstop per notebook run (grades never depend on it: limits that decide "
                        "count CPU seconds)")
    p.add_argument("--force", action="store_true", help="grade again submissions unchanged since their last grade")
    p.add_argument("--reseed", action="store_true",
                   help="draw a new course seed for the hidden cases (and grade everyone again)")
    p.add_argument("--unsafe-no-sandbox", action="store_true", help="run submissions without bubblewrap")
    p = commands.add_parser("report", help="the class report: scores, tests, failures, time, flags, alike work, regrades",
                            description=f"The class report of one assignment ({assignments}): an offline HTML page "
                                        "with CSV files beside it, in COURSE/reports/ASSIGNMENT/.")
    p.add_argument("assignment", help=f"one of: {assignments}")
    p.add_argument("--course", type=Path, default=Path("course"))
    p.add_argument("--against", type=Path, default=None, metavar="DIR",
                   help="also compare the code with earlier classes' submissions kept in DIR")
    p.add_argument("--language", choices=("en", "zh"), default=None,
                   help="the page's language (default: the language the assignment was released in)")
    p = commands.add_parser("feedback", help="feedback pages for students, and a zip for the LMS's feedback upload",
                            description=f"Feedback for every graded student of one assignment ({assignments}).")
    p.add_argument("assignment", help=f"one of: {assignments}")
    p.add_argument("--course", type=Path, default=Path("course"))
    p = commands.add_parser("export", help="export grades for nbgrader, Moodle or Canvas")
    p.add_argument("--course", type=Path, default=Path("course"))
    p.add_argument("--to", type=Path, default=Path("grades.csv"))
    p.add_argument("--format", choices=Course.EXPORT_FORMATS, default="nbgrader",
                   help="moodle: the grading worksheet to upload; canvas: the gradebook import; nbgrader: its own CSV")
    p.add_argument("--assignment", default=None, help=f"only this assignment ({assignments}); Moodle needs one")
    p.add_argument("--leave-out-ungraded", action="store_true",
                   help="export the others when some students' written answers still await a manual grade in "
                        "formgrader (by default the export refuses, naming them): those students are left out, and listed")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except UsageError as error:
        print(f"attention-course {args.command}: {error}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from attention_course.grading.course import CourseError
    from attention_course.grading.lms import ExportError

    try:
        if args.command == "check":
            from attention_course.grading.student_check import check
            return check(args.notebook, args.cell_cpu_seconds)
        if args.command == "release":
            return release(args.course, args.exercises, verify=not args.no_verify, force=args.force,
                           only=args.assignment)
        if args.command == "grade":
            return grade(args.course, args.assignment, args.zip, args.jobs, args.unsafe_no_sandbox, args.wall_seconds,
                         force=args.force, reseed=args.reseed, roster=args.roster, student=args.student,
                         cluster=args.cluster, cold=args.cold)
        if args.command == "feedback":
            return feedback(args.course, args.assignment)
        if args.command == "report":
            return report(args.course, args.assignment, args.against, args.language)
        return export(args.course, args.to, args.format, args.assignment, args.leave_out_ungraded)
    except (CourseError, ExportError) as error:
        raise UsageError(str(error)) from None


if __name__ == "__main__":
    sys.exit(main())
