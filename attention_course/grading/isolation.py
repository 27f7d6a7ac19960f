"""How one sandbox is made on this host: who it runs as, its user namespace, bubblewrap's command line,
the limits and the process-count cgroup (see sandbox.py for the whole)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path


NOBODY = 65534  # the uid of a submission when the grader is root, inside its sandbox and outside (see run_identity)
INSIDE = "/submission"
SPOOL = "/spool"  # where a warm template sees the folders of its jobs


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces on this machine."""


@dataclass(frozen=True)
class Limits:
    """Every limit that decides anything counts CPU time or sizes, never the wall clock: a grade must not
    depend on how busy the machine is. The wall-clock limit is only a backstop for a run that makes no
    progress, and ``idle_s`` stops a run that has used no CPU for that long (sleeping, waiting)."""

    cell_cpu_s: float = 120.0  # CPU seconds one notebook cell may use (training included)
    case_cpu_s: float = 20.0  # CPU seconds one graded call may use
    cpu_s: int = 900  # CPU seconds of a whole run, per process (RLIMIT_CPU)
    idle_s: float = 60.0  # wall seconds without any CPU progress before the run is stopped
    wall_s: float = 1800.0  # backstop; far above what an honest notebook needs even on a crowded machine
    memory_bytes: int = 6 << 30  # address space: torch alone maps a few GB of it
    processes: int = 256  # processes and threads alive at once (torch starts a few threads)
    file_bytes: int = 256 << 20  # largest file the submission may write
    output_bytes: int = 64 << 10  # of stdout and stderr, kept for diagnosis; the rest is read and dropped


@dataclass
class RunResult:
    returncode: int | None  # None when the grader stopped it
    timed_out: bool  # stopped by the wall-clock backstop
    idle: bool  # stopped after idle_s without CPU progress
    seconds: float  # wall seconds
    cpu_seconds: float  # CPU seconds of the sandbox's processes
    output_tail: str  # the last part of what the process printed (at most Limits.output_bytes)
    output_bytes: int  # how much it printed in all


def _python_paths() -> list[str]:
    """The folders the interpreter needs: its installation and, if different, the virtual environment."""
    paths = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    return sorted(paths)


COMPILER_FOLDERS = ("/usr/lib/gcc", "/usr/libexec/gcc", *(str(p) for p in sorted(Path("/usr/lib").glob("llvm-*"))))


def run_identity() -> tuple[int, int]:
    """The uid and gid a submission runs as in its sandbox (see lockdown.py). As root: 65534, which the sandbox's
    user namespace maps to the host's nobody, a user who owns nothing the sandbox can reach. Otherwise: 0 of
    the sandbox's namespace, the grader's own uid outside (which owns no device node and no system file)."""
    return (NOBODY, NOBODY) if os.geteuid() == 0 else (0, 0)


ID_MAP = f"0 0 1\n{NOBODY} {NOBODY} 1\n"  # (as root) the sandbox's ids: the host's root and nobody, as themselves
CLONE_NEWUSER = 0x10000000


def _unshare_user() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")


def _user_namespace() -> int:
    """(The grader is root.) A fresh user namespace for one sandbox, as a descriptor for bubblewrap's --userns.

    Its only ids are 0, the host's root, and 65534, the host's nobody (``ID_MAP``). bubblewrap sets the sandbox
    up as 0, which reaches every folder it binds (a Python installed below /root, say); the submission runs as
    65534 (lockdown.py switches to it before anything of the submission exists). Without this, bubblewrap maps
    the sandbox's one uid to the caller's, and a submission run by root would be the host's root, owner of
    every system file and device node it can see (and of the kernel's settings under /proc/sys). Nobody in it
    may change their groups (setgroups is denied)."""
    cat = shutil.which("cat") or "/bin/cat"
    try:
        helper = subprocess.Popen([cat], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  preexec_fn=_unshare_user)
    except (OSError, subprocess.SubprocessError) as error:
        raise SandboxUnavailable(f"cannot make a user namespace for the sandbox: {error}") from None
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", ID_MAP), ("gid_map", ID_MAP)):
            with open(f"/proc/{helper.pid}/{name}", "w") as table:
                table.write(text)
        return os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as error:
        raise SandboxUnavailable(f"cannot set up a user namespace for the sandbox: {error}") from None
    finally:
        helper.stdin.close()
        helper.wait()


