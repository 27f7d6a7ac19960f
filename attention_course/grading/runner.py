"""Runs inside the sandbox: the student's cells, then the grader's calls. Saves data; decides nothing.

Usage (inside the sandbox): ``python -I runner.py FOLDER``. FOLDER holds ``program.json`` and
``inputs.npz`` (see ``cases.py``), which it reads and deletes before any student code runs. It
writes ``FOLDER/cells.json`` (what each cell printed, whether it raised) and then, in a fresh
``FOLDER/out/``, per case ``<id>.npz`` (the outputs and the arguments as they were
after the call) and ``<id>.json`` (status, types, forbidden calls seen). Each file is written as soon
as it is known, so a submission that crashes half-way still leaves what it produced.

This file imports only the standard library, NumPy, PyTorch and IPython: the course package (with
its reference implementations) is not visible in the sandbox, and nothing here is trusted by the
grader beyond being data to compare.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

TEXT_LIMIT = 4_000  # characters kept of a cell's output, an error message or a traceback
FORBIDDEN = {
    "softmax", "log_softmax", "_softmax", "_log_softmax", "cosine_similarity",
    "scaled_dot_product_attention", "_scaled_dot_product_attention", "multi_head_attention_forward",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention_for_cpu",
}


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that a bare ``except Exception`` does not swallow it."""


def _alarm(seconds: float):
    """Interrupt the student's code after ``seconds`` of CPU time (not wall time: a busy machine
    grading several students at once must not make an honest call time out). Code that sleeps
    instead of computing is stopped by the sandbox's wall-time limit."""

    def handler(signum, frame):
        raise _Timeout(f"used more than {seconds:g} s of CPU time")

    signal.signal(signal.SIGPROF, handler)
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _cancel_alarm():
    signal.setitimer(signal.ITIMER_PROF, 0)


class _CappedText(io.TextIOBase):
    """A text stream that keeps the first TEXT_LIMIT characters and counts the rest."""

    def __init__(self):
        self.parts, self.kept, self.dropped = [], 0, 0

    def writable(self):
        return True

    def write(self, text):
        room = TEXT_LIMIT - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def value(self) -> str:
        text = "".join(self.parts)
        return text + (f"\n[... {self.dropped} more characters not kept]" if self.dropped else "")


