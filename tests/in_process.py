"""Judge answers without a sandbox: the runner's own ``run_case`` in this process, the grader's verdicts.

For fast tests over many seeds and many submissions. Nothing is sealed here (forbidden shortcuts are
the sandbox's business, tested end to end elsewhere); everything else is what the grader does: the
cases of the course seed, the notebook's given helpers re-installed before each call, the stand-ins,
the teacher-forced pass of ``translate``, the verdicts and their messages.
"""

from __future__ import annotations

import contextlib
import io
import marshal
import os
import re
from pathlib import Path

import nbformat
import torch

from attention_course.grading import runner
from attention_course.grading.cases import encode_case
from attention_course.grading.checks import checks_for
from attention_course.grading.grade import plan_cases, visible_only
from attention_course.grading.submission import given_helpers
from attention_course.grading.verdicts import CheckVerdict, Outcome, judge_case

ROOT = Path(__file__).resolve().parents[1]
if runner._GUARD is None:  # what the runner's main() sets up before the first cell (here without an audit hook)
    runner._GUARD = runner._make_guard(set())
SOLUTION_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\n?", re.M)


def solution_notebook(assignment: str):
    return nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)


def solution_cells(assignment: str) -> dict[str, str]:
    """{grade id: source} of the solution's code cells, without the solution markers."""
    return {cell.metadata["nbgrader"]["grade_id"]: SOLUTION_MARKERS.sub("", cell.source)
            for cell in solution_notebook(assignment).cells
            if cell.cell_type == "code" and "nbgrader" in cell.metadata}


def run_notebook(assignment: str, answers: dict[str, str], extra_cells: tuple[str, ...] = ()) -> dict:
    """The namespace of the solution notebook with ``answers`` in place of its cells (by grade id), test
    cells skipped, run top to bottom (errors in a cell are kept quiet, as in the grader)."""
    namespace: dict = {}
    folder = ROOT / "solutions" / assignment
    threads = torch.get_num_threads()
    cwd = os.getcwd()
    try:
        os.chdir(folder)  # the seq2seq setup cell reads toy_corpus.json from the working folder
        for cell in solution_notebook(assignment).cells:
            meta = cell.metadata.get("nbgrader") or {}
            if cell.cell_type != "code" or (meta.get("grade") and not meta.get("solution")):
                continue
            source = answers.get(meta.get("grade_id"), SOLUTION_MARKERS.sub("", cell.source))
            _quietly(source, namespace)
        for source in extra_cells:
            _quietly(source, namespace)
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
    return namespace


def _quietly(source: str, namespace: dict) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            exec(compile(source, "<cell>", "exec"), namespace)
        except Exception:
            pass


def judge(assignment: str, namespace: dict, seed: int, grade_ids: set[str] | None = None,
          visible: bool = False) -> dict[str, CheckVerdict]:
    """The grader's verdict for each check (or those in ``grade_ids``) on the functions in ``namespace``;
    ``visible``: on the visible cases only, as ``attention-course check`` judges them."""
    checks = {g: c for g, c in checks_for(assignment).items() if grade_ids is None or g in grade_ids}
    if visible:
        checks = visible_only(checks)
    helpers = compile(given_helpers(solution_notebook(assignment)), "<given helpers>", "exec")
    runner._load_standin()
    verdicts = {g: CheckVerdict(g, c.points, c.what) for g, c in checks.items()}
    threads = torch.get_num_threads()
    plan = runner._snapshot()  # run_case restores it after each call, as in the sandbox
    try:
        for case_id, check, case in plan_cases(checks, seed):
            described = marshal.loads(encode_case(case_id, case))
            outcome = Outcome(*runner.run_case(described, namespace, helpers, [], 30.0, plan)[1:])
            verdicts[check.grade_id].cases.append(judge_case(check, case, outcome))
    finally:
        torch.set_num_threads(threads)
    return verdicts


def points(verdicts: dict[str, CheckVerdict]) -> dict[str, float]:
    return {grade_id: (verdict.points if verdict.passed else 0) for grade_id, verdict in verdicts.items()}
