"""The warm template: a sandboxed interpreter with PyTorch already imported, from which each run is forked.

Runs inside bubblewrap (see ``sandbox.Template``), started as ``python -I forkserver.py FD UID GID [PATH ...]``
where FD is a Unix socket to the grader, UID and GID the identity of its runs (``sandbox.run_identity``) and
the PATHs are the interpreter's folders below /tmp; lockdown.py lies next to this file. It
imports what every run of ``runner.py`` imports (the ~2 s of CPU a fresh interpreter spends on
``import torch``), then waits. It never runs student code and never holds any: the grader sends it
only the name of a job folder, numbers (limits) and four file descriptors (the runner's two channel
pipes, the pipe for its output, and a socket on which the child waits until the grader has put it in
its process cgroup, and on which the runner says that its set-up is done).

For each job the template forks a child, which, before anything of the student's exists in it:
- enters its own mount, PID, network, IPC and UTS namespaces (the template is root of its sandbox's
  user namespace, with every capability inside it for this, and has, before anything else, set that
  namespace's limit of nested user namespaces to 0 and made the bound device nodes read-only);
- mounts a fresh /tmp (with the interpreter's folders below /tmp bound back, read-only, as bubblewrap
  lays them out) and /dev/shm, both the run's uid's, binds the job's folder at /submission and covers
  the folder of all jobs with an empty read-only one; the rest of the file system is read-only
  (``--remount-ro /``), so nothing a run writes outlives it;
- forks the new PID namespace's init, which mounts a /proc of that namespace alone (with /proc/sys
  and its kin read-only, as bubblewrap does) and starts the runner as PID 2. When the runner ends,
  init ends with its status, and the kernel kills every process the run left behind;
- the child is the run's uid from the start (65534, the host's nobody, when the grader is root; else 0,
  the grader's own uid outside), and init drops every capability (effective, permitted, inheritable,
  ambient, bounding; secure bits locked, so uid 0 of the namespace is powerless), as lockdown.py does for
  a cold run;
- the runner gets a new session, the run's resource limits, fresh
  random seeds as a new interpreter would have and only its own file descriptors; it says "set up"
  to the grader (a run that fails before that is the grader's failure, never a grade) and runs
  ``/submission/runner.py`` as ``__main__``, as ``python -I runner.py /submission OUT IN`` would.

Nothing a child does reaches the template: memory is copied on write, and every place a run can
write is its own.
"""

from __future__ import annotations

import builtins
import json
import os
import random
import resource
import signal
import socket
import sys
import traceback
import types

# What every run imports: the point of the template. (runner.py's own imports, and IPython's shell.)
import ast  # noqa: F401
import gc  # noqa: F401
import hashlib  # noqa: F401
import importlib.util  # noqa: F401
import marshal  # noqa: F401
import struct  # noqa: F401
import warnings  # noqa: F401

import numpy as np
import torch
from IPython.core.interactiveshell import InteractiveShell  # noqa: F401
from traitlets.config import Config  # noqa: F401


def _load_lockdown():
    """lockdown.py, from next to this file (the spool), as a module of its own (not in sys.modules)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lockdown.py")
    spec = importlib.util.spec_from_file_location("lockdown", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lockdown = _load_lockdown()
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 8192, 16384, 1 << 18)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
SETUP_FAILED = lockdown.SETUP_FAILED  # the child's exit status when its own set-up failed (the grader's fault, said as such)
SPOOL, INSIDE = "/spool", "/submission"
PYTHON_UNDER_TMP: list[str] = []  # the interpreter's folders below /tmp (from the command line)
RUN_IDENTITY: list[int] = []  # the uid and gid of every run (from the command line)

libc = lockdown.libc
_check, _mount, _prctl = lockdown.check, lockdown.mount, lockdown.prctl


def _loopback_up() -> None:
    """The new network namespace's loopback, up (as bubblewrap leaves it): nothing listens on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        import fcntl
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def _exit_code(status: int) -> int:
    """As bubblewrap reports its command's end: the exit status, or 128 + the signal."""
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _only_fds(keep: set[int]) -> None:
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _run(job: dict, channel_out: int, channel_in: int, go: int) -> None:
    """PID 2 of the run: the runner, as a fresh ``python -I runner.py /submission OUT IN`` would be."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "PR_SET_PDEATHSIG")
    _prctl(PR_SET_DUMPABLE, 1, "PR_SET_DUMPABLE")  # (as a program just started is: its /proc/PID is its own)
    os.setsid()
    for kind, (soft, hard) in job["rlimits"]:
        resource.setrlimit(getattr(resource, kind), (soft, hard))
    random.seed()  # a fresh interpreter seeds these from the system's entropy
    np.random.seed()
    torch.seed()
    sys.argv = ["runner.py", INSIDE, str(channel_out), str(channel_in)]
    del job
    path = f"{INSIDE}/runner.py"
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __builtins__=builtins)
    sys.modules["__main__"] = main
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec")
    os.write(go, b"s")  # set up: whatever happens from here on is the run's own doing
    os.close(go)
    try:
        exec(code, main.__dict__)
    except SystemExit as stop:  # as the interpreter ends on it
        if stop.code is None or isinstance(stop.code, int):
            _flush_and_exit(stop.code or 0)
        print(stop.code, file=sys.stderr)
        _flush_and_exit(1)
    except BaseException as error:  # as the interpreter reports it: no frame of this file in the traceback
        error.__traceback__ = error.__traceback__.tb_next
        sys.excepthook(type(error), error, error.__traceback__)
        _flush_and_exit(1)
    _flush_and_exit(0)


def _flush_and_exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code & 0xFF)


def _init(job: dict, channel_out: int, channel_in: int, go: int) -> None:
    """PID 1 of the run's namespace: its own /proc, then the runner; it ends when the runner ends."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "PR_SET_PDEATHSIG")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in ("sys", "sysrq-trigger", "irq", "bus"):
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    lockdown.drop_privileges(*RUN_IDENTITY)
    _prctl(PR_SET_DUMPABLE, 0, "PR_SET_DUMPABLE")
    runner = _fork_into(_run, job, channel_out, channel_in, go)
    _only_fds({0, 1, 2})
    while True:  # reap whatever ends (orphans come to init) until the runner does
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        if pid == runner:
            os._exit(_exit_code(status))


