"""Warm templates: a sandboxed interpreter with PyTorch imported that forks each run (see forkserver.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from attention_course.grading import isolation
from attention_course.grading.channel import Channel
from attention_course.grading.isolation import (
    _RUNNING_LOCK, LOCKDOWN, NOBODY, SPOOL, Limits, SandboxUnavailable, _give_to_run, _new_pids_cgroup,
    _own_process_count, _process_tree, _remove_cgroup, _user_namespace, bwrap_command, run_identity,
)
from attention_course.grading.scratch import scratch_folder


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
        under_tmp = [path for path in isolation._python_paths() if path.startswith("/tmp/")]  # (see forkserver._fresh_tmp)
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
