"""A class's round trip through its LMS: the submissions download in, grades, a report, formgrader flags
and feedback out, in files Moodle and Canvas take back. The downloads are made by ``lms_exports``."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

import lms_exports
from attention_course.grading import lms
from attention_course.grading.nbgrader_bridge import COURSE_ID
from grading_support import command as cli, released_copy

pytestmark = pytest.mark.slow


# -- names, as each platform writes them (fast) ---------------------------------------------------------

@pytest.mark.parametrize("path, key, name, file, late", [
    ("Jane Doe_123456_assignsubmission_file/soft-hard.ipynb", "moodle-123456", "Jane Doe", "soft-hard.ipynb", False),
    ("Jane Doe_123456_assignsubmission_file_/soft-hard.ipynb", "moodle-123456", "Jane Doe", "soft-hard.ipynb", False),
    ("Jane Doe_123456_assignsubmission_file_soft-hard.ipynb", "moodle-123456", "Jane Doe", "soft-hard.ipynb", False),
    ("Participant_123456_assignsubmission_file/soft-hard.ipynb", "moodle-123456", "", "soft-hard.ipynb", False),
    ("Group A-Jane Doe_123456_assignsubmission_file_/soft-hard.ipynb", "moodle-123456", "Group A-Jane Doe",
     "soft-hard.ipynb", False),
    ("李雷_88_assignsubmission_file/sub/soft-hard (1).ipynb", "moodle-88", "李雷", "sub/soft-hard (1).ipynb", False),
    ("doejane_4711_98765_soft-hard.ipynb", "canvas-4711", "doejane", "soft-hard.ipynb", False),
    ("müllerzoë_LATE_4712_98766_soft-hard-1.ipynb", "canvas-4712", "müllerzoë", "soft-hard-1.ipynb", True),
    ("李雷_late_4713_9_soft_hard.ipynb", "canvas-4713", "李雷", "soft_hard.ipynb", True),
    ("anon_x8Hq2_555_soft-hard.ipynb", "canvas-anon-x8Hq2", "", "soft-hard.ipynb", False),
    ("anon_12345_556_soft-hard.ipynb", "canvas-anon-12345", "", "soft-hard.ipynb", False),
])
def test_students_are_keyed_on_the_platforms_id_and_keep_their_names(path, key, name, file, late):
    student, received, _ = lms.identify(path)
    assert (student.key, student.name, received, student.late) == (key, name, file, late)


def test_which_notebook_is_graded_among_several():
    def got(*names: str, grade_ids=frozenset()) -> str | None:
        files = [lms.Received(n, b"{}", when=None, order=i) for i, n in enumerate(names)]
        choice = lms.choose(files, "soft-hard", set(grade_ids))
        return choice.file.name if choice.file else None

    assert got("Untitled.ipynb", "soft-hard.ipynb", "soft-hard (1).ipynb") == "soft-hard.ipynb"
    assert got("Untitled.ipynb", "soft-hard (1).ipynb") == "soft-hard (1).ipynb"
    assert got("soft-hard (1).ipynb", "soft-hard (2).ipynb") == "soft-hard (2).ipynb"  # the newer upload
    assert got("Copy of Soft_Hard.ipynb", "notes.txt") == "Copy of Soft_Hard.ipynb"
    assert got("mine.ipynb") == "mine.ipynb"
    assert got("a.ipynb", "b.ipynb") is None
    assert got("report.pdf") is None


def test_a_folder_in_nbgrader_layout_gets_the_same_choice(tmp_path):
    from attention_course.grading.intake import adopt_renamed_notebook as _adopt_renamed_notebook

    release = lms_exports.released()
    folder = tmp_path / "submitted" / "alice" / "soft-hard"
    folder.mkdir(parents=True)
    (folder / "Untitled.ipynb").write_text("{}")
    (folder / "my work.IPYNB").write_bytes(lms_exports.notebook_bytes("correct"))
    assert _adopt_renamed_notebook(folder, ["soft-hard"], release) == {"soft-hard": "my work.IPYNB"}
    assert (folder / "soft-hard.ipynb").read_bytes() == (folder / "my work.IPYNB").read_bytes()


# -- a Moodle class of 30 -----------------------------------------------------------------------------

def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def _report(course: Path) -> dict[str, dict[str, str]]:
    """The grading report's rows, by student."""
    return {row["student"]: row for row in _rows(course / "reports" / "soft-hard.csv")}


def _new_course(tmp_path_factory, folder: Path) -> Path:
    """A course as `attention-course release --course COURSE --no-verify` makes it (a copy of the session's)."""
    return released_copy(tmp_path_factory, folder / "course").root


