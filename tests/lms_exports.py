"""Submissions downloads as Moodle and Canvas write them, made by code (the naming is in ``lms.py``'s
docstring), with every case an instructor meets: accents and Chinese names, renamed, zipped and
upper-case notebooks, checkpoints, macOS metadata, blank extra notebooks, nothing gradable, late and
anonymous submissions, and a re-download after an upgrade. Each sample says what it deserves."""

from __future__ import annotations

import csv
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grading_support import filled
from test_grading_soft_hard import CORRECT, answers

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "soft-hard"
BUGGY_SOFTMAX = answers(softmax="def softmax(scores, dim=-1):\n    e = scores.exp()\n    return e / e.sum(dim=dim, keepdim=True)")


def released():
    return nbformat.read(ROOT / "exercises" / NOTEBOOK / f"{NOTEBOOK}.ipynb", as_version=4)


def notebook_bytes(kind: str) -> bytes:
    """"correct" (10/10), "buggy" (8/10: softmax overflows), "blank" (the release, unanswered: 0)."""
    release = released()
    if kind == "blank":
        return nbformat.writes(release).encode()
    return nbformat.writes(filled(release, CORRECT if kind == "correct" else BUGGY_SOFTMAX)).encode()


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in files.items():
            bundle.writestr(name, data)
    return buffer.getvalue()


@dataclass
class Sample:
    lms_id: str
    name: str
    files: dict[str, bytes]  # as the student uploaded them
    score: float  # what the submission deserves, of 10
    notes: list[str] = field(default_factory=list)  # fragments the summary must show
    late: bool = False
    graded_from: str = "soft-hard.ipynb"  # the file that must be the one graded ("" if none)


def moodle_class() -> list[Sample]:
    """30 students of a Moodle course, and what each submission deserves."""
    correct, buggy, blank = notebook_bytes("correct"), notebook_bytes("buggy"), notebook_bytes("blank")
    samples = [
        Sample("500001", "Jane Doe", {"soft-hard.ipynb": correct}, 10),
        Sample("500002", "Zoë Ångström", {"soft-hard.ipynb": correct}, 10),
        Sample("500003", "李雷", {"soft-hard.ipynb": buggy}, 8),
        Sample("500004", "José Núñez-García", {"soft-hard.ipynb": correct, "Untitled.ipynb": blank}, 10,
               ["also submitted, not graded: Untitled.ipynb"]),
        Sample("500005", "Åsa Öberg", {"soft-hard (1).ipynb": correct}, 10, ["submitted as soft-hard (1).ipynb"],
               graded_from="soft-hard (1).ipynb"),
        Sample("500006", "Mark O'Neil", {"soft-hard.IPYNB": correct}, 10, ["submitted as soft-hard.IPYNB"],
               graded_from="soft-hard.IPYNB"),
        Sample("500007", "韩梅梅", {"work.zip": zipped({"soft-hard.ipynb": correct, "__MACOSX/._soft-hard.ipynb": b"x"})},
               10, ["unpacked from work.zip"], graded_from="soft-hard.ipynb (in work.zip)"),
        Sample("500008", "Chloé Dubois", {"report.pdf": b"%PDF-1.4 not a notebook"}, 0,
               ["nothing gradable: no notebook in the submission (report.pdf)"], graded_from=""),
        Sample("500009", "Ivan Petrov", {"my attempt.ipynb": correct, "scratch.ipynb": blank[:0] + b"{}"}, 10,
               ["the notebook with this assignment's cells"], graded_from="my attempt.ipynb"),
        Sample("500010", "Fatima Zahra", {"soft-hard.ipynb": b""}, 0, ["empty notebook file"]),
        Sample("500011", "Noah Schmidt", {".ipynb_checkpoints/soft-hard-checkpoint.ipynb": blank,
                                          "soft-hard.ipynb": correct}, 10),
        Sample("500012", "Ana María Pérez", {"soft-hard.ipynb": blank}, 0),
    ]
    for number in range(13, 31):  # the rest of the class: most right, some with the softmax bug
        kind = "buggy" if number % 5 == 0 else "correct"
        samples.append(Sample(f"5000{number:02d}", f"Student {number:02d}",
                              {"soft-hard.ipynb": correct if kind == "correct" else buggy}, 10 if kind == "correct" else 8))
    return samples


