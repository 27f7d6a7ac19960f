"""The class report (``attention-course report``): what an instructor learns after grading a class.

One soft-hard class is graded once for the module: honest students in the book's style and in others, two
disguised copies of one honest solution, students with the same canonical bug, one with another bug in
the same test, one who handed in the release untouched, and one whose folder holds a file the grader does
not use (a flag). The report's figures are checked against the saved results read here independently.
"""

from __future__ import annotations

import csv
import math
import random
import re
import shutil

import pytest

import in_process
from canonical_bugs import CANONICAL_BUGS
from grading_support import filled, grade_all, released_copy, submit_all
from honest_corpus import SOFT_HARD as HONEST
from attention_course.grading.class_report import pattern_of, point_biserial
from attention_course.grading.cli import main as cli
from attention_course.grading.course import Course
from attention_course.grading.grade import NotebookResult
from attention_course.grading import report_page

ASSIGNMENT = "soft-hard"
DIM_0 = CANONICAL_BUGS["softmax along dim 0 whatever dim says"][2]
NO_MAX = CANONICAL_BUGS["softmax without subtracting the largest score"][2]
NO_TEMPERATURE = CANONICAL_BUGS["soft attention without the temperature"][2]

# A copy of the d2l-style honest answer, disguised: names changed, comments rewritten, independent
# statements reordered, blank lines moved.
DISGUISED_SOFTMAX = '''def softmax(logits, dim=-1):
    # subtract the maximum first: exp of a large score would overflow
    shifted = torch.exp(logits - logits.max(dim, keepdim=True)[0])

    total = shifted.sum(dim, keepdim=True)
    return shifted / total
'''
DISGUISED_HARD = '''def hard_attention(s, v):
    n = s.size(-1)
    pick = torch.argmax(s, dim=-1)   # ties: the first maximum
    w = F.one_hot(pick, num_classes=n).type_as(s)
    return torch.matmul(w.unsqueeze(-2), v).squeeze(-2), w
'''


def _solution_answers() -> dict[str, str]:
    cells = in_process.solution_cells(ASSIGNMENT)
    notebook = in_process.solution_notebook(ASSIGNMENT)
    return {cell.metadata["nbgrader"]["grade_id"]: cells[cell.metadata["nbgrader"]["grade_id"]]
            for cell in notebook.cells if (cell.metadata.get("nbgrader") or {}).get("solution")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp("report") / "course")
    released = course.released(ASSIGNMENT, ASSIGNMENT)
    base = _solution_answers()
    d2l = HONEST["d2l-max-indexing"].answers
    students = {
        "honest-book": {},
        "honest-d2l": d2l,
        "honest-uva": HONEST["uva-type-hints-einsum"].answers,
        "copy-one": d2l,
        "copy-two": {**d2l, "softmax": DISGUISED_SOFTMAX, "hard_attention": DISGUISED_HARD},
        "dim-0-a": {"softmax": DIM_0},
        "dim-0-b": {"softmax": DIM_0},
        "no-max": {"softmax": NO_MAX},
        "no-temperature": {"soft_attention": NO_TEMPERATURE},
    }
    notebooks = {student: filled(released, {**base, **answers}) for student, answers in students.items()}
    notebooks["untouched"] = released
    submit_all(course, ASSIGNMENT, notebooks, files={"honest-uva": {"notes.txt": "my scratch notes"}})
    summaries, results = grade_all(course, ASSIGNMENT)
    return course, summaries, results


