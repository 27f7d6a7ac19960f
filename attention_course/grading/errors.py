"""The two ways a workflow stops short that the instructor must hear about in plain words."""

from __future__ import annotations


class CourseError(Exception):
    """An ordinary mistake (a missing course, a mistyped assignment, a file that is not what it should be):
    its message says what to do, in one line."""


class GradingInterrupted(Exception):
    """Ctrl-C during a batch: ``graded`` of ``total`` submissions were graded (and recorded, if ``recorded``)."""

    def __init__(self, graded: int, total: int, recorded: bool):
        super().__init__(f"interrupted: {graded} of {total} submissions graded")
        self.graded, self.total, self.recorded = graded, total, recorded
