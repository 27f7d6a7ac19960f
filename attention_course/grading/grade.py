"""Grade one submitted notebook: prepare it, run it sandboxed, judge what it produced.

A grade is a pure function of the submission's bytes, the release and the course seed: every hidden
case is drawn from a generator seeded with (course seed, grade id), and every limit that decides
anything counts CPU seconds inside the sandbox, never the wall clock.

Each phase with cases gets its own sandboxed run of the notebook (see ``runner``): ``open`` first
(the cells as the student ran them), then ``sealed`` (the softmax family gone from the start). The
runner asks for the phase's cases once its graded child is ready; a second request, a result for a
case that was not sent or sent twice, or anything else out of protocol discards the run's results
and is flagged.

The result is plain data (:class:`NotebookResult`, saved as JSON in the grader's own folder) that the
nbgrader step turns into test-cell outputs and gradebook scores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import marshal
import secrets
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from attention_course.grading import runner as runner_module
from attention_course.grading import sandbox, standin
from attention_course.grading.cases import PHASES, Case, Check, encode_case
from attention_course.grading.submission import prepare
from attention_course.grading.verdicts import FORBIDDEN_REASON, CheckVerdict, Outcome, judge_case

# Data files of the released assignment that are copied into the sandbox next to the notebook.
DATA_SUFFIXES = {".csv", ".txt", ".json", ".npz", ".npy", ".pt"}
MAX_DATA_BYTES = 20 << 20
BUDGET_MARK = "(the step budget)"  # what the given training loops print when they stop on their budget


@dataclass
class NotebookResult:
    notebook: str
    checks: dict[str, dict] = field(default_factory=dict)  # grade id -> {"passed", "points", "message"}
    flags: list[str] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)  # what each run cell printed (capped), in run order
    seconds: float = 0.0  # wall seconds of the sandboxed runs (informative only)
    cpu_seconds: float = 0.0  # CPU seconds of the sandboxed runs
    seed: int = 0
    fingerprint: str = ""  # of (submission, release, seed, grader): a re-grade with the same one is skipped
    readable: bool = True  # False for a missing, empty or unreadable notebook: nothing of it ran
    made_of: dict[str, str] = field(default_factory=dict)  # the fingerprint's parts, each alone (fingerprints.parts)
    language: str = "en"  # the submitted notebook's language ("en", or "zh" for the Chinese notebook)

    @property
    def score(self) -> float:
        return sum(c["points"] for c in self.checks.values() if c["passed"])

    @property
    def max_score(self) -> float:
        return sum(c["points"] for c in self.checks.values())

    def save(self, path: Path) -> None:
        """Written whole or not at all (an interrupted batch leaves no half-written result)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".partial")
        temporary.write_text(json.dumps(asdict(self), ensure_ascii=False, indent=1), encoding="utf-8")
        temporary.replace(path)

    @classmethod
    def load(cls, path: Path) -> "NotebookResult":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k in known})


def case_generator(seed: int, grade_id: str) -> torch.Generator:
    """The generator of one check's hidden cases: a function of the course seed and the grade id only."""
    digest = hashlib.sha256(f"{seed}:{grade_id}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") & (2**63 - 1))


def visible_only(checks: dict[str, Check]) -> dict[str, Check]:
    """The same checks with their visible cases only: what ``attention-course check`` runs on a student's
    machine (the grader's runner, stand-ins, rules and limits; none of the hidden cases). A check with no
    visible case (a trained model measured on new sentences) keeps its cases, drawn from ``check``'s own
    seed, never the course's: they are a fresh draw of the same kind, as good a practice as a visible one."""
    def visible(check: Check):
        def make_cases(generator):
            cases = check.make_cases(generator)
            shown = [case for case in cases if not case.hidden]
            return shown or [dataclasses.replace(case, hidden=False) for case in cases]
        return make_cases
    return {grade_id: dataclasses.replace(check, make_cases=visible(check)) for grade_id, check in checks.items()}


def plan_cases(checks: dict[str, Check], seed: int) -> list[tuple[str, Check, Case]]:
    """Every case of every check, with the id the runner knows it by."""
    planned = []
    for check in checks.values():
        for case in check.make_cases(case_generator(seed, check.grade_id)):
            planned.append((f"case{len(planned)}", check, case))
    return planned


def data_files(release_folder: Path) -> list[Path]:
    """The assignment's own data files, from the release (never the student's copies, which may be edited):
    what every run gets next to the notebook."""
    chosen, size = [], 0
    for path in sorted(release_folder.iterdir()) if release_folder.is_dir() else []:
        if path.is_file() and not path.is_symlink() and path.suffix in DATA_SUFFIXES and path.name != "timestamp.txt":
            size += path.stat().st_size
            if size <= MAX_DATA_BYTES:
                chosen.append(path)
    return chosen


