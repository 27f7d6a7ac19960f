"""Nothing a submission does, cold or warm, changes a file, a device node or a permission outside its sandbox.

A submission graded by root used to be the host's root inside its sandbox (bubblewrap maps the sandbox's uid
to the caller's), with the host's /dev/null, /dev/full, ... bound writable: it could chmod them for every
later process of the machine. Here a runner.py of our own, run through the grader's entry points
(``sandbox.workspace`` and ``sandbox.run``, cold and forked from a warm template), tries chmod, chown, utime
(a given time, and now), write and truncate, rename and unlink on every path the sandbox binds, on a file
inside each bound folder, and on every device node it has (and writes two of the kernel's settings back
unchanged: its /proc/sys is not read-only everywhere). Which paths: those the sandbox's own bubblewrap
command line binds (``sandbox.bwrap_command``), plus the device nodes bound under its ``--dev`` folder, and a
check that no other mount of a host file system is in the sandbox, so that a path bound tomorrow is
covered without editing this file. The host's stat of each (type and mode, owner, group, device numbers,
size and content hash of a regular file) must be the same afterwards, and every attempt must fail, but on
the run's own folder (/submission, its copy of the submission) and for reading and writing a device as a
device (writing to /dev/null is what it is for).

The attempts are chosen to be harmless if they succeed (the sticky bit toggled, a file's first byte
written back over itself, a rename undone, a file made in a folder removed), and whatever they changed on
the host is put back before the assertions.
Run as root (as CI does) or not: either way the grader's sandbox is what is tested.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from attention_course.grading import isolation, sandbox

pytestmark = pytest.mark.skipif(os.environ.get("CI") != "true" and not sandbox.shutil.which("bwrap"),
                                reason="bubblewrap is not installed (under CI=true this never skips)")

LIMITS = sandbox.Limits(wall_s=300, idle_s=60)
BIND_OPTIONS = ("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--dev-bind-try")  # bubblewrap's
OWN = sandbox.INSIDE  # the run's own copy of the submission: the one place it may change
# Settings of the host's kernel (not of the sandbox's namespaces) that root may write: written back unchanged.
KERNEL = [path for path in ("/proc/sys/kernel/printk_ratelimit", "/proc/sys/fs/protected_symlinks") if os.path.exists(path)]

# The submission: every attempt on every target, reported as one JSON line.
PROBE = textwrap.dedent('''
    import json, os, stat
    plan = json.load(open("/submission/targets.json"))
    SOME_TIME = 1_000_000_000 * 10**9  # 2001-09-09, in nanoseconds

    mounts = []
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        mounts.append((fields[4].replace("\\\\040", " "), fields[2]))
    devices = []
    for point, _ in mounts:
        try:
            mode = os.stat(point).st_mode
        except OSError:
            continue
        if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and any(point.startswith(d + "/") for d in plan["dev"]):
            devices.append(point)
    targets = [(path, kind) for path, kind in plan["targets"]] + [(path, "device") for path in sorted(set(devices))]

    def attempt(path, kind):
        outcome = {}
        try:
            before = os.lstat(path)
        except OSError as error:
            return {"stat": "missing: %s" % error.strerror}, None
        mode = before.st_mode

        def trying(name, action, undo=None):
            try:
                action()
            except OSError as error:
                outcome[name] = error.strerror or str(error)
                return
            outcome[name] = "done"
            if undo is not None:
                try:
                    undo()
                except OSError:
                    pass

        # (Left as they are if they succeed: the host's side sees them, and puts them back.)
        trying("chmod", lambda: os.chmod(path, stat.S_IMODE(mode) ^ stat.S_ISVTX))
        trying("chown", lambda: os.chown(path, os.getuid(), os.getgid()))
        trying("utime", lambda: os.utime(path, ns=(SOME_TIME, SOME_TIME)))
        trying("touch", lambda: os.utime(path))
        if stat.S_ISDIR(mode):
            probe = os.path.join(path, ".host-probe-%d" % os.getpid())
            trying("write", lambda: os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)),
                   lambda: os.unlink(probe))
        elif stat.S_ISREG(mode):
            def write_back():  # the file's first byte, written over itself
                with open(path, "rb") as source:
                    first = source.read(1)
                descriptor = os.open(path, os.O_WRONLY)
                try:
                    os.pwrite(descriptor, first, 0)
                finally:
                    os.close(descriptor)
            trying("write", write_back)
            trying("truncate", lambda: os.truncate(path, before.st_size))
        else:  # a device: writing to it is using it, not changing it (judged by the host's stat alone)
            def use():
                descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                try:
                    os.write(descriptor, b"\\0")
                finally:
                    os.close(descriptor)
            trying("device-write", use)
            trying("truncate", lambda: os.truncate(path, 0))
        moved = path.rstrip("/") + ".moved"
        trying("rename", lambda: os.rename(path, moved), lambda: os.rename(moved, path))
        if kind != "sample":  # (a bound path is a mount point; a file inside a folder is only renamed)
            trying("unlink", lambda: (os.rmdir if stat.S_ISDIR(mode) else os.unlink)(path))
        return outcome, before.st_rdev

    report = {"uid": os.getuid(), "mounts": mounts, "attempts": {}, "rdev": {}, "kernel": {}}
    for setting in plan["kernel"]:  # the kernel's settings, each written back as it is
        try:
            with open(setting) as current:
                value = current.read()
            with open(setting, "w") as target:
                target.write(value)
            report["kernel"][setting] = "done"
        except OSError as error:
            report["kernel"][setting] = error.strerror or str(error)
    for path, kind in targets:
        outcome, rdev = attempt(path, kind)
        report["attempts"][path] = {"kind": kind, "outcome": outcome}
        if rdev is not None:
            report["rdev"][path] = rdev
    print("FACTS " + json.dumps(report))
''')


def binds(command: list[str]) -> tuple[dict[str, str], list[str]]:
    """From a bubblewrap command line: {destination: source} of every bind, and the folders of --dev."""
    options = command[:command.index("--")]
    pairs = {options[i + 2]: options[i + 1] for i, arg in enumerate(options) if arg in BIND_OPTIONS}
    dev = [options[i + 1] for i, arg in enumerate(options) if arg == "--dev"]
    return pairs, dev


def sample_file(folder: Path) -> Path | None:
    """The first regular file below ``folder`` (shallowest first, then by name), not through a link."""
    level = [folder]
    for _ in range(4):
        below = []
        for parent in level:
            try:
                entries = sorted(os.scandir(parent), key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                if entry.is_file(follow_symlinks=False) and os.access(entry.path, os.R_OK):
                    return Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
        level = below
    return None


def host_state(path: str) -> dict:
    """What must not change: type and mode, owner, group, device numbers; a regular file's size and hash."""
    status = os.stat(path)
    state = {"mode": oct(status.st_mode), "uid": status.st_uid, "gid": status.st_gid,
             "device": [os.major(status.st_rdev), os.minor(status.st_rdev)] if status.st_rdev else None}
    if stat.S_ISREG(status.st_mode):
        state["size"] = status.st_size
        digest = hashlib.sha256()
        with open(path, "rb") as source:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
        state["sha256"] = digest.hexdigest()
    return state


