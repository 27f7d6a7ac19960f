"""Runs forked from a warm template are sandboxed exactly as cold ones, and share nothing with each other.

Each test drives ``sandbox.run`` with a runner.py of its own (the template runs whatever
/submission/runner.py the job folder holds), so a run can report what it sees: its identity and
capabilities, its processes, where it can write, what the previous run left. The same probe run cold
(a fresh bubblewrap sandbox) is the reference.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from attention_course.grading import isolation, sandbox
from grading_support import files_left

pytestmark = pytest.mark.skipif(os.environ.get("CI") != "true" and not sandbox.shutil.which("bwrap"),
                                reason="bubblewrap is not installed (under CI=true this never skips)")

LIMITS = sandbox.Limits(wall_s=300, idle_s=60)

# What a run reports about itself, as one JSON line.
REPORT = textwrap.dedent('''
    import ctypes, json, os, socket, sys
    facts = {"uid": os.getuid(), "argv": sys.argv[1:2], "cwd": os.getcwd(), "file": __file__,
             "name": __name__, "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
             "pid": os.getpid(), "modules_torch": "torch" in sys.modules}
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if line.startswith("Cap"))
    facts["capabilities"] = {k: int(v, 16) for k, v in status.items()}
    libc = ctypes.CDLL(None, use_errno=True)
    facts["user_namespace"] = libc.unshare(0x10000000) == 0
    facts["mount_namespace"] = libc.unshare(0x20000) == 0
    writable = []
    for line in open("/proc/self/mountinfo"):
        point = line.split()[4]
        if point.startswith("/proc") or point.startswith("/dev/pts"):
            continue
        target = os.path.join(point, ".probe-%d" % os.getpid())
        try:
            open(target, "w").close()
            os.unlink(target)
            writable.append(point)
        except OSError:
            pass
    facts["writable"] = sorted(set(writable))
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2)
        facts["network"] = True
    except OSError:
        facts["network"] = False
    facts["left"] = sorted(p for p in ("/tmp/left", "/dev/shm/left", "/submission/../left") if os.path.exists(p))
    print("FACTS " + json.dumps(facts))
''')

# What a hostile run leaves behind: files in every place it can write, and a process that outlives it.
LEAVE = textwrap.dedent('''
    import os, time
    for path in ("/tmp/left", "/dev/shm/left"):
        open(path, "w").write("x")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open("/tmp/daemon", "w").write(str(os.getpid()))
            while True:
                time.sleep(0.05)
        os._exit(0)
    while not os.path.exists("/tmp/daemon"):
        time.sleep(0.01)
    print("LEFT")
''')


def _run(template, script: str, port: int, limits: sandbox.Limits = LIMITS) -> tuple[sandbox.RunResult, dict]:
    with sandbox.workspace(True, template is not None) as (workdir, chosen):
        assert (chosen is None) == (template is None)
        (workdir / "runner.py").write_text(f"PORT = {port}\n" + script)
        result = sandbox.run(workdir, [sandbox.sys.executable, "-I", "runner.py", sandbox.INSIDE], limits, template=chosen)
    facts = {}
    for line in result.output_tail.splitlines():
        if line.startswith("FACTS "):
            facts = json.loads(line[len("FACTS "):])
    return result, facts


@pytest.fixture(scope="module")
def server():
    """A TCP server on the host's loopback, counting connections (there must be none)."""
    listener = socket.create_server(("127.0.0.1", 0))
    count = {"connections": 0}

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            count["connections"] += 1
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], count
    listener.close()


@pytest.fixture(scope="module")
def runs(server):
    """The probe run cold, then warm three times through one template with a hostile run in between."""
    port, _ = server
    sandbox._WARM_PROBLEM.clear()
    results = {}
    results["cold"] = _run(None, REPORT, port)
    outcome: dict = {}

    def in_one_thread():  # a template belongs to the thread that starts it
        template = sandbox.template()
        outcome["template"] = template
        outcome["first"] = _run(template, REPORT, port)
        outcome["hostile"] = _run(template, LEAVE, port)
        outcome["after"] = _run(template, REPORT, port)
        outcome["same_template"] = sandbox.template() is template and template.alive
        outcome["template_processes"] = len(sandbox._process_tree(template.process.pid))

    worker = threading.Thread(target=in_one_thread)
    worker.start()
    worker.join()
    results.update(outcome)
    yield results
    sandbox.close_templates()