def _give_to_run(folder: Path) -> None:
    """(The grader is root.) A run's folder and what is in it belong to the uid the run has on the host."""
    if os.geteuid() != 0 or not folder.is_dir():  # (a folder that is gone fails the run's set-up, as it should)
        return
    os.chown(folder, NOBODY, NOBODY, follow_symlinks=False)
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            os.chown(os.path.join(parent, name), NOBODY, NOBODY, follow_symlinks=False)


LOCKDOWN = Path(__file__).with_name("lockdown.py")


@functools.lru_cache(maxsize=None)
def _lockdown_source() -> str:
    return LOCKDOWN.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def _bwrap_options(bwrap: str) -> str:
    return subprocess.run([bwrap, "--help"], capture_output=True, text=True).stdout


BIND_OPTIONS = ("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--dev-bind-try")


def _open_parents(command: list[str]) -> list[str]:
    """bubblewrap (0.5 to 0.8 at least) makes the missing parents of what it binds (/etc, /work, ...) with mode
    0700, owned by the set-up's uid 0, which a submission running as another uid could not pass: make each
    first, 0755. (Inserted after the first mount, the fresh /tmp, below which a virtual environment may live.)"""
    binds = [command[i + 2] for i, arg in enumerate(command) if arg in BIND_OPTIONS]
    made = {command[i + 1] for i, arg in enumerate(command) if arg in ("--tmpfs", "--dir", "--proc", "--dev")}
    inside_bind = lambda path: any(path == bind or path.startswith(bind.rstrip("/") + "/") for bind in binds)  # noqa: E731
    parents = sorted({str(parent) for bind in binds for parent in Path(bind).parents
                      if str(parent) != "/" and str(parent) not in made and not inside_bind(str(parent))},
                     key=lambda path: (path.count("/"), path))
    at = command.index("--tmpfs") + 2
    return [*command[:at], *(arg for parent in parents for arg in ("--perms", "0755", "--dir", parent)), *command[at:]]