def host_devices() -> list[str]:
    """The host's device nodes in /dev (not through a link): a --dev folder binds some of them."""
    found = []
    for entry in os.scandir("/dev"):
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            found.append(entry.path)
    return found


def host_mount_devices() -> set[str]:
    """The device numbers (major:minor) of every file system mounted on the host, as this process sees it."""
    with open("/proc/self/mountinfo") as table:
        return {line.split()[2] for line in table}


def put_back(path: str, status: os.stat_result) -> None:
    """Undo, where we may, whatever an attempt changed on the host (mode, owner, times)."""
    for undo in (lambda: os.chown(path, status.st_uid, status.st_gid),
                 lambda: os.chmod(path, stat.S_IMODE(status.st_mode)),
                 lambda: os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))):
        try:
            undo()
        except OSError:
            pass


def device_sources(report: dict, dev: list[str]) -> dict[str, str]:
    """{device node inside: the host's node it is}: a --dev folder binds the host's /dev/NAME at FOLDER/NAME."""
    found = {}
    for inside, entry in report["attempts"].items():
        if entry["kind"] == "device":
            folder = next(folder for folder in dev if inside.startswith(folder + "/"))
            found[inside] = "/dev/" + inside[len(folder) + 1:]
    return found


def probe(warm: bool) -> dict:
    """One run of PROBE (cold, or forked from a template), with the host's state of every path it could reach
    before and after (put back if it changed), and where each path inside comes from on the host."""
    outcome: dict = {}

    def in_one_thread():  # a template belongs to the thread that starts it
        with sandbox.workspace(True, warm) as (workdir, template):
            assert (template is not None) == warm, sandbox._WARM_PROBLEM
            if warm:
                command = sandbox.bwrap_command(template.spool, ["python"], template_spool=template.spool)
            else:
                command = sandbox.bwrap_command(workdir, ["python"])
            pairs, dev = binds(command)
            pairs[OWN] = str(workdir)  # (warm: the template binds each job's folder there itself)
            targets, sources = [], {}
            for inside, source in sorted(pairs.items()):
                kind = "own" if inside == OWN else "bound"
                targets.append((inside, kind))
                sources[inside] = os.path.realpath(source)
                if kind == "bound" and os.path.isdir(source) and (sample := sample_file(Path(source))) is not None:
                    inside_sample = os.path.join(inside, os.path.relpath(sample, source))
                    targets.append((inside_sample, "sample"))
                    sources[inside_sample] = str(sample)
            reachable = [source for inside, source in sources.items() if not inside.startswith(OWN)] + host_devices()
            before = {path: host_state(path) for path in reachable}
            statuses = {path: os.stat(path) for path in reachable}
            (workdir / "targets.json").write_text(json.dumps({"targets": targets, "dev": dev, "kernel": KERNEL}))
            (workdir / "runner.py").write_text(PROBE)
            result = sandbox.run(workdir, [sys.executable, "-I", "runner.py", sandbox.INSIDE], LIMITS, template=template)
        report = next((json.loads(line[len("FACTS "):]) for line in result.output_tail.splitlines()
                       if line.startswith("FACTS ")), None)
        devices = device_sources(report, dev) if report else {}
        # What the sandbox reached: its binds, and the host's nodes of its device nodes (not the other nodes of
        # /dev, which others may change meanwhile). Whatever of it changed is put back first.
        watched = [source for inside, source in sources.items() if not inside.startswith(OWN)] + list(devices.values())
        after = {}
        for path in watched:
            after[path] = host_state(path)
            if after[path] != before[path] or os.stat(path).st_mtime_ns != statuses[path].st_mtime_ns:
                put_back(path, statuses[path])
        outcome.update(result=result, report=report, before={path: before[path] for path in watched}, after=after,
                       sources=sources, devices=devices, host_mounts=host_mount_devices())

    worker = threading.Thread(target=in_one_thread)
    worker.start()
    worker.join()
    if warm:
        sandbox.close_templates()
    return outcome


