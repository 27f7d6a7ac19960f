"""Throughput of `attention-course grade` next to stock `nbgrader autograde`, locally and on a Dask cluster.

Every part grades the same submissions of the soft-hard assignment into a course directory and gradebook
of its own: a mix of correct and buggy notebooks (no infinite loops, which would stall stock nbgrader).
The parts:

- stock: ``nbgrader autograde`` (sequential, unsandboxed: what a course without this grader runs);
- cold: ``attention-course grade --jobs N``, each sandboxed run a fresh interpreter (as before templates);
- warm: the same, each sandboxed run forked from a warm template (the default);
- cluster-1, cluster-2: ``grade --cluster`` through a Dask scheduler and 1 or 2 one-thread workers
  started on this machine (each worker forks from its own warm template).

Reports seconds per graded notebook (= per student: the assignment has one notebook), notebooks per
minute, the speedup over stock, and the machine's load average before and after each part (a figure
taken next to other work is not the machine's speed). Each of our parts must give every student the
same score (stock nbgrader judges by its own tests).
Goal (issue: grading at the scale of a MOOC): warm >= 4x stock on 2 cores, sandbox on.

Run: ``.venv/bin/python bench/grading_throughput.py [--submissions 40] [--jobs N] [--parts ...]``;
writes bench/results/grading_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
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


def start_cluster(folder: Path, workers: int) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and ``workers`` one-thread workers on 127.0.0.1, each a process of its own."""
    from distributed import Client

    dask = str(Path(sys.executable).with_name("dask"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
    processes = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], **quiet)]
    for number in range(workers):
        local = folder / f"worker-{number}"
        local.mkdir(parents=True)
        processes.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                           "--local-directory", str(local)], **quiet))
    deadline = time.monotonic() + 300
    while True:
        try:
            with Client(address, timeout=5, set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=max(1.0, deadline - time.monotonic()))
            return address, processes
        except (OSError, TimeoutError):
            if time.monotonic() > deadline:
                stop_cluster(processes)
                raise


def stop_cluster(processes: list[subprocess.Popen]) -> None:
    for process in reversed(processes):
        process.terminate()
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def timed_part(name: str, run) -> dict:
    load_before = os.getloadavg()
    started = time.perf_counter()
    scores = run()
    seconds = time.perf_counter() - started
    return {"part": name, "seconds": seconds, "scores": scores, "load_before": load_before, "load_after": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--parts", nargs="*", default=["stock", "cold", "warm", "cluster-1", "cluster-2"])
    args = parser.parse_args()
    n = args.submissions

    parts = []
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as folder:
        for part in args.parts:
            course = make_course(Path(folder) / part, n)
            if part == "stock":
                def run(course=course):
                    stock_autograde(course)
                    from nbgrader.api import Gradebook
                    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", "attention-course") as gradebook:
                        return {s.student.id: s.score for s in gradebook.assignment_submissions(ASSIGNMENT)}
            elif part in ("cold", "warm"):
                def run(course=course, warm=part == "warm"):
                    return {s.student: s.score for s in course.grade(ASSIGNMENT, jobs=args.jobs, progress=False, warm=warm)}
            elif part.startswith("cluster-"):
                workers = int(part.split("-")[1])
                address, processes = start_cluster(Path(folder) / f"{part}-workers", workers)

                def run(course=course, address=address):
                    return {s.student: s.score for s in course.grade(ASSIGNMENT, cluster=address, progress=False)}
            else:
                sys.exit(f"unknown part {part}")
            try:
                parts.append(timed_part(part, run))
            finally:
                if part.startswith("cluster-"):
                    stop_cluster(processes)
            shutil.rmtree(course.root, ignore_errors=True)
            figure = parts[-1]
            print(f"  {part:10s} {figure['seconds']:7.1f} s  {figure['seconds'] / n:5.2f} s/notebook  "
                  f"{60 * n / figure['seconds']:6.1f} notebooks/min  load average before "
                  f"{[round(x, 2) for x in figure['load_before']]}, after {[round(x, 2) for x in figure['load_after']]}",
                  flush=True)

    ours = [p for p in parts if p["part"] != "stock"]  # (stock nbgrader judges by other tests: other scores)
    mismatched = [p["part"] for p in ours if p["scores"] != ours[0]["scores"]]
    stock = next((p["seconds"] for p in parts if p["part"] == "stock"), None)
    results = {
        "submissions": n,
        "cpus": os.cpu_count(),
        "jobs": args.jobs,
        "parts": {p["part"]: {"seconds": round(p["seconds"], 1), "seconds_per_notebook": round(p["seconds"] / n, 2),
                              "notebooks_per_minute": round(60 * n / p["seconds"], 1),
                              "speedup_over_stock": round(stock / p["seconds"], 2) if stock else None,
                              "load_average_1_5_15_before": [round(x, 2) for x in p["load_before"]],
                              "load_average_1_5_15_after": [round(x, 2) for x in p["load_after"]]} for p in parts},
        "same_scores_in_every_part": not mismatched,
        "goal_speedup_warm": 4.0,
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    out = ROOT / "bench" / "results" / "grading_throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{n} submissions of {ASSIGNMENT}, {os.cpu_count()} cores, --jobs {args.jobs}")
    for name, figures in results["parts"].items():
        print(f"  {name:10s} {figures['notebooks_per_minute']:6.1f} notebooks/min"
              + (f"  {figures['speedup_over_stock']:.2f}x stock" if figures["speedup_over_stock"] else ""))
    if mismatched:
        sys.exit(f"the scores differ from {ours[0]['part']}'s in: {', '.join(mismatched)}")
    print(f"each of our parts gave every student the same score; written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
