"""Run the grading runner on one submission inside bubblewrap, with limits.

Inside the sandbox the runner sees: the system's /usr (read-only), the Python installation and the
virtual environment (read-only; the course package and its reference implementations are not
there), a private /tmp, and one writable folder, ``/submission``, holding a copy of the submission's
own files. There is no network (a fresh network namespace has only a loopback that nothing listens
on), no other process is visible, no compiler, and it runs as uid 65534 in its own user namespace,
without capabilities and without the right to make another. Limits: address space, processes, file
size, CPU time, and how much of its output is kept; a run that makes no CPU progress is stopped, and
the wall clock is only a distant backstop, so that a busy machine never changes a grade.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import hmac
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

NOBODY = 65534  # the uid inside the sandbox's user namespace (outside, the caller's own uid)
# Held by every ast.parse / ast.literal_eval in the grader's threads: in CPython 3.11 they share one
# recursion counter per interpreter (gh-106905), and two at once can fail with "SystemError: AST
# constructor recursion depth mismatch", more often the busier the machine.
PARSE_LOCK = threading.Lock()
INSIDE = "/submission"


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


@functools.lru_cache(maxsize=None)
def _supports_disable_userns(bwrap: str) -> bool:
    help_text = subprocess.run([bwrap, "--help"], capture_output=True, text=True).stdout
    return "--disable-userns" in help_text


def bwrap_command(workdir: Path, argv: list[str]) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: `sudo apt-get install bubblewrap`")
    command = [
        bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
        "--uid", str(NOBODY), "--gid", str(NOBODY),
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
    if _supports_disable_userns(bwrap):
        command += ["--disable-userns"]  # no nested user namespace: no capabilities, no hidden mounts
    command += [
        "--bind", str(workdir), INSIDE, "--chdir", INSIDE,
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


def _own_process_count() -> int:
    uid = os.getuid()
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


def _limit_child(limits: Limits, cgroup: Path | None):
    """preexec_fn: resource limits, and a process cap (the pids cgroup as root, RLIMIT_NPROC otherwise)."""
    processes = _own_process_count() + limits.processes

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
    """Kill every sandbox this process started that is still running; returns how many."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for process in running:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    return len(running)


def run(workdir: Path, argv: list[str], limits: Limits = Limits(), sandboxed: bool = True,
        channel: Channel | None = None) -> RunResult:
    """Run ``argv`` with ``workdir`` as its only writable folder; never raises for what the child does.

    With a ``channel``, the two pipe ends the runner uses are passed in and their numbers appended to
    ``argv``; the run ends when the channel is finished (the runner said "done"), when every process
    of the run is stopped or exited, when it has used no CPU for ``idle_s``, or at the wall backstop."""
    pass_fds: tuple[int, ...] = ()
    if channel is not None:
        argv = [*argv, str(channel.runner_out), str(channel.runner_in)]
        pass_fds = (channel.runner_out, channel.runner_in)
    if sandboxed:
        command = bwrap_command(workdir, argv)
        cwd = None
    else:
        command, cwd = argv, str(workdir)
    cgroup = _new_pids_cgroup(limits.processes) if os.getuid() == 0 else None
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            preexec_fn=_limit_child(limits, cgroup), start_new_session=True, pass_fds=pass_fds,
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"} if not sandboxed else None,
        )
    except BaseException:
        if channel is not None:
            channel.close()
            os.close(channel.read_end)
        raise
    with _RUNNING_LOCK:
        _RUNNING.add(process)
    server = None
    if channel is not None:
        channel.close_runner_ends()
        server = threading.Thread(target=channel.serve, daemon=True)
        server.start()
    tail = bytearray()
    total = 0

    def drain() -> None:
        nonlocal total
        while chunk := process.stdout.read(65536):
            total += len(chunk)
            tail.extend(chunk)
            del tail[:-limits.output_bytes]

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    timed_out = idle = False
    cpu, progress_cpu, progress_at = 0.0, 0.0, time.monotonic()
    try:
        while process.poll() is None:
            if channel is not None and channel.finished.wait(0.2):
                break
            elif channel is None:
                time.sleep(0.2)
            now = time.monotonic()
            tree = _process_tree(process.pid)
            cpu = max(cpu, sum(c for _, _, c in tree.values()))
            if cpu > progress_cpu + 0.01:
                progress_cpu, progress_at = cpu, now
            runners = [state for name, state, _ in tree.values() if name != "bwrap"]
            if runners and all(state in "TtZX" for state in runners):
                break  # every process of the run is stopped or gone: it has nothing more to say
            if now - started > limits.wall_s:
                timed_out = True
                break
            if now - progress_at > limits.idle_s:
                idle = True
                break
    finally:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        with _RUNNING_LOCK:
            _RUNNING.discard(process)
        # No timeouts here: the pipes close when the sandbox's processes are gone, and a join cut short on a
        # busy machine would lose the end of the conversation (and change a grade).
        reader.join()
        if channel is not None:
            channel.close()
            if server is not None:
                server.join()
        if cgroup is not None:
            _remove_cgroup(cgroup)
    stopped_by_us = timed_out or idle or process.returncode in (-signal.SIGKILL,)
    return RunResult(
        returncode=None if stopped_by_us else process.returncode,
        timed_out=timed_out,
        idle=idle,
        seconds=time.monotonic() - started,
        cpu_seconds=round(cpu, 2),
        output_tail=tail.decode("utf-8", errors="replace"),
        output_bytes=total,
    )


def check_available() -> None:
    """Raise :class:`SandboxUnavailable` unless a sandbox can actually start here."""
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"sandbox-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        result = run(probe, [sys.executable, "-I", "-c", "print('ok')"], Limits(wall_s=60, idle_s=30))
    except SandboxUnavailable:
        raise
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if result.returncode != 0 or "ok" not in result.output_tail:
        raise SandboxUnavailable(f"bubblewrap could not start a sandbox here: {result.output_tail.strip()[-500:]}")