class Conversation:
    """The grader's side of one run's protocol: the runner says it is ready, then asks for the cases one at a
    time, sending each one's result (after what the grader measures before the call, for a case that has it)
    before it may ask for the next; then it says it is done."""

    def __init__(self, phase: str, cases: list[tuple[str, Case]]):
        self.phase = phase
        self.cases = list(cases)
        self.case_ids = {case_id for case_id, _ in cases}
        self.sent = 0  # cases sent so far
        self.ready = self.done = False
        self.results: dict[str, Outcome] = {}
        self.before: dict[str, tuple] = {}  # case id -> what the runner measured before the call
        self.notes: list[str] = []
        self.problem = ""  # why the results of this run cannot be trusted
        self.runner_error = ""
        self.broken_seal = ""

    def __call__(self, message, signed: bool = True) -> bytes | None:
        kind = message[0] if isinstance(message, tuple) and message and isinstance(message[0], str) else None
        if kind != "note" and not signed:
            return self._stop("a message that the grader's runner did not sign")
        if kind == "note":
            if len(message) == 2 and isinstance(message[1], str) and message[1] not in self.notes and len(self.notes) < 20:
                self.notes.append(message[1][:200])
            return None
        if kind == "ready":
            if self.ready:
                return self._stop("the notebook's code spoke for the grader's runner before the graded calls")
            if message[1:] != (self.phase,):
                return self._stop("a request that the grader did not expect")
            self.ready = True
            return None
        if kind == "next":
            if not self.ready or len(self.results) != self.sent:
                return self._stop("a request for the grader's inputs out of turn")
            if self.sent == len(self.cases):
                return marshal.dumps(None)
            case_id, case = self.cases[self.sent]
            self.sent += 1
            return encode_case(case_id, case)
        if kind == "extra":  # what the runner measured before the call (sent then, so that no frame holds it)
            expected = self.cases[self.sent - 1][0] if self.sent else None
            if (len(message) != 3 or message[1] != expected or expected in self.results or expected in self.before
                    or not isinstance(message[2], tuple)):
                return self._stop("a measurement for a call the grader did not ask for")
            self.before[expected] = message[2]
            return None
        if kind == "result":
            expected = self.cases[self.sent - 1][0] if self.sent else None
            if len(message) != 8 or message[1] != expected or expected in self.results:
                return self._stop("a result for a call the grader did not ask for")
            try:
                outcome = Outcome.from_message(message)
            except (TypeError, ValueError):
                return self._stop("a result the grader could not read")
            outcome.extra = (*self.before.pop(expected, ()), *outcome.extra)
            self.results[expected] = outcome
            return None
        if kind == "done" and self.ready and len(self.results) == len(self.cases):
            self.done = True
            raise sandbox.Channel.Stop("")
        if kind == "broken-seal" and len(message) == 2:
            self.broken_seal = str(message[1])[:300]
            raise sandbox.Channel.Stop("")
        if kind == "runner-error" and len(message) == 2:
            self.runner_error = str(message[1])[:300]
            raise sandbox.Channel.Stop("")
        return self._stop("a message out of the grader's protocol")

    def _stop(self, problem: str):
        self.problem = problem
        self.results.clear()  # none of this run's results can be trusted any more
        self.before.clear()
        raise sandbox.Channel.Stop(problem)


def _run_phase(phase: str, prepared, cases: list[tuple[str, Case]], *, release_folder: Path | None, sandboxed: bool,
               limits: sandbox.Limits, warm: bool) -> tuple[Conversation, sandbox.RunResult, list[dict]]:
    conversation = Conversation(phase, cases)
    with sandbox.workspace(sandboxed, warm) as (workdir, template):
        if release_folder is not None:
            for path in data_files(release_folder):
                shutil.copy2(path, workdir / path.name)
        shutil.copy2(runner_module.__file__, workdir / "runner.py")
        shutil.copy2(standin.__file__, workdir / "standin.py")
        key = secrets.token_bytes(32)  # the runner's signing key for this run; read and deleted before any cell
        program = {"cells": prepared.cells, "helpers": prepared.helpers, "phase": phase,
                   "cell_cpu_s": limits.cell_cpu_s, "case_cpu_s": limits.case_cpu_s, "key": key.hex()}
        (workdir / "program.json").write_text(json.dumps(program), encoding="utf-8")
        channel = sandbox.Channel(conversation, key)
        run = sandbox.run(workdir, [sys.executable, "-I", "runner.py", sandbox.INSIDE if sandboxed else str(workdir)],
                          limits, sandboxed=sandboxed, channel=channel, template=template)
        if channel.failure is not None:  # (grading stops for this student: a grader error, no grade)
            raise RuntimeError(f"the grader failed while talking to the runner: {channel.failure!r}") from channel.failure
        if channel.problem and not conversation.problem:  # a frame refused before it reached the conversation
            conversation.problem = channel.problem
            conversation.results.clear()
        cells = _read_cells(workdir)
    return conversation, run, cells


