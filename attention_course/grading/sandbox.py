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



import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
# The sandbox's parts, each in a module of its own; what callers use is named here.
from attention_course.grading.channel import PARSE_LOCK, Channel
from attention_course.grading.isolation import (
    _RUNNING, _RUNNING_LOCK, INSIDE, NOBODY, SPOOL, Limits, RunResult, SandboxUnavailable, _closed_to_nobody,
    _give_to_run, _limit_child, _new_pids_cgroup, _process_tree, _remove_cgroup, _user_namespace, bwrap_command,
    run_identity,
)
from attention_course.grading.scratch import scratch_folder
from attention_course.grading.templates import (
    _TEMPLATES, _WARM_PROBLEM, ENDING_GRACE_S, TEMPLATES_STARTED, Template, TemplateFailed, close_templates, template,
)

__all__ = ["INSIDE", "NOBODY", "PARSE_LOCK", "SPOOL", "TEMPLATES_STARTED", "Channel", "Limits", "RunResult",
           "SandboxUnavailable", "Template", "TemplateFailed", "_WARM_PROBLEM", "bwrap_command", "check_available", "close_templates",
           "run", "run_identity", "scratch_folder", "stop_all", "template", "workspace"]


def stop_all() -> int:
    """Kill every sandbox this process started that is still running (warm templates too); returns how
    many runs were going."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
        templates = list(_TEMPLATES)
    for process in running:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    busy = sum(each.busy for each in templates)
    for each in templates:
        each.close()
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
