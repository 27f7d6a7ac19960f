"""Runs inside the sandbox: the student's cells, then the grader's calls. Sends data; decides nothing.

Usage (inside the sandbox): ``python -I runner.py FOLDER OUT IN``, where OUT and IN are the file
descriptors of two pipes to the grader (runner -> grader and grader -> runner). FOLDER holds
``program.json`` (the cells to run, the source of the notebook's given helpers, the phase, the CPU
limits); it is read and deleted before any student code runs. No grading input is in the process
while the student's cells run: the grader sends the cases only when the graded child asks for them.

A run serves one phase. In a **sealed** run every operator of the softmax family is gone before the
first cell: its kernels in PyTorch's dispatcher (softmax, log_softmax, their private and safe
variants, cosine similarity, scaled dot-product and multi-head attention; every namespace, every
dispatch key they are registered for) are replaced by one that refuses, with registrations that no
Python object refers to, and torch's own Python implementations of them (references,
decompositions) refuse too. A probe checks that the replacement took. No process of the run, nor
any it starts, can compute one of them, so a graded call cannot reach one by any path, whatever it
switches on or off; a refusal it meets is reported as a forbidden shortcut. New programs cannot be
started (a fresh interpreter would be unsealed) and ctypes cannot be used. An **open** run seals
nothing: it serves checks whose subject drives code that may use the family (``translate`` runs the
student's whole model).

The cells run in this process, in an IPython shell, after the runner has installed an audit hook
(it cannot be removed) and taken a snapshot of the shared namespaces (builtins, torch, numpy, this
module). The graded calls run in a forked child, which restores every snapshot first; from then on
the audit hook refuses, in the child, what could observe or rewrite the grader from inside a call:
frames, the garbage collector's object lists, code and defaults of functions, new processes,
signals to other processes, sockets, ctypes. Tracing and profiling hooks are refused from the start
(they are the one way Python code can rewrite another frame's local variables).

Each graded call gets the notebook's given helpers re-installed from the release and every
snapshot namespace restored first, so that nothing the cells redefined or patched changes a check.
Where a check judges a function on its own, a stand-in answers the call of the student's other
function with the correct values, but only when asked with exactly the expected arguments; its data
lives in keyword defaults, which graded calls can neither read nor replace.

No answer is ever within the student's reach: no code of the student's runs from a frame, or with a
frame among its callers, that holds one, and no object the student's code is given holds one. A case
is read, and its stand-ins' answers sealed in guarded deciders, while every signal is blocked and
nothing of the student's runs; a stand-in decides in a frame that calls nothing of the student's and
returns, and calls the student's own function (when the call is not the expected one) from a frame
that holds only that function and its arguments; what the grader measures before a call (its own
decoding of a model, the evidence) is sent to the grader as soon as it is made. No code of the
student's can be a signal handler (a seccomp filter refuses new handlers before the first cell), nor
read a callee's frame through a traceback, nor another thread's frames, during a graded call.

Results go back on the pipe as framed ``repr`` text of plain tuples (tensors as raw bytes), which the
grader parses with ``ast.literal_eval``. This file imports only the standard library, NumPy, PyTorch
and IPython: the course package, with its reference implementations, is not in the sandbox.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import gc
import hashlib
import io
import json
import marshal
import math
import os
import re
import signal
import sys
import time
import traceback
import types
import warnings

import numpy as np
import torch

CHANNEL_OUT, CHANNEL_IN = 3, 4  # set from the command line before anything runs
TEXT_LIMIT = 16_000  # characters kept of a cell's output or of an error message
MAX_FRAME = 32 << 20
# Operator names of the softmax family, in every namespace (aten, quantized, ...).
FAMILY = re.compile(r"softmax|softmin|cosine|attention|_transformer|multi_head|sdp")
REFUSAL = "ForbiddenOperation"
GRADER_REFUSES = "the grader does not allow"  # how the audit hook's refusals begin
TORCH_PYTHON_IMPLEMENTATIONS = ("torch._refs", "torch._decomp", "torch._prims", "torch._higher_order_ops")

# Audit events refused everywhere, from the first cell on: hooks that could rewrite another frame's locals,
# and the garbage collector's lists, from which every object (a stand-in's answer, the grader's signer) is reachable.
BLOCK_ALWAYS = frozenset({"sys.settrace", "sys.setprofile", "sys.addaudithook", "gc.get_objects", "gc.get_referrers",
                          "gc.get_referents"})
# ... and in a sealed run: a new program would be an unsealed interpreter.
BLOCK_SEALED = frozenset({"os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen", "os.forkpty"})
# Audit events refused in the graded child (once it starts calling the student's code).
# (A call's own frame and its callers' stay readable: the standard library reads them (logging, namedtuple,
# warnings), and no frame of the runner's holds an answer while a graded call runs. A frame of a callee, through
# an exception's traceback (tb_frame), and other threads' frames are refused: a thread the student starts sees no
# frame of the runner's but through them.)
BLOCK_GRADED = frozenset({
    "function.__new__", "code.__new__", "os.fork", "sys._current_frames", "sys._current_exceptions",
    "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.kill", "os.killpg", "subprocess.Popen",
    "signal.pthread_kill", "socket.__new__",
})
# A function's code and defaults: no code may read or write them for the runner's own functions and the
# stand-ins (which keep their answers there); no code may replace any function's code.
GUARDED_WRITES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
# Events worth telling the instructor about when the student's cells use them (not what libraries do:
# matplotlib starts fc-list, libraries load native code).
NOTED = {
    "sys.settrace": "tries to install a tracing hook", "sys.setprofile": "tries to install a profiling hook",
    "sys.addaudithook": "tries to install an audit hook", "gc.get_objects": "walks the garbage collector's objects",
    "gc.get_referrers": "walks the garbage collector's objects", "gc.get_referents": "walks the garbage collector's objects",
}


class _Timeout(BaseException):
    """Raised by the CPU-time alarm; a BaseException so that ``except Exception`` does not swallow it."""


def _make_hook(runner_pid: int, sealed: bool, noted: set, protected: tuple, guarded_ids: set):
    """The audit hook. Everything it uses is bound now, as positional defaults (a tuple: unlike keyword
    defaults, it cannot be changed in place): nothing in a module can change it, and no code can change the
    code or the defaults of the ``protected`` functions (the hook itself and the functions the graded child
    relies on). A process other than the runner's own (the graded child, or a process the cells started)
    is held to the graded calls' rules."""

    def hook(event, args, _always=BLOCK_ALWAYS, _sealed=BLOCK_SEALED if sealed else frozenset(), _ctypes=sealed,
             _graded=BLOCK_GRADED, _writes=GUARDED_WRITES, _getpid=os.getpid,
             _pid=runner_pid, _noted=noted, _notes=NOTED, _write=os.write, _fd=CHANNEL_OUT, _repr=repr, _len=len,
             _error=PermissionError, _pack=int.to_bytes, _guarded=guarded_ids, _id=id, _says=GRADER_REFUSES,
             _protected=protected):
        in_graded_call = _getpid() != _pid
        refused = event in _always or event in _sealed or (_ctypes and event.startswith("ctypes."))
        if not refused and _len(args) > 1 and (event == "object.__setattr__" or event == "object.__delattr__"
                                               or event == "object.__getattr__"):
            name = args[1]
            if name in _writes:  # (the same names are guarded for reading)
                guarded = _id(args[0]) in _guarded
                for function in _protected:
                    if function is args[0]:
                        guarded = True
                refused = guarded or (name == "__code__" and event != "object.__getattr__")
        if not refused and in_graded_call:
            refused = (event in _graded or event.startswith("ctypes.")
                       or (event == "object.__getattr__" and _len(args) > 1 and args[1] == "tb_frame"))
        if not in_graded_call and event in _notes and event not in _noted:
            _noted.add(event)
            message = _repr(("note", _notes[event])).encode()
            try:
                _write(_fd, _pack(_len(message) + 1, 4, "big") + b"\x00" + message)  # unsigned: a note only
            except OSError:
                pass
        if refused:
            raise _error(f"{_says} {event} here")

    hook.__defaults__ = (*hook.__defaults__[:-1], (hook, *protected))  # _protected, the last one, with the hook
    return hook


