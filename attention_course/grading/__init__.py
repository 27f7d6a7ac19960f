"""Grading the course's exercises without trusting the student's kernel.

The pipeline, one small step per module:

- ``cases``      what a check asks of a submission: named calls on inputs drawn at grading time;
- ``checks/``    the checks of each assignment, keyed by the grade id of the test cell they score;
- ``submission`` reading a submitted notebook against the released one: restored test cells, flags;
- ``runner``     the script that runs inside the sandbox: the student's cells, then the calls, saving
                 only data (``.npz`` and JSON) — it never decides anything;
- ``sandbox``    bubblewrap around the runner: no network, an unprivileged uid, only the submission's
                 own folder, limits on memory, processes, time and output;
- ``verdicts``   the trusted side: compares the saved outputs with the reference implementations;
- ``nbgrader_bridge`` nbgrader's own preprocessors with the verdicts in place of execution, so the
                 gradebook, formgrader, feedback and export work as instructors know them;
- ``cli``        the ``attention-course`` command.
"""