@pytest.fixture(scope="module", params=["cold", "warm"])
def run(request):
    sandbox._WARM_PROBLEM.clear()
    outcome = probe(request.param == "warm")
    assert outcome["report"] is not None, outcome["result"].output_tail
    return outcome


def test_every_host_file_system_in_the_sandbox_is_a_path_it_binds(run):
    """No mount of a host file system inside but those the command line binds and the --dev device nodes:
    whatever is bound tomorrow is tried here without a word of this file changing."""
    known = set(run["sources"]) | set(run["devices"])
    from_host = sorted(point for point, device in run["report"]["mounts"] if device in run["host_mounts"])
    assert from_host, "no mount of the host's file systems was found inside the sandbox"
    assert set(from_host) <= known, f"bound but not tried: {sorted(set(from_host) - known)}"
    devices = run["devices"]
    assert {"/dev/null", "/dev/full"} <= set(devices), devices
    for inside, host in devices.items():  # the node inside is the host's node of that name
        assert run["report"]["rdev"][inside] == os.stat(host).st_rdev, (inside, host)


def test_nothing_outside_the_sandbox_changed(run):
    changed = {path: (run["before"][path], run["after"][path]) for path in run["before"]
               if run["before"][path] != run["after"][path]}
    assert not changed, f"the host changed (put back since): {changed}"


def test_every_attempt_outside_its_own_folder_failed(run):
    succeeded = {}
    for inside, entry in run["report"]["attempts"].items():
        if entry["kind"] == "own":
            continue
        done = sorted(name for name, result in entry["outcome"].items() if result == "done" and name != "device-write")
        if done:
            succeeded[inside] = done
    assert not succeeded, f"attempts that reached the host (uid {run['report']['uid']} inside): {succeeded}"
    attempts = run["report"]["attempts"]
    assert attempts[OWN]["outcome"]["write"] == "done", attempts[OWN]  # the one place a run may write
    assert attempts["/dev/null"]["outcome"]["device-write"] == "done", attempts["/dev/null"]  # devices still work
    assert all(entry["outcome"] for entry in attempts.values())


def test_the_kernels_settings_are_out_of_reach(run):
    """(A sandbox whose uid was the host's root could write them: /proc/sys is not read-only in a cold one.)"""
    assert KERNEL, "no setting to try"
    written = {setting: result for setting, result in run["report"]["kernel"].items() if result == "done"}
    assert set(run["report"]["kernel"]) == set(KERNEL) and not written, run["report"]["kernel"]


def test_as_root_an_interpreter_that_nobody_may_read_is_refused(tmp_path, monkeypatch):
    """As root the submission is the host's nobody: a virtual environment it could not read (made with umask
    077, say) would fail every notebook's imports, so the sandbox refuses to start instead."""
    closed = tmp_path / "venv" / "lib" / "python3.11"
    closed.mkdir(parents=True)
    closed.chmod(0o700)
    monkeypatch.setattr(isolation, "_python_paths", lambda: [str(tmp_path / "venv")])
    assert sandbox._closed_to_nobody() == (str(closed) if os.geteuid() == 0 else None)
    closed.chmod(0o755)
    assert sandbox._closed_to_nobody() is None
