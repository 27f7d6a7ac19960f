"""The runner's guards, each on its own, in a fresh interpreter (no sandbox, fast).

- the audit hook: what a graded call may and may not do (frames yes; the garbage collector's lists,
  a stand-in's defaults, a function's code, new processes no), what the cells may not do (tracing
  hooks; the runner's own functions), and that its own defaults are out of reach;
- the seal: every way to reach softmax and its relatives in PyTorch is refused, whatever was switched
  off, while the rest of PyTorch works;
- the signer: it signs for the runner's own code path only.
"""

from __future__ import annotations

import json

from fresh_python import run_python

HOOK = """
import gc, json, os, sys
from attention_course.grading import runner

guarded_ids = set()
guard = runner._make_guard(guarded_ids)
stand_in = guard(lambda *args, _answer="the answer", **kwargs: None)

def plain(x, y=2, *, z=3):
    return x


def _traceback():
    try:
        plain()
    except TypeError as error:
        return error.__traceback__

runner_pid = os.getpid() + (1 if GRADED else 0)  # in a graded call, the process is not the runner's own
hook = runner._make_hook(runner_pid, False, set(), (runner._restore_with,), guarded_ids)
sys.addaudithook(hook)
attempts = {
    "read a stand-in's keyword defaults": lambda: stand_in.__kwdefaults__,
    "read a stand-in's code": lambda: stand_in.__code__,
    "replace a stand-in's keyword defaults": lambda: setattr(stand_in, "__kwdefaults__", {}),
    "read the hook's defaults": lambda: hook.__defaults__,
    "read a runner function's defaults": lambda: runner._restore_with.__defaults__,
    "replace a function's code": lambda: setattr(plain, "__code__", (lambda x, y=2, *, z=3: 0).__code__),
    "walk the garbage collector's objects": lambda: gc.get_objects(),
    "get an object's referents": lambda: gc.get_referents(stand_in),
    "install a tracing hook": lambda: sys.settrace(None),
    "read another function's defaults": lambda: plain.__defaults__,
    "replace another function's defaults": lambda: setattr(plain, "__defaults__", (5,)),
    "read a frame": lambda: sys._getframe(0).f_back,
    "read a callee's frame through a traceback": lambda: _traceback().tb_frame,
    "read other threads' frames": lambda: sys._current_frames(),
}
outcome = {}
for name, attempt in attempts.items():
    try:
        attempt()
        outcome[name] = "allowed"
    except PermissionError:
        outcome[name] = "refused"
try:
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    outcome["fork"] = "allowed"
except PermissionError:
    outcome["fork"] = "refused"
print(json.dumps(outcome))
"""


def _outcome(graded: bool) -> dict[str, str]:
    result = run_python(f"GRADED = {graded}\n" + HOOK)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


# Refused everywhere: what could reach the grader's state or rewrite a frame's locals. What the standard
# library does (namedtuple sets __defaults__, logging reads frames) is allowed.
REFUSED_EVERYWHERE = {
    "read a stand-in's keyword defaults", "read a stand-in's code", "replace a stand-in's keyword defaults",
    "read the hook's defaults", "read a runner function's defaults", "replace a function's code",
    "walk the garbage collector's objects", "get an object's referents", "install a tracing hook"}


def _refused(graded: bool) -> set[str]:
    return {name for name, what in _outcome(graded).items() if what == "refused"}


def test_the_hook_in_a_graded_call():
    assert _refused(graded=True) == REFUSED_EVERYWHERE | {"fork", "read a callee's frame through a traceback",
                                                         "read other threads' frames"}


def test_the_hook_in_the_cells():
    assert _refused(graded=False) == REFUSED_EVERYWHERE


