"""Hostile submissions to the soft-hard assignment, each with the outcome the grader must produce.

Every attack starts from wrong answers (which honestly earn 0 points) and adds a way of forging a
better grade, of escaping the sandbox, or of breaking the batch. The grader must give each one 0
points and name what it did in the summary. Placeholders in braces are filled in by the test:
{gradebook}, {course}, {solutions}, {canary}, {port}.
"""

from __future__ import annotations

from attention_course.grading.checks import checks_for

WRONG = {
    "softmax": "def softmax(scores, dim=-1):\n    return scores",
    "soft_attention": "def soft_attention(scores, values, temperature=1.0):\n    return values.sum(-2), scores",
    "hard_attention": "def hard_attention(scores, values):\n    return values.sum(-2), scores",
}


def _returning(expression: str, setup: str = "") -> dict[str, str]:
    """Wrong answers, except that softmax returns ``expression`` (after ``setup`` at module level)."""
    return {**WRONG, "softmax": f"{setup}\ndef softmax(scores, dim=-1):\n    return {expression}"}


# Correct-looking answers built on a forbidden shortcut (hard_attention stays wrong).
def _shortcut(body: str, setup: str = "") -> dict[str, str]:
    return {
        **WRONG,
        "softmax": f"{setup}\ndef softmax(scores, dim=-1):\n{body}",
        "soft_attention": ("def soft_attention(scores, values, temperature=1.0):\n"
                           "    w = softmax(scores / temperature)\n    return (w.unsqueeze(-1) * values).sum(-2), w"),
    }


SOFT_ATTENTION_POINTS = checks_for("soft-hard")["test-soft-attention"].points