def test_a_warm_run_is_the_runner_as_a_fresh_interpreter_would_run_it(runs):
    _, cold = runs["cold"]
    result, warm = runs["first"]
    assert result.returncode == 0, result.output_tail
    for fact in ("argv", "cwd", "file", "name"):
        assert warm[fact] == cold[fact], fact
    assert warm["name"] == "__main__" and warm["argv"] == ["/submission"]
    assert warm["modules_torch"] and not cold["modules_torch"]  # the one difference: torch is already there


def test_a_warm_run_has_no_capability_and_cannot_make_namespaces(runs):
    _, cold = runs["cold"]
    _, warm = runs["first"]
    assert warm["capabilities"] == {name: 0 for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    assert cold["capabilities"]["CapEff"] == 0
    assert not warm["user_namespace"] and not cold["user_namespace"]
    assert not warm["mount_namespace"] and not cold["mount_namespace"]


def test_a_warm_run_sees_only_its_own_processes_and_no_network(runs, server):
    _, cold = runs["cold"]
    _, warm = runs["first"]
    assert warm["pid"] == cold["pid"] == 2  # the namespace's init is 1, the runner 2
    assert warm["pids"] == cold["pids"] == [1, 2]
    assert warm["network"] is cold["network"] is False
    assert server[1]["connections"] == 0


def test_a_warm_run_can_write_where_a_cold_one_can_and_nowhere_shared(runs):
    _, cold = runs["cold"]
    _, warm = runs["first"]
    assert set(warm["writable"]) <= {"/tmp", "/dev/shm", "/submission"}, warm["writable"]
    assert set(cold["writable"]) >= {"/tmp", "/submission"}


def test_nothing_a_run_leaves_behind_reaches_the_next_one(runs):
    hostile, _ = runs["hostile"]
    assert "LEFT" in hostile.output_tail, hostile.output_tail
    result, after = runs["after"]
    assert result.returncode == 0, result.output_tail
    assert after["left"] == [] and after["pids"] == [1, 2]
    assert runs["same_template"], "the template was replaced: the runs did not share it"
    # The hostile run's daemon died with it: only the template's own processes are left (bwrap, its init, python).
    assert runs["template_processes"] == 3


def test_a_run_whose_set_up_fails_is_the_graders_failure(tmp_path):
    template = sandbox.Template()
    try:
        folder = tmp_path / "elsewhere"
        folder.mkdir()
        with pytest.raises(ValueError):  # a folder outside the template's spool is refused before anything runs
            sandbox.run(folder, ["python"], LIMITS, template=template)
        job = Path(sandbox.tempfile.mkdtemp(dir=template.spool))
        job.rmdir()  # the folder is gone by the time the run binds it: the set-up fails
        with pytest.raises(sandbox.TemplateFailed):
            sandbox.run(job, ["python"], LIMITS, template=template)
        assert not template.alive
    finally:
        template.close()


def test_a_run_the_grader_stops_ends_with_all_its_processes():
    """A run stopped by the grader (here by the wall-clock backstop) ends at once, warm or cold, with every
    process it had: none keeps its output open (the grader would wait for it) or runs on in the template."""
    spin = "import time\nwhile True:\n    sum(range(10000))\n    time.sleep(0.01)\n"
    limits = sandbox.Limits(wall_s=3, idle_s=60)
    outcome: dict = {}

    def both():
        template = sandbox.template()
        outcome["warm"] = _run(template, spin, 0, limits)[0]
        for _ in range(100):  # (the run's init may still be being reaped)
            outcome["template_processes"] = sandbox._process_tree(template.process.pid)
            if len(outcome["template_processes"]) <= 3:
                break
            time.sleep(0.1)
        outcome["cold"] = _run(None, spin, 0, limits)[0]

    worker = threading.Thread(target=both, daemon=True)
    worker.start()
    worker.join(240)
    assert not worker.is_alive(), f"a stopped run did not end: {outcome}"
    assert outcome["warm"].timed_out and outcome["cold"].timed_out, outcome
    # bwrap, its init, the template: the run's init and runner are gone
    assert len(outcome["template_processes"]) == 3, outcome["template_processes"]


ENDINGS = {
    "uncaught": "def main():\n    raise BlockingIOError(11, 'Resource temporarily unavailable')\nmain()\n",
    "sys-exit": "import sys\nprint('bye', flush=True)\nsys.exit(3)\n",
    "sys-exit-text": "import sys\nsys.exit('a message')\n",
    "os-exit": "import os\nos._exit(5)\n",
    "killed": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "unflushed": "print('kept in the buffer')\n",
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_run_ends_the_same_warm_and_cold(ending):
    """Exit status and output, as the grader's notes quote them, do not tell a warm run from a cold one."""
    outcome = {}

    def warm():
        outcome["warm"] = _run(sandbox.template(), ENDINGS[ending], 0)[0]

    worker = threading.Thread(target=warm)
    worker.start()
    worker.join()
    cold = _run(None, ENDINGS[ending], 0)[0]
    assert (outcome["warm"].returncode, outcome["warm"].output_tail) == (cold.returncode, cold.output_tail)


def test_the_interpreters_folders_below_tmp_stay_visible_in_a_fresh_tmp(tmp_path, monkeypatch):
    """A virtual environment may live below /tmp (a CI checkout does): a warm run's fresh /tmp must still show
    it, read-only, as a cold run's does, and nothing else of the host's /tmp."""
    extra = tmp_path / "site"
    extra.mkdir()
    (extra / "marker_module.py").write_text("WHERE = 'found'\n")
    assert str(extra).startswith("/tmp/")
    original = isolation._python_paths
    monkeypatch.setattr(isolation, "_python_paths", lambda: [*original(), str(extra)])
    script = textwrap.dedent(f'''
        import json, os, sys
        sys.path.insert(0, {str(extra)!r})
        import marker_module
        try:
            open({str(extra / "written")!r}, "w").close()
            writable = True
        except OSError:
            writable = False
        print("FACTS " + json.dumps({{"where": marker_module.WHERE, "writable": writable,
                                      "tmp": sorted(os.listdir("/tmp"))}}))
    ''')
    template = sandbox.Template()
    try:
        job = Path(sandbox.tempfile.mkdtemp(dir=template.spool))
        (job / "runner.py").write_text(script)
        warm = sandbox.run(job, [sandbox.sys.executable], LIMITS, template=template)
    finally:
        template.close()
    _, cold = _run(None, script, 0)
    facts = json.loads(next(line for line in warm.output_tail.splitlines() if line.startswith("FACTS "))[6:])
    below_tmp = sorted({path.split("/")[2] for path in isolation._python_paths() if path.startswith("/tmp/")})
    assert facts == cold == {"where": "found", "writable": False, "tmp": below_tmp}, warm.output_tail


def test_a_killed_grader_leaves_nothing_in_its_temp_dir(tmp_path):
    """A grader SIGKILLed (it cannot clean up) in the middle of a warm run leaves no spool, no run's folder."""
    tmp = tmp_path / "tmp"  # the grader's TMPDIR
    tmp.mkdir()
    grader = textwrap.dedent('''
        import time
        from attention_course.grading import sandbox
        with sandbox.workspace() as (folder, template):
            print(template is not None, folder, flush=True)
            time.sleep(600)
    ''')
    process = subprocess.Popen([sys.executable, "-c", grader], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "TMPDIR": str(tmp)})
    try:
        warm, folder = process.stdout.readline().split()
        assert warm == "True" and Path(folder).is_dir() and Path(folder).is_relative_to(tmp)  # a run in a spool
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    deadline = time.monotonic() + 30
    while (left := files_left(tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []
