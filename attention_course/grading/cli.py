"""``attention-course``: one command for each student and instructor workflow.

Students:
  attention-course check NOTEBOOK          run the notebook and its visible tests; exit 1 on any failure

Instructors (COURSE is an nbgrader course directory, created on first use; default ./course):
  attention-course release [--course COURSE] [--exercises DIR]
                                           generate the student notebooks, and prove every solution
                                           scores full marks (hidden tests included)
  attention-course grade ASSIGNMENT [--zip EXPORT.zip] [--jobs N] [--force] [--reseed]
                                           grade submitted/<student>/<ASSIGNMENT>/ (or an LMS export),
                                           sandboxed, into the gradebook; prints a summary. Hidden cases
                                           come from the course seed (COURSE/grader/seeds.json); a
                                           submission unchanged since its last grade is not regraded
  attention-course feedback ASSIGNMENT     write feedback/ for students (no hidden tests in it)
  attention-course export [--to grades.csv]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from attention_course.grading import sandbox


def _test_cells(notebook):
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader") or {}
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            yield meta["grade_id"], float(meta.get("points", 0)), cell


def check(notebook_path: Path, timeout: int) -> int:
    """Run a student's notebook top to bottom; report each test cell; non-zero exit on any failure."""
    import nbclient
    import nbformat

    if not notebook_path.is_file():
        print(f"no such notebook: {notebook_path}", file=sys.stderr)
        return 2
    notebook = nbformat.read(notebook_path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=timeout, allow_errors=True, kernel_name="python3",
                                     resources={"metadata": {"path": str(notebook_path.parent.resolve())}})
    try:
        client.execute()
    except nbclient.exceptions.CellTimeoutError as error:
        print(f"a cell ran longer than {timeout} s: {str(error).splitlines()[0]}", file=sys.stderr)
    tests = list(_test_cells(notebook))
    if not tests:
        print("this notebook has no test cells (is it one of the course's exercises?)", file=sys.stderr)
        return 2
    earned = total = 0.0
    failed = 0
    width = max(len(g) for g, _, _ in tests)
    for grade_id, points, cell in tests:
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        ran = cell.get("execution_count") is not None
        total += points
        if ran and not errors:
            earned += points
            print(f"  passed  {grade_id:<{width}}  {points:g} points")
        else:
            failed += 1
            reason = (f"{errors[0].ename}: {errors[0].evalue}" if errors else "did not run").strip()
            print(f"  FAILED  {grade_id:<{width}}  {points:g} points\n          " + reason.replace("\n", "\n          "))
    print(f"\n{earned:g} of {total:g} points from the visible tests"
          + ("; hidden tests run when your instructor grades." if not failed else f"; {failed} test(s) failed."))
    return 1 if failed else 0


def release(course_dir: Path, exercises: Path | None, verify: bool) -> int:
    from attention_course.grading.course import Course

    course = Course(course_dir)
    status = 0
    for assignment in course.assignments():
        course.generate(assignment)
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
    full = summary.score == summary.max_score > 0 and not summary.flags
    print(f"{assignment}: the solution scores {summary.score:g} of {summary.max_score:g}"
          + ("" if full else f"  <- NOT FULL MARKS {summary.flags}"))
    return 0 if full else 1