def _short(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " [...]"


class _RecordCalls(TorchFunctionMode):
    """Notes every torch function called by name (torch.softmax, F.softmax, Tensor.softmax ...)."""

    def __init__(self, seen: set):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in FORBIDDEN:
            self.seen.add(name)
        return func(*args, **(kwargs or {}))


class _RecordOps(TorchDispatchMode):
    """Notes the ATen operators that actually run: catches torch.ops.aten calls and disabled overrides."""

    def __init__(self, seen: set):
        super().__init__()
        self.seen = seen

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ to disable dynamo, and importing dynamo costs a
        # second per sandbox; nothing here is compiled.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in FORBIDDEN:
            self.seen.add(f"aten.{name}")
        return func(*args, **(kwargs or {}))


def _shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    return InteractiveShell.instance(config=config)


def _exit_if_forked(runner_pid: int) -> None:
    # A child that the student's code forked must not go on to run the grader's calls.
    if os.getpid() != runner_pid:
        os._exit(0)


def run_cells(shell, cells: list[str], folder: Path, cell_timeout: float) -> None:
    report = []
    runner_pid = os.getpid()
    for number, source in enumerate(cells):
        stdout, stderr = _CappedText(), _CappedText()
        started = time.perf_counter()
        status, error = "ok", None
        try:
            _alarm(cell_timeout)
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                result = shell.run_cell(source, store_history=False)
            _cancel_alarm()
            failure = result.error_before_exec or result.error_in_exec
            if failure is not None:
                status, error = "error", _short(f"{type(failure).__name__}: {failure}")
        except _Timeout as timeout:
            status, error = "timeout", str(timeout)
        finally:
            _cancel_alarm()
            _exit_if_forked(runner_pid)
        report.append({"cell": number, "status": status, "error": error, "stdout": stdout.value(),
                       "stderr": stderr.value(), "seconds": round(time.perf_counter() - started, 3)})
        (folder / "cells.json").write_text(json.dumps(report), encoding="utf-8")


def _decode(value, arrays):
    if isinstance(value, dict) and "tensor" in value:
        return torch.from_numpy(arrays[value["tensor"]].copy())
    if isinstance(value, dict) and "list" in value:
        return [_decode(v, arrays) for v in value["list"]]
    return value


def _save_case(out: Path, case_id: str, record: dict, tensors: dict) -> None:
    np.savez(out / f"{case_id}.npz", **tensors)
    (out / f"{case_id}.json").write_text(json.dumps(record), encoding="utf-8")


def _flatten(result, prefix: str, tensors: dict, described: list) -> None:
    """Record a returned value: tensors into the .npz, everything else described in JSON."""
    if isinstance(result, torch.Tensor):
        tensors[prefix] = result.detach().cpu().numpy().copy()
        described.append({"kind": "tensor", "key": prefix, "type": f"{type(result).__module__}.{type(result).__qualname__}"})
    elif isinstance(result, (tuple, list)):
        described.append({"kind": "sequence", "length": len(result)})
        for i, item in enumerate(result):
            _flatten(item, f"{prefix}.{i}", tensors, described)
    elif result is None or isinstance(result, (bool, int, float, str)):
        described.append({"kind": "scalar", "key": prefix, "value": result})
    else:
        described.append({"kind": "other", "key": prefix, "type": type(result).__qualname__})


def run_case(shell, case: dict, arrays, out: Path, case_timeout: float) -> str:
    record = {"id": case["id"], "status": "ok", "error": None, "forbidden": [], "returned": []}
    tensors: dict[str, np.ndarray] = {}
    seen: set[str] = set()
    try:
        target = shell.user_ns.get(case["call"])
        if target is None:
            raise NameError(f"name '{case['call']}' is not defined in the notebook")
        args = [_decode(a, arrays) for a in case["args"]]
        kwargs = {k: _decode(v, arrays) for k, v in case["kwargs"].items()}
        _alarm(case_timeout)
        with _RecordOps(seen), _RecordCalls(seen):
            if case["construct"] is not None:
                target = target(**case["construct"])
                if case["state"] is not None:
                    state = {k: _decode(v, arrays) for k, v in case["state"].items()}
                    # Convert first: loading float64 weights into float32 parameters would round them.
                    target = target.to(next(iter(state.values())).dtype)
                    target.load_state_dict(state, strict=True)
            result = target(*args, **kwargs)
        _cancel_alarm()
        _flatten(result, "out", tensors, record["returned"])
        for i, arg in enumerate(args):
            if isinstance(arg, torch.Tensor):
                tensors[f"after.arg{i}"] = arg.detach().cpu().numpy().copy()
    except _Timeout as timeout:
        record["status"], record["error"] = "timeout", str(timeout)
    except BaseException as exc:  # the student's code may raise anything; record it as data
        record["status"] = "error"
        record["error"] = _short(f"{type(exc).__name__}: {exc}")
        record["traceback"] = _short("".join(traceback.format_exception(exc)[-3:]))
    finally:
        _cancel_alarm()
    record["forbidden"] = sorted(seen)
    _save_case(out, case["id"], record, tensors)
    return record["status"]


def main(folder: Path) -> None:
    program = json.loads((folder / "program.json").read_text(encoding="utf-8"))
    with np.load(folder / "inputs.npz", allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    # The student's cells never see the grader's inputs on disk, nor a results folder to plant files in.
    (folder / "program.json").unlink()
    (folder / "inputs.npz").unlink()
    shell = _shell()
    # The first use of the recording modes imports parts of torch (seconds); do it before any time limit.
    with _RecordOps(set()), _RecordCalls(set()):
        torch.zeros(1).add(1)
    run_cells(shell, program["cells"], folder, program.get("cell_timeout_s", 60))
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    stuck: set[str] = set()  # a call that timed out once is not tried again: its other cases time out too
    for case in program["cases"]:
        if case["call"] in stuck:
            _save_case(out, case["id"], {"id": case["id"], "status": "timeout", "forbidden": [], "returned": [],
                                         "error": "not tried: an earlier call of the same function timed out"}, {})
            continue
        if run_case(shell, case, arrays, out, program.get("case_timeout_s", 10)) == "timeout":
            stuck.add(case["call"])
    (out / "done.json").write_text(json.dumps({"finished": True}), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