@pytest.fixture(scope="module")
def moodle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("moodle")
    samples = lms_exports.moodle_class()
    course = _new_course(tmp_path_factory, folder)
    worksheet = lms_exports.moodle_worksheet(samples, folder / "worksheet.csv", extra=[("500031", "Wang Fang")])
    older = lms_exports.moodle_download(samples, folder / "before-upgrade.zip", naming="older")
    first = cli("grade", "soft-hard", "--course", str(course), "--zip", str(older), "--roster", str(worksheet), "--jobs", "2")
    current = lms_exports.moodle_download(samples, folder / "after-upgrade.zip", naming="folder")
    again = cli("grade", "soft-hard", "--course", str(course), "--zip", str(current), "--jobs", "2")
    feedback = cli("feedback", "soft-hard", "--course", str(course))
    worksheet_out = folder / "upload-to-moodle.csv"
    exported = cli("export", "--course", str(course), "--format", "moodle", "--to", str(worksheet_out))
    nbgrader_csv = folder / "nbgrader.csv"
    exported_nbgrader = cli("export", "--course", str(course), "--to", str(nbgrader_csv))
    return dict(samples=samples, course=course, first=first, again=again, feedback=feedback, exported=exported,
                worksheet=worksheet_out, exported_nbgrader=exported_nbgrader, nbgrader_csv=nbgrader_csv)


def test_moodle_nobody_lost_nobody_split_and_the_right_notebook_graded(moodle):
    for run in ("first", "again"):
        assert moodle[run].returncode == 0, moodle[run].stdout + moodle[run].stderr
    assert "imported 30 students" in moodle["first"].stdout
    assert "__MACOSX (1)" in moodle["first"].stdout
    keys = {f"moodle-{s.lms_id}" for s in moodle["samples"]}
    assert {p.name for p in (moodle["course"] / "submitted").iterdir()} == keys  # the upgrade split nobody
    report = _report(moodle["course"])
    assert set(report) == keys | {"moodle-500031"}
    for sample in moodle["samples"]:
        row = report[f"moodle-{sample.lms_id}"]
        assert (row["name"], float(row["score"]), row["max_score"]) == (sample.name, sample.score, "10"), row
        for note in sample.notes:
            assert note in row["notes"], (sample.name, row["notes"])
        assert all(row[test] != "" for test in ("test-softmax", "test-soft-attention", "test-hard-attention"))
    missing = report["moodle-500031"]
    assert missing["score"] == "0" and "no submission" in missing["notes"] and missing["name"] == "Wang Fang"
    # The re-download changed no notebook: nothing graded again, every score the same.
    assert moodle["again"].stdout.count("unchanged since its last grade") == 31  # (the missing one too)


def test_moodle_gradebook_has_names_ids_and_formgrader_flags(moodle):
    with Gradebook(f"sqlite:///{moodle['course'] / 'gradebook.db'}", COURSE_ID) as gradebook:
        students = {s.id: s for s in gradebook.students}
        assert len(students) == 31
        assert students["moodle-500003"].first_name == "李雷" and students["moodle-500003"].lms_user_id == "500003"
        assert students["moodle-500002"].email == "u500002@example.edu"
        flagged = {nb.student.id for a in gradebook.assignments for s in a.submissions for nb in s.notebooks if nb.flagged}
    with_notes = {f"moodle-{s.lms_id}" for s in moodle["samples"] if s.notes or s.score == 0 and s.graded_from != "soft-hard.ipynb"}
    assert with_notes <= flagged
    assert "moodle-500001" not in flagged and "moodle-500013" not in flagged  # a clean submission is not flagged
    assert "moodle-500031" in flagged


def test_moodle_feedback_for_everyone_in_a_zip_moodle_matches_to_participants(moodle):
    assert moodle["feedback"].returncode == 0, moodle["feedback"].stderr
    assert "feedback written for 31 students" in moodle["feedback"].stdout
    bundle = zipfile.ZipFile(moodle["course"] / "feedback" / "soft-hard-moodle.zip")
    participants = {f"5000{n:02d}" for n in range(1, 32)}
    seen = set()
    for name in bundle.namelist():
        folder, _, page = name.partition("/")
        # Moodle's importer: each path part split on "_" (at most 5 pieces) needs a participant id and a
        # submission plugin; the name part has no "_".
        info = folder.split("_", 4)
        assert len(info) >= 4 and info[1] in participants and info[2:4] == ["assignsubmission", "file"], name
        assert page == "soft-hard-feedback.html"
        seen.add(info[1])
        html = bundle.read(name).decode()
        assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?(https?:)?//""", html), name
    assert seen == participants
    jane = bundle.read("Jane Doe_500001_assignsubmission_file/soft-hard-feedback.html").decode()
    assert "<mjx-container" in jane and len(jane.encode()) < 400_000  # math drawn in the page, no 2 MB script
    assert (moodle["course"] / "feedback" / "soft-hard-moodle.zip").stat().st_size < 31 * 100_000
    chloe = bundle.read("Chloé Dubois_500008_assignsubmission_file/soft-hard-feedback.html").decode()
    assert "could not be graded" in chloe and "report.pdf" in chloe and "0 points" in chloe
    assert "<code>soft-hard.ipynb</code>" in chloe and ".ipynb)" not in chloe  # the notebook's name, once
    absent = bundle.read("Wang Fang_500031_assignsubmission_file/soft-hard-feedback.html").decode()
    assert "no submission" in absent