# name -> dict(answers=..., extra=[cells appended], file=special file handling,
#              flag=fragment expected in the summary, alternatives separated by "|",
#              score=what the honest part earns: 0 unless said; the shortcuts' soft_attention is correct code,
#              judged with correct softmax weights, so it earns its points and the shortcut costs softmax's)
ATTACKS = {
    "ipython-input-transformer": dict(
        extra=["ip = get_ipython()\n"
               "ip.input_transformers_cleanup.append(lambda lines: [l for l in lines if not l.lstrip().startswith('assert')])"],
        flag="installs IPython hooks or input transformers"),
    "ipython-hooks": dict(
        extra=["import sys\nsys.excepthook = lambda *args: None\n"
               "get_ipython().events.register('post_run_cell', lambda result: None)"],
        flag="installs IPython hooks or input transformers"),
    "patched-torch-testing": dict(
        extra=["import torch.testing\ntorch.testing.assert_close = lambda *args, **kwargs: None"],
        flag="replaces test helpers"),
    "patched-numpy-testing": dict(
        extra=["import numpy\nnumpy.testing.assert_allclose = lambda *args, **kwargs: None"],
        flag="replaces test helpers"),
    "patched-grader-helpers": dict(
        extra=["def expect_close(*args, **kwargs):\n    pass\n\ndef run_hidden_check(*args, **kwargs):\n    pass"],
        flag="replaces test helpers"),
    "always-equal": dict(
        answers=_returning("Anything()", "class Anything:\n    def __eq__(self, other):\n        return True\n"
                                         "    def __ne__(self, other):\n        return False"),
        flag="defines objects that can pass for tensors or compare equal to anything"),
    "torch-function-impostor": dict(
        answers=_returning("Impostor()", "class Impostor:\n    @classmethod\n"
                                         "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                                         "        return True"),
        flag="defines objects that can pass for tensors or compare equal to anything"),
    "tensor-subclass": dict(
        answers=_returning("torch.full_like(scores, 1.0 / scores.shape[dim]).as_subclass(Sneaky)",
                           "class Sneaky(torch.Tensor):\n    pass"),
        flag="defines objects that can pass for tensors or compare equal to anything"),
    "grader-environment-gated": dict(
        extra=["import os\nif os.environ.get('NBGRADER_EXECUTION') == 'autograde':\n    GRADING = True"],
        flag="looks for the grader"),
    "reads-gradebook": dict(
        extra=["try:\n    print(open('{gradebook}', 'rb').read()[:100])\nexcept OSError as error:\n    print(error)"],
        flag="reaches for files outside its folder"),
    "writes-gradebook": dict(
        extra=["import sqlite3\ntry:\n    db = sqlite3.connect('{gradebook}')\n"
               "    db.execute('update grade set auto_score = 100')\n    db.commit()\nexcept Exception as error:\n    print(error)"],
        flag="opens databases"),
    "reads-solutions": dict(
        extra=["try:\n    print(open('{solutions}/soft-hard/soft-hard.ipynb').read()[:100])\nexcept OSError as error:\n    print(error)"],
        flag="reaches for files outside its folder"),
    "writes-other-submission": dict(
        extra=["try:\n    open('{course}/submitted/honest-correct/soft-hard/soft-hard.ipynb', 'w').write('{{}}')\n"
               "except OSError as error:\n    print(error)"],
        flag="reaches for files outside its folder"),
    "writes-results-file": dict(
        extra=["import json\ntry:\n    open('{course}/grader-results/soft-hard/writes-results-file/soft-hard.json', 'w')"
               ".write(json.dumps({{'checks': {{}}}}))\nexcept OSError as error:\n    print(error)"],
        flag="reaches for files outside its folder"),
    "writes-canary": dict(
        extra=["try:\n    open('{canary}', 'w').write('escaped')\nexcept OSError as error:\n    print(error)"],
        flag="reaches for files outside its folder"),
    "network": dict(
        extra=["import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'grade me 100')\n"
               "except OSError as error:\n    print(error)"],
        flag="tries to use the network"),
    "infinite-loop": dict(extra=["while True:\n    pass"], flag="used more than its"),
    "deep-recursion": dict(
        extra=["import sys\nsys.setrecursionlimit(10**8)\ndef dive(n):\n    return dive(n + 1)\ndive(0)"],
        flag="crashed|used more than its|recursed"),  # a C stack overflow, or a frame stack filling memory slowly
    "memory-bomb": dict(extra=["hoard = bytearray(64 * 2**30)"], flag="ran out of memory"),
    "fork-bomb": dict(extra=["import os\nwhile True:\n    os.fork()"], flag="starts processes"),
    "os-exit": dict(extra=["import os\nos._exit(0)"], flag="crashed"),
    # ctypes is refused in a sealed run: the cell fails, nothing crashes, and the code is named.
    "segfault": dict(extra=["import ctypes\nctypes.string_at(0)"], flag="crashed|ctypes"),
    "huge-single-line": dict(extra=["print('x' * 20_000_000)"], flag="printed more than the grader keeps"),
    "many-lines": dict(extra=["for i in range(100_000):\n    print(i)"], flag="printed more than the grader keeps"),
    "forbidden-aliased-import": dict(
        answers=_shortcut("    return sm(scores, dim)", "from torch.nn.functional import softmax as sm"),
        flag="forbidden shortcuts", score=SOFT_ATTENTION_POINTS),
    "forbidden-getattr": dict(
        answers=_shortcut("    return getattr(torch, 'soft' + 'max')(scores, dim)"), flag="forbidden shortcuts", score=SOFT_ATTENTION_POINTS),
    "forbidden-aten": dict(
        answers=_shortcut("    return torch.ops.aten._softmax(scores, dim, False)"), flag="forbidden shortcuts", score=SOFT_ATTENTION_POINTS),
    "forbidden-disabled-torch-function": dict(
        answers=_shortcut("    with torch._C.DisableTorchFunction():\n        return torch.softmax(scores, dim)"),
        flag="forbidden shortcuts", score=SOFT_ATTENTION_POINTS),
    "hidden-test-leak": dict(
        extra=["import glob\nprint(glob.glob('/**/*.ipynb', recursive=True)[:20])"],
        flag="reaches for files outside its folder"),
    "renamed-notebook": dict(file="renamed", flag="notebook renamed"),
    "missing-notebook": dict(file="missing", flag="missing notebook"),
    "empty-notebook": dict(file="empty", flag="empty notebook file"),
    "forged-timestamp": dict(file="timestamp", flag="timestamp.txt is in the future"),
}
