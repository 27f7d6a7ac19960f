"""A shortcut never pays, and the student's code can never decide whether it was seen.

The hostile corpus (tests/hostile_corpus.py) holds one submission per class of shortcut, in all three
assignments, each built from otherwise-honest code: it must get exactly the points of its honest parts
(0 for the function with the shortcut, and no more), and the summary must name what it did where the
grader can tell. End to end, each assignment's whole corpus is graded in one batch (real sandbox, real
nbgrader, real gradebook), and the summary, the gradebook and nbgrader's CSV export must agree. A fast
part, without a sandbox, checks the pieces that decide: the metadata read against the release, the
channel's protocol, the stand-ins' matchers, translate's check (run in this process), and the audit hook's
refusal of every way to start a fresh, unsealed interpreter.
"""

from __future__ import annotations

import base64
import copy
import csv
import io

import nbformat
import pytest
import torch
from nbgrader.api import Gradebook

import in_process
from attention_course.grading import runner, sandbox
from attention_course.grading.cases import Case
from attention_course.grading.grade import Conversation
from attention_course.grading.nbgrader_bridge import COURSE_ID
from attention_course.grading.submission import HIDDEN_TESTS, prepare
from fresh_python import run_python
from grading_support import filled, grade_id, graded_batch, released_notebook
from hostile_corpus import ATTACKS, POINTS, SEQ2SEQ, Attack

LIMITS = sandbox.Limits(cell_cpu_s=15, case_cpu_s=5, idle_s=20)
CASES = [(assignment, name) for assignment, attacks in ATTACKS.items() for name in attacks]


# ---------------------------------------------------------------------------------------------
# Building the submissions.


def _pretrained_weights() -> str:
    """The solution notebook's model, trained here (about 5 CPU seconds), as base64 of torch.save(state_dict)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        namespace = in_process.run_notebook("seq2seq-attention", {"translate": ""})
    finally:
        torch.set_num_threads(threads)
    assert namespace["validation_accuracy"] >= 0.98
    buffer = io.BytesIO()
    torch.save(namespace["model"].state_dict(), buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _fill(text: str, placeholders: dict[str, str]) -> str:
    for key, value in placeholders.items():
        text = text.replace(key, value)
    return text


def build(released, attack: Attack, placeholders: dict[str, str] | None = None):
    """The attack's notebook: the release with its answers, edits, extra cells and nbgrader metadata edits."""
    placeholders = placeholders or {}
    answers = {g: _fill(source, placeholders) for g, source in attack.answers.items()}
    notebook = filled(released, answers, edits=attack.edits,
                      extra_cells=[_fill(source, placeholders) for source in attack.extra_cells])
    for operation in attack.metadata:
        if operation[0] == "set":
            _, target, key, value = operation
            cell = next(c for c in notebook.cells if grade_id(c) == target)
            cell.metadata["nbgrader"][key] = value
        elif operation[0] == "add":
            _, new_id, points, source = operation
            cell = nbformat.v4.new_code_cell(source)
            cell.metadata["nbgrader"] = {"grade": True, "grade_id": new_id, "locked": True, "points": points,
                                         "schema_version": 3, "solution": False, "task": False}
            notebook.cells.append(cell)
        else:
            raise ValueError(operation)
    return notebook


def grade_batch(assignment: str, tmp_path_factory) -> dict:
    """Every attack on ``assignment`` graded in one batch; what the summary, results, gradebook and export say."""
    released = released_notebook(tmp_path_factory, assignment)
    attacks = ATTACKS[assignment]
    needs_weights = any("@@WEIGHTS@@" in text for a in attacks.values() for text in [*a.answers.values(), *a.extra_cells])
    placeholders = {"@@WEIGHTS@@": _pretrained_weights()} if needs_weights else {}
    course, summaries, saved = graded_batch(
        tmp_path_factory, assignment, {name: build(released, attack, placeholders) for name, attack in attacks.items()},
        files={name: dict(attack.files) for name, attack in attacks.items() if attack.files}, limits=LIMITS)
    errors = {name: [f for f in summary.flags if "grader error" in f] for name, summary in summaries.items()}
    assert not any(errors.values()), errors  # the grader's own failure is no grade
    results = {name: saved[name] for name in attacks}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        recorded = {name: (gradebook.find_submission(assignment, name).score,
                           gradebook.find_submission(assignment, name).max_score) for name in attacks}
    export, _ = course.export(course.root / "grades.csv")
    with export.open(encoding="utf-8", newline="") as rows:
        exported = {row["student_id"]: row for row in csv.DictReader(rows) if row["assignment"] == assignment}
    return dict(course=course, summaries=summaries, results=results, recorded=recorded, exported=exported)


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    """assignment -> its graded batch, graded on first use (one course per assignment)."""
    cache: dict[str, dict] = {}

    def get(assignment: str) -> dict:
        if assignment not in cache:
            cache[assignment] = grade_batch(assignment, tmp_path_factory)
        return cache[assignment]

    return get