def _make_guard(guarded_ids: set):
    """guard(function): from now on no code may read or replace its code or defaults (a stand-in keeps its
    answer there). The set is reachable only through this function's and the hook's defaults."""

    def guard(function, _ids=guarded_ids, _keep=[], _id=id):
        _keep.append(function)  # alive for good: an id is never reused by another object
        _ids.add(_id(function))
        return function

    return guard


# ---------------------------------------------------------------------------------------------
# The cells.


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


IDLE_S = 15.0  # wall seconds without CPU progress after which a cell or a call is stopped (it waits or sleeps)


_ALARM = [0.0, 0.0]  # the CPU seconds of the alarm that is set; the CPU time the idle check last saw


def _on_cpu(signum, frame, _state=_ALARM, _error=_Timeout):
    raise _error(f"used more than {_state[0]:g} s of CPU time")


def _on_wall(signum, frame, _state=_ALARM, _clock=time.process_time, _error=_Timeout):
    now = _clock()
    if now - _state[1] < 0.05:
        raise _error(f"made no progress for {IDLE_S:g} s (it waits or sleeps)")
    _state[1] = now


def _alarm(seconds: float, *, _state=_ALARM, _clock=time.process_time, _get=signal.getsignal, _signal=signal.signal,
           _set=signal.setitimer, _cpu=signal.ITIMER_PROF, _wall=signal.ITIMER_REAL, _prof=signal.SIGPROF,
           _alrm=signal.SIGALRM, _on_cpu=_on_cpu, _on_wall=_on_wall) -> None:
    """Interrupt after ``seconds`` of CPU time (not wall time: a busy machine must not fail an honest cell),
    or when IDLE_S seconds of wall time pass without any CPU progress: a call that waits on a pipe or sleeps
    makes none, however busy the machine, and one that computes always makes some. The two handlers are the
    runner's own, installed once (in the runner, before the first cell: from then on no handler can be set,
    see :func:`deny_signal_handlers`)."""
    _state[0], _state[1] = seconds, _clock()
    if _get(_prof) is not _on_cpu:
        _signal(_prof, _on_cpu)
    if _get(_alrm) is not _on_wall:
        _signal(_alrm, _on_wall)
    _set(_cpu, seconds)
    _set(_wall, IDLE_S, IDLE_S)


def _cancel_alarm(_set=signal.setitimer, _cpu=signal.ITIMER_PROF, _wall=signal.ITIMER_REAL) -> None:
    _set(_cpu, 0)
    _set(_wall, 0)


MAX_RECURSION = 20_000  # frames: far more than honest code needs; a deeper stack takes minutes to unwind
TRACEBACK_FRAMES = 8  # of a cell's error, printed from the cell down


def _bounded_recursion_limit(limit, _set=sys.setrecursionlimit, _most=MAX_RECURSION):
    """sys.setrecursionlimit as the student's code gets it: at most MAX_RECURSION frames. (A recursion of
    10**8 frames stopped by the CPU limit took minutes and gigabytes to unwind and report.)"""
    _set(min(limit, _most) if isinstance(limit, int) else limit)


def _short_traceback(exc_tuple=None, filename=None, tb_offset=None, exception_only=False,
                     running_compiled_code=False):
    """IPython's showtraceback, bounded: the cell's first frames and the error. IPython's own formats every
    frame of the stack, minutes for a deep one."""
    kind, value, tb = exc_tuple or sys.exc_info()
    for _ in range(3):  # skip IPython's frames above the cell's
        if tb is None or tb.tb_frame.f_code.co_filename.startswith("<ipython-input-"):
            break
        tb = tb.tb_next
    print("".join(traceback.format_exception(kind, value, tb, limit=TRACEBACK_FRAMES)), end="", file=sys.stderr)


def _shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    shell = InteractiveShell.instance(config=config)
    shell.showtraceback = _short_traceback
    return shell


def run_cells(shell, cells: list[str], folder: Path, cell_cpu_s: float, sealed: bool = False) -> None:
    report = []
    runner_pid = os.getpid()
    for number, source in enumerate(cells):
        stdout, stderr = _CappedText(), _CappedText()
        started = time.process_time()
        status, error = "ok", None
        try:
            _alarm(cell_cpu_s)
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                failure = _run_cell(shell, source, sealed)
            _cancel_alarm()
            if isinstance(failure, _Timeout):  # (IPython reports it as the cell's own error)
                status, error = "timeout", str(failure)
            elif failure is not None:
                status, error = "error", _short(f"{type(failure).__name__}: {failure}")
        except _Timeout as timeout:
            status, error = "timeout", str(timeout)
        finally:
            _cancel_alarm()
            if os.getpid() != runner_pid:  # a child the student's code forked must not go on
                os._exit(0)
        report.append({"cell": number, "status": status, "error": error, "stdout": stdout.value(),
                       "stderr": stderr.value(), "cpu_seconds": round(time.process_time() - started, 3)})
        (folder / "cells.json").write_text(json.dumps(report), encoding="utf-8")


def refused_by_grader(failure: BaseException | str | None) -> bool:
    """Whether an error (or its text) is one the grader caused: a switched-off function, or something the
    audit hook refuses."""
    text = "" if failure is None else str(failure)
    return REFUSAL in text or GRADER_REFUSES in text


def _run_cell(shell, source: str, sealed: bool) -> BaseException | None:
    """Run a cell; the error it raised, if any. A top-level statement that the grader refuses (a call of a
    switched-off function, `!pip ...` in a sealed run) fails alone: the statements after it still run (a
    comparison with torch.softmax above a def must not take the def with it)."""
    result = shell.run_cell(source, store_history=False)
    first = result.error_before_exec or result.error_in_exec
    failure = first
    for _ in range(100):
        if not refused_by_grader(failure):
            break
        source = _statements_after(shell, source, failure)
        if not source:
            break
        result = shell.run_cell(source, store_history=False)
        failure = result.error_before_exec or result.error_in_exec
    return first


def _statements_after(shell, source: str, failure: BaseException) -> str:
    """The source of the top-level statements after the one that raised ``failure`` ("" if none or unknown)."""
    line = None
    traceback = failure.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename.startswith("<ipython-input-"):
            line = traceback.tb_lineno
            break
        traceback = traceback.tb_next
    if line is None:
        return ""
    code = shell.transform_cell(source)
    try:
        statements = ast.parse(code).body
    except SyntaxError:
        return ""
    later = [statement for statement in statements if statement.lineno > line]
    if not later:
        return ""
    return "\n".join(code.splitlines()[later[0].lineno - 1:])


# ---------------------------------------------------------------------------------------------
# Snapshots of shared namespaces, restored in the graded child.

SNAPSHOT_MODULES = ("builtins", "torch", "torch._C", "torch.nn", "torch.nn.functional", "torch.nn.modules.module",
                    "torch.overrides", "torch.utils._python_dispatch", "numpy", "os", "sys", "signal", "gc", "marshal",
                    "time", "types", "io", "contextlib")
SNAPSHOT_CLASSES = (torch.Tensor, torch.nn.Module, torch.nn.Linear, torch.nn.Embedding, torch.nn.GRUCell,
                    torch.nn.GRU, torch._C._DispatchModule)


def _snapshot() -> tuple:
    """(kind, target, pairs) triples: 0 = this module's globals (cleared, then refilled), 1 = a module
    (refilled; attributes added since are kept), 2 = a class (refilled; attributes added since are removed)."""
    plan = [(0, globals(), tuple(globals().items())), (1, sys.modules, tuple(sys.modules.items()))]
    for name in SNAPSHOT_MODULES:
        module = sys.modules[name]
        plan.append((1, vars(module), tuple(vars(module).items())))
    for cls in SNAPSHOT_CLASSES:
        plan.append((2, cls, tuple(vars(cls).items())))
    return tuple(plan)


def _restore_with(plan, _setattr=setattr, _delattr=delattr, _vars=vars, _list=list, _dict=dict):
    """Put every snapshot namespace back. Uses only methods of built-in types and the names bound as defaults."""
    for kind, target, pairs in plan:
        if kind == 0:
            target.clear()
            target.update(pairs)
        elif kind == 1:
            target.update(pairs)
        else:
            original = _dict(pairs)
            for name in _list(_vars(target)):
                if name not in original:
                    try:
                        _delattr(target, name)
                    except (AttributeError, TypeError):
                        pass
            for name, value in pairs:
                if _vars(target).get(name, original) is not value:
                    try:
                        _setattr(target, name, value)
                    except (AttributeError, TypeError):
                        pass


