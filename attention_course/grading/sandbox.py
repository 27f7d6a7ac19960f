"""Run the grading runner on one submission inside bubblewrap, with limits.

Inside the sandbox the runner sees: the system's /usr (read-only), the Python installation and the
virtual environment (read-only; the course package and its reference implementations are not
there), a private /tmp, and one writable folder, ``/submission``, holding a copy of the submission's
own files. There is no network (a fresh network namespace has only a loopback that nothing listens
on), no other process is visible, no compiler, and it runs in its own user namespace without
capabilities and without the right to make another. Nothing it does reaches the host: when the grader
is root it runs as the host's nobody (uid 65534), who owns nothing it can see, else as the grader's own
uid; the device nodes it is given are read-only mounts (usable as devices, but no chmod, chown or utime
reaches the host's nodes), and all else of the host it sees but its own folder is read-only (see
lockdown.py, and tests/test_sandbox_host.py for how we know). Limits: address
space, processes, file size, CPU time, and how much of its output is kept; a run that makes no CPU
progress is stopped, and the wall clock is only a distant backstop, so that a busy machine never changes
a grade.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import ctypes
import functools
import hashlib
import hmac
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534  # the uid of a submission when the grader is root, inside its sandbox and outside (see run_identity)
# Held by every ast.parse / ast.literal_eval in the grader's threads: in CPython 3.11 they share one
# recursion counter per interpreter (gh-106905), and two at once can fail with "SystemError: AST
# constructor recursion depth mismatch", more often the busier the machine.
PARSE_LOCK = threading.Lock()
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


class Channel:
    """The grader's side of the runner's two pipes: frames in, replies out.

    A frame is [length][kind][signature][repr of a plain tuple]: kind 1 is signed with ``key`` (a keyed
    BLAKE2b digest that only the runner's graded child can make, see runner._make_signer), kind 0 is an
    unsigned note. ``handler(message, signed)`` gets each message (parsed with ``ast.literal_eval``; a
    signed one only if its signature is right) and returns bytes to send back, or None. A frame that
    cannot be parsed or whose signature is wrong, or a handler that raises ``Channel.Stop``, ends the
    conversation and stops the run."""

    class Stop(Exception):
        pass

    def __init__(self, handler, key: bytes = b""):
        self.handler = handler
        self.key = key
        self.finished = threading.Event()  # the runner said it is done, or the conversation broke down
        self.problem = ""
        self.failure: Exception | None = None  # the grader's own error while serving: no grade can come of it
        self.read_end, self.runner_out = os.pipe()
        self.runner_in, self.write_end = os.pipe()

    def serve(self) -> None:
        with open(self.read_end, "rb", buffering=0) as incoming:
            try:
                while True:
                    header = _read_exactly(incoming, 4)
                    if header is None:
                        return
                    size = int.from_bytes(header, "big")
                    if size > MAX_FRAME_BYTES:
                        raise Channel.Stop(f"the runner sent a frame of {size:,} bytes")
                    data = _read_exactly(incoming, size)
                    if data is None:
                        return
                    signed = data[:1] == b"\x01"
                    if signed:
                        signature, data = data[1:1 + SIGNATURE_BYTES], data[1 + SIGNATURE_BYTES:]
                        expected = hashlib.blake2b(data, key=self.key, digest_size=SIGNATURE_BYTES).digest()
                        if not self.key or not hmac.compare_digest(signature, expected):
                            raise Channel.Stop("a message signed with a key other than the grader's")
                    elif data[:1] == b"\x00":
                        data = data[1:]
                    else:
                        raise Channel.Stop("a frame out of the grader's protocol")
                    try:
                        with PARSE_LOCK:
                            message = ast.literal_eval(data.decode("utf-8"))
                    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as error:
                        raise Channel.Stop(f"unreadable message from the sandbox ({type(error).__name__})")
                    reply = self.handler(message, signed)
                    if reply is not None:
                        os.write(self.write_end, len(reply).to_bytes(4, "big"))
                        view = memoryview(reply)
                        while view:
                            view = view[os.write(self.write_end, view):]
            except Channel.Stop as stop:
                self.problem = str(stop)
            except OSError:
                pass
            except Exception as error:  # the grader's fault, not the runner's: say so, never charge the student
                self.failure = error
            finally:
                self.finished.set()

    def close_runner_ends(self) -> None:
        """Our copies of the ends the runner uses (it has its own once started). Each fd is closed once:
        closing a number twice could close another thread's file that reused it."""
        for name in ("runner_out", "runner_in"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                with contextlib.suppress(OSError):
                    os.close(fd)

    def close(self) -> None:
        self.close_runner_ends()
        if self.write_end >= 0:
            fd, self.write_end = self.write_end, -1
            with contextlib.suppress(OSError):
                os.close(fd)


MAX_FRAME_BYTES = 32 << 20
SIGNATURE_BYTES = 32


def _read_exactly(stream, count: int) -> bytes | None:
    chunks = []
    while count:
        chunk = stream.read(min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


# Running sandboxes, so that an interrupted batch can stop them all (see stop_all()).
_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def stop_all() -> int:
    """Kill every sandbox this process started that is still running (warm templates too); returns how
    many runs were going."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
        templates = list(_TEMPLATES)
    for process in running:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    busy = sum(template.busy for template in templates)
    for template in templates:
        template.close()
    return len(running) + busy


class _Cold:
    """A run of its own: bubblewrap starting a fresh interpreter."""

    def __init__(self, command: list[str], cwd: str | None, limits: Limits, pass_fds: tuple[int, ...], env,
                 sandboxed: bool = True):
        self.cgroup = _new_pids_cgroup(limits.processes) if os.getuid() == 0 else None
        as_root = sandboxed and os.geteuid() == 0  # (then the run is nobody on the host, and has no groups)
        self.process = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=_limit_child(limits, self.cgroup, NOBODY if as_root else None), start_new_session=True,
            pass_fds=pass_fds, env=env, extra_groups=[] if as_root else None)
        with _RUNNING_LOCK:
            _RUNNING.add(self.process)
        self.root, self.output = self.process.pid, self.process.stdout

    def set_up_processes(self) -> set[int]:
        return set()  # (bubblewrap's own processes are known by name)

    def exit_code(self) -> int | None:
        return self.process.poll()

    def stop(self, grace: float = 0.0) -> int | None:
        """Kill what is left (after ``grace`` seconds to end by itself); the exit status, or None when it
        was still running (stopped by us)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            if grace:
                self.process.wait(grace)
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        with _RUNNING_LOCK:
            _RUNNING.discard(self.process)
        return None if self.process.returncode == -signal.SIGKILL else self.process.returncode

    def clean_up(self) -> None:
        if self.cgroup is not None:
            _remove_cgroup(self.cgroup)


def run(workdir: Path, argv: list[str], limits: Limits = Limits(), sandboxed: bool = True,
        channel: Channel | None = None, template: "Template | None" = None) -> RunResult:
    """Run ``argv`` with ``workdir`` as its only writable folder; never raises for what the child does.

    With a ``channel``, the two pipe ends the runner uses are passed in and their numbers appended to
    ``argv``; the run ends when the channel is finished (the runner said "done"), when every process
    of the run is stopped or exited, when it has used no CPU for ``idle_s``, or at the wall backstop.
    With a ``template`` (whose spool holds ``workdir``), the run is forked from that warm template
    instead of starting a fresh interpreter: ``argv`` must then be the runner's (see forkserver.py)."""
    started = time.monotonic()
    try:
        if template is not None:
            handle = template.start(workdir, limits, channel)
        else:
            pass_fds: tuple[int, ...] = ()
            if channel is not None:
                argv = [*argv, str(channel.runner_out), str(channel.runner_in)]
                pass_fds = (channel.runner_out, channel.runner_in)
            env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"} if not sandboxed else None
            if not sandboxed:
                handle = _Cold(argv, str(workdir), limits, pass_fds, env, sandboxed=False)
            else:
                userns = _user_namespace() if os.geteuid() == 0 else None
                try:
                    _give_to_run(workdir)
                    command = bwrap_command(workdir, argv, userns_fd=userns)
                    handle = _Cold(command, None, limits, (*pass_fds, *([userns] if userns is not None else [])), env)
                finally:
                    if userns is not None:
                        os.close(userns)
    except BaseException:
        if channel is not None:
            channel.close()
            os.close(channel.read_end)
        raise
    server = None
    if channel is not None:
        channel.close_runner_ends()
        server = threading.Thread(target=channel.serve, daemon=True)
        server.start()
    tail = bytearray()
    total = 0

    def drain() -> None:
        nonlocal total
        while chunk := handle.output.read(65536):
            total += len(chunk)
            tail.extend(chunk)
            del tail[:-limits.output_bytes]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    timed_out = idle = False
    cpu, progress_cpu, progress_at = 0.0, 0.0, time.monotonic()
    returncode = None
    grace = 0.0
    try:
        while handle.exit_code() is None:
            if channel is not None and channel.finished.wait(0.2):
                grace = ENDING_GRACE_S  # the runner is done, or gone: let it end by itself
                break
            elif channel is None:
                time.sleep(0.2)
            now = time.monotonic()
            tree = _process_tree(handle.root)
            cpu = max(cpu, sum(c for _, _, c in tree.values()))
            if cpu > progress_cpu + 0.01:
                progress_cpu, progress_at = cpu, now
            set_up = handle.set_up_processes()
            runners = [state for pid, (name, state, _) in tree.items() if name != "bwrap" and pid not in set_up]
            if runners and all(state in "TtZX" for state in runners):
                # Every process of the run is stopped or gone: it has nothing more to say. If they are all
                # gone, the run is ending by itself: let it, so that its exit status is its own.
                grace = ENDING_GRACE_S if all(state in "ZX" for state in runners) else 0.0
                break
            if now - started > limits.wall_s:
                timed_out = True
                break
            if now - progress_at > limits.idle_s:
                idle = True
                break
    finally:
        try:
            returncode = handle.stop(grace)
        finally:
            # No timeouts here: the pipes close when the sandbox's processes are gone, and a join cut short on
            # a busy machine would lose the end of the conversation (and change a grade).
            reader.join()
            handle.output.close()
            if channel is not None:
                channel.close()
                if server is not None:
                    server.join()
            handle.clean_up()
    stopped_by_us = timed_out or idle or returncode is None
    return RunResult(
        returncode=None if stopped_by_us else returncode,
        timed_out=timed_out,
        idle=idle,
        seconds=time.monotonic() - started,
        cpu_seconds=round(cpu, 2),
        output_tail=tail.decode("utf-8", errors="replace"),
        output_bytes=total,
    )


# -- the grader's folder under the temp dir ------------------------------------------------------------

# The watcher of a scratch folder, a process of its own: detached from the grader (forked once more, in a
# session of its own, deaf to hangups, Ctrl-C and SIGTERM), it reads its stdin, a pipe whose only writing
# end the grader holds, until the end, which comes when the grader ends, however it ends; then it removes
# the folder (more than once while a sandbox that is still dying writes into it).
_WATCHER = """
import os, shutil, signal, sys, time
for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
    signal.signal(number, signal.SIG_IGN)
if os.fork():
    os._exit(0)
os.setsid()
while os.read(0, 4096):
    pass
for _ in range(100):
    shutil.rmtree(sys.argv[1], ignore_errors=True)
    if not os.path.lexists(sys.argv[1]):
        break
    time.sleep(0.1)
"""
_SCRATCH: list = []  # [pid, folder, the pipe's writing end]: this process's scratch folder, once made
_SCRATCH_LOCK = threading.Lock()


def scratch_folder() -> Path:
    """This process's folder in the temp dir, which holds everything the grader makes there: the warm
    templates' spools, the folders of cold runs and of a cluster's tasks, the sandbox probe. A watcher
    removes it once this process has ended, however it ended: a grader that is SIGKILLed (a Dask worker
    killed mid-batch, the OOM killer) cannot clean up after itself, and one ended by SIGTERM runs no atexit.

    (Rather than a lock file that the next grader on the machine sweeps away, or Dask's own
    ``local_directory``, which the next worker started in it cleans: either leaves the folder until
    another grader or worker starts there, which may be never, as for a worker killed for good, and the
    latter does nothing for grading on one machine.)"""
    with _SCRATCH_LOCK:
        if _SCRATCH and _SCRATCH[0] == os.getpid():
            return _SCRATCH[1]
        folder = Path(tempfile.mkdtemp(prefix="attention-grader-"))
        read, write = os.pipe()  # neither end is inherited by what this process starts (but the watcher's stdin)
        try:
            started = subprocess.run([sys.executable, "-I", "-S", "-c", _WATCHER, str(folder)], stdin=read,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", env={})
        finally:
            os.close(read)
        if started.returncode != 0:
            print(f"warning: no watcher for {folder}: it stays if this process is killed", file=sys.stderr)
        _SCRATCH[:] = [os.getpid(), folder, write]  # the writing end stays open until this process ends
        return folder


# -- warm templates (see forkserver.py) ------------------------------------------------------------------

FORKSERVER = Path(__file__).with_name("forkserver.py")
ENDING_GRACE_S = 10.0  # for a run whose processes are all gone to end by itself (its exit status is then its own)
TEMPLATE_START_S = 600.0  # for a template to import torch and answer, even on a crowded machine (no grade depends on it)
_TEMPLATES: set["Template"] = set()
_LOCAL = threading.local()
_WARM_PROBLEM: list[str] = []  # why warm templates cannot run here, once found
TEMPLATES_STARTED = [0]  # how many templates this process has started (the tests count them)


class TemplateFailed(RuntimeError):
    """A warm template broke down (the grader's machinery, never a student's grade)."""


class Template:
    """A warm template: one sandboxed interpreter with PyTorch imported, serving one run at a time.

    Each run is forked from it before any of the student's code exists, and enters fresh namespaces,
    mounts and limits of its own (forkserver.py says how); the template never runs student code. A
    template belongs to the thread that starts it: bubblewrap's --die-with-parent ends it with that
    thread, and :func:`close_templates` ends them all."""

    def __init__(self):
        self.spool = Path(tempfile.mkdtemp(prefix="grader-spool-", dir=scratch_folder()))
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.busy = False
        self.thread = threading.current_thread()
        under_tmp = [path for path in _python_paths() if path.startswith("/tmp/")]  # (see forkserver._fresh_tmp)
        uid, gid = run_identity()
        argv = [sys.executable, "-I", f"{SPOOL}/forkserver.py", str(theirs.fileno()), str(uid), str(gid), *under_tmp]
        as_root = os.geteuid() == 0
        userns = None
        try:
            shutil.copy2(FORKSERVER, self.spool / "forkserver.py")
            shutil.copy2(LOCKDOWN, self.spool / "lockdown.py")
            userns = _user_namespace() if as_root else None
            self.process = subprocess.Popen(
                bwrap_command(self.spool, argv, template_spool=self.spool, userns_fd=userns), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(theirs.fileno(), *([userns] if userns is not None else [])), extra_groups=[] if as_root else None)
        except BaseException:
            self.control.close()
            shutil.rmtree(self.spool, ignore_errors=True)
            raise
        finally:
            theirs.close()
            if userns is not None:
                os.close(userns)
        self.tail = bytearray()
        threading.Thread(target=self._drain, daemon=True).start()
        with _RUNNING_LOCK:
            _TEMPLATES.add(self)
        try:
            ready = self._receive(TEMPLATE_START_S)
            if not isinstance(ready.get("ready"), int) or ready.get("threads") != 1:
                raise TemplateFailed(f"the template is not ready to fork: {ready}")
        except BaseException:
            self.close()
            raise
        with _RUNNING_LOCK:
            TEMPLATES_STARTED[0] += 1

    def _drain(self) -> None:
        while chunk := self.process.stdout.read(4096):
            self.tail.extend(chunk)
            del self.tail[:-4000]

    def _receive(self, timeout: float | None) -> dict:
        self.control.settimeout(timeout)
        try:
            message = self.control.recv(1 << 16)
        except (socket.timeout, OSError) as error:
            raise TemplateFailed(f"the template did not answer ({error}): {self._said()}") from None
        if not message:
            raise TemplateFailed(f"the template ended: {self._said()}")
        return json.loads(message)

    def _said(self) -> str:
        return bytes(self.tail).decode("utf-8", errors="replace").strip()[-500:] or "(it printed nothing)"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def start(self, workdir: Path, limits: Limits, channel: Channel | None) -> "_Warm":
        if workdir.parent != self.spool:
            raise ValueError(f"{workdir} is not in this template's spool")
        _give_to_run(workdir)
        cgroup = _new_pids_cgroup(limits.processes) if os.getuid() == 0 else None
        rlimits = [("RLIMIT_AS", (limits.memory_bytes, limits.memory_bytes)), ("RLIMIT_CPU", (limits.cpu_s, limits.cpu_s + 5)),
                   ("RLIMIT_FSIZE", (limits.file_bytes, limits.file_bytes)), ("RLIMIT_CORE", (0, 0))]
        if cgroup is None:
            processes = _own_process_count(NOBODY if os.geteuid() == 0 else None) + limits.processes
            rlimits.append(("RLIMIT_NPROC", (processes, processes)))
        output, output_end = os.pipe()
        go, go_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)  # "go" to the run, "set up" back
        if channel is not None:
            runner_out, runner_in = channel.runner_out, channel.runner_in
        else:  # (a run without a conversation: the runner's descriptors lead nowhere)
            runner_out, runner_in = os.open(os.devnull, os.O_WRONLY), os.open(os.devnull, os.O_RDONLY)
        self.busy = True
        try:
            socket.send_fds(self.control, [json.dumps({"folder": workdir.name, "rlimits": rlimits}).encode()],
                            [runner_out, runner_in, output_end, go_end.fileno()])
            answer = self._receive(60.0)
            if "started" not in answer:
                raise TemplateFailed(f"the template refused the run: {answer}")
            child = _host_pid(self.process.pid, int(answer["started"]))
            if child is None:
                raise TemplateFailed("the template's child could not be found")
            if cgroup is not None:
                (cgroup / "cgroup.procs").write_text(str(child))
            go.sendall(b"g")
        except BaseException:
            self.busy = False
            self.close()
            go.close()
            os.close(output)
            if cgroup is not None:
                _remove_cgroup(cgroup)
            raise
        finally:
            go_end.close()
            for fd in (output_end, *((runner_out, runner_in) if channel is None else ())):
                os.close(fd)
        return _Warm(self, child, os.fdopen(output, "rb", buffering=0), go, cgroup)

    def close(self) -> None:
        """End the template (it also ends with the thread that started it)."""
        with _RUNNING_LOCK:
            _TEMPLATES.discard(self)
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        shutil.rmtree(self.spool, ignore_errors=True)


class _Warm:
    """A run forked from a template: ``root`` is the template's child (the run's set-up process), whose child
    is the init of the run's PID namespace; the runner is that init's child."""

    def __init__(self, template: Template, child: int, output, go: socket.socket, cgroup: Path | None):
        self.template, self.root, self.output, self.go, self.cgroup = template, child, output, go, cgroup
        self.init = None
        self.ended: int | None = None

    def set_up_processes(self) -> set[int]:
        """The run's set-up process and its PID namespace's init: the grader's, not the student's."""
        if self.init is None:
            self.init = next(iter(_children_of(self.root)), None)
        return {self.root, self.init}

    def exit_code(self) -> int | None:
        if self.ended is None:
            self.template.control.settimeout(0)
            try:
                message = self.template.control.recv(1 << 16)
            except (BlockingIOError, socket.timeout):
                return None
            except OSError as error:
                raise TemplateFailed(f"the template's control socket failed: {error}") from None
            if not message:
                raise TemplateFailed(f"the template ended during a run: {self.template._said()}")
            self.ended = int(json.loads(message)["exited"])
        return self.ended

    def stop(self, grace: float = 0.0) -> int | None:
        """Kill what is left of the run (after ``grace`` seconds to end by itself); its exit status, or None
        when it was still running. Raises :class:`TemplateFailed` (and ends the template) if the template
        broke or the run's set-up failed."""
        try:
            code = self.exit_code()
            if code is None and grace:
                self.template.control.settimeout(grace)
                with contextlib.suppress(socket.timeout):
                    message = self.template.control.recv(1 << 16)
                    if not message:
                        raise TemplateFailed(f"the template ended during a run: {self.template._said()}")
                    code = self.ended = int(json.loads(message)["exited"])
            if code is None:
                with contextlib.suppress(OSError):
                    os.kill(self.root, signal.SIGKILL)  # its init, then every process of the run, die with it
                answer = self.template._receive(60.0)
                if "exited" not in answer:
                    raise TemplateFailed(f"the template said {answer} after a run")
            self.go.settimeout(0)
            try:
                set_up = self.go.recv(1) == b"s"
            except (BlockingIOError, OSError):
                set_up = False
            if not set_up:
                raise TemplateFailed("a run forked from the template failed to set itself up")
        except TemplateFailed:
            self.template.close()
            raise
        finally:
            self.template.busy = False
            self.go.close()
        return code

    def clean_up(self) -> None:
        if self.cgroup is not None:
            _remove_cgroup(self.cgroup)


def _children_of(pid: int) -> list[int]:
    children = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                children += [int(child) for child in listing.read().split()]
    return children


def _host_pid(root: int, inside: int) -> int | None:
    """The host's number of the process that the template (a descendant of ``root``) calls ``inside``."""
    for pid in _process_tree(root):
        try:
            with open(f"/proc/{pid}/status") as status:
                line = next(line for line in status if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        numbers = line.split()[1:]
        if len(numbers) == 2 and numbers[1] == str(inside):
            return pid
    return None


def template() -> Template | None:
    """This thread's warm template, started on first use; None where templates cannot run here (said once)."""
    current = getattr(_LOCAL, "template", None)
    if current is not None and current.alive and current in _TEMPLATES:
        return current
    if _WARM_PROBLEM:
        return None
    try:
        current = Template()
    except (TemplateFailed, OSError, SandboxUnavailable) as error:
        _WARM_PROBLEM.append(str(error))
        print(f"warning: runs start cold (a fresh interpreter each): {error}", file=sys.stderr)
        return None
    _LOCAL.template = current
    return current


def close_templates(of_ended_threads: bool = False) -> None:
    """End every template, or only those whose thread has ended (others may be serving a run)."""
    with _RUNNING_LOCK:
        templates = [each for each in _TEMPLATES if not of_ended_threads or not each.thread.is_alive()]
    for each in templates:
        each.close()


@contextlib.contextmanager
def workspace(sandboxed: bool = True, warm: bool = True):
    """A fresh folder for one run, and the template to fork it from (None: a cold start). The folder is
    removed afterwards."""
    chosen = template() if sandboxed and warm else None
    folder = Path(tempfile.mkdtemp(prefix="grade-", dir=chosen.spool if chosen is not None else scratch_folder()))
    try:
        yield folder, chosen
    finally:
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(close_templates)


def check_available() -> None:
    """Raise :class:`SandboxUnavailable` unless a sandbox can actually start here."""
    probe = Path(tempfile.mkdtemp(prefix="sandbox-probe-", dir=scratch_folder()))
    try:
        result = run(probe, [sys.executable, "-I", "-c", "print('ok')"], Limits(wall_s=60, idle_s=30))
    except SandboxUnavailable:
        raise
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if result.returncode != 0 or "ok" not in result.output_tail:
        raise SandboxUnavailable(f"bubblewrap could not start a sandbox here: {result.output_tail.strip()[-500:]}")
    closed = _closed_to_nobody()
    if closed:
        raise SandboxUnavailable(
            f"as root, the sandbox runs as the host's nobody (uid {NOBODY}), who cannot read {closed}: make the "
            "Python installation and the virtual environment readable by all (`chmod -R o+rX` on them)")


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