def test_moodle_worksheet_export_fills_the_downloaded_worksheet(moodle):
    assert moodle["exported"].returncode == 0, moodle["exported"].stderr
    rows = _rows(moodle["worksheet"])
    assert {"Identifier", "Grade", "Last modified (grade)"} <= set(rows[0])  # what Moodle's upload requires
    grades = {row["Identifier"]: row for row in rows}
    assert len(grades) == 31
    for sample in moodle["samples"]:
        row = grades[f"Participant {sample.lms_id}"]
        assert float(row["Grade"]) == pytest.approx(sample.score * 10)  # the worksheet's maximum is 100
        assert row["Full name"] == sample.name and row["Maximum Grade"] == "100.00"
    assert grades["Participant 500031"]["Grade"] == "0.00"
    nbgrader_rows = _rows(moodle["nbgrader_csv"])
    assert len(nbgrader_rows) == 31 and {r["assignment"] for r in nbgrader_rows} == {"soft-hard"}  # graded only
    assert all(r["first_name"] for r in nbgrader_rows)


# -- a Canvas class --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def canvas(tmp_path_factory):
    folder = tmp_path_factory.mktemp("canvas")
    samples = lms_exports.canvas_class()
    course = _new_course(tmp_path_factory, folder)
    roster = lms_exports.canvas_gradebook(samples, folder / "gradebook-export.csv")
    first = cli("grade", "soft-hard", "--course", str(course), "--zip",
                str(lms_exports.canvas_download(samples, folder / "download.zip")), "--roster", str(roster), "--jobs", "2")
    # A re-download after one student resubmitted: every attachment id is new.
    samples[1].files = {"soft-hard.ipynb": lms_exports.notebook_bytes("correct")}
    samples[1].score, redownload = 10, lms_exports.canvas_download(samples, folder / "again.zip", first_attachment=95000)
    again = cli("grade", "soft-hard", "--course", str(course), "--zip", str(redownload), "--jobs", "2")
    one = cli("grade", "soft-hard", "--course", str(course), "--student", "canvas-4712", "--force")
    feedback = cli("feedback", "soft-hard", "--course", str(course))
    gradebook_csv = folder / "import-to-canvas.csv"
    exported = cli("export", "--course", str(course), "--format", "canvas", "--to", str(gradebook_csv))
    return dict(samples=samples, course=course, first=first, again=again, one=one, feedback=feedback,
                exported=exported, gradebook_csv=gradebook_csv, redownload=redownload)


def test_canvas_keys_late_and_anonymous_and_a_resubmission_splits_nobody(canvas):
    for run in ("first", "again"):
        assert canvas[run].returncode == 0, canvas[run].stdout + canvas[run].stderr
    assert "1 marked late" in canvas["first"].stdout
    report = _report(canvas["course"])
    expected = {"canvas-4711", "canvas-4712", "canvas-4713", "canvas-4714", "canvas-anon-x8Hq2", "canvas-4716",
                "canvas-4717"}
    assert set(report) == expected  # 6 submitted + 1 on the gradebook only; the resubmission is the same student
    for sample in canvas["samples"]:
        key = "canvas-" + sample.lms_id.replace("_", "-")
        assert float(report[key]["score"]) == sample.score, report[key]
        for note in sample.notes:
            assert note in report[key]["notes"]
    assert report["canvas-4714"]["late"] == "yes" and report["canvas-4712"]["name"] == "Müller, Zoë"
    assert "no submission" in report["canvas-4717"]["notes"]
    # --student grades that one student again, and the report still holds everyone.
    assert canvas["one"].returncode == 0, canvas["one"].stderr
    graded = [line.split()[0] for line in canvas["one"].stdout.splitlines() if line.startswith("canvas-")]
    assert graded == ["canvas-4712"] and "1 student graded" in canvas["one"].stdout


