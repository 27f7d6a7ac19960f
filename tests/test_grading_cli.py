"""The instructor's commands, as an instructor types them: every ordinary mistake gets one clear line and
exit status 2 (never a traceback), and the instructor's own files are kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from attention_course.grading.course import Course, CourseError
from grading_support import released_copy

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_course.grading.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def released_course(tmp_path_factory) -> Path:
    """A course as `attention-course release --course COURSE --no-verify` makes it (a copy of the session's)."""
    return released_copy(tmp_path_factory, tmp_path_factory.mktemp("cli") / "course").root


MISTAKES = ["mistyped assignment", "zip that is not a zip", "zip that does not exist", "roster that is not a roster",
            "negative jobs", "unknown student", "missing course", "export to a folder", "export on a missing course",
            "export before grading", "feedback before grading", "check on a file that is not a notebook"]


def _mistakes(course: Path, scratch: Path) -> dict[str, tuple[list[str], str]]:
    (scratch / "not-a-zip.zip").write_text("hello")
    (scratch / "not-json.ipynb").write_text("this is not JSON")
    (scratch / "a-folder").mkdir(exist_ok=True)
    missing = scratch / "no-such-course"
    return {
        "mistyped assignment": (["grade", "sof-hard", "--course", str(course)], "no assignment 'sof-hard'; this course has"),
        "zip that is not a zip": (["grade", "soft-hard", "--course", str(course), "--zip", str(scratch / "not-a-zip.zip")],
                                  "is not a zip file"),
        "zip that does not exist": (["grade", "soft-hard", "--course", str(course), "--zip", str(scratch / "gone.zip")],
                                    "no such file"),
        "roster that is not a roster": (["grade", "soft-hard", "--course", str(course), "--roster",
                                         str(scratch / "not-json.ipynb")], "neither a Moodle grading worksheet"),
        "negative jobs": (["grade", "soft-hard", "--course", str(course), "--jobs", "-3"], "--jobs must be at least 1"),
        "unknown student": (["grade", "soft-hard", "--course", str(course), "--student", "nobody"], "no submission"),
        "missing course": (["grade", "soft-hard", "--course", str(missing)], "no course at"),
        "export to a folder": (["export", "--course", str(course), "--to", str(scratch / "a-folder")], "is a folder"),
        "export on a missing course": (["export", "--course", str(missing)], "no course at"),
        "export before grading": (["export", "--course", str(course), "--to", str(scratch / "g.csv")],
                                  "nothing graded yet"),
        "feedback before grading": (["feedback", "soft-hard", "--course", str(course)], "nothing graded yet"),
        "check on a file that is not a notebook": (["check", str(scratch / "not-json.ipynb")], "not a notebook"),
    }


@pytest.mark.parametrize("mistake", MISTAKES)
def test_an_ordinary_mistake_gets_one_line_and_exit_status_2(mistake, released_course, tmp_path):
    mistakes = _mistakes(released_course, tmp_path)
    assert sorted(mistakes) == sorted(MISTAKES)
    args, says = mistakes[mistake]
    ran = cli(*args, timeout=300)
    assert ran.returncode == 2, (ran.returncode, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], ran.stderr
    assert not (tmp_path / "no-such-course").exists()  # a mistyped --course creates nothing


def test_grade_help_lists_the_assignments():
    shown = cli("grade", "--help", timeout=120)
    assert shown.returncode == 0
    for assignment in ("soft-hard", "three-stages", "seq2seq-attention"):
        assert assignment in shown.stdout


def test_release_keeps_the_instructors_config_and_refuses_to_replace_an_edited_source(tmp_path):
    course = Course(tmp_path / "course")
    course.root.mkdir()
    shared = tmp_path / "srv" / "grades"
    shared.mkdir(parents=True)
    own = ("c = get_config()  # noqa: F821\n"
           "c.Exchange.timezone = 'Asia/Shanghai'\n"
           "c.AssignLatePenalties.plugin_class = 'mycourse.HalfOffPerDay'\n"
           f"c.CourseDirectory.db_url = 'sqlite:///{shared}/gradebook.db'\n")
    (course.root / "nbgrader_config.py").write_text(own)
    course.generate("soft-hard")
    config = (course.root / "nbgrader_config.py").read_text()
    assert config.startswith(own) and "c.CourseDirectory.course_id = 'attention-course'" in config
    # the gradebook is where the instructor's config puts it, not in the course folder
    assert (shared / "gradebook.db").is_file() and not (course.root / "gradebook.db").exists()
    course.generate("soft-hard")  # again: unchanged source, nothing added twice
    assert (course.root / "nbgrader_config.py").read_text() == config

    source = course.root / "source" / "soft-hard" / "soft-hard.ipynb"
    edited = source.read_text().replace("softmax", "softmax ", 1)
    source.write_text(edited)
    with pytest.raises(CourseError, match="edited since the grader wrote it"):
        course.generate("soft-hard")
    assert source.read_text() == edited  # kept
    refused = cli("release", "--course", str(course.root), "--no-verify", timeout=300)
    assert refused.returncode == 2 and "release --force" in refused.stderr and source.read_text() == edited
    course.generate("soft-hard", force=True)
    assert source.read_bytes() == (ROOT / "solutions" / "soft-hard" / "soft-hard.ipynb").read_bytes()
