"""The checks of each assignment, keyed by the grade id of the test cell each one scores."""

from __future__ import annotations

from attention_course.grading.cases import Check
from attention_course.grading.checks import seq2seq_attention, soft_hard, three_stages
from attention_course.grading.checks import attention_experiments
from attention_course.grading.checks import multi_head
from attention_course.grading.checks import transformer

ASSIGNMENTS: dict[str, list[Check]] = {
    soft_hard.ASSIGNMENT: soft_hard.CHECKS,
    three_stages.ASSIGNMENT: three_stages.CHECKS,
    seq2seq_attention.ASSIGNMENT: seq2seq_attention.CHECKS,
    attention_experiments.ASSIGNMENT: attention_experiments.CHECKS,
    multi_head.ASSIGNMENT: multi_head.CHECKS,
    transformer.ASSIGNMENT: transformer.CHECKS,
}


def checks_for(assignment: str) -> dict[str, Check]:
    if assignment not in ASSIGNMENTS:
        raise KeyError(f"unknown assignment {assignment!r}; known: {', '.join(sorted(ASSIGNMENTS))}")
    return {check.grade_id: check for check in ASSIGNMENTS[assignment]}


def descriptions() -> list[str]:
    """Each check's one-line description (``Check.what``), as the feedback shows it: messages of the
    ``grading`` catalog (``make catalogs`` extracts them from here), so a Chinese page says them in Chinese."""
    return list(dict.fromkeys(check.what for checks in ASSIGNMENTS.values() for check in checks))