# ---------------------------------------------------------------------------------------------
# Sealing the softmax family.


def _refuser(name: str, seen: list):
    """A kernel (or a Python function's body) that refuses. Self-contained: it may run with another
    module's globals (torch's own Python implementations get this code in place of theirs)."""

    def refuse(*args, _name=name, _seen=seen, _error=RuntimeError, _prefix=REFUSAL, **kwargs):
        _seen.append(_name)
        raise _error(f"{_prefix}: {_name} is not allowed in a graded function: write this step yourself")

    return refuse


def _innermost(function):
    for _ in range(10):
        inner = getattr(function, "__wrapped__", None)
        if inner is None:
            break
        function = inner
    return function


def seal_python_implementations(seen: list) -> int:
    """Make torch's own Python implementations of the family (references, decompositions) refuse.

    Done before the first cell: eager code never uses them, and a copy taken later would need the
    original code object, which is then gone."""
    sealed = 0
    for name in list(sys.modules):
        if not name.startswith(TORCH_PYTHON_IMPLEMENTATIONS) or sys.modules[name] is None:
            continue
        for value in list(vars(sys.modules[name]).values()):
            function = _innermost(value)
            if isinstance(function, types.FunctionType) and FAMILY.search(function.__name__) and not function.__closure__:
                function.__code__ = _refuser(function.__qualname__, []).__code__.replace(
                    co_name=function.__code__.co_name)
                function.__kwdefaults__ = {"_name": f"{function.__module__}.{function.__qualname__}", "_seen": seen,
                                           "_error": RuntimeError, "_prefix": REFUSAL}
                sealed += 1
    return sealed


def seal_dispatcher(seen: list) -> tuple:
    """Register a refusing kernel for every dispatch key of every operator of the family. Returns the
    registrations, which must stay alive (dropping them would restore the real kernels)."""
    libraries, count = {}, 0
    for full in sorted(torch._C._dispatch_get_all_op_names()):
        namespace, _, name = full.partition("::")
        if not FAMILY.search(name):
            continue
        keys = []
        for line in torch._C._dispatch_dump(full).splitlines()[4:]:
            key = line.split(":")[0].replace("[alias]", "").replace("(inactive)", "").strip()
            if key and key != "Meta" and key not in keys:
                keys.append(key)
        for key in keys:
            library = libraries.get((namespace, key))
            if library is None:
                library = libraries[(namespace, key)] = torch._C._dispatch_library(
                    "IMPL", namespace, key, "attention-course-grader", 0)
            try:
                library.impl(name, key, _refuser(full, seen), False)
                count += 1
            except RuntimeError:  # a key that takes no Python kernel (none of these is reachable from a CPU tensor)
                pass
    return tuple(libraries.values()), count


def _probe_seal(seen: list) -> str:
    """"" when each probe is refused by the grader's kernel, else what still computes."""
    x = torch.tensor([[1.0, 2.0, 3.0]])
    probes = {
        "torch.softmax": lambda: torch._C._VariableFunctions.softmax(x, -1),
        "torch._softmax": lambda: torch._C._VariableFunctions._softmax(x, -1, False),
        "torch.log_softmax": lambda: torch._C._VariableFunctions.log_softmax(x, -1),
        "torch._safe_softmax": lambda: torch._C._VariableFunctions._safe_softmax(x, -1),
        "torch.cosine_similarity": lambda: torch._C._VariableFunctions.cosine_similarity(x, x),
        "scaled_dot_product_attention": lambda: torch._C._nn.scaled_dot_product_attention(x[None], x[None], x[None]),
    }
    for label, probe in probes.items():
        before = len(seen)
        try:
            probe()
        except RuntimeError as error:
            if REFUSAL in str(error) and len(seen) > before:
                continue
            return f"{label} raised something else: {str(error)[:200]}"
        return f"{label} still computes"
    return ""


# ---------------------------------------------------------------------------------------------
# The channel.


SIGNATURE_BYTES = 32
_SIGNER = None  # set by main() before the first cell: see _make_signer
_GUARD = None  # set by main() before the first cell: see _make_guard


def _send(message: tuple) -> None:
    """A message to the grader, signed: [length][1][signature][repr of the message]."""
    data = repr(message).encode("utf-8")
    signature = _SIGNER(data)
    if signature is None:  # (raised here, not in the signer: its traceback would hold the signer's frame, and key)
        raise PermissionError("only the grader's runner signs its messages")
    frame = (len(data) + 1 + SIGNATURE_BYTES).to_bytes(4, "big") + b"\x01" + signature + data
    while frame:
        written = os.write(CHANNEL_OUT, frame)
        frame = frame[written:]


def _make_signer(key: bytes):
    """The one function that can sign for the runner. The key is one of its defaults, which no code can read
    (the audit hook refuses it, and the garbage collector's lists); it refuses by returning None, not by raising
    (the traceback of an exception raised here would hold its frame, key included). It signs only when called by _send from
    grade_in_child (or main, or run_case called by grade_in_child) in the graded child, with main past the
    student's cells: code in a cell, a process a cell started, or a graded call cannot have it sign, whatever it
    calls."""

    def sign(data: bytes, _key=key, _hash=hashlib.blake2b, _frame=sys._getframe, _send_code=_send.__code__,
             _child_code=grade_in_child.__code__, _main_code=main.__code__, _case_code=run_case.__code__,
             _mask=signal.pthread_sigmask, _block=signal.SIG_BLOCK, _restore_mask=signal.SIG_SETMASK,
             _signals=signal.valid_signals(), _error=PermissionError, _type=type, _bytes=bytes, _size=SIGNATURE_BYTES):
        try:
            caller = _frame(1)
            sender = caller.f_back
            if sender.f_code is _case_code:  # run_case, called by grade_in_child: what it measured before a call
                sender = sender.f_back if sender.f_back.f_code is _child_code else None
            top = sender.f_back if sender.f_code is _child_code else sender
            allowed = (caller.f_code is _send_code and (sender.f_code is _child_code or sender.f_code is _main_code)
                       and top.f_code is _main_code and top.f_locals.get("graded") is True and _type(data) is _bytes)
        except (AttributeError, ValueError):
            allowed = False
        if not allowed:
            return None  # (not an exception: its traceback would hold this frame, with the key in it)
        previous = _mask(_block, _signals)  # no handler of the student's may run while the key is in a frame
        try:
            return _hash(data, key=_key, digest_size=_size).digest()
        finally:
            _mask(_restore_mask, previous)

    return sign


def _receive() -> object:
    def read_exactly(count: int) -> bytes:
        chunks = []
        while count:
            chunk = os.read(CHANNEL_IN, min(count, 1 << 20))
            if not chunk:
                raise EOFError("the grader closed the channel")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    size = int.from_bytes(read_exactly(4), "big")
    if size > MAX_FRAME:
        raise ValueError("frame too large")
    return marshal.loads(read_exactly(size))


# ---------------------------------------------------------------------------------------------
# Values in and out.


def _decode(value, user_ns: dict):
    """The grader's description of an argument -> the value (tensors from raw bytes, names from the notebook)."""
    if isinstance(value, tuple) and value:
        tag = value[0]
        if tag == "tensor":
            _, dtype, shape, raw = value
            return torch.from_numpy(np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy())
        if tag == "list":
            return [_decode(v, user_ns) for v in value[1]]
        if tag == "tuple":
            return tuple(_decode(v, user_ns) for v in value[1])
        if tag == "ns":
            if value[1] not in user_ns:
                raise NameError(f"name '{value[1]}' is not defined in the notebook")
            return user_ns[value[1]]
        if tag == "translator":
            return STANDIN.Translator(*value[1:])
        if tag == "value":
            return value[1]
    return value


