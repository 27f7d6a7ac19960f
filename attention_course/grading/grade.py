"""Grade one submitted notebook: prepare it, run it sandboxed, judge what it produced.

The result is plain data (:class:`NotebookResult`, saved as JSON in the grader's own folder) that the
nbgrader step turns into test-cell outputs and gradebook scores.
"""

from __future__ import annotations

import json
import secrets
import threading
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from attention_course.grading import runner as runner_module
from attention_course.grading import sandbox
from attention_course.grading.cases import Check, write_program
from attention_course.grading.submission import prepare
from attention_course.grading.verdicts import FORBIDDEN_REASON, CheckVerdict, judge_case

# Data files of the released assignment that are copied into the sandbox next to the notebook.
_PARSE_LOCK = threading.Lock()
DATA_SUFFIXES = {".csv", ".txt", ".json", ".npz", ".npy", ".pt"}
MAX_DATA_BYTES = 20 << 20


@dataclass
class NotebookResult:
    notebook: str
    checks: dict[str, dict] = field(default_factory=dict)  # grade id -> {"passed", "points", "message"}
    flags: list[str] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)  # what each run cell printed (capped), in run order
    seconds: float = 0.0
    seed: int = 0
    readable: bool = True  # False for a missing, empty or unreadable notebook: nothing of it ran

    @property
    def score(self) -> float:
        return sum(c["points"] for c in self.checks.values() if c["passed"])

    @property
    def max_score(self) -> float:
        return sum(c["points"] for c in self.checks.values())

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), ensure_ascii=False, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "NotebookResult":
        return cls(**json.loads(path.read_text(encoding="utf-8")))


def _copy_data_files(release_folder: Path, workdir: Path) -> None:
    """The assignment's own data files, from the release (never the student's copies, which may be edited)."""
    source_folder = release_folder
    copied = 0
    for path in sorted(source_folder.iterdir()) if source_folder.is_dir() else []:
        if path.is_file() and not path.is_symlink() and path.suffix in DATA_SUFFIXES and path.name != "timestamp.txt":
            copied += path.stat().st_size
            if copied <= MAX_DATA_BYTES:
                shutil.copy2(path, workdir / path.name)


def grade_notebook(
    submitted: Path,
    released,
    checks: dict[str, Check],
    *,
    release_folder: Path | None = None,
    sandboxed: bool = True,
    limits: sandbox.Limits = sandbox.Limits(),
    seed: int | None = None,
) -> NotebookResult:
    """Grade ``submitted`` (a path that may not exist) against the ``released`` notebook's checks."""
    seed = secrets.randbits(63) if seed is None else seed
    result = NotebookResult(notebook=submitted.name, seed=seed)
    with _PARSE_LOCK:  # ast.parse is not thread-safe in CPython 3.11 (gh-106905)
        prepared = prepare(submitted, released)
    result.flags.extend(prepared.flags)
    result.readable = prepared.readable

    generator = torch.Generator().manual_seed(seed)
    planned = [(check, case) for check in checks.values() for case in check.make_cases(generator)]
    verdicts = {grade_id: CheckVerdict(grade_id, check.points, check.what) for grade_id, check in checks.items()}

    if prepared.readable:
        with tempfile.TemporaryDirectory(prefix="grade-") as folder:
            workdir = Path(folder)
            if release_folder is not None:
                _copy_data_files(release_folder, workdir)
            shutil.copy2(runner_module.__file__, workdir / "runner.py")
            write_program(workdir, prepared.cells, [case for _, case in planned])
            run = sandbox.run(workdir, [sys.executable, "-I", "runner.py", sandbox.INSIDE if sandboxed else str(workdir)],
                              limits, sandboxed=sandboxed)
            result.seconds = round(run.seconds, 2)
            if run.timed_out:
                result.flags.append(f"timed out after {limits.wall_s:g} s")
            elif not (workdir / "out" / "done.json").is_file():
                result.flags.append(f"crashed (exit status {run.returncode}): {run.output_tail.strip()[-300:]}".strip())
            if run.output_bytes > limits.output_bytes:
                result.flags.append(f"printed {run.output_bytes:,} bytes outside the notebook's cells (not kept)")
            result.cells = _read_cells(workdir)
            for report in result.cells:  # which cell each report is about, for the autograded notebook
                number = report.get("cell")
                report["source"] = prepared.cells[number] if isinstance(number, int) and 0 <= number < len(prepared.cells) else ""
            stuck, shortcuts = [], {}
            for number, (check, case) in enumerate(planned):
                static = prepared.forbidden_by_name.get(case.call, set())
                verdict = judge_case(check, case, f"case{number}", workdir / "out", static)
                verdicts[check.grade_id].cases.append(verdict)
                if verdict.reason.startswith("the call did not finish") and case.call not in stuck:
                    stuck.append(case.call)
                if verdict.reason.startswith(FORBIDDEN_REASON):
                    shortcuts[case.call] = verdict.reason.removeprefix(FORBIDDEN_REASON)
            if stuck and not run.timed_out:
                result.flags.append(f"timed out in {', '.join(stuck)} (those calls were stopped)")
            if shortcuts:
                result.flags.append("forbidden shortcuts: " + "; ".join(f"{call} uses {uses}" for call, uses in shortcuts.items()))
            result.flags.extend(_cell_flags(result.cells, limits))
    for grade_id, verdict in verdicts.items():
        result.checks[grade_id] = {"passed": verdict.passed, "points": verdict.points, "message": verdict.message()}
    return result


def _cell_flags(cells: list[dict], limits: sandbox.Limits) -> list[str]:
    """What the run of the student's own cells says about the submission."""
    flags = []
    errors = " ".join(str(c.get("error") or "") for c in cells)
    if "MemoryError" in errors:
        flags.append(f"ran out of memory (limit {limits.memory_bytes / 2**30:g} GiB)")
    if "RecursionError" in errors:
        flags.append("recursed too deeply")
    if any(c.get("status") == "timeout" for c in cells):
        flags.append("a cell ran out of time")
    dropped = [c for c in cells if "more characters not kept]" in (c.get("stdout", "") + c.get("stderr", ""))]
    if dropped:
        flags.append(f"{len(dropped)} cell(s) printed more than the grader keeps (truncated)")
    return flags


def _read_cells(workdir: Path) -> list[dict]:
    path = workdir / "cells.json"
    if not path.is_file() or path.stat().st_size > (4 << 20):
        return []
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return []
    return cells if isinstance(cells, list) else []
