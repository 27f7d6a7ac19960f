"""The visible tests a student runs catch the canonical bugs, say what to fix, and never crash on NaN.

Each test runs a released notebook's setup cell, the solution with one bug, and the visible part of
one test cell (what the student has), in this process: the test cell must fail with an AssertionError
whose message names the fix — never pass, never an IndexError from the test's own helper.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import nbformat
import pytest
import torch

from attention_course.grading.submission import HIDDEN_TESTS
from canonical_bugs import CANONICAL_BUGS

ROOT = Path(__file__).resolve().parents[1]

# canonical bug -> a phrase the failure of its visible test must contain
PHRASES = {
    "softmax along dim 0 whatever dim says": "normalise along the dim you are given",
    "softmax without subtracting the largest score": "subtract the largest score",
    "soft attention normalised over the wrong axis": "normalise the scores along dim=-1",
    "hard attention with float32 weights for any scores": "float64 weights",
    "Gumbel noise with the wrong sign": "use g = -log(-log(u))",
    "exponential noise -log(u) instead of Gumbel noise": "use g = -log(-log(u))",
    "straight-through with the soft weights detached": "hard + soft - soft.detach()",
    "straight-through output from soft attention's output": "only the chosen value gets one",
    "straight-through without the temperature": "divide the scores by the temperature",
    "masked softmax without subtracting the largest score": "NaN",
    "packing mask in which padding sees padding": "is never seen",
    "causal packing mask that hides the query's own position": "sees the keys j <= i",
    "masked attention masking the weights after the softmax": "mask the scores with -inf before exp",
    "masked attention giving NaN for a query that sees nothing": "shift it by 0",
    "seq2seq masked softmax without subtracting the largest score": "subtract the largest score",
    "general score with W_a on the query side": "check which side W_a multiplies",
    "Luong decoder attending before its step": "attends with the state it has just computed",
    "Luong logits read from H_i instead of the attentional state": "self.output of the attentional state",
    "exact match that forgives words too many": "a word too long, so both are wrong",
    "agreement on the model's own guesses, not the reference": "Feed the reference words (teacher forcing)",
    "agreement averaged per sentence, not pooled over words": "pool the words of all pairs",
    "scaled dot product divided by d instead of its square root": "divide the dot products by the square root of d",
    "mask applied to the weights after the softmax": "mask the scores before the softmax",
    "heads split along the sequence axis instead of the features": "split the last axis into heads",
    "key/value heads repeated in the wrong order (Tensor.repeat)": "that is Tensor.repeat's order",
    "cache appended on the head axis": "grows along the sequence axis",
    "causal mask not shifted by the length of the cache": "sits at position P + t",
    "encoder layer always post-LN, norm_first ignored": "norm_first=True asks for pre-LN",
    "pre-LN residual added to the normalised copy": "not to its normalised copy",
    "RoPE turning the two halves instead of interleaved pairs": "RoPE here turns interleaved pairs",
    "RoPE frequencies base ** (-m / d), one per feature index": "pair m turns by p * base ** (-2m / d)",
    "online softmax without rescaling the running sum": "rescale the running sum l and the running output o",
    "online softmax NaN for a row whose first tile is wholly masked": "where the maximum is still -inf, shift by 0",
    "log-sum-exp without the running maximum": "logsumexp = m + log l",
    "causal mask aligned at the top left (query t sees keys 0 … t)": "stands at position S - T + t",
    "every key tile read and masked, none skipped": "those tiles must never be read",
    "rotary cache without the position offset": "new token t stands at position P + t",
    "rotary cache of unrotated keys, the whole cache rotated at every step": "the cache holds keys already rotated",
    "rotary cache whose cached keys are rotated again": "never rotate a cached key again",
}
BUGS = {name: (*CANONICAL_BUGS[name], phrase) for name, phrase in PHRASES.items()}


def _cells(assignment: str):
    return nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4).cells


def _solution(assignment: str) -> dict[str, str]:
    notebook = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: re.sub(r"^\s*### (BEGIN|END) SOLUTION\n?", "", c.source, flags=re.M)
            for c in notebook.cells if (c.metadata.get("nbgrader") or {}).get("solution")}


def _run_visible_test(assignment: str, answers: dict[str, str], test_id: str) -> None:
    """Setup, the answers up to the test cell, then the test cell as the student has it."""
    namespace: dict = {}
    threads = torch.get_num_threads()
    cwd = os.getcwd()
    os.chdir(ROOT / "exercises" / assignment)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            for cell in _cells(assignment):
                meta = cell.metadata.get("nbgrader") or {}
                if cell.cell_type != "code":
                    continue
                grade_id = meta.get("grade_id")
                if grade_id == test_id:
                    exec(compile(HIDDEN_TESTS.sub("", cell.source), test_id, "exec"), namespace)
                    return
                if meta.get("grade") and not meta.get("solution"):
                    continue  # other test cells
                if grade_id in ("train", "translate"):
                    continue  # no test here needs the trained model
                exec(compile(answers.get(grade_id, cell.source), grade_id or "cell", "exec"), namespace)
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)


@pytest.mark.parametrize("assignment,test_id", [
    ("soft-hard", "test-softmax"), ("soft-hard", "test-soft-attention"), ("soft-hard", "test-hard-attention"),
    ("three-stages", "test-masked-softmax"), ("seq2seq-attention", "test-masked-softmax"),
    ("soft-hard", "test-sample-hard-attention"), ("soft-hard", "test-straight-through"),
    ("three-stages", "test-packing-mask"), ("three-stages", "test-masked-attention"),
    ("seq2seq-attention", "test-general-attention"), ("seq2seq-attention", "test-luong-step"),
    ("multi-head", "test-scaled-dot-product"), ("multi-head", "test-multi-head"), ("multi-head", "test-grouped-query"),
    ("multi-head", "test-cached-attention"), ("transformer", "test-encoder-layer"), ("transformer", "test-rope"),
    ("transformer", "test-tiled-attention"), ("transformer", "test-rotary-cache"),
])
def test_the_solution_passes_the_visible_tests(assignment, test_id):
    _run_visible_test(assignment, _solution(assignment), test_id)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_visible_tests_catch_the_canonical_bugs_and_say_what_to_fix(bug):
    assignment, cell, source, test_id, phrase = BUGS[bug]
    with pytest.raises(AssertionError) as failure:
        _run_visible_test(assignment, {**_solution(assignment), cell: source}, test_id)
    assert phrase in str(failure.value), str(failure.value)
