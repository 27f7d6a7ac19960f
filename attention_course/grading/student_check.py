"""``attention-course check NOTEBOOK``: the grader on a student's machine, minus the hidden cases.

The notebook is prepared, run and judged exactly as ``grade`` does it (:func:`grade.grade_notebook`): the
same sandboxed runner where bubblewrap can start one, the same stand-ins (so one bug shows in its own
check only), the same forbidden-operation rules, the same CPU limits, the same messages and hints. Only the
cases differ: the visible ones (the numbers the notebook's own tests use), none of the hidden ones. The
points graded by hand are named, never counted as earned.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from attention_course.grading import sandbox
from attention_course.grading.checks import ASSIGNMENTS, checks_for
from attention_course.grading.grade import grade_notebook, visible_only
from attention_course.grading.layout import REPOSITORY
from attention_course.grading.nbgrader_bridge import written_cells
from attention_course.grading.submission import read_notebook
from attention_course.grading.notebook_translation import language_of_notebook
from attention_course.i18n import translator

EXERCISES = REPOSITORY / "exercises"


@dataclass
class Identified:
    assignment: str
    released: object  # the pristine student notebook it was released as
    release_folder: Path  # where its data files are (never the student's copies)


def _test_ids(notebook) -> set[str]:
    return {(c.metadata.get("nbgrader") or {}).get("grade_id") for c in notebook.cells
            if (c.metadata.get("nbgrader") or {}).get("grade")} - {None}


def identify(notebook, path: Path) -> Identified | None:
    """The assignment a notebook belongs to (the one whose checks it has test cells for, whatever the
    file is called), and the release it started from: the course's ``exercises/`` copy of the same file
    when the course is installed from its repository, else the notebook's own cells."""
    ids = _test_ids(notebook)
    found = [a for a, checks in ASSIGNMENTS.items() if checks and {c.grade_id for c in checks} <= ids]
    if len(found) != 1:
        return None
    assignment = found[0]
    folder = EXERCISES / assignment
    candidates = [folder / path.name, *sorted(folder.glob("*.ipynb"))] if folder.is_dir() else []
    for candidate in candidates:
        released, _ = read_notebook(candidate)
        if released is not None and _test_ids(released) == _test_ids(notebook) and language_of_notebook(released) == language_of_notebook(notebook):
            return Identified(assignment, released, folder)
    return Identified(assignment, notebook, path.parent)


def _points(tr, points: float) -> str:
    return (tr("1 point") if points == 1 else tr("{points} points").format(points=f"{points:g}"))


def check(path: Path, cpu_seconds: float | None = None, out=sys.stdout) -> int:
    """Check ``path`` as the grader would, on the visible cases; print what the grader will say.
    Exit status: 0 when every visible case passed, 1 when one failed, 2 when the notebook cannot be checked."""
    notebook, problem = read_notebook(path)
    if notebook is None:
        print(f"no such notebook: {path}" if problem == "missing notebook"
              else f"{path} is not a notebook that Jupyter can open ({problem})", file=sys.stderr)
        return 2
    found = identify(notebook, path)
    if found is None:
        print(f"{path} is not one of the course's exercises (its test cells match no assignment's: "
              f"{', '.join(sorted(ASSIGNMENTS))})", file=sys.stderr)
        return 2
    language = language_of_notebook(notebook)
    tr = translator(language, "grading")
    checks = visible_only(checks_for(found.assignment))
    limits = sandbox.Limits() if cpu_seconds is None else sandbox.Limits(cell_cpu_s=cpu_seconds)
    try:
        sandbox.check_available()
        sandboxed = True
    except sandbox.SandboxUnavailable:
        sandboxed = False
    print(tr("Checking {name} as the grader will, on the visible cases ({assignment}){how}.").format(
        name=path.name, assignment=found.assignment,
        how="" if sandboxed else tr(", without a sandbox (bubblewrap cannot start one here)")), file=out, flush=True)
    result = grade_notebook(path, found.released, checks, seed=0, release_folder=found.release_folder,
                            sandboxed=sandboxed, limits=limits, warm=False, language=language)
    width = max(len(g) for g in result.checks)
    earned = total = 0.0
    failed = 0
    for grade_id, verdict in result.checks.items():
        total += verdict["points"]
        if verdict["passed"]:
            earned += verdict["points"]
            print(f"  {tr('passed')}  {grade_id:<{width}}  {_points(tr, verdict['points'])}", file=out)
        else:
            failed += 1
            print(f"  {tr('FAILED')}  {grade_id:<{width}}  {_points(tr, verdict['points'])}", file=out)
            print("          " + verdict["message"].replace("\n", "\n          "), file=out)
    for flag in result.flags:
        print(tr("  note: {flag}").format(flag=flag), file=out)
    by_hand = written_cells(found.released)
    print("\n" + tr("{earned} of {total} points on the visible cases.").format(earned=f"{earned:g}", total=f"{total:g}"),
          file=out)
    if by_hand:
        print(tr("{points} more points are graded by hand by your instructor: {cells}.").format(
            points=f"{sum(by_hand.values()):g}", cells=", ".join(f"{g} ({p:g})" for g, p in by_hand.items())), file=out)
    print(tr("Hidden cases run when your instructor grades: a check passes only if they pass too.") if not failed else
          tr("{failed} check(s) failed: start with the first; the lines under it say what was expected, what your "
             "code did and, where the visible test has one, a hint.").format(
              failed=failed), file=out)
    return 1 if failed else 0