def moodle_entry(sample: Sample, file: str, naming: str) -> str:
    """One file's path in a Moodle download: "folder" (Moodle >= 4.1), "older" (before), "flat", "blind"."""
    prefix = f"{'Participant' if naming == 'blind' else sample.name.replace('_', ' ')}_{sample.lms_id}"
    if naming == "flat":
        return f"{prefix}_assignsubmission_file_{file}"
    return f"{prefix}_assignsubmission_file{'_' if naming == 'older' else ''}/{file}"


def moodle_download(samples: list[Sample], path: Path, naming: str = "folder") -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        for sample in samples:
            for file, data in sample.files.items():
                bundle.writestr(moodle_entry(sample, file, naming), data)
            if sample.lms_id == "500002":  # an online text too, and what a Mac adds to a zip it touched
                bundle.writestr(f"{sample.name}_{sample.lms_id}_assignsubmission_onlinetext/onlinetext.html",
                                "<p>see my notebook</p>")
        bundle.writestr("__MACOSX/Jane Doe_500001_assignsubmission_file/._soft-hard.ipynb", b"\0\5\26\7")
        bundle.writestr(".DS_Store", b"\0")
    return path


def moodle_worksheet(samples: list[Sample], path: Path, extra: list[tuple[str, str]] = (), maximum: float = 100) -> Path:
    """Moodle's grading worksheet as downloaded: every participant, including ones who submitted nothing."""
    columns = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade", "Grade can be changed",
               "Last modified (submission)", "Online text", "Last modified (grade)", "Feedback comments"]
    with path.open("w", newline="", encoding="utf-8-sig") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        for lms_id, name in [(s.lms_id, s.name) for s in samples] + list(extra):
            writer.writerow([f"Participant {lms_id}", name, f"u{lms_id}@example.edu", "Submitted for grading", "",
                             f"{maximum:.2f}", "Yes", "Monday, 30 November 2026, 9:00 AM", "", "-", ""])
    return path


def canvas_class() -> list[Sample]:
    correct, buggy = notebook_bytes("correct"), notebook_bytes("buggy")
    return [
        Sample("4711", "doejane", {"soft-hard.ipynb": correct}, 10),
        Sample("4712", "müllerzoë", {"soft-hard.ipynb": buggy}, 8),
        Sample("4713", "李雷", {"soft-hard.ipynb": correct}, 10),
        Sample("4714", "smithjohn", {"soft-hard.ipynb": correct}, 10, ["late"], late=True),
        Sample("anon_x8Hq2", "", {"soft-hard.ipynb": buggy}, 8),
        Sample("4716", "ngjoan", {"soft-hard.ipynb": buggy, "soft-hard-1.ipynb": correct}, 8,
               ["also submitted, not graded: soft-hard-1.ipynb"]),
    ]


def canvas_download(samples: list[Sample], path: Path, first_attachment: int = 90000) -> Path:
    attachment = first_attachment
    with zipfile.ZipFile(path, "w") as bundle:
        for sample in samples:
            for file, data in sample.files.items():
                attachment += 1
                name = "_".join(part for part in (sample.name, "LATE" if sample.late else "", sample.lms_id) if part)
                bundle.writestr(f"{name}_{attachment}_{file}", data)
        bundle.writestr("__MACOSX/._doejane_4711_90001_soft-hard.ipynb", b"\0")
    return path


def canvas_gradebook(samples: list[Sample], path: Path, title: str = "soft-hard (3301)", points: float = 20) -> Path:
    """Canvas's gradebook export: the student columns, a "Points Possible" row, one column per assignment."""
    names = {"4711": "Doe, Jane", "4712": "Müller, Zoë", "4713": "李, 雷", "4714": "Smith, John", "4716": "Ng, Joan",
             "4717": "Quiet, Quinn"}
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", title, "Current Score"])
        writer.writerow(["    Points Possible", "", "", "", "", f"{points:.2f}", "(read only)"])
        for lms_id, name in names.items():
            writer.writerow([name, lms_id, f"S{lms_id}", f"login{lms_id}", "Section A", "", ""])
    return path
