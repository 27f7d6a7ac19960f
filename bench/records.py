"""How fast the coordinator records graded students into the gradebook (the part no grading worker can
take over), and what it was before.

A course is released and a few distinct soft-hard submissions are graded in the sandbox (the solution,
the release left unanswered, a notebook that is not one); then the class is grown to ``--students`` by
copying those submissions and their saved results to new students (a grade depends on the notebook's
bytes, not on the student's name, so each copy's saved grade is its own). The timed part records the
whole class through :class:`records.Recorder`, as a batch does, and each student's gradebook scores are
checked against the grader's. With ``--before N`` the first N students are also recorded as before this
change (nbgrader's pipeline opening its own gradebooks, one student at a time), into a copy of the course.

Run: ``.venv/bin/python bench/records.py [--students 300] [--before 20]``; prints students recorded per
second with the load average beside it, and the recording thread's CPU time a student (what the rate
would be with a core to itself), and writes bench/results/records.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from attention_course.grading.course import Course  # noqa: E402

ASSIGNMENT = "soft-hard"


def distinct_class(root: Path) -> Course:
    """A released course with three distinct submissions, graded."""
    course = Course(root)
    course.generate(ASSIGNMENT)
    samples = {"solution": (ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes(),
               "unanswered": (course.root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes(),
               "not-a-notebook": b"{ this is not JSON"}
    for student, data in samples.items():
        folder = course.root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_bytes(data)
    course.grade(ASSIGNMENT, jobs=2, progress=False)
    return course


def grow(course: Course, students: int) -> list[str]:
    """Copies of the three graded submissions (and their saved results) for ``students`` students."""
    samples = ["solution", "unanswered", "not-a-notebook"]
    names = []
    for number in range(students):
        sample, name = samples[number % len(samples)], f"student-{number:05d}"
        shutil.copytree(course.root / "submitted" / sample, course.root / "submitted" / name)
        shutil.copytree(course.results_dir / ASSIGNMENT / sample, course.results_dir / ASSIGNMENT / name)
        names.append(name)
    return names


def record_with_recorder(course: Course, students: list[str]) -> tuple[float, float]:
    """Wall seconds, and the recorder thread's CPU seconds."""
    from attention_course.grading.records import Recorder, StudentSummary

    summaries = {s: StudentSummary(s) for s in students}
    started = time.perf_counter()
    recorder = Recorder(course.layout, ASSIGNMENT, course.notebooks(ASSIGNMENT), summaries, reused=set())
    for student in students:
        recorder.add(student)
    recorder.close()
    return time.perf_counter() - started, recorder.cpu_seconds


def record_as_before(course: Course, students: list[str]) -> float:
    """nbgrader's pipeline for each student with gradebooks of its own: what a record cost before (the
    readable notebooks: an unreadable one was recorded directly, then as now)."""
    from attention_course.grading.grade import NotebookResult
    from attention_course.grading.nbgrader_bridge import record_in_gradebook

    students = [s for s in students
                if NotebookResult.load(course.layout.results_path(ASSIGNMENT, s, ASSIGNMENT)).readable]
    started, cpu = time.perf_counter(), time.thread_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for student in students:
            record_in_gradebook(course.root, course.results_dir, ASSIGNMENT, student)
    return time.perf_counter() - started, time.thread_time() - cpu


def check(course: Course, students: list[str]) -> None:
    """Each student's gradebook scores are the grader's."""
    from attention_course.grading.gradebook import open_gradebook
    from attention_course.grading.grade import NotebookResult
    from attention_course.grading.records import expected_scores, recorded_scores

    with open_gradebook(course.root) as gradebook:
        for student in students:
            result = NotebookResult.load(course.layout.results_path(ASSIGNMENT, student, ASSIGNMENT))
            assert recorded_scores(gradebook, ASSIGNMENT, student) == expected_scores([result]), student


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--before", type=int, default=20, help="students recorded the old way, for comparison (0: none)")
    args = parser.parse_args()
    report = {"cpus": os.cpu_count(), "measured": time.strftime("%Y-%m-%d %H:%M:%S"), "assignment": ASSIGNMENT}
    with tempfile.TemporaryDirectory(prefix="records-bench-") as folder:
        course = distinct_class(Path(folder) / "course")
        students = grow(course, args.students)
        if args.before:  # (every third student is not a notebook, and not counted)
            shutil.copytree(course.root, Path(folder) / "before")
            before = Course(Path(folder) / "before")
            load = os.getloadavg()
            seconds, cpu = record_as_before(before, students[:args.before])
            counted = sum(1 for n, _ in enumerate(students[:args.before]) if n % 3 != 2)
            report["before"] = {"students": counted, "seconds": round(seconds, 2),
                                "students_per_second": round(counted / seconds, 2),
                                "cpu_seconds_per_student": round(cpu / counted, 4),
                                "load_average_before": [round(x, 2) for x in load],
                                "load_average_after": [round(x, 2) for x in os.getloadavg()]}
            print(f"before: {counted} students in {seconds:.1f} s = {counted / seconds:.1f} students/s, "
                  f"{1000 * cpu / counted:.0f} ms of CPU a student "
                  f"(load {report['before']['load_average_before']} -> {report['before']['load_average_after']})")
        load = os.getloadavg()
        seconds, cpu = record_with_recorder(course, students)
        check(course, students)
        report["recorder"] = {"students": len(students), "seconds": round(seconds, 2),
                              "students_per_second": round(len(students) / seconds, 2),
                              "cpu_seconds_per_student": round(cpu / len(students), 4),
                              "load_average_before": [round(x, 2) for x in load],
                              "load_average_after": [round(x, 2) for x in os.getloadavg()]}
        print(f"now:    {len(students)} students in {seconds:.1f} s = {len(students) / seconds:.1f} students/s, "
              f"{1000 * cpu / len(students):.0f} ms of CPU a student "
              f"(load {report['recorder']['load_average_before']} -> {report['recorder']['load_average_after']})")
    out = ROOT / "bench" / "results" / "records.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
