"""Throughput of `attention-course grade` (sandboxed, parallel) next to stock `nbgrader autograde`.

Both grade the same submissions of the soft-hard assignment into their own course directory and
gradebook: a mix of correct and buggy notebooks (no infinite loops, which would stall stock nbgrader).
Reports seconds per graded notebook (= per student: the assignment has one notebook) and notebooks
per minute for each, and the ratio, with the machine's load average before and after each part
(a figure taken next to other work is not the machine's speed). Goal (issues: sandboxed grading;
grades an instructor can stand behind): >= 2x stock throughput on 2 cores, with the sandbox, the
sealed softmax family and the protocol on.

Run: ``.venv/bin/python bench/grading_throughput.py [--submissions 40] [--jobs N]``; writes
bench/results/grading_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from attention_course.grading.course import Course  # noqa: E402
from grading_support import filled, submit  # noqa: E402
from test_grading_soft_hard import SAMPLES  # noqa: E402

ASSIGNMENT = "soft-hard"
# Honest samples only: stock nbgrader has no protection against the hostile ones.
MIX = ["correct-other-style", "no-max-subtraction", "softmax-wrong-axis", "modifies-input", "last-index-on-ties"]


def make_course(root: Path, submissions: int) -> Course:
    course = Course(root)
    course.generate(ASSIGNMENT)
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    for number in range(submissions):
        solution, changes, _, _ = SAMPLES[MIX[number % len(MIX)]]
        submit(course.root, f"student-{number:03d}", ASSIGNMENT, ASSIGNMENT, filled(released, solution, **changes))
    return course


def stock_autograde(course: Course) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        [str(Path(sys.executable).with_name("nbgrader")), "autograde", ASSIGNMENT, "--force",
         f"--CourseDirectory.root={course.root}", f"--CourseDirectory.course_id=attention-course"],
        capture_output=True, text=True, cwd=course.root,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"stock nbgrader autograde failed:\n{result.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="grading-bench-") as folder:
        ours = make_course(Path(folder) / "ours", args.submissions)
        stock = make_course(Path(folder) / "stock", args.submissions)

        load_before = os.getloadavg()
        started = time.perf_counter()
        summaries = ours.grade(ASSIGNMENT, jobs=args.jobs, progress=False)
        ours_seconds = time.perf_counter() - started
        load_between = os.getloadavg()
        sandbox_seconds = [s.seconds for s in summaries]

        stock_seconds = stock_autograde(stock)
        load_after = os.getloadavg()
        shutil.rmtree(folder, ignore_errors=True)

    n = args.submissions
    results = {
        "submissions": n,
        "cpus": os.cpu_count(),
        "jobs": args.jobs,
        "ours": {"seconds": round(ours_seconds, 1), "seconds_per_notebook": round(ours_seconds / n, 2),
                 "notebooks_per_minute": round(60 * n / ours_seconds, 1),
                 "median_sandboxed_run_s": round(sorted(sandbox_seconds)[n // 2], 2)},
        "stock_nbgrader": {"seconds": round(stock_seconds, 1), "seconds_per_notebook": round(stock_seconds / n, 2),
                           "notebooks_per_minute": round(60 * n / stock_seconds, 1)},
        "speedup": round(stock_seconds / ours_seconds, 2),
        "goal_speedup": 2.0,
        "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                "after_ours": [round(x, 2) for x in load_between],
                                "after_stock": [round(x, 2) for x in load_after]},
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    out = ROOT / "bench" / "results" / "grading_throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{n} submissions of {ASSIGNMENT}, {os.cpu_count()} cores; load average (1, 5, 15 min) before "
          f"{results['load_average_1_5_15']['before']}, after ours {results['load_average_1_5_15']['after_ours']}, "
          f"after stock {results['load_average_1_5_15']['after_stock']}")
    print(f"  attention-course grade (sandboxed, --jobs {args.jobs}): {ours_seconds:6.1f} s  "
          f"{results['ours']['seconds_per_notebook']:.2f} s/notebook  {results['ours']['notebooks_per_minute']:.1f} notebooks/min")
    print(f"  stock nbgrader autograde (sequential):       {stock_seconds:6.1f} s  "
          f"{results['stock_nbgrader']['seconds_per_notebook']:.2f} s/notebook  "
          f"{results['stock_nbgrader']['notebooks_per_minute']:.1f} notebooks/min")
    print(f"  speedup {results['speedup']:.2f}x (goal >= 2x); written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
