"""Run the grading runner on one submission inside bubblewrap, with limits.

Inside the sandbox the runner sees: the system's /usr (read-only), the Python installation and the
virtual environment (read-only; the course package and its reference implementations are not
there), a private /tmp, and one writable folder, ``/submission``, holding a copy of the submission's
own files. There is no network (a fresh network namespace has only a loopback that nothing listens
on), no other process is visible, and it runs as uid 65534 in its own user namespace, without
capabilities. Limits: address space, processes, file size, CPU time, wall time, and how much of its
output is kept.
"""

from __future__ import annotations

import contextlib
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
INSIDE = "/submission"


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces on this machine."""


@dataclass(frozen=True)
class Limits:
    wall_s: float = 120.0
    cpu_s: int = 240
    memory_bytes: int = 6 << 30  # address space: torch alone maps a few GB of it
    processes: int = 256  # processes and threads alive at once (torch starts a few threads)
    file_bytes: int = 256 << 20  # largest file the submission may write
    output_bytes: int = 64 << 10  # of stdout and stderr, kept for diagnosis; the rest is read and dropped


@dataclass
class RunResult:
    returncode: int | None  # None when killed for the wall-time limit
    timed_out: bool
    seconds: float
    output_tail: str  # the last part of what the process printed (at most Limits.output_bytes)
    output_bytes: int  # how much it printed in all


def _python_paths() -> list[str]:
    """The folders the interpreter needs: its installation and, if different, the virtual environment."""
    paths = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    return sorted(paths)


def bwrap_command(workdir: Path, argv: list[str]) -> list[str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: `sudo apt-get install bubblewrap`")
    command = [
        bwrap, "--unshare-all", "--die-with-parent", "--new-session",
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
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        else:
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))

    return apply


def run(workdir: Path, argv: list[str], limits: Limits = Limits(), sandboxed: bool = True) -> RunResult:
    """Run ``argv`` with ``workdir`` as its only writable folder; never raises for what the child does."""
    if sandboxed:
        command = bwrap_command(workdir, argv)
        cwd = None
    else:
        command, cwd = argv, str(workdir)
    cgroup = _new_pids_cgroup(limits.processes) if os.getuid() == 0 else None
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=_limit_child(limits, cgroup), start_new_session=True,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"} if not sandboxed else None,
    )
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
    timed_out = False
    try:
        process.wait(timeout=limits.wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join(timeout=5)
    if cgroup is not None:
        _remove_cgroup(cgroup)
    return RunResult(
        returncode=None if timed_out else process.returncode,
        timed_out=timed_out,
        seconds=time.perf_counter() - started,
        output_tail=tail.decode("utf-8", errors="replace"),
        output_bytes=total,
    )


def check_available() -> None:
    """Raise :class:`SandboxUnavailable` unless a sandbox can actually start here."""
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"sandbox-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        result = run(probe, [sys.executable, "-I", "-c", "print('ok')"], Limits(wall_s=60))
    except SandboxUnavailable:
        raise
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if result.returncode != 0 or "ok" not in result.output_tail:
        raise SandboxUnavailable(f"bubblewrap could not start a sandbox here: {result.output_tail.strip()[-500:]}")
