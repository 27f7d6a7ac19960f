"""Feedback: a page for each graded student, and a zip laid out for each platform's feedback upload.

The pages are nbgrader's own (``generate_feedback``) with no hidden test in them, whoever graded the
notebooks, and their math typeset into the page (:mod:`feedback_pages`); a submission that could not be
graded gets a page that says why."""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import GetGrades

from attention_course.grading import feedback_pages, lms
from attention_course.grading.errors import CourseError
from attention_course.grading.grade import NotebookResult, data_files
from attention_course.grading.intake import intake_notes, people as read_people, read_intake, students as all_students
from attention_course.grading.layout import Layout
from attention_course.grading.nbgrader_bridge import HideHiddenTests, written_cells
from attention_course.grading.notebook_translation import ChineseFeedback
from attention_course.grading.written import all_written

AWAITING_FEEDBACK = "written answers await a manual grade in formgrader (feedback once they are graded)"


@dataclass
class FeedbackReport:
    folder: Path
    written: int = 0
    skipped: Counter = field(default_factory=Counter)  # why -> how many students
    zips: list[Path] = field(default_factory=list)  # one per platform, for its feedback upload
    not_zipped: Counter = field(default_factory=Counter)  # why -> how many pages are in no zip
    math_inlined: int = 0  # pages whose math could not be typeset (no Node?): MathJax inlined instead


PAGE_LANGUAGE = {"en": "en", "zh": "zh-CN"}


def set_page_language(page: Path, language: str) -> None:
    """Say the page's language on its ``<html>`` element (nbgrader's template says none): the language of the
    notebook the student submitted, whose instructions the page shows; and put the template's own labels in
    that language (:func:`feedback_pages.page_chrome_in`)."""
    if not page.is_file():
        return
    html = page.read_text(encoding="utf-8")
    tagged = re.sub(r"<html\b(?![^>]*\blang=)", f'<html lang="{PAGE_LANGUAGE.get(language, "en")}"', html, count=1)
    tagged = feedback_pages.page_chrome_in(tagged, language)
    if tagged != html:
        page.write_text(tagged, encoding="utf-8")


def feedback(layout: Layout, assignment: str) -> FeedbackReport:
    """Feedback for every graded student: nbgrader's page (no hidden tests in it, whoever graded the
    notebooks; its math typeset into the page; the points and comments of the answers graded by hand in
    formgrader), or a page that says why the submission could not be graded; and
    ``feedback/<assignment>-<platform>.zip`` laid out for each platform's feedback upload. A student with an
    answer that awaits a manual grade gets no page (nor a place in the zip) until it has one."""
    layout.require(assignment)
    notebooks = layout.notebooks(assignment)
    graded = [s for s in all_students(layout, assignment)
              if all(layout.results_path(assignment, s, nb).is_file() for nb in notebooks)]
    if not graded:
        raise CourseError(f"nothing graded yet for {assignment}: run `attention-course grade {assignment}` first")
    try:
        feedback_pages.mathjax_script()  # (fails early, with what to do, if the MathJax files are missing)
    except FileNotFoundError as missing:
        raise CourseError(str(missing)) from None
    nbgrader_pages: list[Path] = []
    if (layout.root / "autograded").is_dir() and any((layout.root / "autograded").glob(f"*/{assignment}")):
        config = layout.config()
        config.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, ChineseFeedback, CSSHTMLHeaderPreprocessor]
        config.ChineseFeedback.release_dir = str(layout.root / "release")
        config.ChineseFeedback.results_dir = str(layout.results_dir)
        result = layout.api(config).generate_feedback(assignment, force=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_feedback failed:\n{result['log']}")
        _drop_release_data(layout, assignment)
    people, intake = read_people(layout, assignment), read_intake(layout, assignment)
    awaiting = {student for student, grades in all_written(layout, assignment).items() if any(g.awaiting for g in grades)
                } if any(written_cells(layout.released(assignment, nb)) for nb in notebooks) else set()
    report = FeedbackReport(folder=layout.root / "feedback")
    zips: dict[str, zipfile.ZipFile] = {}
    written: list[tuple[str, list[Path]]] = []
    try:
        for student in all_students(layout, assignment):
            if student not in graded:
                report.skipped["never graded"] += 1
                continue
            folder = layout.root / "feedback" / student / assignment
            pages = [folder / f"{nb}.html" for nb in notebooks]
            if student in awaiting:  # a page now would show 0 for an answer nobody has graded yet: none, until it is
                for page in pages:
                    page.unlink(missing_ok=True)
                report.skipped[AWAITING_FEEDBACK] += 1
                continue
            results = [NotebookResult.load(layout.results_path(assignment, student, nb)) for nb in notebooks]
            if any(r.readable and not p.is_file() for p, r in zip(pages, results)):
                report.skipped["nbgrader wrote no page (it could not record the notebook; its score is in the report)"] += 1
                continue
            for page, result, nb in zip(pages, results, notebooks):
                if result.readable:
                    nbgrader_pages.append(page)
                    set_page_language(page, result.language)
                else:  # nbgrader writes nothing for a notebook it could not read: say what was wrong
                    folder.mkdir(parents=True, exist_ok=True)
                    person = people.get(student)
                    reasons = [f for f in intake_notes(layout, assignment, student, intake) if not f.startswith("late")]
                    reasons += [f for f in result.flags if not reasons or f != "missing notebook"]
                    received = (intake["students"].get(student) or {}).get("others", [])
                    page.write_text(feedback_pages.problem_page(assignment, (person.name if person else "") or student,
                                                                reasons or ["no notebook was received"], received,
                                                                notebook=f"{nb}.ipynb"),
                                    encoding="utf-8")
            report.written += 1
            written.append((student, pages))
        # The math of nbgrader's pages, typeset where they are (no script, no network); inlined MathJax
        # for any page that could not be typeset.
        for page in feedback_pages.typeset(nbgrader_pages):
            page.write_text(feedback_pages.offline_math(page.read_text(encoding="utf-8")), encoding="utf-8")
            report.math_inlined += 1
        for student, pages in written:
            person = people.get(student) or lms.Student(key=student, lms="folder", lms_id=student)
            entry = lms.feedback_entry(person, assignment)
            if entry is None:
                report.not_zipped["no uploaded file on the platform to attach it to"] += 1
                continue
            if person.lms not in zips:
                path = layout.root / "feedback" / f"{assignment}-{person.lms}.zip"
                zips[person.lms] = zipfile.ZipFile(path.with_name(path.name + ".partial"), "w", zipfile.ZIP_DEFLATED)
                report.zips.append(path)
            for page, nb in zip(pages, notebooks):
                name = entry if len(notebooks) == 1 else entry.replace(f"{assignment}-feedback", f"{nb}-feedback")
                zips[person.lms].write(page, name)
    finally:
        for bundle in zips.values():
            bundle.close()
    for path in report.zips:
        path.with_name(path.name + ".partial").replace(path)
    return report


def _drop_release_data(layout: Layout, assignment: str) -> None:
    """nbgrader copies every file of the autograded folder beside each feedback page, the release's data
    files too (a 250 KB corpus a student already has): those copies are removed."""
    released = {path.name for path in data_files(layout.release_folder(assignment))}
    for copy in (layout.root / "feedback").glob(f"*/{assignment}/*"):
        if copy.name in released and copy.is_file():
            copy.unlink()