def _describe(value, budget: list) -> tuple:
    """A returned value as plain tuples; tensors as raw bytes (only plain torch.Tensor counts as a tensor)."""
    if type(value) is torch.Tensor:
        array = torch.Tensor.numpy(torch.Tensor.contiguous(torch.Tensor.detach(value)))
        raw = array.tobytes()
        budget[0] -= len(raw)
        if budget[0] < 0:
            return ("other", "a result larger than the grader accepts")
        return ("tensor", array.dtype.str, tuple(int(n) for n in array.shape), raw)
    if isinstance(value, torch.Tensor):
        return ("other", f"{type(value).__module__}.{type(value).__qualname__} (a subclass of torch.Tensor)")
    for sequence in (tuple, list):  # a namedtuple is a tuple; its items are read as a tuple's, not its own way
        if issubclass(type(value), sequence):
            length = sequence.__len__(value)
            if length > 10_000:
                return ("other", "a sequence longer than the grader accepts")
            return ("seq", tuple(_describe(sequence.__getitem__(value, i), budget) for i in range(length)))
    if value is None or type(value) in (bool, int, float):
        return ("scalar", value)
    if type(value) is str:
        budget[0] -= len(value)
        return ("scalar", value[:TEXT_LIMIT]) if budget[0] >= 0 else ("other", "a result larger than the grader accepts")
    return ("other", f"{type(value).__module__}.{type(value).__qualname__}")


# ---------------------------------------------------------------------------------------------
# Stand-ins: the correct answer, for exactly the expected call only.


def _matches(matcher: tuple, given, first_tensor, _type=type, _int=int, _bool=bool, _tensor=torch.Tensor,
             _size=torch._C.TensorBase.size, _dim=torch._C.TensorBase.dim,
             _dtype=torch._C.TensorBase.dtype.__get__, _allclose=torch._C._VariableFunctions.allclose,
             _equal=torch._C._VariableFunctions.equal) -> bool:
    """Whether ``given`` is what the expected call passes. Only built-in and C-level functions decide."""
    kind = matcher[0]
    if kind == "any":
        return True
    if kind == "none":
        return given is None
    if kind == "scalar":  # a number equal to matcher[1] (a temperature)
        return (_type(given) is float or _type(given) is _int) and given == matcher[1]
    if kind == "last_dim":
        if _type(first_tensor) is not _tensor or _type(given) is not _int:
            return False
        return given == -1 or given == _dim(first_tensor) - 1
    if _type(given) is not _tensor:
        return False
    expected = matcher[1]
    if _size(given) != _size(expected) or _dtype(given) is not _dtype(expected):
        return False
    if kind == "equal":
        return _bool(_equal(given, expected))
    return _bool(_allclose(given, expected, rtol=matcher[2], atol=matcher[3]))


def _linearised(outputs: list, derivatives: tuple, bound: dict, *, _type=type, _tensor=torch.Tensor,
                _requires=torch._C.TensorBase.requires_grad.__get__, _detach=torch._C.TensorBase.detach,
                _sub=torch._C.TensorBase.sub, _add=torch._C.TensorBase.add, _dim=torch._C.TensorBase.dim,
                _tensordot=torch._C._VariableFunctions.tensordot, _tuple=tuple, _range=range) -> list:
    """A stand-in's answers, attached to the autograd graph of the arguments it was given: each output plus
    J (x - x.detach()) for each (output position, parameter name, Jacobian J) in ``derivatives``. The added
    term is zero, so the values are the answer's, and its gradient is the correct function's at this point:
    a function that back-propagates through a stand-in gets the correct gradient."""
    for position, name, jacobian in derivatives:
        given = bound.get(name)
        if _type(given) is _tensor and _requires(given):
            change = _sub(given, _detach(given))  # zeros that carry the gradient of ``given``
            inner, outer = _dim(given), _dim(jacobian)
            outputs[position] = _add(outputs[position], _tensordot(
                jacobian, change, _tuple(_range(outer - inner, outer)), _tuple(_range(inner))))
    return outputs


_NO_ANSWER = object()  # what a stand-in's decider gives back when the call is not the expected one
_MISSING = object()


def _decode_item(value, *, _frombuffer=np.frombuffer, _dtype=np.dtype, _reshape=np.ndarray.reshape,
                 _copy=np.ndarray.copy, _from_numpy=torch.from_numpy, _type=type, _tuple=tuple, _len=len):
    """One tensor or plain value of a stand-in's data, with functions bound when the runner was loaded."""
    if _type(value) is _tuple and _len(value) == 4 and value[0] == "tensor":
        return _from_numpy(_copy(_reshape(_frombuffer(value[3], dtype=_dtype(value[1])), value[2])))
    if _type(value) is _tuple and _len(value) == 2 and value[0] == "value":
        return value[1]
    return value


def _decode_sealed(value, *, _item=_decode_item, _type=type, _tuple=tuple, _len=len):
    """A stand-in's data (its answer, its matchers' tensors, its Jacobians) from the case: a tensor, a value, or
    a tuple or list of them. This runs while the case, with every answer in it, is in the runner's frames: only
    functions bound when the runner was loaded, none of the student's (nor anything the student could patch)."""
    if _type(value) is _tuple and _len(value) == 2 and (value[0] == "tuple" or value[0] == "list"):
        items = []
        for item in value[1]:
            items.append(_item(item))
        return _tuple(items) if value[0] == "tuple" else items
    return _item(value)


def _decider(params: tuple, defaults: dict, matchers: tuple, answer, derivatives: tuple = (), *,
             _matches=_matches, _linearised=_linearised, _clone=torch._C.TensorBase.clone, _type=type,
             _tuple=tuple, _len=len, _dict=dict, _zip=zip, _no=_NO_ANSWER, _base=BaseException,
             _no_function=torch._C.DisableTorchFunction, _no_dispatch=torch._C._DisableTorchDispatch):
    """decide(args, kwargs): the correct answer when the matchers accept the call's arguments, else _NO_ANSWER.

    It holds the answer and calls nothing of the student's, whoever calls it: torch function and dispatch modes
    are off inside (a mode of the student's would be called from this frame, with the expected arguments or the
    answer as its arguments), only exact tensors and numbers are looked at, and it raises nothing (an exception's
    traceback would hold this frame; one raised before the try, at its first instruction, is refused to a graded
    call by the audit hook, which does not let it read tb_frame). Everything it holds and uses is one keyword
    default, a tuple, which no graded call can read once it is guarded: a caller can replace it, but only whole,
    answer included (a default of its own, matchers that accept anything, would otherwise give the answer for
    any call). With ``derivatives``, the answer carries the correct gradient (see :func:`_linearised`)."""

    def decide(args, kwargs, *, _held=(params, defaults, matchers, answer, derivatives, _matches, _linearised,
                                       _clone, _type, _tuple, _len, _dict, _zip, _no, _base, _no_function,
                                       _no_dispatch)):
        (params, defaults, matchers, answer, derivatives, matches, linearised, clone, type_, tuple_, len_, dict_,
         zip_, no, base, no_function, no_dispatch) = _held
        try:
            with no_function(), no_dispatch():
                if type_(args) is not tuple_ or type_(kwargs) is not dict_ or len_(args) > len_(params):
                    return no
                bound = dict_(defaults)
                for name, value in zip_(params, args):
                    bound[name] = value
                for name, value in kwargs.items():  # (an exact dict, whose keys the stand-in checked are exact str)
                    if name not in params or name in bound and name not in defaults:
                        return no
                    bound[name] = value
                if len_(bound) != len_(params):
                    return no
                first = args[0] if args else None
                for param, matcher in zip_(params, matchers):
                    if not matches(matcher, bound.get(param), first):
                        return no
                if derivatives:
                    outputs = linearised([clone(t) for t in answer] if type_(answer) is tuple_ else [clone(answer)],
                                         derivatives, bound)
                    return tuple_(outputs) if type_(answer) is tuple_ else outputs[0]
                if type_(answer) is tuple_:
                    return tuple_([clone(t) for t in answer])
                return clone(answer)
        except base:
            return no

    return decide


def _quietly(decide, args, kwargs, *, _mask=signal.pthread_sigmask, _block=signal.SIG_BLOCK,
             _setmask=signal.SIG_SETMASK, _unblock=signal.SIG_UNBLOCK, _signals=signal.valid_signals(),
             _alarms=(signal.SIGPROF, signal.SIGALRM)):
    """decide(args, kwargs) with every signal blocked: the runner's alarm, if it goes off meanwhile, raises its
    timeout when the decider has returned (in this frame, which holds no answer) rather than inside it, where it
    would be taken for a call that does not match. (No code of the student's can be a signal handler: see
    :func:`deny_signal_handlers`.)"""
    previous = None
    try:
        previous = _mask(_block, _signals)
        return decide(args, kwargs)
    finally:
        if previous is None:  # (a pending handler raised in _mask, after the mask was set: its timeout)
            _mask(_unblock, _alarms)
        else:
            _mask(_setmask, previous)