def grade_notebook(
    submitted: Path,
    released,
    checks: dict[str, Check],
    *,
    seed: int,
    release_folder: Path | None = None,
    sandboxed: bool = True,
    limits: sandbox.Limits = sandbox.Limits(),
    fingerprint: str = "",
    warm: bool = True,
    language: str = "en",
) -> NotebookResult:
    """Grade ``submitted`` (a path that may not exist) against the ``released`` notebook's checks.

    ``warm``: fork each sandboxed run from a warm template (PyTorch already imported) rather than start
    a fresh interpreter; the grade is the same either way. ``language``: that of the notebook submitted, which
    the checks' messages are written in ("en" or "zh"; the grade is the same in both)."""
    result = NotebookResult(notebook=submitted.name, seed=seed, fingerprint=fingerprint, language=language)
    with sandbox.PARSE_LOCK:  # (the source scan parses the cells)
        prepared = prepare(submitted, released)
    result.flags.extend(prepared.flags)
    result.readable = prepared.readable

    planned = plan_cases(checks, seed)
    verdicts = {grade_id: CheckVerdict(grade_id, check.points, check.what) for grade_id, check in checks.items()}
    outcomes: dict[str, Outcome] = {}
    if prepared.readable:
        for phase in PHASES:
            cases = [(case_id, case) for case_id, check, case in planned if check.phase == phase]
            if not cases:
                continue
            conversation, run, cells = _run_phase(phase, prepared, cases, release_folder=release_folder,
                                                  sandboxed=sandboxed, limits=limits, warm=warm)
            outcomes.update(conversation.results)
            result.seconds = round(result.seconds + run.seconds, 2)
            result.cpu_seconds = round(result.cpu_seconds + run.cpu_seconds, 2)
            if not result.cells or phase == "open":
                result.cells = cells
            result.flags.extend(_run_flags(phase, conversation, run, cells, limits))
            result.flags.extend(note for note in conversation.notes if note not in result.flags)
        for report in result.cells:  # which cell each report is about, for the autograded notebook
            number = report.get("cell")
            report["source"] = prepared.cells[number] if isinstance(number, int) and 0 <= number < len(prepared.cells) else ""
    stuck, shortcuts, noticed = [], {}, []
    for case_id, check, case in planned:
        verdict = judge_case(check, case, outcomes.get(case_id) if prepared.readable else None)
        verdicts[check.grade_id].cases.append(verdict)
        if verdict.flag:  # what a check says the instructor should look at (evidence not measured, ...)
            noticed.append(verdict.flag)
        if verdict.reason.startswith("the call did not finish") and case.call not in stuck:
            stuck.append(case.call)
        if verdict.reason.startswith(FORBIDDEN_REASON):
            shortcuts.setdefault(case.call, verdict.reason.removeprefix(FORBIDDEN_REASON).split(" [")[0])
    if stuck:
        result.flags.append(f"timed out in {', '.join(stuck)} (those calls were stopped)")
    if shortcuts:
        result.flags.append("forbidden shortcuts: " + "; ".join(f"{call} uses {uses}" for call, uses in shortcuts.items()))
    result.flags.extend(noticed)
    result.flags = list(dict.fromkeys(result.flags))
    for grade_id, verdict in verdicts.items():
        result.checks[grade_id] = {"passed": verdict.passed, "points": verdict.points,
                                   "message": verdict.message(language)}
    return result


def _run_flags(phase: str, conversation: Conversation, run: sandbox.RunResult, cells: list[dict],
               limits: sandbox.Limits) -> list[str]:
    flags = []
    if conversation.problem:
        flags.append(f"tampered with the grader's channel: {conversation.problem} (this run's results were discarded)")
    if conversation.broken_seal:
        flags.append(f"the grader could not switch off the softmax family ({conversation.broken_seal}): not graded")
    if conversation.runner_error:
        flags.append(f"the grader's runner failed: {conversation.runner_error}")
    if run.timed_out:
        flags.append(f"stopped after {limits.wall_s:g} s of wall-clock time")
    elif run.idle:
        flags.append(f"stopped: no CPU progress for {limits.idle_s:g} s (sleeping or waiting)")
    elif not conversation.done and not conversation.problem and not conversation.broken_seal and not conversation.runner_error:
        flags.append(f"crashed (exit status {run.returncode}): {run.output_tail.strip()[-300:]}".strip())
    if run.output_bytes > limits.output_bytes:
        flags.append(f"printed {run.output_bytes:,} bytes outside the notebook's cells (not kept)")
    flags.extend(_cell_flags(cells, limits))
    return flags


def _cell_flags(cells: list[dict], limits: sandbox.Limits) -> list[str]:
    """What the run of the student's own cells says about the submission."""
    flags = []
    errors = " ".join(str(c.get("error") or "") for c in cells)
    if "MemoryError" in errors:
        flags.append(f"ran out of memory (limit {limits.memory_bytes / 2**30:g} GiB)")
    if "RecursionError" in errors:
        flags.append("recursed too deeply")
    if any(c.get("status") == "timeout" for c in cells):
        flags.append(f"a cell used more than its {limits.cell_cpu_s:g} CPU seconds")
    if any(BUDGET_MARK in str(c.get("stdout", "")) for c in cells):
        flags.append("training stopped at its step budget, not at its target accuracy")
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
