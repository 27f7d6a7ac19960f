"""Hidden tests for stock ``nbgrader autograde``: the same checks, run inside the notebook's kernel.

The hidden part of each test cell in ``solutions/`` calls :func:`run_hidden_check`, so that the
instructor's usual nbgrader tools still grade the exercises. That path trusts the kernel (a hostile
submission can defeat it); ``attention-course grade`` never executes these cells and decides from
data instead.
"""

from __future__ import annotations

import secrets

import torch

from attention_course.grading.checks import checks_for
from attention_course.grading.runner import _RecordCalls, _RecordOps
from attention_course.grading.verdicts import compare, reference_output


def run_hidden_check(assignment: str, grade_id: str, namespace: dict) -> None:
    check = checks_for(assignment)[grade_id]
    generator = torch.Generator().manual_seed(secrets.randbits(63))
    failures = []
    for case in check.make_cases(generator):
        target = namespace.get(case.call)
        if target is None:
            failures.append(f"{case.label}: {case.call} is not defined")
            continue
        args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
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
        elif reason := (check.compare or compare)(got, reference_output(check, case), case):
            failures.append(f"{case.label}: {reason}")
    assert not failures, f"{check.what}: hidden tests failed:\n" + "\n".join(failures[:5])