def _stand_in_calling(yours, decide, label: str, guard, *, _quiet=_quietly, _no=_NO_ANSWER, _type=type,
                      _str=str, _error=NameError):
    """The stand-in proper: ``decide`` answers the expected call; any other call goes to ``yours`` (the student's
    own function, or an earlier stand-in of the same name). The student's function is called from this frame,
    which holds nothing but it, the decider (guarded: it gives an answer only for the expected arguments, as
    this function does), the label and the call's own arguments: no answer, no matcher."""

    def stand_in(*args, _yours=yours, _decide=decide, _label=label, _quiet=_quiet, _no=_no, _type=_type,
                 _str=_str, _error=_error, **kwargs):
        for key in kwargs:
            if _type(key) is not _str:  # (a str subclass could run code of the student's inside the decider)
                break
        else:
            given = _quiet(_decide, args, kwargs)
            if given is not _no:
                return given
            del given
        if _yours is None:
            raise _error(f"name '{_label}' is not defined")
        return _yours(*args, **kwargs)

    return guard(stand_in)


def _stand_in_function(yours, params: tuple, defaults: dict, matchers: tuple, answer, label: str,
                       derivatives: tuple = (), guard=None):
    """A function that returns ``answer`` when called with arguments that the matchers accept, and calls
    ``yours`` otherwise (see :func:`_decider` and :func:`_stand_in_calling`)."""
    guard = guard or _GUARD
    return _stand_in_calling(yours, guard(_decider(params, dict(defaults), matchers, answer, derivatives)), label,
                             guard)


class _StandInModule(torch.nn.Module):
    """Takes the place of a submodule (a decoder's ``attention``): the stand-in function above, as a module. It
    holds the stand-in (guarded) and the student's own module, never an answer."""

    def __init__(self, original, function):
        super().__init__()
        self.original = original
        for name in ("W_q", "W_k", "w_v"):
            if isinstance(getattr(original, name, None), torch.nn.Module):
                setattr(self, name, getattr(original, name))
        self.__dict__["answer_call"] = function

    def forward(self, *args, **kwargs):
        return self.__dict__["answer_call"](*args, _yours=self.original, **kwargs)


def _sealed_stand_in(spec: tuple, guard, *, _decode=_decode_sealed, _decider=_decider, _dict=dict, _tuple=tuple,
                     _len=len) -> tuple:
    """(kind, name, decide) of a stand-in's spec: the part that holds its answer, guarded. Built while the case
    is in the runner's frames, so it touches nothing of the student's (not even the notebook's namespace: the
    student's function is looked up afterwards, see :func:`_stand_in_calling`)."""
    kind, name, params, defaults, matchers, answer, *more = spec
    decoded = []
    for matcher in matchers:
        if matcher[0] == "equal" or matcher[0] == "close":
            decoded.append((matcher[0], _decode(matcher[1]), *matcher[2:]))
        else:
            decoded.append(matcher)
    derivatives = []
    for position, param, jacobian in (more[0] if _len(more) > 0 else ()):
        derivatives.append((position, param, _decode(jacobian)))
    return kind, name, guard(_decider(params, _dict(defaults), _tuple(decoded), _decode(answer), _tuple(derivatives)))


# ---------------------------------------------------------------------------------------------
# One graded call.


def _pop_modes() -> None:
    while torch._C._len_torch_function_stack() > 0:
        torch._C._pop_torch_function_stack()
    while torch._C._len_torch_dispatch_stack() > 0:
        torch._C._pop_torch_dispatch_stack(None)


def _source_batch(sentences, source_vocab) -> tuple:
    """English sentences -> (source ids (B, S) padded with 0, lengths (B,)), as the notebook's source_batch."""
    source_ids = {word: i for i, word in enumerate(source_vocab)}
    encoded = [[source_ids.get(word, 3) for word in sentence.split()] for sentence in sentences]
    lengths = torch.tensor([len(ids) for ids in encoded])
    source = torch.zeros(len(encoded), int(lengths.max()), dtype=torch.long)
    for row, ids in enumerate(encoded):
        source[row, : len(ids)] = torch.tensor(ids)
    return source, lengths


def _greedy_ids(model, source, lengths, longest: int, *, _argmax=torch._C.TensorBase.argmax,
                _tolist=torch._C.TensorBase.tolist, _full=torch._C._VariableFunctions.full, _range=range,
                _enumerate=enumerate, _all=all, _set_grad=torch._C._set_grad_enabled,
                _grad=torch._C.is_grad_enabled) -> list:
    """The grader's own greedy decoding of the student's model (the rule the task states: one batch, at
    most 2 S + 2 steps, each row's ids up to its first EOS, without PAD and BOS). The model's code runs
    between the steps: everything else here was bound before it could change anything."""
    pad, bos, eos = 0, 1, 2
    grad = _grad()
    _set_grad(False)
    try:
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        batch = len(lengths)
        previous = _full((batch,), bos)
        rows = [[] for _ in _range(batch)]
        finished = [False] * batch
        for _ in _range(2 * longest + 2):
            logits, hidden, _weights = model.decoder(previous, hidden, states, lengths)
            previous = _argmax(logits, -1)
            for row, token in _enumerate(_tolist(previous)):
                if token == eos:
                    finished[row] = True
                elif not finished[row] and token != pad and token != bos:
                    rows[row].append(token)
            if _all(finished):
                break
    finally:
        _set_grad(grad)
    return rows


def _decode_afresh(model, user_ns: dict, recipe: tuple, source, lengths, *,
                   _weights=torch.nn.Module.state_dict, _load=torch.nn.Module.load_state_dict,
                   _greedy=_greedy_ids) -> tuple:
    """("decoded", ids, own decoder, own attention): the grader's greedy decoding of a fresh model of the
    notebook's classes, built as ``recipe`` says ((encoder class, args), (decoder class, args), model class),
    with ``model``'s weights: nothing set on the model's instances (a forward, an encoder replaced) comes
    along. "own": whether the model's decoder is the notebook's AttentionDecoder and its attention the
    notebook's AdditiveAttention."""
    decoder = getattr(model, "decoder", None)
    own = (type(decoder) is user_ns.get("AttentionDecoder", _MISSING),
           type(getattr(decoder, "attention", None)) is user_ns.get("AdditiveAttention", _MISSING))
    (encoder_class, encoder_args), (decoder_class, decoder_args), model_class = recipe
    fresh = user_ns[model_class](user_ns[encoder_class](*encoder_args), user_ns[decoder_class](*decoder_args))
    _load(fresh, _weights(model), strict=True)
    return ("decoded", _greedy(fresh, source, lengths, int(source.shape[1])), *own)


def _forced_argmax(model, source, lengths, targets: list, *, _argmax=torch._C.TensorBase.argmax,
                   _tolist=torch._C.TensorBase.tolist, _tensor=torch._C._VariableFunctions.tensor,
                   _full=torch._C._VariableFunctions.full, _range=range, _len=len, _max=max, _type=type,
                   _set_grad=torch._C._set_grad_enabled, _grad=torch._C.is_grad_enabled) -> tuple | None:
    """Teacher forcing with the given translations (target ids, without BOS and EOS): per sentence, the
    source position each target word's attention weights are largest at (the first on ties). None when the
    decoder reports no weights (a model without attention)."""
    grad = _grad()
    _set_grad(False)
    try:
        states, final = model.encoder(source, lengths)
        hidden = model.initial_state(final)
        batch, longest = _len(targets), _max(_len(row) for row in targets)
        rows = [[] for _ in _range(batch)]
        previous = _full((batch,), 1)  # BOS
        for step in _range(longest):
            _logits, hidden, weights = model.decoder(previous, hidden, states, lengths)
            if weights is None:
                return None
            if _type(weights) is not torch.Tensor:
                raise TypeError("the decoder's weights are not a tensor")
            best = _tolist(_argmax(weights, -1))
            for row in _range(batch):
                if step < _len(targets[row]):
                    rows[row].append(int(best[row]))
            previous = _tensor([targets[row][step] if step < _len(targets[row]) else 0 for row in _range(batch)])
    finally:
        _set_grad(grad)
    return tuple(tuple(row) for row in rows)