def bwrap_command(workdir: Path, argv: list[str], *, template_spool: Path | None = None,
                  userns_fd: int | None = None) -> list[str]:
    """The bubblewrap command line of a run (``workdir`` bound at /submission), or, given ``template_spool``,
    of a warm template (see forkserver.py), with the spool of job folders at /spool and the rest read-only.

    Either way the sandbox is set up as uid 0 of its own user namespace with every capability inside it:
    ``userns_fd``, from :func:`_user_namespace`, when the grader is root (:func:`run` makes one), else a new one
    that bubblewrap maps to the grader's uid. A run's first step, lockdown.py (cold: it is the command, and
    ends by executing ``argv``; warm: the template runs it for each run), makes the bound device nodes
    read-only, forbids nested user namespaces and drops to :func:`run_identity` without any capability. A
    template is root of its namespace for good: the identity under which it may mount a /proc for each run's
    PID namespace; it never runs student code. Either way: no network, the same binds and environment."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: `sudo apt-get install bubblewrap`")
    options = _bwrap_options(bwrap)
    if userns_fd is None:
        namespaces = ["--unshare-all", "--unshare-user"]
    elif "--userns" not in options:
        raise SandboxUnavailable("this bubblewrap cannot grade as root (it has no --userns): install 0.4 or later")
    else:  # (--unshare-all would try a new user namespace too)
        namespaces = ["--userns", str(userns_fd), "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                      "--unshare-cgroup-try"]
    command = [
        bwrap, *namespaces, "--die-with-parent", "--new-session",
        "--uid", "0", "--gid", "0", "--cap-add", "ALL",
        # A private /tmp first: a later tmpfs would hide binds below it (the venv may live under /tmp).
        "--tmpfs", "/tmp",
        "--ro-bind", "/usr", "/usr",
        "--proc", "/proc", "--dev", "/dev",
    ]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
        if target:
            command += ["--symlink", target, f"/{link}"]
        elif os.path.isdir(f"/{link}"):
            command += ["--ro-bind", f"/{link}", f"/{link}"]
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives"):
        if os.path.exists(etc):
            command += ["--ro-bind", etc, etc]
    for path in _python_paths():
        command += ["--ro-bind", path, path]
    # No compiler: code compiled at grading time (a C++ extension, torch.compile's kernels) could call
    # native kernels behind the dispatcher's back. Nothing an honest notebook does needs one.
    for compiler in COMPILER_FOLDERS:
        if os.path.isdir(compiler):
            command += ["--tmpfs", compiler]
    if template_spool is None:
        command += ["--bind", str(workdir), INSIDE, "--chdir", INSIDE]
        uid, gid = run_identity()
        argv = [sys.executable, "-I", "-S", "-c", _lockdown_source(), str(uid), str(gid), "--", *argv]
    else:
        # Read-only: every place a run could write that it does not get afresh (its /tmp, /dev/shm, /proc).
        hidden = [folder for folder in COMPILER_FOLDERS if os.path.isdir(folder)]
        command += ["--bind", str(template_spool), SPOOL, "--dir", INSIDE,
                    *(arg for folder in hidden for arg in ("--remount-ro", folder)),
                    "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/"]
    if "--perms" in options:  # (an older bubblewrap makes them 0755 itself)
        command = _open_parents(command)
    command += [
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", "/tmp",
        "--setenv", "MPLBACKEND", "Agg",
        "--setenv", "MPLCONFIGDIR", "/tmp",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "MKL_NUM_THREADS", "1",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--",
    ]
    return command + argv


def _own_process_count(uid: int | None = None) -> int:
    """How many processes ``uid`` (by default our own) has on the host."""
    uid = os.getuid() if uid is None else uid
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _new_pids_cgroup(limit: int) -> Path | None:
    """A fresh cgroup capping the number of processes (a fork bomb), where we may make one.

    RLIMIT_NPROC does not bind processes started by root, so as root we use the pids controller
    (cgroup v1 at /sys/fs/cgroup/pids, or v2 with pids enabled). Returns None where neither is writable.
    """
    for base in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
        if not (base / "cgroup.procs").exists() or not os.access(base, os.W_OK):
            continue
        group = base / f"attention-course-grader-{os.getpid()}-{time.monotonic_ns()}"
        try:
            group.mkdir()
            (group / "pids.max").write_text(str(limit))
            return group
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
    return None


def _remove_cgroup(group: Path) -> None:
    for _ in range(50):
        with contextlib.suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():
                os.kill(int(pid), signal.SIGKILL)
            group.rmdir()
            return
        time.sleep(0.1)


def _limit_child(limits: Limits, cgroup: Path | None, host_uid: int | None = None):
    """preexec_fn: resource limits, and a process cap (the pids cgroup as root, RLIMIT_NPROC otherwise: it
    counts the processes of ``host_uid``, the uid the run has on the host, by default ours)."""
    processes = _own_process_count(host_uid) + limits.processes

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        else:
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))

    return apply


def _process_tree(root: int) -> dict[int, tuple[str, str, float]]:
    """{pid: (command name, state, CPU seconds incl. reaped children)} for ``root`` and its descendants."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                text = stat.read()
        except OSError:
            continue
        name, _, rest = text.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        if len(fields) < 15:
            continue
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        table[int(entry)] = (int(fields[1]), name, fields[0], ticks / CLOCK_TICKS)
    tree, stack = {}, [root]
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in table.items():
        children.setdefault(ppid, []).append(pid)
    while stack:
        pid = stack.pop()
        if pid in table:
            _, name, state, cpu = table[pid]
            tree[pid] = (name, state, cpu)
        stack.extend(children.get(pid, []))
    return tree


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# Running sandboxes, so that an interrupted batch can stop them all (see stop_all()).
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def _closed_to_nobody() -> str | None:
    """(The grader is root.) A folder of the interpreter's that others may not list and enter, if any: a
    submission, running as nobody, could not import from it (only folders are checked: cheap, and what an
    installation made with umask 077 gets wrong)."""
    if os.geteuid() != 0:
        return None
    for top in _python_paths():
        stack = [top]
        while stack:
            folder = stack.pop()
            if os.stat(folder).st_mode & 0o005 != 0o005:
                return folder
            with os.scandir(folder) as entries:
                stack.extend(entry.path for entry in entries if entry.is_dir(follow_symlinks=False))
    return None