def _csv(path):
    with path.open(encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


def _text(page) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<svg.*?</svg>|<[^>]+>", " ", page, flags=re.DOTALL))


def test_point_biserial_is_pearsons_r_with_a_zero_one_variable():
    rng = random.Random(5)
    for _ in range(20):
        passed = [rng.random() < 0.6 for _ in range(30)]
        rest = [rng.gauss(10, 3) + (2 if p else 0) for p in passed]
        mx, my = sum(passed) / 30, sum(rest) / 30
        cov = sum((p - mx) * (r - my) for p, r in zip(passed, rest))
        pearson = cov / math.sqrt(sum((p - mx) ** 2 for p in passed) * sum((r - my) ** 2 for r in rest))
        assert point_biserial(passed, rest) == pytest.approx(pearson, abs=1e-12)
    assert point_biserial([True, True], [1.0, 2.0]) is None  # nobody failed: undefined, not 0
    assert point_biserial([True, False], [3.0, 3.0]) is None  # no spread in the rest


def test_failure_patterns_hide_numbers_not_words():
    one = "failed 2 of 6 cases: softmax\n- hidden case 'rows': wrong values (expected 2.63, got 2.01)"
    two = "failed 2 of 6 cases: softmax\n- hidden case 'rows': wrong values (expected 0.5, got -1e-3)"
    assert pattern_of(one) == pattern_of(two)
    assert pattern_of(one) != pattern_of(one.replace("wrong values", "expected shape"))


def test_the_report_is_written_after_grading_with_its_csv_files(graded):
    course, _, _ = graded
    folder = course.root / "reports" / ASSIGNMENT
    assert (folder / "index.html").is_file()
    assert {p.name for p in folder.glob("*.csv")} == {"checks.csv", "failures.csv", "similarity.csv", "regrade.csv"}
    assert list(_csv(folder / "similarity.csv")[0]) == ["student_a", "student_b", "function", "score", "flagged"]
    assert (course.root / "reports" / f"{ASSIGNMENT}.csv").is_file()  # the one-line-a-student report, as before


def test_pass_rates_and_discrimination_match_the_saved_results(graded):
    course, _, results = graded
    rows = {row["test"]: row for row in _csv(course.root / "reports" / ASSIGNMENT / "checks.csv")}
    tests = {g: c["points"] for r in results.values() for g, c in r.checks.items()}
    assert set(rows) == set(tests)
    for grade_id, points in tests.items():
        passed = [results[s].checks[grade_id]["passed"] for s in sorted(results)]
        totals = [results[s].score for s in sorted(results)]
        rest = [t - (points if p else 0) for p, t in zip(passed, totals)]
        assert int(rows[grade_id]["passed"]) == sum(passed) and int(rows[grade_id]["graded"]) == len(results)
        expected = point_biserial(passed, rest)
        assert rows[grade_id]["discrimination"] == ("" if expected is None else f"{expected:.3f}")
    # the softmax test was failed by four students (three bugs of it, and the untouched release) and passed by six
    assert (rows["test-softmax"]["passed"], rows["test-softmax"]["graded"]) == ("6", "10")


def test_the_same_mistake_is_counted_once_with_its_students(graded):
    course, _, _ = graded
    failures = [row for row in _csv(course.root / "reports" / ASSIGNMENT / "failures.csv") if row["test"] == "test-softmax"]
    by_students = {row["students"]: int(row["count"]) for row in failures}
    assert by_students.get("dim-0-a dim-0-b") == 2, failures  # one bug, two students: one pattern
    assert sum(by_students.values()) == 4
    assert len(failures) == 3  # dim 0, no max subtraction, nothing written: three different mistakes


def test_the_page_shows_scores_flags_time_and_the_alike_pair(graded):
    course, summaries, _ = graded
    page = (course.root / "reports" / ASSIGNMENT / "index.html").read_text(encoding="utf-8")
    text = _text(page)
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")  # offline, no script
    assert page.count("<svg") == 3  # the distribution, the pass rates, the CPU seconds
    assert "10 students graded" in text
    flagged = [s for s, summary in summaries.items() if summary.flags]
    assert flagged and all(s in text for s in flagged)
    assert "notes.txt" in text  # why honest-uva is flagged: a file the grader does not use
    pairs = {(r["student_a"], r["student_b"]): r for r in _csv(course.root / "reports" / ASSIGNMENT / "similarity.csv")
             if r["flagged"] in ("True", "true", "1", "yes")}
    assert ("copy-one", "copy-two") in pairs, pairs
    assert "copy-one · copy-two" in text and "pairs of students flagged" in text
    independent = {"honest-book", "honest-d2l", "honest-uva"}  # honest, and written apart
    assert not [pair for pair in pairs if set(pair) <= independent]


def test_the_page_is_the_same_for_the_same_grades_and_comes_in_chinese(graded, tmp_path):
    course, _, _ = graded
    page = course.root / "reports" / ASSIGNMENT / "index.html"
    before = page.read_bytes()
    assert cli(["report", ASSIGNMENT, "--course", str(course.root)]) == 0
    assert page.read_bytes() == before
    assert cli(["report", ASSIGNMENT, "--course", str(course.root), "--language", "zh"]) == 0
    chinese = page.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in chinese and "全班报告" in chinese and "区分度" in chinese
    for english in ("Scores", "Tests", "Flagged submissions", "What the last regrade changed", "students graded"):
        assert english not in _text(chinese)
    assert cli(["report", ASSIGNMENT, "--course", str(course.root)]) == 0
    assert page.read_bytes() == before


def test_report_refuses_a_missing_archive_folder(graded, tmp_path, capsys):
    course, _, _ = graded
    assert cli(["report", ASSIGNMENT, "--course", str(course.root), "--against", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_page_fits_a_phone(graded, browser):
    course, _, _ = graded
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto((course.root / "reports" / ASSIGNMENT / "index.html").as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    for summary in page.locator("details summary").all():
        summary.click()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # the code side by side, stacked
    page.close()


def test_a_regrade_says_who_changed_by_how_much_and_why(graded, tmp_path_factory):
    course, _, _ = graded
    regrade = tmp_path_factory.mktemp("regrade") / "course"
    shutil.copytree(course.root, regrade)
    again = Course(regrade)
    base, released = _solution_answers(), again.released(ASSIGNMENT, ASSIGNMENT)
    submit_all(again, ASSIGNMENT, {"dim-0-a": filled(released, base)})  # a resubmission that fixes the bug
    before = NotebookResult.load(again.layout.results_path(ASSIGNMENT, "dim-0-a", ASSIGNMENT)).score
    assert cli(["grade", ASSIGNMENT, "--course", str(regrade), "--force", "--jobs", "2"]) == 0
    rows = _csv(regrade / "reports" / ASSIGNMENT / "regrade.csv")
    assert [row["student"] for row in rows] == ["dim-0-a"]  # everyone was graded again; one grade changed
    [row] = rows
    after = NotebookResult.load(again.layout.results_path(ASSIGNMENT, "dim-0-a", ASSIGNMENT)).score
    assert (float(row["before"]), float(row["after"])) == (before, after) and after > before
    assert row["why"] == "the submission changed"
    assert row["tests"].startswith("test-softmax 0->")
    text = _text((regrade / "reports" / ASSIGNMENT / "index.html").read_text(encoding="utf-8"))
    assert "10 students graded again; 1 of them changed." in text


def test_a_report_that_fails_is_said_and_loses_no_grade(graded, tmp_path_factory, monkeypatch, capsys):
    course, summaries, _ = graded
    copy = tmp_path_factory.mktemp("broken-report") / "course"
    shutil.copytree(course.root, copy)

    def broken(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(report_page, "write_report_page", broken)
    again = Course(copy).grade(ASSIGNMENT, jobs=1, progress=False)  # nothing changed: nobody graded again
    said = capsys.readouterr().err
    assert "the class report could not be written (OSError: No space left on device" in said
    assert f"Run `attention-course report {ASSIGNMENT}` to try again" in said
    assert {s.student: s.score for s in again} == {student: s.score for student, s in summaries.items()}
