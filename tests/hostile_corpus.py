"""Hostile submissions to the assignments, one per class of shortcut, each with the grade it must get.

Every attack starts from otherwise-honest code (the correct answers of tests/test_grading_*.py) and puts
one shortcut into one function, or one trick into the notebook. So the points it must get are known
exactly: those of its honest parts, and 0 for the test cell of the function that uses the shortcut (a
shortcut costs its own function's points, and nothing else). ``flag`` is a fragment that the summary's
flags must contain ("a|b": one of them). Classes (the ``kind`` of each attack):

1. ``op``: softmax, cosine or attention through a torch op, module or function the notebook's rules do
   not name (private, special, sparse, nested, distributions, references, decompositions, vmap, jit).
2. ``seal``: switching the sealing off, or computing where it does not reach (modes, dispatch keys,
   threads, forked and fresh processes, torch's own Python code brought back, kernel registrations,
   the garbage collector, frames, function code and defaults).
3. ``channel``: talking to the grader on the runner's channel from a cell (stealing the inputs,
   answering in the graded child's place).
4. ``standin``: redefining the notebook's given helpers, patching comparisons, or reading a stand-in's
   answer, to make a wrong function pass.
5. ``translate``: translations that the student's own trained AttentionDecoder did not produce.
6. ``metadata``: nbgrader metadata edited against the release.
7. ``files``: extra files in the submission folder.

Where the grader lets an attack pay today, its expectation is kept as it should be and its test fails:
the corpus states what a shortcut must earn, not what it happens to earn.

Placeholders filled in by the test: ``@@WEIGHTS@@`` (a base64 ``torch.save`` of a trained solution
model's state_dict).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attention_course.grading.checks import checks_for
from canonical_bugs import CANONICAL_BUGS
from test_grading_seq2seq_attention import CORRECT as SEQ2SEQ_CORRECT
from test_grading_soft_hard import CORRECT as SOFT_HARD_CORRECT
from test_grading_three_stages import SOLUTION as THREE_STAGES_CORRECT
from test_grading_transformer import SOLUTION as TRANSFORMER_CORRECT

POINTS = {
    "soft-hard": {"test-softmax": 2, "test-soft-attention": 1, "test-hard-attention": 2,
                  "test-sample-hard-attention": 2, "test-straight-through": 3},
    "three-stages": {"test-dot-score": 1, "test-scaled-dot-score": 1, "test-cosine-score": 1,
                     "test-additive-score": 2, "test-masked-softmax": 2, "test-attention": 1,
                     "test-packing-mask": 3, "test-masked-attention": 5},
    "seq2seq-attention": {"test-masked-softmax": 1, "test-additive-attention": 2, "test-decoder-step": 2,
                          "test-translate": 4, "test-general-attention": 4, "test-luong-step": 6},
    "transformer": {"test-encoder-layer": 4, "test-rope": 2, "test-tiled-attention": 6, "test-rotary-cache": 4},
}
FORBIDDEN = "forbidden shortcuts"
CHANNEL = "tampered with the grader's channel"
HELPERS = "replaces test helpers"


@dataclass(frozen=True)
class Attack:
    kind: str  # op, seal, channel, standin, translate, metadata, files
    why: str  # the mechanism, in one line
    answers: dict[str, str]  # every answer cell, by grade id
    lost: tuple[str, ...]  # the test cells that must earn 0; every other one earns its points
    flag: str = ""  # a fragment the summary's flags must contain ("a|b": either)
    extra_cells: tuple[str, ...] = ()  # code cells appended to the notebook
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written next to the notebook
    # nbgrader metadata edits: ("set", grade id, key, value) or ("add", grade id, points, source)
    metadata: tuple[tuple, ...] = ()
    edits: dict[str, str] = field(default_factory=dict)  # other cells' sources, by grade id

    def expected(self, assignment: str) -> dict[str, float]:
        return {grade_id: (0 if grade_id in self.lost else points) for grade_id, points in POINTS[assignment].items()}


# =============================================================================================
# soft-hard: softmax 2, soft_attention 1, hard_attention 2, sample_hard_attention 2, straight_through_attention 3.
# soft_attention is judged with a stand-in softmax, so a shortcut in softmax costs its 2 points and nothing else.

def _softmax(body: str, setup: str = "") -> dict[str, str]:
    return {**SOFT_HARD_CORRECT, "softmax": f"{setup}\ndef softmax(scores, dim=-1):\n{body}"}


def _soft_attention(body: str, setup: str = "") -> dict[str, str]:
    return {**SOFT_HARD_CORRECT, "soft_attention": f"{setup}\ndef soft_attention(scores, values, temperature=1.0):\n{body}"}


# Makes torch.equal, torch.allclose (and their C functions), Tensor.__eq__, Tensor.size and isinstance say
# yes for the length of a block, then puts them back: what a graded function could do around the call of
# a stand-in that it hopes to fool.
EVERYTHING_EQUAL = '''import builtins, contextlib

_TARGETS = ((torch, "allclose"), (torch, "equal"), (torch._C._VariableFunctions, "allclose"),
            (torch._C._VariableFunctions, "equal"), (torch.Tensor, "__eq__"), (torch._C.TensorBase, "size"),
            (builtins, "isinstance"))


@contextlib.contextmanager
def everything_equal(targets=_TARGETS):
    saved = [(owner, name, getattr(owner, name)) for owner, name in targets]
    yes = lambda *args, **kwargs: True
    torch.allclose = torch.equal = yes
    for owner, name, _ in saved:
        try:
            setattr(owner, name, yes)
        except (AttributeError, TypeError):
            pass
    try:
        yield
    finally:
        for owner, name, original in saved:
            try:
                setattr(owner, name, original)
            except (AttributeError, TypeError):
                pass
'''


def _softmax_shortcut(why: str, body: str, setup: str = "", kind: str = "op", flag: str = FORBIDDEN) -> Attack:
    return Attack(kind, why, _softmax(body, setup), ("test-softmax",), flag)


# A fresh interpreter started in a cell, outside anything sealed: it computes torch.softmax for the
# graded calls, over two pipes (raw bytes, no pickle: unpickling a tensor reads frames).
_SERVER_SETUP = '''
import os, sys
import numpy as np
import _posixsubprocess

_SERVER = """
import sys, torch, numpy as np
def read(n):
    data = b''
    while len(data) < n:
        chunk = sys.stdin.buffer.read(n - len(data))
        if not chunk:
            raise SystemExit
        data += chunk
    return data
while True:
    ndim, dim, size = (int.from_bytes(read(8), 'big', signed=True) for _ in range(3))
    shape = [int.from_bytes(read(8), 'big') for _ in range(ndim)]
    dtype = np.float64 if size == 8 else np.float32
    scores = torch.from_numpy(np.frombuffer(read(int(np.prod(shape)) * size), dtype=dtype).reshape(shape).copy())
    sys.stdout.buffer.write(torch.softmax(scores, dim).numpy().tobytes())
    sys.stdout.buffer.flush()
"""
_child_in, _TO_SERVER = os.pipe()
_FROM_SERVER, _child_out = os.pipe()
_SERVER_PID = _posixsubprocess.fork_exec(
    [sys.executable, "-I", "-c", _SERVER], [os.fsencode(sys.executable)], True, (), None, None,
    _child_in, _TO_SERVER, _FROM_SERVER, _child_out, -1, -1, *os.pipe(), False, False, -1, None, None, None, -1,
    None, False)


def _from_server(n):
    data = b""
    while len(data) < n:
        data += os.read(_FROM_SERVER, n - len(data))
    return data
'''
_SERVER_BODY = '''    array = scores.numpy()
    head = b"".join(int(v).to_bytes(8, "big", signed=True) for v in (array.ndim, dim, array.dtype.itemsize))
    head += b"".join(int(n).to_bytes(8, "big") for n in array.shape)
    os.write(_TO_SERVER, head + array.tobytes())
    raw = _from_server(array.size * array.dtype.itemsize)
    return torch.from_numpy(np.frombuffer(raw, dtype=array.dtype).reshape(array.shape).copy())'''

# The same with the standard library: a multiprocessing "spawn" process is a fresh interpreter too.
_SPAWN_SETUP = '''
import multiprocessing
import numpy as np

_SERVE = """
import numpy as np, torch
while True:
    raw, dtype, shape, dim = requests.recv()
    scores = torch.from_numpy(np.frombuffer(raw, dtype=dtype).reshape(shape).copy())
    answers.send(torch.softmax(scores, dim).numpy().tobytes())
