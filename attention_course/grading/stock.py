"""Hidden tests for stock ``nbgrader autograde``: the same checks, run inside the notebook's kernel.

The hidden part of each test cell in ``solutions/`` calls :func:`run_hidden_check`, so that the
instructor's usual nbgrader tools still grade the exercises. That path trusts the kernel (a hostile
submission can defeat it, and its shortcut detection is a recording mode that student code can
switch off); ``attention-course grade`` never executes these cells, runs the notebook sandboxed
with the softmax family sealed off, and decides from data instead. Its cases come from a fixed seed
(the environment variable ``ATTENTION_COURSE_SEED`` when set), so that stock grading is at least
reproducible.
"""

from __future__ import annotations

import os

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from attention_course.grading.checks import checks_for
from attention_course.grading.grade import case_generator
from attention_course.grading.runner import FAMILY
from attention_course.grading.verdicts import compare, reference_output

DEFAULT_SEED = 2026


class _RecordCalls(TorchFunctionMode):
    def __init__(self, seen: set):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if FAMILY.search(getattr(func, "__name__", "")):
            self.seen.add(func.__name__)
        return func(*args, **(kwargs or {}))


class _RecordOps(TorchDispatchMode):
    def __init__(self, seen: set):
        super().__init__()
        self.seen = seen

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if FAMILY.search(func.overloadpacket.__name__):
            self.seen.add(f"aten.{func.overloadpacket.__name__}")
        return func(*args, **(kwargs or {}))


def _resolve(value, namespace: dict):
    from attention_course.grading import standin
    from attention_course.grading.cases import NotebookName, StandInTranslator

    if isinstance(value, NotebookName):
        return namespace[value.name]
    if isinstance(value, StandInTranslator):
        return standin.Translator(value.seed, value.source_vocab_size, value.target_vocab_size)
    if isinstance(value, torch.Tensor):
        return value.clone()
    return value


def run_hidden_check(assignment: str, grade_id: str, namespace: dict) -> None:
    check = checks_for(assignment)[grade_id]
    seed = int(os.environ.get("ATTENTION_COURSE_SEED", DEFAULT_SEED))
    failures = []
    for case in check.make_cases(case_generator(seed, grade_id)):
        if case.stand_ins:
            continue  # needs the sandboxed grader's stand-ins; the visible test covers it here
        target = namespace.get(case.call)
        if target is None:
            failures.append(f"{case.label}: {case.call} is not defined")
            continue
        args = tuple(_resolve(a, namespace) for a in case.args)
        seen: set[str] = set()
        try:
            with _RecordOps(seen), _RecordCalls(seen):
                if case.construct is not None:
                    target = target(**case.construct)
                    target = target.to(next(iter(case.state.values())).dtype)  # float64 cases need float64 weights
                    target.load_state_dict(case.state)
                got = target(*args, **case.kwargs)
        except Exception as error:  # report, as a failed case, whatever the student's code raised
            failures.append(f"{case.label}: raised {type(error).__name__}: {error}")
            continue
        if seen:
            failures.append(f"{case.label}: uses a forbidden shortcut: {', '.join(sorted(seen))}")
        elif any(isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(args, case.args)):
            failures.append(f"{case.label}: an argument was modified in place")
        else:
            comparison = check.compare or compare
            expected = reference_output(check, case)
            if case.consistency is not None:
                from attention_course.grading.runner import (_decode_afresh, _measure_afresh, _measure_own,
                                                             _source_batch)

                try:
                    if case.consistency[0] == "evidence":  # attention-experiments: the grader measures the models
                        rebuilt = {}  # ... and, after the call as the runner does, calls the notebook's measurements
                        extra = _measure_afresh(namespace, case.consistency, keep=rebuilt)
                        if len(case.consistency) > 6:
                            extra = (*extra, _measure_own(namespace, case.consistency[6], rebuilt))
                    else:
                        extra = _decode_afresh(args[0], namespace, case.consistency[2],
                                               *_source_batch(args[1], case.consistency[0]))
                except Exception as error:
                    extra = ("error", f"{type(error).__name__}: {error}")
                reason = comparison(got, expected, case, extra)
            else:
                try:
                    reason = comparison(got, expected, case, ())
                except TypeError:
                    reason = comparison(got, expected, case)
            if reason:
                failures.append(f"{case.label}: {reason}")
    assert not failures, f"{check.what}: hidden tests failed:\n" + "\n".join(failures[:5])