def grade(course_dir: Path, assignment: str, zip_path: Path | None, jobs: int | None, unsafe: bool, wall: float,
          force: bool = False, reseed: bool = False) -> int:
    from attention_course.grading.course import Course, GradingInterrupted

    if jobs is not None and jobs < 1:
        print(f"--jobs must be at least 1, got {jobs}", file=sys.stderr)
        return 2
    course = Course(course_dir)
    if not (course.root / "release" / assignment).is_dir():
        course.generate(assignment)
    if zip_path is not None:
        imported = course.import_zip(zip_path, assignment)
        print(f"imported {len(imported)} submissions from {zip_path}")
    if unsafe:
        print("WARNING: grading WITHOUT the sandbox (--unsafe-no-sandbox): submissions run with your rights.",
              file=sys.stderr)
    if reseed:
        print(f"new course seed for {assignment}: every submission's hidden cases change; all are graded again")
        course.seed(assignment, reseed=True)
    try:
        summaries = course.grade(assignment, jobs=jobs, sandboxed=not unsafe, limits=sandbox.Limits(wall_s=wall),
                                 force=force or reseed)
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
    print(f"\n{'student':<{width}}  score      seconds  notes")
    for s in summaries:
        notes = "; ".join(s.flags) if s.flags else ""
        print(f"{s.student:<{width}}  {s.score:>4g}/{s.max_score:<4g}  {s.seconds:7.1f}  {notes}")
    flagged = [s for s in summaries if s.flags]
    mean = sum(s.score for s in summaries) / len(summaries)
    print(f"\n{len(summaries)} students graded, mean {mean:.2f}; {len(flagged)} with notes above. "
          f"Gradebook: {course.root / 'gradebook.db'}")
    failed = [s.student for s in summaries if any(f.startswith("grader error") for f in s.flags)]
    if failed:
        print(f"the grader itself failed on {len(failed)} submission(s) ({', '.join(failed[:5])}): they have no grade; "
              "run the same command again", file=sys.stderr)
        return 1
    return 0


def _quiet_nbgrader_internals() -> None:
    # nbgrader's gradebook code triggers SQLAlchemy warnings that say nothing to an instructor.
    import warnings

    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", message=".*not in session.*")


def main(argv: list[str] | None = None) -> int:
    _quiet_nbgrader_internals()
    parser = argparse.ArgumentParser(prog="attention-course", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("check", help="run a notebook with its visible tests")
    p.add_argument("notebook", type=Path)
    p.add_argument("--timeout", type=int, default=600, help="seconds a cell may run")
    p = commands.add_parser("release", help="generate exercises and verify the solutions")
    p.add_argument("--course", type=Path, default=Path("course"))
    p.add_argument("--exercises", type=Path, default=None, help="also copy the student notebooks here")
    p.add_argument("--no-verify", action="store_true", help="skip grading the solutions")
    p = commands.add_parser("grade", help="grade submissions into the gradebook")
    p.add_argument("assignment")
    p.add_argument("--course", type=Path, default=Path("course"))
    p.add_argument("--zip", type=Path, default=None, help="an LMS export (Moodle or Canvas) of the submissions")
    p.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: all cores)")
    p.add_argument("--wall-seconds", type=float, default=sandbox.Limits.wall_s,
                   help="wall-clock backstop per notebook run (grades never depend on it: limits that decide "
                        "count CPU seconds)")
    p.add_argument("--force", action="store_true", help="grade again submissions unchanged since their last grade")
    p.add_argument("--reseed", action="store_true",
                   help="draw a new course seed for the hidden cases (and grade everyone again)")
    p.add_argument("--unsafe-no-sandbox", action="store_true", help="run submissions without bubblewrap")
    p = commands.add_parser("feedback", help="generate feedback for students")
    p.add_argument("assignment")
    p.add_argument("--course", type=Path, default=Path("course"))
    p = commands.add_parser("export", help="export grades to CSV")
    p.add_argument("--course", type=Path, default=Path("course"))
    p.add_argument("--to", type=Path, default=Path("grades.csv"))
    args = parser.parse_args(argv)

    if args.command == "check":
        return check(args.notebook, args.timeout)
    if args.command == "release":
        return release(args.course, args.exercises, verify=not args.no_verify)
    if args.command == "grade":
        return grade(args.course, args.assignment, args.zip, args.jobs, args.unsafe_no_sandbox, args.wall_seconds,
                     force=args.force, reseed=args.reseed)
    from attention_course.grading.course import Course

    if args.command == "feedback":
        print(f"feedback written to {Course(args.course).feedback(args.assignment)}")
        return 0
    print(f"grades written to {Course(args.course).export(args.to)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