def test_canvas_feedback_zip_names_the_graded_attachment(canvas):
    assert canvas["feedback"].returncode == 0, canvas["feedback"].stderr
    download = {name.split("_")[-2]: name for name in zipfile.ZipFile(canvas["redownload"]).namelist()
                if not name.startswith("__MACOSX")}  # attachment id -> file name in the download
    bundle = zipfile.ZipFile(canvas["course"] / "feedback" / "soft-hard-canvas.zip")
    users = set()
    for name in bundle.namelist():
        # Canvas's re-upload: "LATE" dropped, then "anon_<id>_<attachment>" or the first two numbers.
        tokens = [t for t in name.split("_") if t != "LATE"]
        if tokens[0] == "anon":
            user, attachment = f"anon_{tokens[1]}", tokens[2]
        else:
            numbers = [i for i, t in enumerate(tokens[:-1]) if t.isdigit() and tokens[i + 1].isdigit()]
            user, attachment = tokens[numbers[0]], tokens[numbers[0] + 1]
        assert attachment in download and f"_{user}_" in f"_{download[attachment]}"
        assert download[attachment].endswith("_soft-hard.ipynb"), name  # the file that was graded
        users.add(user)
    assert users == {"4711", "4712", "4713", "4714", "anon_x8Hq2", "4716"}
    assert "not in the zip: 1" in canvas["feedback"].stdout  # the student with no upload to attach it to


def test_canvas_gradebook_export_has_canvas_columns_and_scaled_points(canvas):
    assert canvas["exported"].returncode == 0, canvas["exported"].stderr
    rows = list(csv.reader(io.StringIO(canvas["gradebook_csv"].read_text(encoding="utf-8"))))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "soft-hard (3301)",
                       lms.CANVAS_TOTAL_COLUMN]  # the course total: a column Canvas's import drops, as its own totals
    assert rows[1][0] == "Points Possible" and rows[1][5] == "20.00" and rows[1][6] == "10.00"
    by_id = {row[1]: row for row in rows[2:]}
    assert set(by_id) == {"4711", "4712", "4713", "4714", "4716", "4717"}
    assert by_id["4713"][0] == "李, 雷" and by_id["4713"][2:5] == ["S4713", "login4713", "Section A"]
    assert by_id["4712"][5] == "20.00" and by_id["4716"][5] == "16.00" and by_id["4717"][5] == "0.00"
    assert by_id["4716"][6] == "8.00"  # the course total is nbgrader's points, one assignment graded so far
    assert "anonymous" in canvas["exported"].stdout  # said, not silently dropped


# -- a Moodle group assignment ----------------------------------------------------------------------------

def test_a_moodle_group_submission_is_graded_for_every_member(tmp_path_factory, tmp_path):
    course = _new_course(tmp_path_factory, tmp_path)
    members = {"600001": ("Li Na", "Team Red"), "600002": ("Omar Haddad", "Team Red"),
               "600003": ("Sofía Ruiz", "Team Blue"), "600004": ("王伟", "Team Blue"), "600005": ("Solo Sam", "")}
    worksheet = tmp_path / "worksheet.csv"
    with worksheet.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["Identifier", "Full name", "Email address", "Status", "Group", "Grade", "Maximum Grade",
                         "Grade can be changed", "Last modified (submission)", "Last modified (grade)"])
        for lms_id, (name, group) in members.items():
            writer.writerow([f"Participant {lms_id}", name, "", "", group, "", "10.00", "Yes", "-", "-"])
    download = tmp_path / "download.zip"
    with zipfile.ZipFile(download, "w") as bundle:
        # Moodle >= 4.1 names a group's submission after the group (and its id); older Moodle put the group's
        # name before the submitter's.
        bundle.writestr("Team Red_45_assignsubmission_file/soft-hard.ipynb", lms_exports.notebook_bytes("correct"))
        bundle.writestr("Team Blue-Sofía Ruiz_600003_assignsubmission_file_/soft-hard.ipynb",
                        lms_exports.notebook_bytes("buggy"))
    graded = cli("grade", "soft-hard", "--course", str(course), "--zip", str(download), "--roster", str(worksheet),
                 "--jobs", "2")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    report = _report(course)
    assert set(report) == {f"moodle-{i}" for i in members}  # no student "moodle-45": that is the group
    scores = {key: float(row["score"]) for key, row in report.items()}
    assert scores == {"moodle-600001": 10, "moodle-600002": 10, "moodle-600003": 8, "moodle-600004": 8, "moodle-600005": 0}
    assert "group submission of Team Red" in report["moodle-600002"]["notes"]
    assert "group submission of Team Blue" in report["moodle-600004"]["notes"]
    assert "no submission" in report["moodle-600005"]["notes"] and report["moodle-600004"]["name"] == "王伟"
    assert cli("feedback", "soft-hard", "--course", str(course)).returncode == 0
    entries = zipfile.ZipFile(course / "feedback" / "soft-hard-moodle.zip").namelist()
    assert sorted(e.split("_")[1] for e in entries) == sorted(members)  # every member gets their own page
