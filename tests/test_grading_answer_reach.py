"""No answer is within the student's reach: a submission that searches everything it can reach earns nothing.

Each submission of tests/reach_corpus.py walks a path where the grader calls the student's own code while it
holds a correct answer: a global stand-in whose arguments do not match (softmax, masked_softmax,
scaled_dot_product, rope: chained, once for the queries and once for the keys), an attribute stand-in (a
decoder's attention module), translate after the grader's own decoding of the model, and the evidence (each
reported number read after the grader measured the models). Its reacher searches the frames of its callers,
the defaults, keyword defaults and closures of the functions it finds there, the attributes of the objects, the
tracebacks of a decider called with nonsense, and the garbage collector's referrers; it returns what it finds,
or nonsense. End to end (real sandbox, real nbgrader), every check whose path a submission walks must earn
nothing. (Before the runner kept answers out of reach, each of them earned full marks.) A fast part checks the
pieces in this process: a stand-in called with arguments it does not expect calls the student's function from
a frame that holds no answer, its decider cannot be talked into answering another call, and a torch mode of the
student's sees nothing of it.
"""

from __future__ import annotations

import sys

import pytest
import torch

from attention_course.grading import runner, sandbox
from grading_support import filled, graded_batch, released_notebook
from reach_corpus import submissions

LIMITS = sandbox.Limits(cell_cpu_s=120, case_cpu_s=30, idle_s=20)
# Checks that a submission does honestly: they must pass (the run worked).
HONEST = {
    ("three-stages", "global-stand-ins"): ("test-dot-score", "test-scaled-dot-score", "test-packing-mask"),
    ("seq2seq-attention", "global-stand-ins"): ("test-decoder-step", "test-luong-step"),
    ("seq2seq-attention", "attribute-stand-ins"): ("test-masked-softmax",),
    ("seq2seq-attention", "translate"): ("test-masked-softmax", "test-additive-attention", "test-decoder-step"),
    ("transformer", "global-stand-ins"): ("test-encoder-layer", "test-tiled-attention"),
    ("attention-experiments", "evidence"): ("test-exact-match", "test-agreement"),
}
SUBMISSIONS = submissions()
CASES = [(assignment, student) for assignment, students in SUBMISSIONS.items() for student in students]


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    """assignment -> {student: saved result}, graded on first use (one course per assignment)."""
    cache: dict[str, dict] = {}

    def get(assignment: str) -> dict:
        if assignment not in cache:
            released = released_notebook(tmp_path_factory, assignment)
            notebooks = {student: filled(released, answers) for student, (answers, _) in SUBMISSIONS[assignment].items()}
            _, summaries, results = graded_batch(tmp_path_factory, assignment, notebooks, limits=LIMITS)
            errors = {s: [f for f in summary.flags if "grader error" in f] for s, summary in summaries.items()}
            assert not any(errors.values()), errors
            cache[assignment] = results
        return cache[assignment]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("assignment, student", CASES, ids=[f"{a}/{s}" for a, s in CASES])
def test_searching_for_the_answer_earns_nothing(batches, assignment, student):
    result = batches(assignment)[student]
    _, walked = SUBMISSIONS[assignment][student]
    earned = {g: result.checks[g]["points"] for g in walked if result.checks[g]["passed"]}
    assert earned == {}, {g: result.checks[g]["message"][:300] for g in walked}
    # ... because nothing was within reach, not because the run broke: the graded calls ran, and the honest
    # parts earn their points.
    broken = ("crashed", "runner failed", "tampered", "could not switch off", "timed out", "stopped")
    assert not [flag for flag in result.flags if any(word in flag for word in broken)], result.flags
    honest = HONEST.get((assignment, student), ())
    assert all(result.checks[g]["passed"] for g in honest), {g: result.checks[g]["message"][:300] for g in honest}


# ---------------------------------------------------------------------------------------------
# Fast: the stand-in's pieces, in this process.


def _stand_in(yours):
    expected = torch.tensor([[1.0, 2.0, 3.0]])
    answer = torch.tensor([[0.1, 0.2, 0.7]])
    return runner._stand_in_function(yours, ("scores", "dim"), {"dim": -1}, (("close", expected, 1e-5, 1e-7),
                                                                            ("last_dim",)), answer, "softmax"), expected, answer


def _frames_above() -> list[dict]:
    """The locals of the runner's frames among the caller's callers."""
    frame, seen = sys._getframe(2), []
    while frame is not None:
        if frame.f_code.co_filename == runner.__file__:
            seen.append(dict(frame.f_locals))
        frame = frame.f_back
    return seen


def test_a_stand_in_calls_the_students_function_from_a_frame_without_the_answer():
    looked = []

    def yours(scores, dim=-1):
        looked.extend(_frames_above())
        return scores

    stand_in, expected, answer = _stand_in(yours)
    assert torch.equal(stand_in(expected.clone()), answer)  # the expected call: the answer
    wrong = expected * 2
    assert stand_in(wrong) is wrong  # any other: the student's own
    assert looked  # (the stand-in's frame, at least)
    for locals_ in looked:
        for value in locals_.values():
            assert not (isinstance(value, torch.Tensor) and torch.equal(value, answer)), locals_.keys()
            assert not (isinstance(value, tuple) and any(isinstance(v, tuple) and len(v) > 1 and isinstance(v[1], torch.Tensor)
                                                         and torch.equal(v[1], expected) for v in value)), locals_.keys()


def test_a_stand_ins_decider_answers_the_expected_call_only_whatever_it_is_given():
    found = []

    def yours(scores, dim=-1, **kwargs):
        frame = sys._getframe(1)
        found.append(frame.f_locals["_decide"])
        return scores

    stand_in, expected, answer = _stand_in(yours)
    stand_in(expected * 2)
    decide = found[0]
    no = runner._NO_ANSWER
    assert decide((expected * 2,), {}) is no
    # Keyword defaults of the old stand-in (matchers that accept anything) are not the decider's.
    assert stand_in(expected * 2, _matchers=(("any",), ("any",))) is not answer
    with pytest.raises(TypeError):
        decide((expected * 2,), {}, _matchers=(("any",), ("any",)))
    try:  # (replaced whole, its data hold no answer of the grader's)
        given = decide((expected * 2,), {}, _held=(("scores", "dim"), {"dim": -1}, (("any",), ("any",)), "mine", (),
                                                    *([None] * 12)))
    except BaseException:
        given = no
    assert given is no or given == "mine"
    assert torch.equal(decide((expected.clone(),), {}), answer)


def test_a_torch_mode_of_the_students_sees_nothing_of_a_stand_in():
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Watching(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.extend(a for a in args if isinstance(a, torch.Tensor))
            return func(*args, **(kwargs or {}))

    class Dispatching(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.extend(a for a in args if isinstance(a, torch.Tensor))
            return func(*args, **(kwargs or {}))

    stand_in, expected, answer = _stand_in(lambda scores, dim=-1: scores)
    wrong = expected * 2
    for mode in (Watching(), Dispatching()):
        with mode:
            stand_in(wrong)
    assert not any(t.shape == expected.shape and (torch.equal(t, expected) or torch.equal(t, answer)) for t in seen)
