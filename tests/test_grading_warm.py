"""Grading through warm templates: the same grades as a fresh interpreter for each run, and no student
can leave anything for the next one graded by the same template.

A batch is graded with one job, so that one template serves every run in it: students who leave
files, processes, environment variables, patched modules and changed torch state behind alternate with
probes whose ``softmax`` is right only if they find none of it. The same batch graded cold (a fresh
interpreter for every run, as before templates) must give the same scores and notes.
"""

from __future__ import annotations

import pytest

from attention_course.grading import sandbox
from attention_course.grading.course import Course
from attention_course.grading.grade import NotebookResult
from attention_course.grading.nbgrader_bridge import results_path
from grading_support import filled, released_copy, submit_all
from test_grading_soft_hard import answers

ASSIGNMENT = "soft-hard"
LIMITS = sandbox.Limits(cell_cpu_s=15, case_cpu_s=5, idle_s=20)
pytestmark = pytest.mark.slow

POLLUTE = """
import builtins, os, sys, time, types, socket
import numpy, torch
for path in ("/tmp/left-behind", "/dev/shm/left-behind", os.path.expanduser("~/left-behind"),
             "/left-behind", "/dev/left-behind", "/spool/left-behind", "/usr/lib/gcc/left-behind"):
    try:
        with open(path, "w") as file:
            file.write("x")
    except OSError:
        pass
os.environ["LEFT_BEHIND"] = "1"
torch.manual_seed(1234)
numpy.random.seed(1234)
torch.set_default_dtype(torch.float64)
torch.nn.functional.softmax = lambda *args, **kwargs: "patched"
builtins.LEFT_BEHIND = True
sys.modules["left_behind"] = types.ModuleType("left_behind")
if os.fork() == 0:  # a daemon that would outlive the run, listening on an abstract socket
    os.setsid()
    if os.fork() == 0:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind("\\0left-behind")
        listener.listen()
        with open("/tmp/daemon", "w") as file:
            file.write(str(os.getpid()))
        while True:
            time.sleep(0.05)
    os._exit(0)
for _ in range(500):
    if os.path.exists("/tmp/daemon"):
        break
    time.sleep(0.01)
torch.set_default_dtype(torch.float32)
print("polluted")
"""

KILL = """
import os, signal
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        try:
            os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass
print("killed what I could see")
"""

PROBE = """
import builtins, os, sys, socket
import numpy, torch
found = [path for path in ("/tmp/left-behind", "/dev/shm/left-behind", os.path.expanduser("~/left-behind"),
                           "/left-behind", "/dev/left-behind", "/tmp/daemon") if os.path.exists(path)]
if os.path.isdir("/spool") and os.listdir("/spool"):
    found.append("the spool: " + ", ".join(os.listdir("/spool")))
if "LEFT_BEHIND" in os.environ:
    found.append("environment")
if torch.get_default_dtype() != torch.float32:
    found.append("default dtype")
if torch.initial_seed() == 1234 or numpy.random.get_state()[1][0] == 1234:
    found.append("a seed")
if getattr(torch.nn.functional.softmax, "__module__", "") != "torch.nn.functional":
    found.append("a patched torch")
if hasattr(builtins, "LEFT_BEHIND") or "left_behind" in sys.modules:
    found.append("a patched interpreter")
others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
if others:
    found.append(f"processes {others}")
probe = socket.socket(socket.AF_UNIX)
try:
    probe.connect("\\0left-behind")
    found.append("a listening daemon")
except OSError:
    pass
CLEAN = not found
print("LEFTOVERS:", found)
"""

# The probe's softmax is right only where the probe found the run clean.
PROBE_SOFTMAX = (
    "def softmax(scores, dim=-1):\n"
    "    top = scores.max(dim=dim, keepdim=True).values\n"
    "    e = (scores - top).exp()\n"
    "    return e / e.sum(dim=dim, keepdim=True) if globals().get('CLEAN', True) else e"
)

STUDENTS = {  # graded in this order, by one template
    "a-polluter": (answers(), [POLLUTE]),
    "b-probe": (answers(softmax=PROBE_SOFTMAX), [PROBE]),
    "c-killer": (answers(), [KILL]),
    "d-probe": (answers(softmax=PROBE_SOFTMAX), [PROBE]),
    "e-polluter": (answers(), [POLLUTE, KILL]),
    "f-probe": (answers(softmax=PROBE_SOFTMAX), [PROBE]),
}


def _course(tmp_path_factory, name: str) -> Course:
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp(name) / "course")
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    submit_all(course, ASSIGNMENT, {student: filled(released, solution, extra_cells=extra)
                                    for student, (solution, extra) in STUDENTS.items()})
    return course


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    warm_course = _course(tmp_path_factory, "warm")
    sandbox._WARM_PROBLEM.clear()
    started = sandbox.TEMPLATES_STARTED[0]
    warm = {s.student: s for s in warm_course.grade(ASSIGNMENT, jobs=1, progress=False, limits=LIMITS)}
    templates = sandbox.TEMPLATES_STARTED[0] - started
    cold_course = _course(tmp_path_factory, "cold")
    cold = {s.student: s for s in cold_course.grade(ASSIGNMENT, jobs=1, progress=False, limits=LIMITS, warm=False)}
    assert sandbox.TEMPLATES_STARTED[0] - started == templates, "a cold batch started a template"
    return dict(warm=warm, cold=cold, templates=templates, course=warm_course)


def test_one_template_graded_the_whole_batch(graded):
    assert graded["templates"] == 1


@pytest.mark.parametrize("probe", [s for s in STUDENTS if s.endswith("probe")])
def test_nothing_a_student_leaves_behind_reaches_the_next(graded, probe):
    result = NotebookResult.load(results_path(graded["course"].results_dir, ASSIGNMENT, probe, ASSIGNMENT))
    said = [cell.get("stdout", "") for cell in result.cells if "LEFTOVERS" in cell.get("stdout", "")]
    assert said and all("LEFTOVERS: []" in text for text in said), said
    assert graded["warm"][probe].score == 10, graded["warm"][probe]


def test_polluters_and_killers_are_graded_on_their_answers(graded):
    for student in ("a-polluter", "c-killer", "e-polluter"):
        assert graded["warm"][student].score == 10, graded["warm"][student]


def test_warm_and_cold_runs_give_the_same_grades_and_notes(graded):
    for student in STUDENTS:
        warm, cold = graded["warm"][student], graded["cold"][student]
        assert (warm.score, warm.max_score, warm.flags) == (cold.score, cold.max_score, cold.flags), student