# ---------------------------------------------------------------------------------------------
# End to end.


@pytest.mark.slow
@pytest.mark.parametrize("assignment, name", CASES, ids=[f"{a}/{n}" for a, n in CASES])
def test_a_shortcut_earns_exactly_the_points_of_the_honest_parts(batches, assignment, name):
    batch = batches(assignment)
    attack = ATTACKS[assignment][name]
    result, summary = batch["results"][name], batch["summaries"][name]
    got = {g: (c["points"] if c["passed"] else 0) for g, c in result.checks.items()}
    messages = {g: c["message"][:600] for g, c in result.checks.items() if got[g] != attack.expected(assignment)[g]}
    assert got == attack.expected(assignment), (attack.why, messages, summary.flags)
    assert summary.score == sum(attack.expected(assignment).values()), summary
    assert summary.max_score == sum(POINTS[assignment].values())
    if attack.flag:
        fragments = attack.flag.split("|")
        assert any(f in flag for f in fragments for flag in summary.flags), (attack.flag, summary.flags)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", list(ATTACKS))
def test_the_summary_the_gradebook_and_the_export_agree(batches, assignment):
    batch = batches(assignment)
    full = sum(POINTS[assignment].values())
    for name in ATTACKS[assignment]:
        score = batch["summaries"][name].score
        assert batch["recorded"][name] == (score, full), name
        row = batch["exported"][name]
        assert (float(row["score"]), float(row["max_score"])) == (score, full), (name, row)


@pytest.mark.slow
def test_tampered_metadata_is_flagged_and_graded_from_the_release(batches):
    batch = batches("soft-hard")
    course = batch["course"]
    for name, attack in ATTACKS["soft-hard"].items():
        if attack.kind != "metadata":
            continue
        with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
            notebook = gradebook.find_submission_notebook("soft-hard", "soft-hard", name)
            cells = {grade.name: (grade.score, grade.max_score) for grade in notebook.grades}
        assert cells == {g: (attack.expected("soft-hard")[g], p) for g, p in POINTS["soft-hard"].items()}, name
        graded = nbformat.read(course.root / "autograded" / name / "soft-hard" / "soft-hard.ipynb", as_version=4)
        release = {grade_id(c): c.metadata["nbgrader"] for c in course.released("soft-hard", "soft-hard").cells
                   if grade_id(c)}
        for cell in graded.cells:
            if "nbgrader" in cell.metadata:
                assert grade_id(cell) in release, (name, grade_id(cell))
                for key in ("grade", "solution", "locked", "points"):
                    assert cell.metadata["nbgrader"].get(key) == release[grade_id(cell)].get(key), (name, key)


# ---------------------------------------------------------------------------------------------
# Fast: the pieces that decide, without a sandbox.


def _released(assignment: str):
    """The release, near enough for prepare(): the solution notebook with its hidden tests removed."""
    notebook = copy.deepcopy(in_process.solution_notebook(assignment))
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.source = HIDDEN_TESTS.sub("", cell.source)
    return notebook


@pytest.mark.parametrize("name", [n for n, a in ATTACKS["soft-hard"].items() if a.kind == "metadata"])
def test_metadata_edits_are_flagged_and_the_setup_runs_as_released(tmp_path, name):
    attack = ATTACKS["soft-hard"][name]
    released = _released("soft-hard")
    path = tmp_path / "soft-hard.ipynb"
    nbformat.write(build(released, attack), path)
    prepared = prepare(path, released)
    assert any(attack.flag in flag for flag in prepared.flags), prepared.flags
    setup = next(c.source for c in released.cells if grade_id(c) == "setup")
    assert prepared.cells[0] == setup  # the read-only setup as released, edited or unlocked or not
    submitted = {grade_id(c): c.source for c in build(released, attack).cells if grade_id(c)}
    for test_id in POINTS["soft-hard"]:  # a test cell that kept its grade id never runs, whatever its metadata
        if test_id in submitted:
            assert submitted[test_id] not in prepared.cells, test_id


def test_a_second_ready_or_a_wrong_phase_discards_the_run():
    """Whoever speaks first on the channel, a second "ready" (the graded child after a cell that spoke for it)
    or a "ready" for another phase stops the run and discards its results."""
    case = Case("test-softmax", "x", "softmax", (torch.ones(2),))
    conversation = Conversation("sealed", [("case0", case)])
    conversation(("ready", "sealed"))
    with pytest.raises(sandbox.Channel.Stop):
        conversation(("ready", "sealed"))
    assert conversation.results == {} and conversation.problem
    wrong_phase = Conversation("open", [("case0", case)])
    with pytest.raises(sandbox.Channel.Stop):
        wrong_phase(("ready", "sealed"))
    assert wrong_phase.results == {} and wrong_phase.problem