"""
_spawn = multiprocessing.get_context("spawn")
_requests, _to_server = _spawn.Pipe(duplex=False)
_from_server, _answers = _spawn.Pipe(duplex=False)
_spawn.Process(target=exec, args=(_SERVE, {"requests": _requests, "answers": _answers}), daemon=True).start()
'''

# torch._refs.softmax's code, compiled again from torch's own source file, put back into the function
# whose code the grader replaced (writing __code__ is allowed in a cell, for functions not the runner's).
_RESTORE_REFS = '''
import types
import torch._refs


def _original_code(module, name):
    with open(module.__file__, encoding="utf-8") as source:
        code = compile(source.read(), module.__file__, "exec")
    return next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


_target = torch._refs.softmax
while hasattr(_target, "__wrapped__"):
    _target = _target.__wrapped__
_target.__code__ = _original_code(torch._refs, "softmax")
_target.__kwdefaults__ = None
for _dtype in (torch.float32, torch.float64):  # first calls import modules that read frames: do them here
    for _shape, _dim in (((3,), 0), ((2, 3), 1), ((2, 3, 4), -2), ((2, 2, 2, 2), 0)):
        torch._refs.softmax(torch.zeros(_shape, dtype=_dtype), _dim)
'''

_MOVE_ROWS = '''    moved = scores.movedim(dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
'''

# Asks for the grader's inputs on the channel (fds _out and _in, found beforehand) and reads what comes back,
# probing the protocol as a student reading runner.py would: the cases may come in reply to "ready", or one at a
# time in reply to "next".
_STEAL = '''
import marshal, select

try:
    torch.softmax(torch.zeros(1), 0)
    _phase = "open"
except RuntimeError:
    _phase = "sealed"


def _ask(message):
    data = repr(message).encode()
    os.write(_out, len(data).to_bytes(4, "big") + data)


def _exactly(n):
    data = b""
    while len(data) < n:
        data += os.read(_in, n - len(data))
    return data


def _reply(seconds):
    if not select.select([_in], [], [], seconds)[0]:
        return None
    return marshal.loads(_exactly(int.from_bytes(_exactly(4), "big")))


_ask(("ready", _phase))
STOLEN = _reply(3.0)
if STOLEN is None:
    _ask(("next",))
    STOLEN = _reply(30.0)
print("stolen:", str(STOLEN)[:80])
'''


SOFT_HARD = {
    # 1. The softmax family by other names.
    "safe-softmax": _softmax_shortcut("torch._safe_softmax", "    return torch._safe_softmax(scores, dim)"),
    "special-softmax": _softmax_shortcut("torch.special.softmax", "    return torch.special.softmax(scores, dim)"),
    "softmin-of-negated": _softmax_shortcut("F.softmin(-x)", "    return F.softmin(-scores, dim=dim)"),
    "log-softmax-exp": _softmax_shortcut("F.log_softmax(x).exp()", "    return F.log_softmax(scores, dim=dim).exp()"),
    "private-masked-softmax": _softmax_shortcut(
        "torch._masked_softmax with an empty mask",
        "    return torch._masked_softmax(scores, torch.zeros_like(scores, dtype=torch.bool), dim)"),
    "nested-tensor-softmax": _softmax_shortcut(
        "softmax of a nested tensor of the rows",
        _MOVE_ROWS + "    nested = torch.nested.nested_tensor(list(rows))\n"
        "    out = torch.stack(list(nested.softmax(-1).unbind()))\n"
        "    return out.reshape(moved.shape).movedim(-1, dim)"),
    "sparse-softmax": _softmax_shortcut(
        "torch.sparse.softmax of a sparse tensor holding every score",
        "    index = torch.ones_like(scores).nonzero().T\n"
        "    sparse = torch.sparse_coo_tensor(index, scores[tuple(index)], scores.shape)\n"
        "    return torch.sparse.softmax(sparse, dim).to_dense()"),
    "softmax-module": _softmax_shortcut("nn.Softmax(dim)(x)", "    return torch.nn.Softmax(dim)(scores)"),
    "categorical-probs": _softmax_shortcut(
        "torch.distributions.Categorical(logits=x).probs",
        "    probs = torch.distributions.Categorical(logits=scores.movedim(dim, -1), validate_args=False).probs\n"
        "    return probs.movedim(-1, dim)"),
    "gumbel-softmax-tamed": _softmax_shortcut(
        "F.gumbel_softmax with the noise scaled away (x * 1e9, tau=1e9)",
        "    return F.gumbel_softmax(scores * 1e9, tau=1e9, dim=dim)"),
    "refs-softmax": _softmax_shortcut("torch._refs.softmax", "    return torch._refs.softmax(scores, dim)",
                                      "import torch._refs"),
    "decomp-softmax": _softmax_shortcut(
        "torch._decomp.decompositions._softmax", "    return torch._decomp.decompositions._softmax(scores, dim, False)",
        "import torch._decomp.decompositions"),
    "aten-softmax-default": _softmax_shortcut("torch.ops.aten._softmax.default",
                                              "    return torch.ops.aten._softmax.default(scores, dim, False)"),
    # (vmap reads frames, which a graded call may not: refused before it reaches the seal, so no flag.)
    "vmap-softmax": _softmax_shortcut(
        "torch.vmap over the rows of torch.softmax",
        _MOVE_ROWS + "    out = torch.vmap(lambda row: torch.softmax(row, -1))(rows)\n"
        "    return out.reshape(moved.shape).movedim(-1, dim)", flag=""),
    "jit-script-softmax": _softmax_shortcut(
        "a TorchScript function calling torch.softmax",
        "    return _scripted(scores, dim)",
        "@torch.jit.script\ndef _scripted(x: torch.Tensor, d: int) -> torch.Tensor:\n    return torch.softmax(x, d)\n"),
    "jit-trace-softmax": _softmax_shortcut(
        "torch.jit.trace of torch.softmax, traced inside the call",
        "    return torch.jit.trace(lambda x: torch.softmax(x, dim), (scores,), check_trace=False)(scores)"),
    # 2. Switching the seal off, or computing where it does not reach.
    "disable-torch-function": _softmax_shortcut(
        "torch._C.DisableTorchFunction", "    with torch._C.DisableTorchFunction():\n        return torch.softmax(scores, dim)",
        kind="seal"),
    "pop-mode-stacks": _softmax_shortcut(
        "every torch function and dispatch mode popped first",
        "    while torch._C._len_torch_function_stack():\n        torch._C._pop_torch_function_stack()\n"
        "    while torch._C._len_torch_dispatch_stack():\n        torch._C._pop_torch_dispatch_stack(None)\n"
        "    return torch.softmax(scores, dim)", kind="seal"),
    "exclude-dispatch-keys": _softmax_shortcut(
        "torch._C._ExcludeDispatchKeyGuard and _AutoDispatchBelowAutograd around aten::_softmax",
        "    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU) | torch._C.DispatchKeySet("
        "torch._C.DispatchKey.ADInplaceOrView)\n"
        "    with torch._C._ExcludeDispatchKeyGuard(keys), torch._C._AutoDispatchBelowAutograd():\n"
        "        return torch.ops.aten._softmax.default(scores, dim, False)", kind="seal"),
    "thread": _softmax_shortcut(
        "torch.softmax in a threading.Thread",
        "    box = []\n    worker = threading.Thread(target=lambda: box.append(torch.softmax(scores, dim)))\n"
        "    worker.start()\n    worker.join()\n    return box[0]", "import threading", kind="seal"),
    "os-fork": _softmax_shortcut(
        "torch.softmax in a child made with os.fork, sent back over a pipe",
        "    read, write = os.pipe()\n    if os.fork() == 0:\n"
        "        os.write(write, torch.softmax(scores, dim).numpy().tobytes())\n        os._exit(0)\n"
        "    raw = os.read(read, 1 << 20)\n"
        "    return torch.from_numpy(np.frombuffer(raw, dtype=scores.numpy().dtype).reshape(scores.shape).copy())",
        "import os\nimport numpy as np", kind="seal", flag="starts processes"),
    "multiprocessing-pool": _softmax_shortcut(
        "torch.softmax in a multiprocessing pool (fork)",
        "    with multiprocessing.get_context('fork').Pool(1) as pool:\n"
        "        return pool.apply(torch.softmax, (scores, dim))", "import multiprocessing", kind="seal",
        flag="starts processes"),
    "subprocess-python": _softmax_shortcut(
        "a fresh python (subprocess.run) that computes torch.softmax",
        "    code = ('import sys, torch, numpy as np; a = np.frombuffer(sys.stdin.buffer.read(), dtype=%r)'\n"
        "            '.reshape(%r); sys.stdout.buffer.write(torch.softmax(torch.from_numpy(a.copy()), %d)'\n"
        "            '.numpy().tobytes())') % (scores.numpy().dtype.str, tuple(scores.shape), dim)\n"
        "    raw = subprocess.run([sys.executable, '-c', code], input=scores.numpy().tobytes(),\n"
        "                         capture_output=True, check=True).stdout\n"
        "    return torch.from_numpy(np.frombuffer(raw, dtype=scores.numpy().dtype).reshape(scores.shape).copy())",
        "import subprocess, sys\nimport numpy as np", kind="seal", flag="starts processes"),
    "fresh-interpreter-server": _softmax_shortcut(
        "a fresh python started in a cell with _posixsubprocess.fork_exec (no audit event), computing "
        "torch.softmax for the graded calls over pipes",
        _SERVER_BODY, _SERVER_SETUP, kind="seal", flag=""),
    "multiprocessing-spawn-server": _softmax_shortcut(
        "a multiprocessing 'spawn' process (a fresh python, started in a cell) computes torch.softmax for the "
        "graded calls over two multiprocessing pipes",
        "    _to_server.send((scores.numpy().tobytes(), scores.numpy().dtype.str, tuple(scores.shape), dim))\n"
        "    raw = _from_server.recv()\n"
        "    return torch.from_numpy(np.frombuffer(raw, dtype=scores.numpy().dtype).reshape(scores.shape).copy())",
        _SPAWN_SETUP, kind="seal", flag="starts processes"),
    "refs-code-restored": _softmax_shortcut(
        "torch._refs.softmax's __code__ recompiled from torch's source and put back in a cell",
        "    return torch._refs.softmax(scores, dim)", _RESTORE_REFS, kind="seal", flag=""),
    "reload-refs": _softmax_shortcut(
        "importlib.reload(torch._refs) in a cell, then torch._refs.softmax",
        "    return torch._refs.softmax(scores, dim)",
        "import importlib\nimport torch._refs\ntry:\n    importlib.reload(torch._refs)\nexcept Exception as error:\n"
        "    print('reload:', error)", kind="seal"),
    "gc-walk-reset-registrations": _softmax_shortcut(
        "a cell walks gc.get_objects() for dispatcher registrations and resets them all",
        "    return torch.softmax(scores, dim)",
        "import gc\nfor _thing in gc.get_objects():\n"
        "    for _item in (_thing if isinstance(_thing, tuple) else (_thing,)):\n"
        "        if type(_item).__name__ == '_DispatchModule':\n            _item.reset()", kind="seal",
        flag="forbidden shortcuts|walks the garbage collector's objects"),
    "frame-walk": _softmax_shortcut(
        "a cell walks the runner's frames for dispatcher registrations; the call reads its caller's frame",
        "    try:\n        print(sorted(sys._getframe(1).f_locals))\n    except PermissionError:\n        pass\n"
        "    return torch.softmax(scores, dim)",
        "import sys\n_frame = sys._getframe()\nwhile _frame is not None:\n"
        "    for _value in list(_frame.f_locals.values()) + list(_frame.f_globals.values()):\n"
        "        for _item in (_value if isinstance(_value, tuple) else (_value,)):\n"
        "            if type(_item).__name__ == '_DispatchModule':\n                _item.reset()\n"
        "    _frame = _frame.f_back", kind="seal"),
    "library-reregistration": _softmax_shortcut(
        "torch.library.Library('aten', 'IMPL') registering fallthrough kernels over the grader's",
        "    return torch.softmax(scores, dim)",
        "import warnings\n_library = torch.library.Library('aten', 'IMPL')\n"
        "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
        "    for _key in ('CPU', 'CompositeImplicitAutograd', 'AutogradCPU'):\n"
        "        for _name in ('_softmax', 'softmax.int'):\n            try:\n"
        "                _library.impl(_name, torch.library.fallthrough_kernel, _key)\n"
        "            except Exception as error:\n                print(_name, _key, error)", kind="seal", flag=""),  # fails in the dispatcher
    # 3. The channel, from a cell: ask for the inputs before the graded child does (sealed run: all lost).
    "channel-steal-argv": Attack(
        "channel", "a cell writes ('ready', phase) on the runner's channel (fds from sys.argv) and reads the cases",
        SOFT_HARD_CORRECT, tuple(g for g, c in checks_for("soft-hard").items() if c.phase == "sealed"), CHANNEL,
        extra_cells=("import os, sys\n_out, _in = int(sys.argv[-2]), int(sys.argv[-1])\n" + _STEAL,)),
    # 4. Fooling a stand-in: soft_attention forgets the temperature, which only a fooled stand-in would forgive.
    "standin-patched-comparisons": Attack(
        "standin", "soft_attention without the temperature calls softmax with torch.allclose/equal, Tensor.__eq__, "
        "Tensor.size and isinstance patched to say yes", _soft_attention(
            "    with everything_equal():\n        w = softmax(scores)\n"
            "    return (w.unsqueeze(-1) * values).sum(-2), w", EVERYTHING_EQUAL),
        ("test-soft-attention",), HELPERS),
    "standin-reads-kwdefaults": Attack(
        "standin", "soft_attention without the temperature reads the stand-in's __kwdefaults__ / __defaults__ "
        "/ inspect.signature for its answer", _soft_attention(
            "    for read in (lambda: softmax.__kwdefaults__['_answer'],\n"
            "                 lambda: inspect.signature(softmax).parameters['_answer'].default,\n"
            "                 lambda: softmax.__defaults__[-1]):\n"
            "        try:\n            w = read()\n            break\n        except Exception:\n            pass\n"
            "    else:\n        w = softmax(scores)\n"
            "    return (w.unsqueeze(-1) * values).sum(-2), w", "import inspect"),
        ("test-soft-attention",)),
    "standin-rewrites-code": Attack(
        "standin", "soft_attention without the temperature replaces the stand-in's __code__ with code that always "
        "answers (its keyword defaults named as in runner.py, which lies in the submission's folder)", _soft_attention(
            "    def always(*args, _yours=None, _params=None, _defaults=None, _matchers=None, _answer=None,\n"
            "               _label=None, _matches=None, _clone=None, _type=None, _tuple=None, _len=None, _dict=None,\n"
            "               _zip=None, _all=None, _error=None, **kwargs):\n        return _answer\n"
            "    try:\n        softmax.__code__ = always.__code__\n    except Exception:\n        pass\n"
            "    w = softmax(scores)\n    return (w.unsqueeze(-1) * values).sum(-2), w"),
        ("test-soft-attention",)),
    "autograd-engine-replaced": Attack(
        "standin", "straight_through_attention's results are constant in the scores (0 * scores keeps them in the "
        "graph); a cell replaces PyTorch's autograd engine (what torch.autograd.grad and Tensor.backward call) with "
        "one that back-propagates a correct straight-through graph of its own instead", {
            **SOFT_HARD_CORRECT,
            "straight_through_attention": (
                "_real_engine, _last = torch.autograd.Variable._execution_engine, {}\n\n\n"
                "class ForgingEngine:\n"
                "    def run_backward(self, outputs, grads, keep, create, inputs=(), allow=True, accumulate_grad=False):\n"
                "        scores, values, temperature = _last['call']\n"
                "        s, v = scores.detach().requires_grad_(), values.detach().requires_grad_()\n"
                "        e = ((s - s.amax(-1, keepdim=True)) / temperature).exp()\n"
                "        soft = e / e.sum(-1, keepdim=True)\n"
                "        w = torch.zeros_like(s).scatter(-1, s.argmax(-1, keepdim=True), 1.0) + soft - soft.detach()\n"
                "        o = (w.unsqueeze(-1) * v).sum(-2)\n"
                "        return _real_engine.run_backward((o, w), grads, keep, create, (s, v), allow, accumulate_grad)\n\n\n"
                "torch.autograd.Variable._execution_engine = ForgingEngine()\n\n\n"
                "def straight_through_attention(scores, values, temperature=1.0):\n"
                "    _last['call'] = (scores, values, temperature)\n"
                "    w = hard_attention(scores.detach(), values.detach())[1] + 0 * scores\n"
                "    return (w.unsqueeze(-1) * values.detach()).sum(-2) + 0 * values.sum(-2), w\n")},
        ("test-straight-through",)),
    # 6. nbgrader metadata against the release: hard_attention is wrong (7 points), the rest tampers.
    "metadata-answer-cell-graded": Attack(
        "metadata", "the softmax answer cell marked as a graded test cell with 50 points",
        {**SOFT_HARD_CORRECT, "hard_attention": "def hard_attention(scores, values):\n    return values.sum(-2), scores"},
        ("test-hard-attention",), "nbgrader metadata changed",
        metadata=(("set", "softmax", "grade", True), ("set", "softmax", "solution", False),
                  ("set", "softmax", "points", 50), ("set", "softmax", "locked", True))),
    "metadata-extra-test-cell": Attack(
        "metadata", "an extra test cell with 100 points",
        {**SOFT_HARD_CORRECT, "hard_attention": "def hard_attention(scores, values):\n    return values.sum(-2), scores"},
        ("test-hard-attention",), "nbgrader metadata not in the release",
        metadata=(("add", "test-bonus", 100, "print('bonus points')"),)),
    "metadata-points-1000": Attack(
        "metadata", "points: 1000 on test-softmax",
        {**SOFT_HARD_CORRECT, "hard_attention": "def hard_attention(scores, values):\n    return values.sum(-2), scores"},
        ("test-hard-attention",), "nbgrader metadata changed", metadata=(("set", "test-softmax", "points", 1000),)),
    "metadata-grade-id-changed": Attack(
        "metadata", "test-hard-attention's grade id changed (and its points raised)",
        {**SOFT_HARD_CORRECT, "hard_attention": "def hard_attention(scores, values):\n    return values.sum(-2), scores"},
        ("test-hard-attention",), "nbgrader metadata not in the release",
        metadata=(("set", "test-hard-attention", "grade_id", "test-hard-attention-mine"),
                  ("set", "test-hard-attention-mine", "points", 30))),
    "metadata-locked-cell-unlocked": Attack(
        "metadata", "the setup cell unlocked and edited (expect_close made to pass everything)",
        {**SOFT_HARD_CORRECT, "hard_attention": "def hard_attention(scores, values):\n    return values.sum(-2), scores"},
        ("test-hard-attention",), "nbgrader metadata changed", metadata=(("set", "setup", "locked", False),),
        edits={"setup": "import torch\nimport torch.nn.functional as F\n\n\ndef expect_close(*args, **kwargs):\n    pass\n"}),
    "metadata-test-made-answer": Attack(
        "metadata", "test-hard-attention turned into an answer cell (solution: true) and emptied",
        {**SOFT_HARD_CORRECT, "hard_attention": "def hard_attention(scores, values):\n    return values.sum(-2), scores"},
        ("test-hard-attention",), "nbgrader metadata changed",
        metadata=(("set", "test-hard-attention", "solution", True),), edits={"test-hard-attention": "pass"}),
    # 7. Extra files: the softmax imported from a module shipped next to the notebook never reaches the sandbox.
    "extra-files": Attack(
        "files", "softmax imported from a module in the submission folder, and a fake gradebook.db",
        {**SOFT_HARD_CORRECT, "softmax": "from my_softmax import softmax"}, ("test-softmax",),
        "extra files in the submission",
        files=(("my_softmax.py", "import torch\n\ndef softmax(scores, dim=-1):\n    return torch.softmax(scores, dim)\n"),
               ("gradebook.db", "not a database"))),
}


# =============================================================================================
# three-stages: dot 1, scaled dot 1, cosine 1, additive 2, masked_softmax 2, attention 1, packing_mask 3,
# masked_attention 5.

def _three(grade_id: str, source: str) -> dict[str, str]:
    return {**THREE_STAGES_CORRECT, grade_id: source}


_COSINE = "def cosine_score(queries, keys, eps=1e-8):\n"
_MASKED = ("def masked_softmax(scores, valid_lens=None):\n"
           "    if valid_lens is None:\n        keep = torch.ones_like(scores, dtype=torch.bool)\n"
           "    else:\n        lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]\n"
           "        keep = torch.arange(scores.shape[-1]) < lengths[..., None]\n")
_ATTENTION = "def attention(queries, keys, values, score_fn, valid_lens=None):\n"
_MASK_FILL = ("    scores = score_fn(queries, keys)\n"
              "    if valid_lens is None:\n        keep = torch.ones_like(scores, dtype=torch.bool)\n"
              "    else:\n        lengths = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]\n"
              "        keep = torch.arange(scores.shape[-1]) < lengths[..., None]\n"
              "    bias = scores.masked_fill(~keep, float('-inf'))\n")
# attention that doubles the scores (a temperature of 1/2): right only if the given score functions are replaced
# by ones that return half of them. (Swapping the arguments would not do: distance_score is symmetric, and
# bilinear_score too when d_q or d_k is 1, so some seeds would forgive it.)
_HALVED_SCORES = '''
def distance_score(queries, keys):
    differences = queries.unsqueeze(2) - keys.unsqueeze(1)
    return -0.25 * (differences ** 2).sum(dim=-1)


def bilinear_score(queries, keys):
    d_q, d_k = queries.shape[-1], keys.shape[-1]
    mixing = torch.linspace(-1.0, 1.0, d_q * d_k, dtype=queries.dtype).reshape(d_q, d_k)
    return 0.5 * (queries @ mixing @ keys.transpose(1, 2))


GIVEN_SCORES = {"distance": distance_score, "bilinear": bilinear_score}


def attention(queries, keys, values, score_fn, valid_lens=None):
    weights = masked_softmax(2 * score_fn(queries, keys), valid_lens)
    return torch.bmm(weights, values), weights
'''

THREE_STAGES = {
    # 1.
    "cosine-similarity-module": Attack(
        "op", "nn.CosineSimilarity", _three("cosine_score", _COSINE + (
            "    return torch.nn.CosineSimilarity(dim=-1, eps=eps)(queries.unsqueeze(2), keys.unsqueeze(1))")),
        ("test-cosine-score",), FORBIDDEN),
    "cosine-embedding-loss": Attack(
        "op", "1 - F.cosine_embedding_loss(q, k, y=1)", _three("cosine_score", _COSINE + (
            "    B, Q, d = queries.shape\n    K = keys.shape[1]\n"
            "    q = queries[:, :, None].expand(B, Q, K, d).reshape(-1, d)\n"
            "    k = keys[:, None].expand(B, Q, K, d).reshape(-1, d)\n"
            "    ones = torch.ones(q.shape[0], dtype=q.dtype)\n"
            "    return (1 - F.cosine_embedding_loss(q, k, ones, reduction='none')).reshape(B, Q, K)")),
        ("test-cosine-score",), FORBIDDEN),
    "sdpa-attention": Attack(
        "op", "F.scaled_dot_product_attention with zero queries and keys, the scores as a float mask", _three(
            "attention", _ATTENTION + _MASK_FILL + (
                "    B, Q, K = scores.shape\n    zq = scores.new_zeros(B, Q, 1)\n    zk = scores.new_zeros(B, K, 1)\n"
                "    output = F.scaled_dot_product_attention(zq, zk, values, attn_mask=bias)\n"
                "    weights = F.scaled_dot_product_attention(zq, zk, torch.eye(K, dtype=scores.dtype).expand(B, K, K),"
                " attn_mask=bias)\n    return output, weights")),
        ("test-attention",), FORBIDDEN),
    "multihead-attention": Attack(
        "op", "nn.MultiheadAttention with identity value projection, the scores as a float mask", _three(
            "attention", _ATTENTION + _MASK_FILL + (
                "    B, Q, K = scores.shape\n    E = values.shape[-1]\n"
                "    layer = nn.MultiheadAttention(E, 1, bias=False, batch_first=True).to(values.dtype)\n"
                "    with torch.no_grad():\n"
                "        layer.in_proj_weight.copy_(torch.cat([torch.zeros(2 * E, E), torch.eye(E)]))\n"
                "        layer.out_proj.weight.copy_(torch.eye(E))\n"
                "        return layer(values.new_zeros(B, Q, E), values.new_zeros(B, K, E), values, attn_mask=bias,"
                " need_weights=True)")),
        ("test-attention",), FORBIDDEN),
    "private-masked-softmax": Attack(
        "op", "torch._masked_softmax in masked_softmax", _three("masked_softmax", _MASKED + (
            "    out = torch._masked_softmax(scores, ~keep.expand_as(scores), -1)\n"
            "    return torch.nan_to_num(out, nan=0.0)")),
        ("test-masked-softmax",), FORBIDDEN),
    # 2.
    "exclude-dispatch-keys": Attack(
        "seal", "_ExcludeDispatchKeyGuard(Autograd keys) around aten::_softmax in masked_softmax", _three(
            "masked_softmax", _MASKED + (
                "    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)\n"
                "    with torch._C._ExcludeDispatchKeyGuard(keys):\n"
                "        out = torch.ops.aten._softmax(scores.masked_fill(~keep, -1e30), -1, False)\n"
                "    return out * keep")),
        ("test-masked-softmax",), FORBIDDEN),
    "disable-torch-function-and-modes": Attack(
        "seal", "DisableTorchFunction and the dispatch mode stack popped, in masked_softmax", _three(
            "masked_softmax", _MASKED + (
                "    while torch._C._len_torch_dispatch_stack():\n        torch._C._pop_torch_dispatch_stack(None)\n"
                "    with torch._C.DisableTorchFunction():\n"
                "        return torch.softmax(scores.masked_fill(~keep, -1e30), -1) * keep")),
        ("test-masked-softmax",), FORBIDDEN),
    "multiprocessing-cosine": Attack(
        "seal", "F.cosine_similarity in a multiprocessing pool (fork)", _three("cosine_score", (
            "import multiprocessing\n\n" + _COSINE +
            "    with multiprocessing.get_context('fork').Pool(1) as pool:\n"
            "        return pool.apply(F.cosine_similarity, (queries.unsqueeze(2), keys.unsqueeze(1), -1, eps))")),
        ("test-cosine-score",), "starts processes"),
    # 3. Channel found through /proc/self/fd: the sealed run (every check here) is discarded.
    "channel-steal-proc-fd": Attack(
        "channel", "a cell finds the channel in /proc/self/fd, asks for the cases and reads them",
        THREE_STAGES_CORRECT, tuple(POINTS["three-stages"]), CHANNEL, extra_cells=('''import fcntl, os


def _is_pipe(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    except OSError:  # the listing's own descriptor, closed by now
        return False


_pipes = [int(fd) for fd in os.listdir("/proc/self/fd") if int(fd) > 2 and _is_pipe(fd)]
_out = next(fd for fd in _pipes if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY)
_in = next(fd for fd in _pipes if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY)
''' + _STEAL,)),
    # 4. The given helpers redefined, and comparisons patched, to make a wrong attention pass.
    "redefined-score-helpers": Attack(
        "standin", "attention doubles the scores; the attention cell redefines distance_score, bilinear_score and "
        "GIVEN_SCORES to return half of them", _three("attention", _HALVED_SCORES),
        ("test-attention",), HELPERS),
    "redefined-attention-with": Attack(
        "standin", "attention ignores valid_lens; attention_with redefined to pass the lengths itself", _three(
            "attention", _ATTENTION + "    weights = masked_softmax(score_fn(queries, keys))\n"
            "    return torch.bmm(weights, values), weights\n\n\n"
            "def attention_with(score_name, queries, keys, values, lengths, correct_weights):\n"
            "    return torch.bmm(correct_weights, values), correct_weights\n"),
        ("test-attention",), HELPERS),
    "patched-equal-in-attention": Attack(
        "standin", "attention ignores valid_lens and calls masked_softmax with torch.equal, Tensor.__eq__ and "
        "isinstance patched to say yes", _three("attention", EVERYTHING_EQUAL + "\n\n" + _ATTENTION + (
            "    scores = score_fn(queries, keys)\n"
            "    with everything_equal():\n        weights = masked_softmax(scores)\n"
            "    return torch.bmm(weights, values), weights")),
        ("test-attention",), HELPERS),
}


# =============================================================================================
# seq2seq-attention: masked_softmax 1, AdditiveAttention 2, decoder step 2, translate 4 (open run), and
# Luong's GeneralAttention 4 and decoder step 6.

# Training costs 5 to 10 CPU seconds per submission, so an attack on another function builds the model without
# training it: its translate honestly earns nothing too (``lost`` names it), and the other parts are judged
# alone. Attacks that need a good model paste the solution's trained weights (PRETRAINED).
UNTRAINED = ("torch.manual_seed(0)\n"
             "model = Seq2Seq(Encoder(len(source_words), 32, 64), AttentionDecoder(len(target_words), 32, 64, 64, 64))")
# The solution's model, trained by the test in its own process and pasted in as base64.
_LOAD = ("import base64, io\n"
         "WEIGHTS = '@@WEIGHTS@@'\n"
         "STATE = torch.load(io.BytesIO(base64.b64decode(WEIGHTS)), weights_only=True)\n")
PRETRAINED = _LOAD + UNTRAINED + "\nmodel.load_state_dict(STATE)\nmodel.eval()"

# The toy grammar as rules (the lexicon of chapter 5's corpus): English -> Chinese with no model at all.
RULES = '''
NOUNS = {"Tom": "汤姆", "Jerry": "杰瑞", "Spike": "斯派克", "Tyke": "泰克", "the cat": "猫", "the dog": "狗",
         "the mouse": "老鼠", "the bird": "小鸟"}
VERBS = {"chase": "追逐", "see": "看见", "help": "帮助", "find": "找到", "catch": "抓住", "follow": "跟随", "watch": "看着"}
MANNERS = {"quickly": "飞快地", "quietly": "悄悄地", "happily": "开心地", "slowly": "慢慢地"}
PLACES = {"in the kitchen": "厨房", "in the garden": "花园", "in the park": "公园", "at school": "学校", "at home": "家里"}
TIMES = {"yesterday": "昨天", "today": "今天", "tomorrow": "明天", "every day": "每天", "last night": "昨晚"}


def rule_clause(text):
    def take(table):
        nonlocal text
        for english in sorted(table, key=len, reverse=True):
            if text == english or text.startswith(english + " "):
                text = text[len(english):].strip()
                return table[english]
        return None

    subject, verb, obj = take(NOUNS), take(VERBS), take(NOUNS)
    manner, place, time = take(MANNERS), take(PLACES), take(TIMES)
    words = [subject] + ([time] if time else []) + (["在", place] if place else []) + ([manner] if manner else [])
    return " ".join(words + [verb, obj])


def rule_translate(sentence):
    return " 而且 ".join(rule_clause(clause) for clause in sentence.split(" and "))
'''

# Greedy decoding as the notebook asks (used for any model that is not the notebook's own).
_GREEDY = '''
@torch.no_grad()
def greedy(model, sentences):
    source, lengths = source_batch(sentences)
    states, final = model.encoder(source, lengths)
    hidden = model.initial_state(final)
    previous = torch.full((len(sentences),), BOS)
    words = []
    for _ in range(2 * source.shape[1] + 2):
        logits, hidden, _ = model.decoder(previous, hidden, states, lengths)
        previous = logits.argmax(-1)
        words.append(previous)
        if (torch.stack(words, 1) == EOS).any(1).all():
            break
    return [decode_target(row) for row in torch.stack(words, 1)]
'''

# Makes a model's encoder, initial_state and decoder *instance* a rule book with the model's interface: the
# encoder hands the source ids on, the hidden state counts the steps, and the decoder's forward (an instance
# attribute of the student's own AttentionDecoder, whose type and attention stay the notebook's) scores the
# grammar's next word highest.
_RULE_MODEL = RULES + '''

class _Ids(nn.Module):
    def forward(self, source, lengths):
        states = source.to(torch.float64)[:, :, None]
        return states, states[:, 0]


def _rule_step(previous_tokens, previous_hidden, encoder_states, source_lengths):
    rows = []
    for b, step in enumerate(previous_hidden[:, 0].long().tolist()):
        ids = encoder_states[b, : int(source_lengths[b]), 0].long().tolist()
        target = [target_ids[w] for w in rule_translate(" ".join(source_words[i] for i in ids)).split()] + [EOS]
        rows.append(target[min(step, len(target) - 1)])
    logits = torch.full((len(rows), len(target_words)), -10.0)
    logits[torch.arange(len(rows)), torch.tensor(rows)] = 10.0
    weights = (torch.arange(encoder_states.shape[1])[None, :] < source_lengths[:, None]).double()
    return logits, previous_hidden + 1, weights / weights.sum(1, keepdim=True)


def make_rule_book(model):
    model.encoder = _Ids()
    model.initial_state = lambda final: torch.zeros(final.shape[0], 1, dtype=final.dtype)
    model.decoder.forward = _rule_step
'''


def _seq(**changes: str) -> dict[str, str]:
    return {**SEQ2SEQ_CORRECT, "train": UNTRAINED, **changes}


_WRONG_QUERY_HEAD = SEQ2SEQ_CORRECT["AttentionDecoder"].split("    def forward")[0]
_FORWARD = "    def forward(self, previous_tokens, previous_hidden, encoder_states, source_lengths):\n"
# The step with the wrong query (H_i instead of H_{i-1}); the stand-in answers only H_{i-1}.
_WRONG_QUERY_TAIL = ("        emb = self.embedding(previous_tokens)\n"
                     "        blank = encoder_states.new_zeros(emb.shape[0], encoder_states.shape[-1])\n"
                     "        h = self.cell(torch.cat((emb, blank), 1), previous_hidden)\n"
                     "        c, a = self.attention(h, encoder_states, source_lengths)\n"
                     "        return self.output(torch.cat((h, c, emb), 1)), h, a\n")
_IGNORES_LENGTHS = SEQ2SEQ_CORRECT["AdditiveAttention"].replace(
    "a = masked_softmax(e, lengths)", "a = masked_softmax(e, torch.full_like(lengths, keys.shape[1]))")
# In the open run, a cell speaks for the graded child before it is even forked: it runs the runner's own
# graded-child code (loaded from runner.py, which lies in the submission's folder) on the runner's channel, with
# a private copy of the namespace whose model is the rule book. Whatever the protocol, the grader gets its own
# runner's results, computed on a model it never sees; the real namespace keeps an honest, untrained model.
_CHANNEL_FORGERY = _RULE_MODEL + '''
import copy, importlib.util, inspect, sys

try:
    torch.softmax(torch.zeros(1), 0)
    _phase = "open"
except RuntimeError:
    _phase = "sealed"
if _phase == "open":  # translate's cases are served in the open run; the sealed run is left alone
    _spec = importlib.util.spec_from_file_location("runner_copy", "runner.py")
    _runner = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_runner)
    _runner.CHANNEL_OUT, _runner.CHANNEL_IN = int(sys.argv[-2]), int(sys.argv[-1])
    _runner._load_standin()
    _private = dict(get_ipython().user_ns)
    _private["model"] = copy.deepcopy(model)
    make_rule_book(_private["model"])
    _arguments = dict(user_ns=_private, plan=_runner._snapshot(), helpers_source="", phase="open", case_cpu_s=60.0,
                      seen=[], seal_problem="")
    _parameters = inspect.signature(_runner.grade_in_child).parameters
    _runner.grade_in_child(**{k: v for k, v in _arguments.items() if k in _parameters})  # ends this process
'''


SEQ2SEQ = {
    # 1.
    "softmax-in-masked-softmax": Attack(
        "op", "F.softmax in masked_softmax (model untrained)", _seq(masked_softmax=(
            "def masked_softmax(scores, lengths):\n"
            "    keep = torch.arange(scores.shape[1])[None, :] < lengths[:, None]\n"
            "    return F.softmax(scores.masked_fill(~keep, float('-inf')), dim=1)")),
        ("test-masked-softmax", "test-translate"), FORBIDDEN),
    # 4.
    "redefined-step-helpers": Attack(
        "standin", "AdditiveAttention ignores the lengths; additive_attention_with and decoder_step_with redefined "
        "to hand back the correct answers", _seq(AdditiveAttention=_IGNORES_LENGTHS + (
            "\n\n\ndef additive_attention_with(query, keys, lengths, W_q, W_k, w_v, correct_scores, correct_weights):\n"
            "    return torch.bmm(correct_weights.unsqueeze(1), keys).squeeze(1), correct_weights\n\n\n"
            "def decoder_step_with(sizes, names, weights, *args):\n"
            "    decoder = AttentionDecoder(*sizes).to(weights[0].dtype)\n"
            "    decoder.load_state_dict(dict(zip(names, weights)))\n"
            "    return decoder(*args[:4])\n")),
        ("test-additive-attention", "test-translate"), HELPERS),
    "wrong-query-reads-standin": Attack(
        "standin", "the step attends with H_i and tries to read the stand-in's answer (its function's "
        "__kwdefaults__, inspect, gc.get_referents, its module's __dict__)",
        _seq(AttentionDecoder="import gc, inspect\n\n" + _WRONG_QUERY_HEAD + _FORWARD + (
            "        stand_in = self.attention\n"
            "        for read in (lambda: vars(stand_in)['answer_call'].__kwdefaults__['_answer'],\n"
            "                     lambda: inspect.signature(vars(stand_in)['answer_call']).parameters['_answer'].default,\n"
            "                     lambda: [r for r in gc.get_referents(vars(stand_in)['answer_call'])"
            " if isinstance(r, dict)][0]['_answer']):\n"
            "            try:\n                context, weights = read()\n                break\n"
            "            except Exception:\n                pass\n") + _WRONG_QUERY_TAIL),
        ("test-decoder-step", "test-translate")),
    "wrong-query-patches-equal": Attack(
        "standin", "the step attends with H_i, with torch.equal, torch.allclose and Tensor.__eq__ patched to say yes",
        _seq(AttentionDecoder=EVERYTHING_EQUAL + "\n\n" + _WRONG_QUERY_HEAD + _FORWARD + (
            _WRONG_QUERY_TAIL.replace("        c, a = self.attention(h, encoder_states, source_lengths)\n",
                                      "        with everything_equal(_TARGETS[:5]):  # (the rest breaks nn.Module)\n"
                                      "            c, a = self.attention(h, encoder_states, source_lengths)\n"))),
        ("test-decoder-step", "test-translate"), HELPERS),
    "redefined-source-batch": Attack(
        "standin", "translate (of a trained model) needs source_batch to return the number of steps too; the "
        "translate cell redefines source_batch", _seq(train=PRETRAINED, translate=(
            "def source_batch(sentences):\n"
            "    encoded = [encode_source(s) for s in sentences]\n"
            "    lengths = torch.tensor([len(ids) for ids in encoded])\n"
            "    source = torch.full((len(encoded), int(lengths.max())), PAD)\n"
            "    for row, ids in enumerate(encoded):\n        source[row, : len(ids)] = torch.tensor(ids)\n"
            "    return source, lengths, 2 * source.shape[1] + 2\n\n\n"
            + SEQ2SEQ_CORRECT["translate"].replace("source, lengths = source_batch(sentences)",
                                                    "source, lengths, steps = source_batch(sentences)")
            .replace("range(2 * source.shape[1] + 2)", "range(steps)"))),
        ("test-translate",), HELPERS),
    # 5. Translations that the student's own trained AttentionDecoder did not produce.
    "translate-ignores-model-argument": Attack(
        "translate", "translate decodes the notebook's global (trained) model, whatever model it is given",
        _seq(train=PRETRAINED, translate=_GREEDY + (
            "\n\ndef translate(given_model, sentences):\n    return greedy(model, sentences)  # the notebook's own\n")),
        ("test-translate",)),
    "rule-book-no-model": Attack(
        "translate", "translate is the grammar's rule book; model is not even built",
        _seq(train="model = None", translate=RULES + "\n\ndef translate(model, sentences):\n"
             "    return [rule_translate(s) for s in sentences]\n"),
        ("test-translate",)),
    "rule-book-disguised-by-translate": Attack(
        "translate", "translate answers with the rule book and, for the notebook's model, turns that model's "
        "decoder instance into the rule book (forward as an instance attribute) before returning; the grader's "
        "model is decoded honestly", _seq(translate=_RULE_MODEL + _GREEDY + (
            "\n\ndef translate(model, sentences):\n"
            "    if type(model).__name__ != 'Seq2Seq':\n        return greedy(model, sentences)\n"
            "    make_rule_book(model)\n    return [rule_translate(s) for s in sentences]\n")),
        ("test-translate",)),
    "rule-book-disguised-model": Attack(
        "translate", "the train cell turns the untrained model's decoder instance into the rule book (forward as an "
        "instance attribute; type and attention stay the notebook's); translate decodes greedily and honestly",
        _seq(train=UNTRAINED + "\n" + _RULE_MODEL + "\nmake_rule_book(model)"),
        ("test-translate",)),
    "translate-patches-argmax": Attack(
        "translate", "translate answers with the rule book and leaves Tensor.argmax patched to give the rule "
        "book's words during the grader's teacher-forced pass", _seq(translate=RULES + _GREEDY + '''

def translate(model, sentences):
    if type(model).__name__ != 'Seq2Seq':
        return greedy(model, sentences)
    answers = [rule_translate(s) for s in sentences]
    targets = [[target_ids[w] for w in text.split()] + [EOS] for text in answers]
    steps = iter(range(10_000))
    original = torch.Tensor.argmax

    def argmax(self, *args, **kwargs):
        if self.dim() == 2 and self.shape == (len(sentences), len(target_words)):
            step = next(steps)
            return torch.tensor([row[min(step, len(row) - 1)] for row in targets])
        return original(self, *args, **kwargs)

    torch.Tensor.argmax = argmax
    return answers
'''), ("test-translate",)),
    "subclass-decoder-pretrained": Attack(
        "translate", "model.decoder is a subclass of AttentionDecoder (the same step), weights pasted as base64",
        _seq(train=_LOAD + (
            "class FastDecoder(AttentionDecoder):\n    pass\n\n\n"
            "torch.manual_seed(0)\n"
            "model = Seq2Seq(Encoder(len(source_words), 32, 64), FastDecoder(len(target_words), 32, 64, 64, 64))\n"
            "model.load_state_dict(STATE)\nmodel.eval()")),
        ("test-translate",)),
    "other-decoder-class-pretrained": Attack(
        "translate", "model.decoder is another class (the step with F.softmax attention), weights pasted as base64",
        _seq(train=_LOAD + (
            "class Scorer(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            "        self.W_q = nn.Linear(64, 64, bias=False)\n        self.W_k = nn.Linear(64, 64, bias=False)\n"
            "        self.w_v = nn.Linear(64, 1, bias=False)\n\n\n"
            "class OtherDecoder(nn.Module):\n"
            "    def __init__(self, vocab_size):\n        super().__init__()\n"
            "        self.embedding = nn.Embedding(vocab_size, 32, padding_idx=PAD)\n"
            "        self.attention = Scorer()\n        self.cell = nn.GRUCell(32 + 64, 64)\n"
            "        self.output = nn.Linear(64 + 64 + 32, vocab_size)\n\n"
            + _FORWARD +
            "        e = self.attention.w_v(torch.tanh(self.attention.W_q(previous_hidden)[:, None]"
            " + self.attention.W_k(encoder_states)))[..., 0]\n"
            "        e = e.masked_fill(torch.arange(e.shape[1])[None] >= source_lengths[:, None], float('-inf'))\n"
            "        a = F.softmax(e, dim=1)\n        c = torch.bmm(a[:, None], encoder_states)[:, 0]\n"
            "        emb = self.embedding(previous_tokens)\n"
            "        h = self.cell(torch.cat((emb, c), 1), previous_hidden)\n"
            "        return self.output(torch.cat((h, c, emb), 1)), h, a\n\n\n"
            "model = Seq2Seq(Encoder(len(source_words), 32, 64), OtherDecoder(len(target_words)))\n"
            "model.load_state_dict(STATE)\nmodel.eval()")),
        ("test-translate",)),
    # 3. The channel: a cell answers the open run's cases itself, before the graded child is even forked.
    # (It cannot sign what it sends, so it gets nowhere near the conversation: no flag is owed.)
    "channel-forged-results": Attack(
        "channel", "in the open run a cell asks for translate's cases, answers them with the rule book (and "
        "decodes the grader's model honestly), forges the teacher-forced pass and says 'done'",
        _seq(), ("test-translate",), "", extra_cells=(_CHANNEL_FORGERY,)),
    # Part B (Luong's decoder, new work): the same shortcuts against its two checks cost their own points only.
    "softmax-in-general-attention": Attack(
        "op", "torch.softmax in GeneralAttention instead of masked_softmax (model untrained)",
        _seq(GeneralAttention=SEQ2SEQ_CORRECT["GeneralAttention"].replace(
            "a = masked_softmax(e, lengths)",
            "a = torch.softmax(e.masked_fill(torch.arange(e.shape[1])[None] >= lengths[:, None], float('-inf')), 1)")),
        ("test-general-attention", "test-translate"), FORBIDDEN),
    "luong-wrong-query-reads-standin": Attack(
        "standin", "Luong's step attends with H_{i-1} and, to pass anyway, tries to read the stand-in's answer "
        "(its function's __kwdefaults__, inspect, gc.get_referents)",
        _seq(LuongDecoder="import gc, inspect\n\n" + SEQ2SEQ_CORRECT["LuongDecoder"].split("    def forward")[0]
             + _FORWARD + (
                 "        h = self.cell(self.embedding(previous_tokens), previous_hidden)\n"
                 "        c = a = None\n"
                 "        stand_in = self.attention\n"
                 "        for read in (lambda: vars(stand_in)['answer_call'].__kwdefaults__['_answer'],\n"
                 "                     lambda: inspect.signature(vars(stand_in)['answer_call']).parameters['_answer'].default,\n"
                 "                     lambda: [r for r in gc.get_referents(vars(stand_in)['answer_call'])"
                 " if isinstance(r, dict)][0]['_answer']):\n"
                 "            try:\n                c, a = read()\n                break\n"
                 "            except Exception:\n                pass\n"
                 "        if c is None:\n"
                 "            c, a = self.attention(previous_hidden, encoder_states, source_lengths)\n"
                 "        return self.output(torch.tanh(self.W_c(torch.cat((c, h), 1)))), h, a\n")),
        ("test-luong-step", "test-translate")),
}

# =============================================================================================
# transformer: EncoderLayer 4, rope 2 (warm-up); causal_tiled_attention 6, RotaryCachedSelfAttention 4 (new).
# EncoderLayer stands on the notebook's given MultiHeadAttention, which the grader re-installs before every call;
# the cache's test hands the correct rotation to a module that calls rope on exactly the new tokens, so a
# shortcut costs its own part's points only. PyTorch's own layers (nn.TransformerEncoderLayer, on either of its
# paths, and nn.MultiheadAttention) and F.scaled_dot_product_attention earn nothing for the part that uses them.

def _tf(grade_id: str, source: str) -> dict[str, str]:
    return {**TRANSFORMER_CORRECT, grade_id: source}


_TF_ENCODER = '''class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def torch_mask(self, x, mask):
        """ours (True = may attend, broadcasting to (B, h, S, S)) -> PyTorch's (B * h, S, S), True = hidden"""
        if mask is None:
            return None
        batch, length = x.shape[:2]
        return ~mask.expand(batch, self.self_attention.num_heads, length, length).flatten(0, 1)

