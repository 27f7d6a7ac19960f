"""A class's round trip through Moodle, timed: for each assignment, 30 students' submissions in a Moodle
download (their notebooks are the solution, so every run trains and decodes in full), graded with
``attention-course grade --zip --roster``, then ``feedback`` (pages and the upload zip) and ``export
--format moodle``. Reports the wall seconds of each step with the load average beside it (a figure
taken next to other work is not the machine's speed).

Run: ``.venv/bin/python bench/lms_round_trip.py [--students 30] [--jobs N] [--assignments a b]``;
writes bench/results/lms_round_trip.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> float:
    started = time.perf_counter()
    ran = subprocess.run([sys.executable, "-m", "attention_course.grading.cli", *args], capture_output=True, text=True)
    if ran.returncode != 0:
        sys.exit(f"attention-course {' '.join(args)} failed ({ran.returncode}):\n{ran.stdout[-2000:]}{ran.stderr[-2000:]}")
    return time.perf_counter() - started


def moodle_download(assignment: str, students: int, folder: Path) -> tuple[Path, Path]:
    notebook = (ROOT / "solutions" / assignment / f"{assignment}.ipynb").read_bytes()
    download, worksheet = folder / f"{assignment}.zip", folder / f"{assignment}-worksheet.csv"
    with zipfile.ZipFile(download, "w") as bundle, worksheet.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["Identifier", "Full name", "Email address", "Grade", "Maximum Grade", "Last modified (grade)"])
        for number in range(students):
            participant, name = 700000 + number, f"Étudiant·e {number:02d} 学生"
            bundle.writestr(f"{name}_{participant}_assignsubmission_file/{assignment}.ipynb", notebook)
            writer.writerow([f"Participant {participant}", name, f"s{number}@example.edu", "", "100.00", "-"])
    return download, worksheet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--assignments", nargs="*", default=["soft-hard", "three-stages", "seq2seq-attention"])
    args = parser.parse_args()
    figures = {"students": args.students, "jobs": args.jobs, "cores": os.cpu_count(), "assignments": {}}
    with tempfile.TemporaryDirectory(prefix="round-trip-") as folder:
        course = Path(folder) / "course"
        cli("release", "--course", str(course), "--no-verify")
        for assignment in args.assignments:
            download, worksheet = moodle_download(assignment, args.students, Path(folder))
            steps = {}
            for step, command in [
                ("grade", ["grade", assignment, "--course", str(course), "--zip", str(download), "--roster", str(worksheet),
                           "--jobs", str(args.jobs)]),
                ("feedback", ["feedback", assignment, "--course", str(course)]),
                ("export", ["export", "--course", str(course), "--format", "moodle", "--assignment", assignment,
                            "--to", str(Path(folder) / f"{assignment}-upload.csv")]),
            ]:
                load = os.getloadavg()[0]
                seconds = cli(*command)
                steps[step] = {"seconds": round(seconds, 1), "load_before": round(load, 2),
                               "load_after": round(os.getloadavg()[0], 2)}
                print(f"{assignment:18s} {step:8s} {seconds:7.1f} s   load {load:.2f} -> {os.getloadavg()[0]:.2f}")
            upload = course / "feedback" / f"{assignment}-moodle.zip"
            steps["feedback_zip_bytes"] = upload.stat().st_size
            figures["assignments"][assignment] = steps
    out = ROOT / "bench" / "results" / "lms_round_trip.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