SEAL = """
import json, warnings
import torch
import torch.nn.functional as F
from torch import nn
from attention_course.grading import runner

warnings.simplefilter("ignore")
seen = []
runner.seal_python_implementations(seen)
registrations, count = runner.seal_dispatcher(seen)
runner._leak(registrations)
del registrations
x = torch.randn(3, 4)
routes = {
    "torch.softmax": lambda: torch.softmax(x, -1), "F.softmax": lambda: F.softmax(x, -1),
    "Tensor.softmax": lambda: x.softmax(-1), "torch._softmax": lambda: torch._softmax(x, -1, False),
    "torch.special.softmax": lambda: torch.special.softmax(x, -1), "F.softmin": lambda: F.softmin(-x, -1),
    "F.log_softmax": lambda: F.log_softmax(x, -1), "torch._safe_softmax": lambda: torch._safe_softmax(x, -1),
    "torch._masked_softmax": lambda: torch._masked_softmax(x, torch.zeros_like(x, dtype=torch.bool), -1, 0),
    "sparse": lambda: torch.sparse.softmax(x.to_sparse(), -1), "nested": lambda: torch.nested.nested_tensor([x]).softmax(-1),
    "mkldnn": lambda: x.to_mkldnn().softmax(-1),
    "aten op": lambda: torch.ops.aten._softmax.default(x, -1, False), "vmap": lambda: torch.vmap(lambda r: r.softmax(0))(x),
    "nn.Softmax": lambda: nn.Softmax(-1)(x), "Categorical": lambda: torch.distributions.Categorical(logits=x).probs,
    "gumbel": lambda: F.gumbel_softmax(x, tau=1.0), "cross_entropy": lambda: F.cross_entropy(x, torch.tensor([0, 1, 2])),
    "cosine": lambda: F.cosine_similarity(x, x), "cosine_embedding_loss": lambda: F.cosine_embedding_loss(x, x, torch.ones(3)),
    "sdpa": lambda: F.scaled_dot_product_attention(x[None], x[None], x[None]),
    "MultiheadAttention": lambda: nn.MultiheadAttention(4, 1)(x, x, x),
    "torch._refs.softmax": lambda: torch._refs.softmax(x, -1),
    "decomposition": lambda: __import__("torch._decomp.decompositions", fromlist=["_"])._softmax(x, -1, False),
    "autograd excluded": lambda: (torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)),
                                  torch._softmax(x, -1, False)),
    "torch function off": lambda: (torch._C.DisableTorchFunction().__enter__(), torch.softmax(x, -1)),
    "jit trace": lambda: torch.jit.trace(lambda t: torch.softmax(t, -1), (torch.randn(3, 4),))(x),
}
outcome = {}
for name, route in routes.items():
    try:
        route()
        outcome[name] = "computed"
    except Exception as error:
        outcome[name] = "refused" if runner.REFUSAL in str(error) else f"other: {type(error).__name__}: {error}"
still = (x - x.amax(-1, keepdim=True)).exp()
outcome["the rest of torch"] = "works" if torch.allclose((still / still.sum(-1, keepdim=True)).sum(-1), torch.ones(3)) else "broken"
outcome["probe"] = runner._probe_seal(seen) or "refused"
print(json.dumps(outcome))
"""


def test_the_seal_refuses_every_route_to_the_family_and_nothing_else():
    result = run_python(SEAL, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome.pop("the rest of torch") == "works"
    assert outcome.pop("probe") == "refused"
    assert {name: what for name, what in outcome.items() if what != "refused"} == {}


SIGNER = """
import json, sys
from attention_course.grading import runner

runner._SIGNER = runner._make_signer(b"k" * 32)
outcome = {}
try:
    outcome["called directly"] = "refused" if runner._SIGNER(b"data") is None else "signed"
except PermissionError:
    outcome["called directly"] = "refused"
runner.CHANNEL_OUT = 1
try:
    runner._send(("result", "forged"))
    outcome["through _send from here"] = "signed"
except PermissionError as error:
    outcome["through _send from here"] = "refused"
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_locals)
        tb = tb.tb_next
    outcome["the key in its traceback"] = "found" if any(b"k" * 32 in map(repr, f.values()) or
                                                       any(v == b"k" * 32 for v in f.values() if isinstance(v, bytes))
                                                       for f in frames) else "not found"
print(json.dumps(outcome))
"""


def test_the_signer_signs_for_no_one_but_the_runner():
    result = run_python(SIGNER)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {"called directly": "refused", "through _send from here": "refused",
                                                          "the key in its traceback": "not found"}


HANDLERS = """
import json, signal
from attention_course.grading import runner

outcome = {}
signal.signal(signal.SIGALRM, runner._on_wall)  # the runner's own, before the filter
outcome["filter"] = "installed" if runner.deny_signal_handlers() else "unknown architecture"
try:
    signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    outcome["set a handler"] = "allowed"
except OSError:
    outcome["set a handler"] = "refused"
try:
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    outcome["replace the runner's"] = "allowed"
except OSError:
    outcome["replace the runner's"] = "refused"
outcome["read a handler"] = "allowed" if signal.getsignal(signal.SIGALRM) is runner._on_wall else "wrong"
runner._ALARM[1] = 1e9  # (so that the idle check finds no progress and raises)
signal.setitimer(signal.ITIMER_REAL, 0.01)
try:
    for _ in range(10 ** 8):
        pass
    outcome["the runner's alarm"] = "did not go off"
except BaseException as error:
    outcome["the runner's alarm"] = type(error).__name__
print(json.dumps(outcome))
"""


def test_no_code_of_the_students_can_be_a_signal_handler():
    """After the runner's filter (installed before the first cell), no handler can be set or replaced (a handler is
    called with the frame it interrupts, the grader's included); the runner's own handlers still work."""
    result = run_python(HANDLERS)
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(result.stdout.splitlines()[-1])
    if outcome["filter"] != "installed":
        return
    assert outcome == {"filter": "installed", "set a handler": "refused", "replace the runner's": "refused",
                       "read a handler": "allowed", "the runner's alarm": "_Timeout"}