def _measure_afresh(user_ns: dict, spec: tuple, *, _weights=torch.nn.Module.state_dict,
                    _load=torch.nn.Module.load_state_dict, _greedy=_greedy_ids, _forced=_forced_argmax,
                    _batch=_source_batch, _type=type, _str=str, _tuple=tuple, _len=len, keep: dict | None = None) -> tuple:
    """("measured", per model: (name, problem, decoder class name, ((set, ids), ...), forced argmaxes or None)):
    the grader's own measurements of the notebook's trained models, for a check that compares them with the
    numbers the notebook reports. Each model is rebuilt from the notebook's given classes as its recipe says
    and gets the notebook model's weights (strictly: the same layers, the same shapes), so that only its
    weights come along; then it is decoded greedily on each set of sentences, and teacher-forced on the
    ``forced`` sentences and translations. ``problem`` says why a model could not be measured ("" if it was).

    spec: ("evidence", source vocabulary, target vocabulary, ((name, recipe), ...), ((set, sentences), ...),
    (sentences, translations)[, the student's own measurements to make: see :func:`_measure_own`]). ``keep``: a
    dict that gets each rebuilt model, by name, for :func:`_measure_own`."""
    _, source_vocab, target_vocab, models, sets, (forced_sentences, forced_translations), *_own = spec
    target_ids = {word: i for i, word in enumerate(target_vocab)}
    targets = [[target_ids.get(word, 3) for word in text.split()] for text in forced_translations]
    measured = []
    for name, recipe in models:
        model = user_ns.get(name, _MISSING)
        if model is _MISSING:
            measured.append((name, f"{name} is not defined", "", (), None))
            continue
        kind = _str(_type(getattr(model, "decoder", None)).__name__)
        (encoder_class, encoder_args), (decoder_class, decoder_args), model_class = recipe
        try:
            fresh = user_ns[model_class](user_ns[encoder_class](*encoder_args), user_ns[decoder_class](*decoder_args))
            _load(fresh, _weights(model), strict=True)
        except Exception as error:
            measured.append((name, f"its weights are not those of {model_class}({encoder_class}, {decoder_class}) "
                                   f"as section 1 builds it: {_type(error).__name__}: {_str(error)[:300]}", kind, (), None))
            continue
        decoded = []
        for label, sentences in sets:
            source, lengths = _batch(sentences, source_vocab)
            decoded.append((label, _tuple(_tuple(row) for row in _greedy(fresh, source, lengths, int(source.shape[1])))))
        forced = _forced(fresh, *_batch(forced_sentences, source_vocab), targets)
        measured.append((name, "", kind, _tuple(decoded), forced))
        if keep is not None:
            keep[name] = fresh
    return ("measured", _tuple(measured))


def _measure_own(user_ns: dict, calls: tuple, models: dict, *, _type=type, _float=float, _int=int,
                 _tensor=torch.Tensor, _numel=torch._C.TensorBase.numel, _item=torch._C.TensorBase.item,
                 _finite=math.isfinite, _subclass=issubclass, _tuple=tuple, _list=list, _str=str, _len=len,
                 _stop=_Timeout, _cancel=_cancel_alarm, _short=_short) -> tuple:
    """("own", ((result name, ((number or None, problem), ...)), ...)): what the notebook's own measurement
    functions give when the grader calls them on the rebuilt models (``models``, from :func:`_measure_afresh`),
    part by part, on the parts of the shipped sentences that the grader chose (seeded by the course seed), so
    that a number of ``results`` computed honestly with a buggy function can be judged against what that
    function measures, and a function that does not measure (that recognises the shipped sentences and gives
    numbers typed in for them) cannot pass for one (the check compares each part with the grader's measurement
    of the same part).

    calls: ((result name, function name, model name, ((pairs, alignments or None), ...)), ...). Each call gets
    fresh lists; what it returns is kept only if it is a number (a float, an int, a one-element tensor), and
    only as a Python float. A call that raises is recorded as such (and the function is not called on that
    result's other parts); one that runs out of time ends the calls (the alarm is off from then on: nothing of
    the student's runs after it)."""
    own = []
    stopped = ""
    for result_name, function_name, model_name, parts in calls:
        given = []
        for pairs, alignments in parts:
            if stopped:
                given.append((None, stopped))
                continue
            if given and given[-1][0] is None:  # (it raised on a part: not called again for this number)
                given.append(given[-1])
                continue
            try:  # (the alarm may also go off in the grader's lines here: the CPU time is the whole call's)
                function, model = user_ns.get(function_name), models.get(model_name)
                if function is None or model is None:
                    given.append((None, f"{function_name} is not defined" if function is None
                                  else f"{model_name} could not be measured"))
                    continue
                arguments = [model, _list(_tuple(pair) for pair in pairs)]
                if alignments is not None:
                    arguments.append(_list(_list(_list(positions) for positions in alignment)
                                           for alignment in alignments))
                value = function(*arguments)
                kind = _type(value)
                if kind is _tensor and _numel(value) == 1:
                    value = _item(value)
                    kind = _type(value)
                if kind is _int or _subclass(kind, _float):  # (not bool; a float subclass is read as a float)
                    number = _float.__float__(value) if kind is not _int else _int.__float__(value)
                    given.append((number, "") if _finite(number) else (None, "returned a number that is not finite"))
                else:
                    given.append((None, f"returned {kind.__name__}, not a number"))
            except _stop as timeout:
                _cancel()
                given.append((None, f"did not finish: {_short(_str(timeout))}"))
                stopped = f"not called: {function_name} ran out of time before"
            except BaseException as error:  # the student's code may raise anything; it is data here
                said = "raised an exception"
                try:  # (its text is the student's code too)
                    said = _short(f"raised {_type(error).__name__}: {error}")[:500]
                except _stop:
                    _cancel()
                    stopped = "not called: the grader ran out of time before"
                except BaseException:
                    pass
                given.append((None, said))
        own.append((result_name, _tuple(given)))
    return ("own", _tuple(own))


_RUN_BACKWARD = torch.autograd.Variable._execution_engine.run_backward  # the C++ engine, bound before any cell
_REQUIRE_GRAD = torch._C.TensorBase.requires_grad_


def _gradients(result, inputs: tuple, grad_outputs: tuple, *, _run=_RUN_BACKWARD, _type=type, _tensor=torch.Tensor,
               _tuple=tuple, _list=list, _len=len, _zip=zip, _size=torch._C.TensorBase.size,
               _dtype=torch._C.TensorBase.dtype.__get__, _to=torch._C.TensorBase.to,
               _requires=torch._C.TensorBase.requires_grad.__get__) -> tuple:
    """Back-propagate sum_i <result_i, grad_outputs_i> to ``inputs``: their gradients (None where none
    reached), or a string that says why there is nothing to back-propagate. The student's backward code (a
    custom autograd Function, a hook) runs here, so this runs inside the graded call, under its limits."""
    outputs = result if _type(result) is _tuple or _type(result) is _list else (result,)
    if _len(outputs) != _len(grad_outputs):
        return f"expected {_len(grad_outputs)} results to back-propagate through, got {_len(outputs)}"
    chosen, grads = [], []
    for output, grad in _zip(outputs, grad_outputs):
        if _type(output) is not _tensor or _size(output) != _size(grad):
            return "a result is not a tensor of the expected shape"
        if _requires(output):
            chosen.append(output)
            grads.append(_to(grad, _dtype(output)))
    if not chosen:
        return (None,) * _len(inputs)
    return _tuple(_run(_tuple(chosen), _tuple(grads), False, False, _tuple(inputs), True, False))


# Every signal but the runner's two alarms: the mask of a graded call (grade_in_child's), and the mask between
# two cases (all of them), while a case with its answers is in the runner's frames.
_GRADED_MASK = frozenset(signal.valid_signals()) - {signal.SIGPROF, signal.SIGALRM}


def _paused(message: tuple, left: list, *, _get=signal.getitimer, _set=signal.setitimer,
            _cpu=signal.ITIMER_PROF) -> tuple:
    """``message``, once the CPU alarm is stopped; the CPU seconds it had left go into ``left``."""
    left.append(_get(_cpu)[0])
    _set(_cpu, 0)
    return message


