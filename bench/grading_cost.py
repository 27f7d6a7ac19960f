"""What one graded notebook costs, per assignment, and what the coordinator costs per student.

For each assignment, N copies of its solution notebook are graded with one job, warm (runs forked
from a template with PyTorch imported) and cold (a fresh interpreter per run). Reported per notebook:
CPU seconds inside the sandbox (what a grading worker spends), wall seconds of grading (for warm runs
including the template's start, once per batch: more copies amortize it), and wall
seconds of recording into the gradebook (nbgrader's per-submission pipeline and SQLite writes: the
part only the coordinating machine does). With the machine's load average beside each figure.

Run: ``.venv/bin/python bench/grading_cost.py [--copies 4] [--assignments soft-hard ...]``; writes
bench/results/grading_cost.json. The design note docs/grading-at-scale.md uses these figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from attention_course.grading.course import Course, assignments_in  # noqa: E402


def make_course(root: Path, assignment: str, copies: int) -> Course:
    course = Course(root)
    course.generate(assignment)
    for number in range(copies):
        folder = course.root / "submitted" / f"student-{number:03d}" / assignment
        folder.mkdir(parents=True)
        for notebook in (ROOT / "solutions" / assignment).glob("*.ipynb"):
            shutil.copy2(notebook, folder / notebook.name)
    return course


def measure(course: Course, assignment: str, warm: bool) -> dict:
    from attention_course.grading.records import Recorder

    recording = []
    original = Recorder.record

    def timed(self, student):
        started = time.perf_counter()
        original(self, student)
        recording.append(time.perf_counter() - started)

    Recorder.record = timed
    load = os.getloadavg()
    started = time.perf_counter()
    try:
        summaries = course.grade(assignment, jobs=1, progress=False, warm=warm, force=True)
    finally:
        Recorder.record = original
    total = time.perf_counter() - started
    results = [json.loads(p.read_text()) for p in sorted(course.results_dir.rglob("*.json"))]
    results = [r for r in results if isinstance(r, dict) and "cpu_seconds" in r]
    n = len(summaries)
    # Full autograded marks (written answers, graded by hand, await the instructor).
    assert all(s.auto_score == s.auto_max > 0 for s in summaries), [(s.student, s.score, s.flags) for s in summaries]
    record_s = sum(recording)
    return {
        "notebooks": n,
        "sandbox_cpu_s_per_notebook": round(sum(r["cpu_seconds"] for r in results) / n, 2),
        "grading_wall_s_per_notebook": round(total / n, 2),  # recording overlaps grading, so it is inside
        "recording_wall_s_per_student": round(record_s / n, 3),
        "load_average_before": [round(x, 2) for x in load],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def template_start_seconds() -> float:
    """Wall seconds for a warm template to start (bubblewrap, then the imports): paid once per grading thread."""
    from attention_course.grading import sandbox

    started = time.perf_counter()
    template = sandbox.Template()
    seconds = time.perf_counter() - started
    template.close()
    return round(seconds, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--assignments", nargs="*", default=assignments_in(ROOT / "solutions"))
    args = parser.parse_args()
    report = {"cpus": os.cpu_count(), "measured": time.strftime("%Y-%m-%d %H:%M:%S"), "assignments": {},
              "template_start_s": template_start_seconds(), "load_average_at_start": os.getloadavg()}
    print(f"a warm template starts in {report['template_start_s']} s (once per grading thread and batch; "
          "included in the warm figures below)", flush=True)
    with tempfile.TemporaryDirectory(prefix="grading-cost-") as folder:
        for assignment in args.assignments:
            report["assignments"][assignment] = {}
            for warm in (True, False):
                course = make_course(Path(folder) / f"{assignment}-{'warm' if warm else 'cold'}", assignment, args.copies)
                figures = measure(course, assignment, warm)
                report["assignments"][assignment]["warm" if warm else "cold"] = figures
                print(f"{assignment:18s} {'warm' if warm else 'cold'}: {figures['sandbox_cpu_s_per_notebook']:6.2f} CPU s "
                      f"in the sandbox, {figures['grading_wall_s_per_notebook']:6.2f} s grading, "
                      f"{figures['recording_wall_s_per_student']:.3f} s recording per notebook "
                      f"(load before {figures['load_average_before']})", flush=True)
    out = ROOT / "bench" / "results" / "grading_cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
