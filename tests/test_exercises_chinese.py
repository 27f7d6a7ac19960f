"""Every assignment in Chinese as well: one nbgrader source, a catalog, two released notebooks, one grade.

The release puts ``<assignment>.zh.ipynb`` beside each English notebook, with the same cells, grade ids,
points and checks; a Chinese submission is graded exactly as the English one (the same checks, recorded
under the assignment's one notebook in the gradebook) and its feedback page is in Chinese.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import compute_checksum

from attention_course.grading import notebook_translation
from attention_course.grading.intake import adopt_translation, choose_language
from attention_course.grading.layout import Layout
from attention_course.grading.lms import Received
from attention_course.grading.nbgrader_bridge import COURSE_ID
from grading_support import _released, filled, grade_all, released_copy, submit
from repo_scripts import script

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
HAN = re.compile(r"[\u4e00-\u9fff]")
CATALOG = notebook_translation.catalog_path("zh")


def _nbgrader(cell) -> dict:
    return dict(cell.metadata.get("nbgrader") or {})


def _comparable(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if k != "checksum"}


@pytest.fixture(scope="module")
def course_root(tmp_path_factory) -> Path:
    return _released(tmp_path_factory)


# -- the release ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_release_puts_a_chinese_notebook_with_the_same_checks_beside_the_english_one(course_root, assignment):
    folder = course_root / "release" / assignment
    assert (folder / f"{assignment}.ipynb").is_file() and (folder / f"{assignment}.zh.ipynb").is_file()
    english = nbformat.read(folder / f"{assignment}.ipynb", as_version=4)
    chinese = nbformat.read(folder / f"{assignment}.zh.ipynb", as_version=4)
    assert english.metadata["attention_course"]["language"] == "en"
    assert chinese.metadata["attention_course"]["language"] == "zh"
    assert [c.cell_type for c in chinese.cells] == [c.cell_type for c in english.cells]
    assert [_comparable(_nbgrader(c)) for c in chinese.cells] == [_comparable(_nbgrader(c)) for c in english.cells]
    translated = 0
    for en, zh in zip(english.cells, chinese.cells):
        meta = _nbgrader(zh)
        if meta.get("solution"):  # an answer cell is the student's: byte for byte the English one
            assert zh.source == en.source
        if meta.get("checksum"):  # as `nbgrader validate` checks a locked or graded cell
            assert meta["checksum"] == compute_checksum(zh), meta.get("grade_id")
        if zh.cell_type == "markdown" and not meta.get("solution") and re.search(r"[A-Za-z]{3,} [a-z]{3,}", en.source):
            assert HAN.search(zh.source), f"{assignment}: an English instruction was left untranslated: {en.source[:80]!r}"
            translated += 1
    assert translated >= 3
    # the gradebook knows one notebook per assignment: the Chinese one is another form of it
    assert Layout(course_root, ROOT / "solutions").notebooks(assignment) == [assignment]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_exercises_folder_holds_both_notebooks(assignment):
    names = {p.name for p in (EXERCISES / assignment).glob("*.ipynb")}
    assert names == {f"{assignment}.ipynb", f"{assignment}.zh.ipynb"}


def test_the_chinese_soft_hard_notebook_translates_instructions_comments_and_test_messages(course_root):
    chinese = nbformat.read(course_root / "release" / "soft-hard" / "soft-hard.zh.ipynb", as_version=4)
    cells = {_nbgrader(c).get("grade_id"): c.source for c in chinese.cells}
    assert "数值稳定的 softmax" in cells["task-softmax"] and "numerically stable" not in cells["task-softmax"]
    assert "# softmax 的可见测试。" in cells["test-softmax"]
    assert '"调用 softmax 之后的分数（输入不得改变）"' in cells["test-softmax"]
    assert "先运行这个单元格" in cells["setup"]
    # the code is the English notebook's: its test cells still compile, and call the same helpers
    compile(cells["test-softmax"], "test-softmax", "exec")
    assert "expect_close(weights, torch.tensor([0.0900, 0.2447, 0.6652]), \"softmax([1, 2, 3])\", atol=1e-4)" in cells["test-softmax"]


# -- grading: the same grades in either language --------------------------------------------------------

SOLUTION = nbformat.read(ROOT / "solutions" / "soft-hard" / "soft-hard.ipynb", as_version=4)
SOLVED = {_nbgrader(c)["grade_id"]: c.source for c in SOLUTION.cells if _nbgrader(c).get("solution")}
NO_MAX = "def softmax(scores, dim=-1):\n    e = scores.exp()\n    return e / e.sum(dim=dim, keepdim=True)"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, course_root):
    english = nbformat.read(course_root / "release" / "soft-hard" / "soft-hard.ipynb", as_version=4)
    chinese = nbformat.read(course_root / "release" / "soft-hard" / "soft-hard.zh.ipynb", as_version=4)
    buggy = dict(SOLVED, softmax=NO_MAX)
    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp("soft-hard-zh") / "course")
    # Four students in one batch; the Chinese ones hand in the Chinese notebook under its released name.
    for student, notebook, name in (("en-solved", filled(english, SOLVED), "soft-hard"),
                                    ("en-bug", filled(english, buggy), "soft-hard"),
                                    ("zh-solved", filled(chinese, SOLVED), "soft-hard.zh"),
                                    ("zh-bug", filled(chinese, buggy), "soft-hard.zh")):
        submit(course.root, student, "soft-hard", name, notebook)
    return (course, *grade_all(course, "soft-hard"))


@pytest.mark.slow
def test_a_chinese_submission_gets_exactly_the_english_ones_grades(graded):
    course, summaries, results = graded
    for english, chinese in (("en-solved", "zh-solved"), ("en-bug", "zh-bug")):
        en, zh = results[english], results[chinese]
        assert {g: (c["passed"], c["points"]) for g, c in zh.checks.items()} == \
            {g: (c["passed"], c["points"]) for g, c in en.checks.items()}
        assert (zh.score, summaries[chinese].score) == (en.score, summaries[english].score)
        assert (en.language, zh.language) == ("en", "zh")
        assert zh.flags == en.flags  # no read-only cell reported "edited": compared with the Chinese release
    assert results["zh-solved"].score == 10
    assert results["zh-bug"].score == 8 and not results["zh-bug"].checks["test-softmax"]["passed"]
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        assert [n.name for n in gradebook.find_assignment("soft-hard").notebooks] == ["soft-hard"]
        for student in ("zh-solved", "zh-bug"):
            recorded = gradebook.find_submission_notebook("soft-hard", "soft-hard", student)
            assert (recorded.score, recorded.max_score) == (results[student].score, 10)


@pytest.mark.slow
def test_the_chinese_students_feedback_page_is_in_chinese(graded):
    course = graded[0]
    folder = course.feedback("soft-hard").folder
    chinese = (folder / "zh-bug" / "soft-hard" / "soft-hard.html").read_text(encoding="utf-8")
    english = (folder / "en-bug" / "soft-hard" / "soft-hard.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN"' in chinese and '<html lang="en"' in english
    assert "数值稳定的 softmax" in chinese and "A numerically stable softmax" not in chinese
    assert "软注意力与硬注意力" in chinese  # the notebook's title
    assert "A numerically stable softmax" in english and "数值稳定" not in english
    assert "BEGIN HIDDEN TESTS" not in chinese and "run_hidden_check" not in chinese
    # the grader's own words on the failed check too: in Chinese on the Chinese page, English on the English one
    assert re.search(r"未通过 \d+ 个（共 \d+ 个用例）", chinese) and not re.search(r"failed \d+ of \d+ case", chinese)
    assert re.search(r"failed \d+ of \d+ cases", english)
    # with the visible test's hint as the Chinese notebook words it, and nbgrader's own labels in Chinese
    assert "提示：" in chinese and "hint: " not in chinese and "hint: subtract the largest score" in english
    assert "测试单元格" in chinese and ">Test cell</a>" not in chinese and "得分：" in chinese
    assert ">Test cell</a>" in english and "(Score: " in english


# -- which notebook is graded ----------------------------------------------------------------------------


def _released_languages(course_root: Path) -> dict:
    return Layout(course_root, ROOT / "solutions").released_languages("soft-hard", "soft-hard")


def test_a_student_who_hands_in_both_is_graded_on_the_one_they_worked_in(course_root, tmp_path):
    released = _released_languages(course_root)
    folder = tmp_path / "submitted"
    folder.mkdir()
    nbformat.write(released["en"], folder / "soft-hard.ipynb")  # untouched
    nbformat.write(filled(released["zh"], SOLVED), folder / "soft-hard.zh.ipynb")
    os.utime(folder / "soft-hard.zh.ipynb", (1, 1))  # older, but the one with answers
    language, notes = adopt_translation(folder, "soft-hard", released)
    assert language == "zh"
    assert notes == ["both the English and the Chinese notebook were submitted: graded the Chinese one "
                     "(its answers differ from the release's and the other's do not); the English one is kept "
                     "as soft-hard.en.ipynb"]
    assert (folder / "soft-hard.ipynb").read_bytes() == (folder / "soft-hard.zh.ipynb").read_bytes()
    assert (folder / "soft-hard.en.ipynb").is_file()
    # graded again: the same choice, nothing moved twice
    assert adopt_translation(folder, "soft-hard", released)[0] == "zh"
    # the renamed-notebook adoption does not take the Chinese notebook for a renamed copy
    from attention_course.grading.intake import adopt_renamed_notebook

    assert adopt_renamed_notebook(folder, ["soft-hard"], released["en"]) == {}


def test_a_student_who_hands_in_only_the_chinese_notebook_is_graded_on_it(course_root, tmp_path):
    released = _released_languages(course_root)
    nbformat.write(filled(released["zh"], SOLVED), tmp_path / "soft-hard.zh.ipynb")
    assert adopt_translation(tmp_path, "soft-hard", released) == ("zh", [])
    assert json.loads((tmp_path / "soft-hard.ipynb").read_text())["metadata"]["attention_course"]["language"] == "zh"


def test_an_lms_export_with_both_notebooks_is_graded_on_the_newer_when_both_have_answers(course_root):
    released = _released_languages(course_root)
    ids = {_nbgrader(c)["grade_id"] for c in released["en"].cells if _nbgrader(c).get("grade")
           and not _nbgrader(c).get("solution")}

    def received(name, notebook, hour):
        return Received(name, nbformat.writes(notebook).encode(), when=datetime(2026, 5, 1, hour, tzinfo=timezone.utc),
                        order=0)

    english = received("soft-hard.ipynb", filled(released["en"], SOLVED), 9)
    chinese = received("soft-hard.zh.ipynb", filled(released["zh"], SOLVED), 10)
    choice = choose_language([english, chinese], "soft-hard", ids, released)
    assert choice.file is chinese and "graded the Chinese one: the newer of the two" in choice.why
    assert choice.others == ["soft-hard.ipynb"]
    alone = choose_language([chinese], "soft-hard", ids, released)
    assert alone.file is chinese and alone.why == ""


# -- the catalog -----------------------------------------------------------------------------------------


def _update_catalogs():
    return script("update_catalogs")


def _read(path: Path):
    from babel.messages.pofile import read_po

    with path.open("rb") as handle:
        return read_po(handle)


def test_the_catalog_holds_exactly_the_notebooks_messages():
    template = {m.id for m in _update_catalogs().exercise_template(ROOT) if m.id}
    catalog = {m.id for m in _read(CATALOG) if m.id}
    assert template == catalog, ("run `make catalogs` and translate: new or changed "
                                 f"{sorted(template - catalog)[:3]}, gone {sorted(catalog - template)[:3]}")


def test_an_english_cell_that_changes_flags_its_translation_fuzzy(tmp_path):
    root = tmp_path / "repo"
    (root / "solutions" / "soft-hard").mkdir(parents=True)
    notebook = nbformat.read(ROOT / "solutions" / "soft-hard" / "soft-hard.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if _nbgrader(c).get("grade_id") == "task-softmax")
    old = "`scores` may have any shape; the result has the same shape and dtype."
    assert old in cell.source
    cell.source = cell.source.replace(old, "`scores` may have any shape; the result has its shape and dtype.")
    nbformat.write(notebook, root / "solutions" / "soft-hard" / "soft-hard.ipynb")
    catalog = root / CATALOG.relative_to(ROOT)
    catalog.parent.mkdir(parents=True)
    shutil.copy2(CATALOG, catalog)
    _update_catalogs().update_exercise_catalogs(root)
    changed = [m for m in _read(catalog) if m.id and "has its shape and dtype" in m.id]
    assert len(changed) == 1 and changed[0].fuzzy and "形状" in changed[0].string
    # a fuzzy translation is not used: the release leaves that message in English, and says so
    translations = notebook_translation.read_catalog(path=catalog)
    assert changed[0].id not in translations


# -- the book's Chinese exercise pages ---------------------------------------------------------------------


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_chinese_exercise_page_links_the_chinese_notebook(assignment):
    page = ROOT / "book" / "locale" / "zh_CN" / "LC_MESSAGES" / "book" / "exercises" / f"{assignment}.po"
    link = f"<../../exercises/{assignment}/{assignment}.zh.ipynb>`"
    assert any(link in (m.string or "") for m in _read(page) if m.id), f"{page.name} does not link {assignment}.zh.ipynb"
    assert (EXERCISES / assignment / f"{assignment}.zh.ipynb").is_file()


def test_a_moodle_export_with_chinese_notebooks_is_taken_in_under_the_notebooks_name(tmp_path_factory, course_root):
    from attention_course.grading.intake import import_zip, notes_of
    from lms_exports import Sample, moodle_download

    course = released_copy(tmp_path_factory, tmp_path_factory.mktemp("moodle-zh") / "course")
    released = _released_languages(course.root)
    solved_zh = nbformat.writes(filled(released["zh"], SOLVED)).encode()
    untouched_en = nbformat.writes(released["en"]).encode()
    samples = [Sample("700001", "Li Lei", {"soft-hard.zh.ipynb": solved_zh}, 10),
               Sample("700002", "Han Meimei", {"soft-hard.ipynb": untouched_en, "soft-hard.zh.ipynb": solved_zh}, 10)]
    import_zip(course.layout, moodle_download(samples, tmp_path_factory.mktemp("zip") / "export.zip"), "soft-hard")
    folders = {p.parent.parent.name: p for p in (course.root / "submitted").glob("*/soft-hard/soft-hard.ipynb")}
    assert len(folders) == 2 and not list((course.root / "submitted").glob("*/soft-hard/soft-hard.zh.ipynb"))
    for student, path in folders.items():  # each graded under the notebook's name, and it is the Chinese one
        assert path.read_bytes() == solved_zh, student
    notes = {student: notes_of(course.layout, "soft-hard", student, ["soft-hard"]) for student in folders}
    assert sorted(map(len, notes.values())) == [0, 2]  # the Chinese notebook alone under its own name: nothing to say
    [both] = [n for n in notes.values() if n]
    assert both == ["soft-hard.ipynb: graded the file soft-hard.zh.ipynb, the Chinese notebook (both the English and "
                    "the Chinese notebook were submitted; graded the Chinese one: its answers differ from the release's "
                    "and the other's do not)", "also submitted, not graded: soft-hard.ipynb"]