def run_case(case: dict | None, user_ns: dict, helpers, seen: list, case_cpu_s: float, plan: tuple,
             stuck: set | None = None, guard=None, send=None, *, _restore=_restore_with, _pop_modes=_pop_modes,
             _decode_afresh=_decode_afresh, _describe=_describe, _measure_afresh=_measure_afresh,
             _measure_own=_measure_own, _module=_StandInModule, _sealed=_sealed_stand_in,
             _calling=_stand_in_calling, _decode=_decode, _alarm=_alarm, _paused=_paused, _cancel=_cancel_alarm,
             _timeout=_Timeout, _short=_short, _gradients=_gradients, _set_grad=torch._C._set_grad_enabled,
             _grad_enabled=torch._C.is_grad_enabled, _require_grad=_REQUIRE_GRAD, _source_batch=_source_batch,
             _mask=signal.pthread_sigmask, _setmask=signal.SIG_SETMASK, _graded_mask=_GRADED_MASK,
             _missing=_MISSING, _setattr=setattr, _getattr=getattr, _exec=exec, _type=type, _str=str,
             _tensor=torch.Tensor, _len=len, _tuple=tuple, _dict=dict, _sorted=sorted, _set=set,
             _base=BaseException) -> tuple | None:
    """Call the student's code as the case says; (id, status, error, returned, after, forbidden, extra).

    No answer is ever within the student's reach. The case (with its stand-ins' answers) is read first, by the
    grader's code alone: in the graded child every signal is blocked until then (grade_in_child blocked them,
    re-installed the given helpers and restored the snapshot before asking for it). Each stand-in's answer goes
    into a guarded decider (see :func:`_decider`), and the case is dropped; only then are the student's
    function and objects looked up and anything of theirs run. What the grader measures before the call (its own
    decoding of the notebook's model, or its measurements for the evidence) is sent to the grader (``send``:
    the runner's _send) as soon as it is made, and is in no frame while the student's code runs; in this
    process, without ``send`` (the tests), it is kept and sent back as the result's ``extra``.

    Everything the runner does between or after the student's code is bound (as keyword defaults) before any
    student code runs, and the snapshot is restored before the runner reads the results: code that patched a
    module, a class or this module's globals during the call changes nothing of what is reported. A gradient
    case (``grad_args``) also back-propagates the given output gradients through the results inside the call
    (the student's backward code runs under the same alarm) and reports the gradients of those arguments as
    ``extra``."""
    if case is None:
        return None
    case_id, call = case["id"], case["call"]
    if stuck is not None and call in stuck:
        return (case_id, "timeout", "not tried: an earlier call of the same function ran out of time",
                ("other", "nothing"), (), (), ())
    guard = guard or _GUARD
    # -- the case, with its answers: only the grader's own code, bound above, runs until it is dropped
    sealed, spec = [], None
    for spec in case["stand_ins"]:
        sealed.append(_sealed(spec, guard))
    encoded = (case["args"], case["kwargs"], case["construct"], case["state"], case["consistency"],
               case.get("grad_args", ()), case.get("grad_outputs", ()))
    del case, spec
    if send is not None:
        _mask(_setmask, _graded_mask)
    status, error, result, extra, budget, pre = "ok", None, None, (), [16 << 20], ()
    grad_args, gradients, grad_mode = (), None, _grad_enabled()
    before = _len(seen)
    installed, args = [], []
    try:
        if helpers is not None:
            _exec(helpers, user_ns)  # the notebook's given helpers, from the release (grade_in_child did it before)
        args_e, kwargs_e, construct_e, state_e, consistency, grad_args, grad_outputs_e = encoded
        del encoded
        args = [_decode(a, user_ns) for a in args_e]
        kwargs = {k: _decode(v, user_ns) for k, v in kwargs_e}
        target = user_ns.get(call)
        if target is None:
            raise NameError(f"name '{call}' is not defined in the notebook")
        decoding = measuring = None
        if consistency is not None and consistency[0] == "evidence":
            measuring = consistency  # the grader measures the notebook's models itself, before the call
        elif consistency is not None:  # the grader decodes the model itself, before translate runs
            decoding = (consistency[2], *_source_batch(args[1], consistency[0]))
        construct = None if construct_e is None else _dict(construct_e)
        state = {k: _decode(v, user_ns) for k, v in state_e}
        # A gradient case: these arguments require grad, and the call's results are back-propagated.
        grad_args = _tuple(grad_args)
        grad_outputs = _tuple(_decode(g, user_ns) for g in grad_outputs_e)
        inputs = _tuple(_require_grad(args[i], True) for i in grad_args)
        # The stand-ins' callers: a global one defers to the one of the same name built before it, or to the
        # student's own function.
        global_stand_ins, attribute_stand_ins, kind, name, decide = [], [], None, None, None
        for kind, name, decide in sealed:
            if kind == "global":
                yours = _missing
                for built_name, built in global_stand_ins:
                    if built_name == name:
                        yours = built
                if yours is _missing:
                    installed.append((name, user_ns.get(name, _missing)))
                    yours = user_ns.get(name)
                global_stand_ins.append((name, _calling(yours, decide, name, guard)))
            else:
                attribute_stand_ins.append((name, _calling(None, decide, name, guard)))
        del sealed, kind, decide
        _alarm(case_cpu_s)
        # -- the student's code, from here to the end of the try block
        if construct is not None:
            target = target(**construct)
            if state:
                # Convert first: float64 weights loaded into float32 parameters would be rounded.
                target = target.to(next(iter(state.values())).dtype)
                target.load_state_dict(state, strict=True)
        for name, stand_in in global_stand_ins:
            user_ns[name] = stand_in
        for name, stand_in in attribute_stand_ins:
            _setattr(target, name, _module(_getattr(target, name), stand_in))
        del global_stand_ins, attribute_stand_ins
        if decoding is not None or measuring is not None:
            rebuilt, left = {}, []
            if send is None:
                pre = (_decode_afresh(args[0], user_ns, *decoding) if decoding is not None
                       else _measure_afresh(user_ns, measuring, keep=rebuilt))
            else:  # to the grader at once, with the alarm paused (a frame cut in two would end the run)
                send(_paused(("extra", case_id, _decode_afresh(args[0], user_ns, *decoding) if decoding is not None
                              else _measure_afresh(user_ns, measuring, keep=rebuilt)), left))
                _alarm(left[0] if left[0] > 0 else 0.001)
        if grad_args:
            _set_grad(True)  # (a cell may have switched gradients off for the whole notebook)
        result = target(*args, **kwargs)
        if grad_args:
            gradients = _gradients(result, inputs, grad_outputs)
        if measuring is not None and _len(measuring) > 6:  # after the call: the reported numbers are read already
            extra = (_measure_own(user_ns, measuring[6], rebuilt),)
    except _timeout as timeout:
        status, error = "timeout", _str(timeout)
        if stuck is not None:
            stuck.add(call)
    except _base as exc:  # the student's code may raise anything; it is data here
        _cancel()
        status = "error"
        try:
            error = _short(f"{_type(exc).__name__}: {exc}")
        except _base:
            error = _type(exc).__name__
    finally:
        _cancel()
        _set_grad(grad_mode)
        _restore(plan)
        _pop_modes()
    # -- from here on, nothing of the student's runs (describing a tensor calls no Python code of theirs)
    for name, original in installed:
        if original is _missing:
            user_ns.pop(name, None)
        else:
            user_ns[name] = original
    returned, after = ("other", "nothing"), ()
    if status == "ok":
        returned = _describe(result, budget)
        after = _tuple(_describe(arg, budget) if _type(arg) is _tensor else ("skip",) for arg in args)
        if grad_args:
            extra = (("no-gradients", gradients) if _type(gradients) is _str
                     else ("gradients", _tuple(_describe(g, budget) for g in gradients)))
    extra = (*pre, *extra)  # (in this process only: in the graded child, what came before the call was sent)
    forbidden = _tuple(_sorted(_set(op for op in seen[before:] if _type(op) is _str)))
    return case_id, status, error, returned, after, forbidden, extra


STANDIN = None  # the grader's stand-in model (standin.py next to this file), loaded before the cells


def _load_standin() -> None:
    global STANDIN
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin.py")
    if os.path.isfile(path):
        spec = importlib.util.spec_from_file_location("attention_course_standin", path)
        STANDIN = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(STANDIN)


# Seccomp: the system calls that start a program, per architecture (audit arch, execve, execveat).
_EXEC_SYSCALLS = {"x86_64": (0xC000003E, 59, 322), "aarch64": (0xC00000B7, 221, 281)}


