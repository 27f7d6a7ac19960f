"""A class of 10,000 graded end to end through the cluster path: what the coordinator costs at that size.

A soft-hard course with ``--students`` submissions (default 10,000), graded by ``grade --cluster`` through a
Dask scheduler and two one-thread workers on this machine, every student recorded in the gradebook as a
batch records them. The submissions are cheap, so that what is measured is the coordinator, not the
sandbox: every ``--real``-th student (default 100) hands in a real notebook (the solution, or one with
a bug, in turn), graded in the workers' sandboxes; the others hand in a file that is not a notebook,
which a worker judges at once. Every grade is checked (full marks, the bug's score, zero).

Reported: wall seconds end to end, students per second, the coordinating process's CPU seconds (all its
threads: fingerprints, sending, saving, recording) and its share of the wall time, the recorder thread's
own CPU seconds, the load average before and after, and the coordinator's peak memory.

Run: ``.venv/bin/python bench/class_of_10000.py [--students 10000] [--real 100]``; writes
bench/results/class_of_10000.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from attention_course.grading import records  # noqa: E402
from attention_course.grading.course import Course  # noqa: E402
from grading_support import filled, submit  # noqa: E402
from grading_throughput import start_cluster, stop_cluster  # noqa: E402
from test_grading_soft_hard import SAMPLES  # noqa: E402

ASSIGNMENT = "soft-hard"


def make_class(root: Path, students: int, real: int) -> tuple[Course, dict[str, float]]:
    """The course and each student's expected score."""
    course = Course(root)
    course.generate(ASSIGNMENT)
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    notebooks = {}
    for name in ("correct-other-style", "no-max-subtraction"):
        code, changes, points, _ = SAMPLES[name]
        notebooks[name] = (filled(released, code, **changes), sum(points.values()))
    broken = b"{ this is not a notebook"
    expected = {}
    for number in range(students):
        student = f"student-{number:05d}"
        if number % real == 0:
            notebook, score = notebooks["correct-other-style" if (number // real) % 2 == 0 else "no-max-subtraction"]
            submit(course.root, student, ASSIGNMENT, ASSIGNMENT, notebook)
        else:
            folder = course.root / "submitted" / student / ASSIGNMENT
            folder.mkdir(parents=True)
            (folder / f"{ASSIGNMENT}.ipynb").write_bytes(broken)
            score = 0.0
        expected[student] = float(score)
    return course, expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=10_000)
    parser.add_argument("--real", type=int, default=100, help="every how many-th student hands in a real notebook")
    args = parser.parse_args()
    recorder_cpu = []
    original_close = records.Recorder.close

    def close(self):
        original_close(self)
        recorder_cpu.append(self.cpu_seconds)

    records.Recorder.close = close
    with tempfile.TemporaryDirectory(prefix="class-of-10000-") as folder:
        started = time.perf_counter()
        course, expected = make_class(Path(folder) / "course", args.students, args.real)
        setup = time.perf_counter() - started
        print(f"{args.students} submissions written in {setup:.0f} s", flush=True)
        address, processes = start_cluster(Path(folder) / "workers", 2)
        try:
            load = os.getloadavg()
            cpu_before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            summaries = course.grade(ASSIGNMENT, cluster=address, progress=True)
            wall = time.perf_counter() - started
            cpu_after = resource.getrusage(resource.RUSAGE_SELF)
            load_after = os.getloadavg()
        finally:
            stop_cluster(processes)
        got = {s.student: s.score for s in summaries}
        wrong = {s: (got.get(s), e) for s, e in expected.items() if got.get(s) != e}
        coordinator = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
        report = {"students": args.students, "real_notebooks": sum(1 for n in range(args.students) if n % args.real == 0),
                  "workers": 2, "cpus": os.cpu_count(), "wall_seconds": round(wall, 1),
                  "students_per_second": round(args.students / wall, 2),
                  "coordinator_cpu_seconds": round(coordinator, 1),
                  "coordinator_share_of_wall": round(coordinator / wall, 3),
                  "recorder_cpu_seconds": round(recorder_cpu[-1], 1) if recorder_cpu else None,
                  "coordinator_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                  "load_average_before": [round(x, 2) for x in load],
                  "load_average_after": [round(x, 2) for x in load_after],
                  "wrong_scores": len(wrong), "measured": time.strftime("%Y-%m-%d %H:%M:%S")}
        shutil.rmtree(course.root, ignore_errors=True)
    for key, value in report.items():
        print(f"  {key}: {value}")
    out = ROOT / "bench" / "results" / "class_of_10000.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")
    if wrong:
        sys.exit(f"{len(wrong)} students got a score other than expected, e.g. {sorted(wrong.items())[:5]}")


if __name__ == "__main__":
    main()