def _fresh_tmp() -> None:
    """A fresh, empty /tmp, but with the read-only folders the interpreter needs that live below /tmp (a
    virtual environment may), as bubblewrap lays them out for a cold run. The new tmpfs is made at
    /submission (not yet in use), the folders bound into it from the /tmp they are still visible in, and
    the whole moved onto /tmp."""
    staging = INSIDE
    _mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for path in PYTHON_UNDER_TMP:
        inside = staging + path[len("/tmp"):]
        os.makedirs(inside, exist_ok=True)
        _mount(path, inside, None, MS_BIND | MS_REC)
        _mount(None, inside, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _mount(staging, "/tmp", None, MS_MOVE)


def _fork_into(function, *args) -> int:
    """Fork; the child runs ``function(*args)`` and ends, with SETUP_FAILED (and the traceback on its output)
    if that returns or raises. Returns the child's pid."""
    pid = os.fork()
    if pid == 0:
        try:
            function(*args)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(SETUP_FAILED)
    return pid


def _child(job: dict, fds: list[int], template_pid: int, control: socket.socket) -> None:
    control.close()
    channel_out, channel_in, output, go = fds
    # The run's uid from here on, with the capabilities its set-up needs (init drops them). First, and not in
    # init: a change of uid clears the parent-death signal, which init, whose parent is outside its PID
    # namespace, could not set again without a moment in which it would outlive this process (and a run the
    # grader stops go on).
    lockdown.become(*RUN_IDENTITY)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "PR_SET_PDEATHSIG")
    if os.getppid() != template_pid:
        os._exit(SETUP_FAILED)
    if os.read(go, 1) != b"g":  # the grader has put this process in the run's cgroup (or says no)
        os._exit(SETUP_FAILED)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    _only_fds({0, 1, 2, channel_out, channel_in, go})
    folder = str(job["folder"])
    if "/" in folder or folder in ("", ".", ".."):
        raise ValueError(f"not a job folder: {folder!r}")
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _fresh_tmp()
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    lockdown.give(("/tmp", "/dev/shm"), *RUN_IDENTITY)
    _mount(f"{SPOOL}/{folder}", INSIDE, None, MS_BIND | MS_REC)
    _mount(None, INSIDE, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV)
    # Hide every job's folder: the mounts came from the template's namespace, so they are locked and cannot be
    # unmounted here, but an empty read-only tmpfs covers them (and nothing here may unmount it).
    _mount("tmpfs", SPOOL, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
    _loopback_up()
    os.chdir(INSIDE)
    init = _fork_into(_init, job, channel_out, channel_in, go)
    for fd in (channel_out, channel_in, go):  # (not through /proc: init mounts the run's own there)
        os.close(fd)
    _, status = os.waitpid(init, 0)
    os._exit(_exit_code(status))


def serve(control: socket.socket) -> None:
    lockdown.forbid_user_namespaces()
    lockdown.read_only_devices()  # (each run's mount namespace is a copy of this one)
    sys.stdout.flush()
    control.send(json.dumps({"ready": os.getpid(), "threads": len(os.listdir("/proc/self/task"))}).encode())
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 16, 8)
        except OSError:
            return
        if not message:
            return  # the grader is gone
        job = json.loads(message)
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"refused": f"{len(fds)} descriptors"}).encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = _fork_into(_child, job, fds, os.getpid(), control)
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"started": pid}).encode())
        _, status = os.waitpid(pid, 0)
        control.send(json.dumps({"exited": _exit_code(status)}).encode())


if __name__ == "__main__":
    # What the runner's first steps would import or warm up anyway (see runner.main).
    torch.zeros(2, 2).add(1).exp().sum(-1)
    RUN_IDENTITY.extend((int(sys.argv[2]), int(sys.argv[3])))
    PYTHON_UNDER_TMP.extend(sys.argv[4:])
    serve(socket.socket(fileno=int(sys.argv[1])))