def deny_new_programs() -> bool:
    """A seccomp filter, for this process and every process it starts: execve and execveat fail with EPERM,
    and so does any system call of another architecture's ABI (32-bit calls on x86_64). It cannot be
    removed. Audit hooks miss some ways of starting a program (``_posixsubprocess.fork_exec`` raises no
    event); the kernel does not. Returns False where this machine's architecture is not known here."""
    native = _EXEC_SYSCALLS.get(os.uname().machine)
    if native is None:
        return False
    arch, execve, execveat = native
    load, jump_eq, accept = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, eperm = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    _install_seccomp([
        (load, 0, 0, 4),  # the architecture
        (jump_eq, 1, 0, arch),
        (accept, 0, 0, eperm),
        (load, 0, 0, 0),  # the system call number
        (jump_eq, 3, 0, execve),
        (jump_eq, 2, 0, execveat),
        (0x35, 1, 0, 0x40000000),  # BPF_JMP|BPF_JGE|BPF_K: the x32 ABI's numbers
        (accept, 0, 0, allow),
        (accept, 0, 0, eperm),
    ])
    return True


# rt_sigaction, per architecture (audit arch, number).
_SIGACTION_SYSCALLS = {"x86_64": (0xC000003E, 13), "aarch64": (0xC00000B7, 134)}


def deny_signal_handlers() -> bool:
    """A seccomp filter, for this process and every process it starts: rt_sigaction may read a signal's handler
    but not set one (EPERM). Installed before the first cell, after the runner's own two alarm handlers: from then
    on no code of the student's can be a signal handler, which Python calls with the frame it interrupts (its
    locals readable) at any instruction, the grader's frames included. Returns False where this machine's
    architecture is not known here."""
    native = _SIGACTION_SYSCALLS.get(os.uname().machine)
    if native is None:
        return False
    arch, sigaction = native
    load, jump_eq, accept = 0x20, 0x15, 0x06
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    _install_seccomp([
        (load, 0, 0, 4),  # 0: the architecture (another's is the other filter's business)
        (jump_eq, 0, 6, arch),  # 1
        (load, 0, 0, 0),  # 2: the system call number
        (jump_eq, 0, 4, sigaction),  # 3
        (load, 0, 0, 24),  # 4: the low half of its second argument, the new action
        (jump_eq, 0, 3, 0),  # 5
        (load, 0, 0, 28),  # 6: the high half
        (jump_eq, 0, 1, 0),  # 7
        (accept, 0, 0, allow),  # 8: no new action: reading the handler
        (accept, 0, 0, eperm),  # 9
    ])
    return True


def _install_seccomp(program: list) -> None:
    import ctypes
    import struct

    filters = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters, len(filters))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    fprog = Program(len(program), ctypes.addressof(buffer))
    if libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP failed")


def _leak(objects) -> None:
    """Keep ``objects`` alive for the life of the process with no Python reference to them (they are not
    tracked by the garbage collector either): nothing can reach them to undo what they hold."""
    import ctypes

    for item in objects:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(item))


def _between_cases(user_ns: dict, helpers, plan: tuple, *, _set=signal.setitimer,
                   _timers=(signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF), _gc_off=gc.disable,
                   _exec=exec, _restore=_restore_with, _pop=_pop_modes, _mask=signal.pthread_sigmask,
                   _block=signal.SIG_BLOCK, _signals=signal.valid_signals()) -> None:
    """Before the graded child asks for a case: no timer of the student's left, the garbage collector off, the
    notebook's given helpers re-installed from the release (a definition they replace may be an object of the
    student's, whose ``__del__`` runs now, while no case is here), every snapshot namespace restored, no torch
    mode; then every signal blocked until the case, with its answers, has been dropped (see run_case)."""
    for timer in _timers:
        _set(timer, 0)
    _gc_off()
    if helpers is not None:
        _exec(helpers, user_ns)
    _restore(plan)
    _pop()
    _gc_off()
    for timer in _timers:
        _set(timer, 0)
    _mask(_block, _signals)


def grade_in_child(user_ns: dict, plan: tuple, helpers_source: str, phase: str, case_cpu_s: float, seen: list,
                   seal_problem: str, guard=None) -> None:
    """The graded child: serve the phase's cases. Ends the process. Every argument was bound before the
    first cell ran (the cells could have changed ``program``'s contents)."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                signal.signal(number, signal.SIG_DFL)
    for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
        signal.setitimer(timer, 0)
    gc.disable()
    gc.callbacks.clear()
    torch.set_num_threads(1)
    _pop_modes()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF, signal.SIGALRM})
    if seal_problem:
        _send(("broken-seal", seal_problem))
        os._exit(0)
    helpers = compile(helpers_source, "<given helpers>", "exec") if helpers_source else None
    _send(("ready", phase))
    stuck = set()  # a call that timed out once is not tried again: its other cases would time out too
    # One case at a time, and no frame holds it while the student's code runs (run_case drops it, and sends
    # what the grader measures before the call at once): frames are readable, and a case carries its stand-ins'
    # correct answers.
    while True:
        _between_cases(user_ns, helpers, plan)
        _send(("next",))
        outcome = run_case(_receive(), user_ns, None, seen, case_cpu_s, plan, stuck, guard, _send)
        if outcome is None:
            break
        _send(("result", *outcome))
        del outcome
    _send(("done",))
    os._exit(0)


def main(folder: Path) -> None:
    program = json.loads((folder / "program.json").read_text(encoding="utf-8"))
    (folder / "program.json").unlink()
    global _SIGNER
    _SIGNER = _make_signer(bytes.fromhex(program.pop("key")))
    sealed = program["phase"] == "sealed"
    seen: list = []  # the operators refused, in order; each graded call reports its own
    seal_problem = ""
    if sealed:
        seal_python_implementations(seen)
        with warnings.catch_warnings():  # "Overriding a previously registered kernel", once per kernel
            warnings.simplefilter("ignore")
            registrations, _ = seal_dispatcher(seen)
        _leak(registrations)
        del registrations
        seal_problem = _probe_seal(seen)
        seen.clear()
        if not deny_new_programs():
            seal_problem = seal_problem or f"no seccomp filter for the architecture {os.uname().machine}"
    _load_standin()
    # Warm up: the first use of some torch paths imports modules (seconds); do it before any limit.
    torch.zeros(2, 2).add(1).exp().sum(-1)
    runner_pid = os.getpid()
    global _GUARD
    guarded_ids: set = set()
    _GUARD = _make_guard(guarded_ids)
    guard = _GUARD
    sys.setrecursionlimit = _bounded_recursion_limit
    plan = _snapshot()
    # Bound here, as locals of this frame: what the graded child needs, and what it needs before it has
    # restored the snapshot. No student code can rebind a local of this frame.
    fork, exit_now, restore, child = os.fork, os._exit, _restore_with, grade_in_child
    helpers_source, phase, case_cpu_s = str(program["helpers"]), str(program["phase"]), float(program["case_cpu_s"])
    mask, block, every_signal = signal.pthread_sigmask, signal.SIG_BLOCK, signal.valid_signals()
    protected = tuple(value for value in globals().values() if isinstance(value, types.FunctionType))
    signal.signal(signal.SIGPROF, _on_cpu)  # the runner's two alarm handlers, the only ones from now on
    signal.signal(signal.SIGALRM, _on_wall)
    deny_signal_handlers()
    sys.addaudithook(_make_hook(runner_pid, sealed, set(), protected, guarded_ids))
    shell = _shell()
    user_ns = shell.user_ns
    run_cells(shell, program["cells"], folder, program["cell_cpu_s"], sealed)
    graded = True  # (read by the signer: no student code can set a local of this frame)
    pid = fork()
    if pid == 0:
        mask(block, every_signal)
        restore(plan)
        try:
            child(user_ns, plan, helpers_source, phase, case_cpu_s, seen, seal_problem, guard)
        except BaseException as error:  # report, then end: nothing after this may run student code
            with contextlib.suppress(BaseException):
                _send(("runner-error", f"{type(error).__name__}: {error}"[:500]))
        exit_now(0)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    exit_now(0)


if __name__ == "__main__":
    from pathlib import Path

    CHANNEL_OUT, CHANNEL_IN = int(sys.argv[2]), int(sys.argv[3])
    main(Path(sys.argv[1]))