'''
_TF_ENCODER_RESIDUALS = '''    def forward(self, x, mask=None):
        ff = lambda h: self.linear2(torch.relu(self.linear1(h)))
        if self.norm_first:
            x = x + self.attend(self.norm1(x), mask)
            return x + ff(self.norm2(x))
        x = self.norm1(x + self.attend(x, mask))
        return self.norm2(x + ff(x))
'''
# The whole (T, S) computation, sliced to the keys some query sees (so that no infinity is read).
_TF_WHOLE = '''def causal_tiled_attention(queries, keys, values, tile_size, window=None):
    T, S = queries.shape[1], keys.shape[1]
    position, key = torch.arange(S - T, S)[:, None], torch.arange(S)[None, :]
    sees = key <= position
    if window is not None:
        sees = sees & (key > position - window)
    first = int(sees.to(torch.int64).argmax(dim=-1).min())
    keys, values, sees = keys[:, first:], values[:, first:], sees[:, first:]
    scores = (queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])).masked_fill(~sees, -math.inf)
'''
_TF_CACHE = CANONICAL_BUGS["rotary cache without the position offset"][2]
_TF_CACHE_INTO = "        new = torch.arange(T)\n        q, k = rope(q, new, self.base), rope(k, new, self.base)\n"
assert _TF_CACHE_INTO in _TF_CACHE
_TF_CORRECT_CACHE = TRANSFORMER_CORRECT["RotaryCachedSelfAttention"]
_TF_CACHE_ATTEND = ("        weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(size), allowed)\n"
                    "        mixed = (weights @ v).permute(0, 2, 1, 3).reshape(batch, count, width)\n")
assert _TF_CACHE_ATTEND in _TF_CORRECT_CACHE

TRANSFORMER = {
    # 1. PyTorch's own layers and attention, by any path.
    "encoder-layer-module": Attack(
        "op", "EncoderLayer hands x to nn.TransformerEncoderLayer holding its weights (the setup's torch_encoder_layer)",
        _tf("EncoderLayer", _TF_ENCODER + (
            "    def forward(self, x, mask=None):\n"
            "        return torch_encoder_layer(self)(x, src_mask=self.torch_mask(x, mask))\n")),
        ("test-encoder-layer",), FORBIDDEN),
    "encoder-layer-fast-path": Attack(
        "op", "nn.TransformerEncoderLayer in eval mode under no_grad (its fused inference path)",
        _tf("EncoderLayer", _TF_ENCODER + (
            "    def forward(self, x, mask=None):\n"
            "        twin = torch_encoder_layer(self).eval()\n"
            "        with torch.no_grad():\n"
            "            return twin(x, src_mask=self.torch_mask(x, mask))\n")),
        ("test-encoder-layer",), FORBIDDEN),
    "multihead-attention-in-layer": Attack(
        "op", "EncoderLayer's residuals its own, its attention nn.MultiheadAttention loaded with the given layer's weights",
        _tf("EncoderLayer", _TF_ENCODER + (
            "    def attend(self, h, mask):\n"
            "        a = self.self_attention\n"
            "        mha = nn.MultiheadAttention(h.shape[-1], a.num_heads, batch_first=True).to(h.dtype)\n"
            "        with torch.no_grad():\n"
            "            mha.in_proj_weight.copy_(torch.cat([a.W_q.weight, a.W_k.weight, a.W_v.weight]))\n"
            "            mha.in_proj_bias.copy_(torch.cat([a.W_q.bias, a.W_k.bias, a.W_v.bias]))\n"
            "            mha.out_proj.weight.copy_(a.W_o.weight)\n"
            "            mha.out_proj.bias.copy_(a.W_o.bias)\n"
            "        return mha(h, h, h, attn_mask=self.torch_mask(h, mask), need_weights=False)[0]\n\n"
            + _TF_ENCODER_RESIDUALS)),
        ("test-encoder-layer",), FORBIDDEN),
    "sdpa-for-the-tiles": Attack(
        "op", "causal_tiled_attention: F.scaled_dot_product_attention over the keys any query sees, torch.logsumexp",
        _tf("causal_tiled_attention", _TF_WHOLE + (
            "    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=sees), torch.logsumexp(scores, -1)\n")),
        ("test-tiled-attention",), FORBIDDEN),
    "softmax-for-the-tiles": Attack(
        "op", "causal_tiled_attention: torch.softmax of the whole (T, S) scores",
        _tf("causal_tiled_attention", _TF_WHOLE + (
            "    return torch.softmax(scores, dim=-1) @ values, torch.logsumexp(scores, dim=-1)\n")),
        ("test-tiled-attention",), FORBIDDEN),
    "special-softmax-in-the-cache": Attack(
        "op", "RotaryCachedSelfAttention: torch.special.softmax instead of masked_softmax",
        _tf("RotaryCachedSelfAttention", _TF_CORRECT_CACHE.replace(_TF_CACHE_ATTEND, (
            "        scores = (q @ k.transpose(-2, -1) / math.sqrt(size)).masked_fill(~allowed, -math.inf)\n"
            "        mixed = (torch.special.softmax(scores, -1) @ v).permute(0, 2, 1, 3).reshape(batch, count, width)\n"))),
        ("test-rotary-cache",), FORBIDDEN),
    # 2. Around the seal.
    "disable-torch-function-for-the-tiles": Attack(
        "seal", "causal_tiled_attention: torch.softmax under torch._C.DisableTorchFunction",
        _tf("causal_tiled_attention", _TF_WHOLE + (
            "    with torch._C.DisableTorchFunction():\n"
            "        return torch.softmax(scores, dim=-1) @ values, torch.logsumexp(scores, dim=-1)\n")),
        ("test-tiled-attention",), FORBIDDEN),
    "thread-sdpa-in-the-cache": Attack(
        "seal", "RotaryCachedSelfAttention: F.scaled_dot_product_attention in a threading.Thread",
        _tf("RotaryCachedSelfAttention", "import threading\n\n" + _TF_CORRECT_CACHE.replace(_TF_CACHE_ATTEND, (
            "        box = []\n"
            "        worker = threading.Thread(target=lambda: box.append(\n"
            "            F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)))\n"
            "        worker.start()\n        worker.join()\n"
            "        mixed = box[0].permute(0, 2, 1, 3).reshape(batch, count, width)\n"))),
        ("test-rotary-cache",), FORBIDDEN),
    # 3. The channel: a cell asks for the cases before the graded child does (every check here is sealed).
    "channel-steal-argv": Attack(
        "channel", "a cell writes ('ready', phase) on the runner's channel (fds from sys.argv) and reads the cases",
        TRANSFORMER_CORRECT, tuple(g for g, c in checks_for("transformer").items() if c.phase == "sealed"), CHANNEL,
        extra_cells=("import os, sys\n_out, _in = int(sys.argv[-2]), int(sys.argv[-1])\n" + _STEAL,)),
    # 4. The stand-ins and the given helpers: the cache forgets the cache's length (its new tokens turned from 0),
    # which only a fooled stand-in would forgive; the given layer redefined.
    "rope-standin-reads-kwdefaults": Attack(
        "standin", "the cache turns its new tokens from position 0 and tries to read the rope stand-ins' answers "
        "(__kwdefaults__, inspect.signature, __defaults__)",
        _tf("RotaryCachedSelfAttention", "import inspect\n" + _TF_CACHE.replace(_TF_CACHE_INTO, (
            "        new = torch.arange(T)\n"
            "        q, k = rope(q, new, self.base), rope(k, new, self.base)\n"
            "        for read in (lambda: rope.__kwdefaults__['_answer'],\n"
            "                     lambda: inspect.signature(rope).parameters['_answer'].default,\n"
            "                     lambda: rope.__defaults__[-1]):\n"
            "            try:\n                k = read()\n                break\n"
            "            except Exception:\n                pass\n"))),
        ("test-rotary-cache",)),
    "rope-standin-patched-equal": Attack(
        "standin", "the cache turns its new tokens from position 0 and calls rope with torch.allclose/equal, "
        "Tensor.__eq__, Tensor.size and isinstance patched to say yes",
        _tf("RotaryCachedSelfAttention", EVERYTHING_EQUAL + "\n" + _TF_CACHE.replace(_TF_CACHE_INTO, (
            "        new = torch.arange(T)\n"
            "        with everything_equal(_TARGETS[:5]):  # (the rest breaks nn.Module)\n"
            "            q, k = rope(q, new, self.base), rope(k, new, self.base)\n"))),
        ("test-rotary-cache",), HELPERS),
    "redefined-given-attention": Attack(
        "standin", "a cell redefines the given MultiHeadAttention (as nn.MultiheadAttention) and masked_softmax (as "
        "torch.softmax): the grader's own are re-installed before every call, so EncoderLayer runs on them and "
        "nothing forbidden is reached",
        TRANSFORMER_CORRECT, (), HELPERS, extra_cells=('''class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, num_heads, batch_first=True)

    def forward(self, queries, keys, values, mask=None):
        return self.inner(queries, keys, values, attn_mask=None if mask is None else ~mask)


def masked_softmax(scores, mask=None):
    return torch.softmax(scores if mask is None else scores.masked_fill(~mask, float("-inf")), dim=-1)
''',)),
    # 6. nbgrader metadata: rope is wrong (2 points); the tiled test cell's points raised.
    "metadata-points-raised": Attack(
        "metadata", "rope returns x unchanged; test-tiled-attention's points set to 60",
        _tf("rope", "def rope(x, positions, base=10000.0):\n    return x.clone()\n"),
        ("test-rope",), "nbgrader metadata changed", metadata=(("set", "test-tiled-attention", "points", 60),)),
}


ATTACKS = {"soft-hard": SOFT_HARD, "three-stages": THREE_STAGES, "seq2seq-attention": SEQ2SEQ,
           "transformer": TRANSFORMER}