def test_a_stand_in_is_not_fooled_by_patched_comparisons():
    """The matchers decide with functions bound when the runner was loaded: patching torch, Tensor or builtins
    during a call changes nothing."""
    import builtins

    expected = torch.tensor([[1.0, 2.0, 3.0]])
    answer = torch.tensor([[0.1, 0.2, 0.7]])
    calls = []
    stand_in = runner._stand_in_function(lambda scores, dim=-1: calls.append("yours") or scores, ("scores", "dim"),
                                         {"dim": -1}, (("close", expected, 1e-5, 1e-7), ("last_dim",)), answer, "softmax")
    right = stand_in(expected.clone())
    wrong = expected * 2
    saved = (torch.equal, torch.allclose, torch.Tensor.__eq__, builtins.isinstance)
    torch.equal = torch.allclose = lambda *args, **kwargs: True
    torch.Tensor.__eq__ = lambda self, other: True
    builtins.isinstance = lambda *args: True
    try:
        fooled = stand_in(wrong)
    finally:
        torch.equal, torch.allclose, torch.Tensor.__eq__, builtins.isinstance = saved
    assert torch.equal(right, answer)
    assert fooled is wrong and calls == ["yours"]


@pytest.mark.parametrize("name", ["rule-book-no-model", "rule-book-disguised-by-translate",
                                  "rule-book-disguised-model", "translate-patches-argmax"])
def test_translations_not_from_the_students_own_decoder_earn_nothing(monkeypatch, name):
    """translate's check as the grader makes it (the runner's run_case, then the verdict), in this process."""
    monkeypatch.setattr(torch.Tensor, "argmax", torch.Tensor.argmax)  # put back whatever an attack patches
    attack = SEQ2SEQ[name]
    threads = torch.get_num_threads()
    try:
        namespace = in_process.run_notebook("seq2seq-attention", attack.answers, tuple(attack.extra_cells))
        verdicts = in_process.judge("seq2seq-attention", namespace, seed=5, grade_ids={"test-translate"})
    finally:
        torch.set_num_threads(threads)
    assert in_process.points(verdicts) == {"test-translate": 0}, verdicts["test-translate"].message()


# Every way to start a program that the corpus uses; each prints "started: <route>" if the program ran
# (it leaves a file behind), "refused: <route>" otherwise.
_START_PROGRAMS = """
import multiprocessing, os, subprocess, sys, tempfile
import _posixsubprocess
from attention_course.grading import runner

runner_pid = os.getpid() + (1 if GRADED else 0)  # in a graded call, the process is not the runner's own
assert runner.deny_new_programs()  # what a sealed run does before its first cell
sys.addaudithook(runner._make_hook(runner_pid, True, set(), (), set()))
python = sys.executable
folder = tempfile.mkdtemp()


def program(name):
    return [python, "-c", f"open({os.path.join(folder, name)!r}, 'w').close()"]


def posix_spawn(name):
    os.waitpid(os.posix_spawn(python, program(name), dict(os.environ)), 0)


def fork_exec(name):
    arguments = program(name)
    pid = _posixsubprocess.fork_exec(arguments, [os.fsencode(python)], True, (), None, None,
                                     -1, -1, -1, -1, -1, -1, *os.pipe(), False, False, -1, None, None, None, -1,
                                     None, False)
    os.waitpid(pid, 0)


def spawn_process(name):
    process = multiprocessing.get_context("spawn").Process(target=exec, args=(f"open({os.path.join(folder, name)!r}, 'w').close()",))
    process.start()
    process.join()


routes = {"subprocess.run": lambda name: subprocess.run(program(name)),
          "os.posix_spawn": posix_spawn, "os.system": lambda name: os.system(" ".join(program(name))),
          "_posixsubprocess.fork_exec": fork_exec, "multiprocessing spawn": spawn_process}
for name, start in routes.items():
    marker = name.replace(" ", "-")
    try:
        start(marker)
    except Exception:
        pass
    print(("started: " if os.path.exists(os.path.join(folder, marker)) else "refused: ") + name)
"""


@pytest.mark.parametrize("graded", [False, True], ids=["in a cell", "in a graded call"])
def test_no_route_starts_a_fresh_interpreter_in_a_sealed_run(graded):
    """A fresh interpreter is unsealed: in a sealed run no way to start one may work (the runner's seccomp filter
    refuses execve to every process; the corpus's fresh-interpreter-server and multiprocessing-spawn-server are
    these routes, end to end)."""
    result = run_python(f"GRADED = {graded}\n" + _START_PROGRAMS, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    started = [line for line in result.stdout.splitlines() if line.startswith("started:")]
    refused = [line for line in result.stdout.splitlines() if line.startswith("refused:")]
    assert started == [] and len(refused) == 5, result.stdout
