"""nbgrader's own pipeline, with the trusted verdicts in place of executing the notebook.

``nbgrader autograde`` sanitises a submission (clear outputs, deduplicate ids, restore locked and
test cells) and then executes it, scoring each test cell by whether its output holds an error. Here
the sanitising steps are nbgrader's, plus :class:`ClearHiddenTests` so that hidden tests never enter
an autograded notebook (and so never reach feedback); the execution step is :class:`ApplyVerdicts`,
which writes each test cell's verdict (decided outside the sandbox) as its output. nbgrader's
``SaveAutoGrades`` then records the scores in the gradebook, so formgrader, ``generate_feedback``
and ``export`` work as instructors know them.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import nbformat
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbformat.v4 import new_output
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearOutput, IgnorePattern,
    LimitOutput, NbGraderPreprocessor, OverwriteCells, OverwriteKernelspec, SaveAutoGrades,
)
from traitlets import Unicode
from traitlets.config import Config

from attention_course.grading.grade import NotebookResult
from attention_course.grading.gradebook import COURSE_ID, gradebook_url
from attention_course.grading.runner import refused_by_grader
from attention_course.grading.submission import HIDDEN_TESTS



def results_path(results_dir: Path, assignment: str, student: str, notebook: str) -> Path:
    return results_dir / assignment / student / f"{notebook}.json"


# -- answers graded by hand ----------------------------------------------------------------------------
#
# nbgrader grades an answer cell with points (``grade: true, solution: true``, a written answer in a markdown
# cell or a free-form code answer) and a task cell (``task: true``) by hand: autograde gives it no score
# (auto_score None, needs_manual_grade True) unless the answer is the release's stub, which scores 0 ("No
# response."); formgrader's manual_score then takes precedence over the auto score, and saving it clears
# needs_manual_grade. A re-autograde keeps manual_score but marks every cell that has one for review.


def written_cells(notebook) -> dict[str, float]:
    """{grade id: points} of the cells of a released ``notebook`` that an instructor grades by hand."""
    found = {}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader") or {}
        if meta.get("grade_id") and ((meta.get("grade") and meta.get("solution")) or meta.get("task")):
            found[meta["grade_id"]] = float(meta.get("points", 0) or 0)
    return found


def written_answers(path: Path, released) -> dict[str, str]:
    """{grade id: digest} of the answers that the submitted notebook at ``path`` gives to the hand-graded cells
    of ``released``, read as nbgrader reads them (the first cell of that grade id; the release's stub when
    there is none, or it is of another type). A task is answered by the notebook as a whole: its digest is of
    every cell. Empty for a file that is not a readable notebook. Plain JSON: nothing of the submission runs."""
    wanted = {c.metadata["nbgrader"]["grade_id"]: c for c in released.cells
              if (c.metadata.get("nbgrader") or {}).get("grade_id") in written_cells(released)}
    if not wanted:
        return {}
    try:
        cells = json.loads(path.read_bytes().decode("utf-8"))["cells"] if path.is_file() and not path.is_symlink() else None
        if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
            return {}
        sources = [(c.get("cell_type"), ((c.get("metadata") or {}).get("nbgrader") or {}).get("grade_id"),
                    "".join(c.get("source")) if isinstance(c.get("source"), list) else str(c.get("source", "")))
                   for c in cells]
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
        return {}

    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    answers = {}
    for grade_id, cell in wanted.items():
        if (cell.metadata.get("nbgrader") or {}).get("task"):
            answers[grade_id] = digest(json.dumps(sources, ensure_ascii=False))
            continue
        first = next(((kind, source) for kind, gid, source in sources if gid == grade_id), None)
        answers[grade_id] = digest(first[1] if first is not None and first[0] == cell.cell_type else cell.source)
    return answers


class DropDuplicateGradeIds(NbGraderPreprocessor):
    """Keep the first cell of each grade id and drop later copies (already flagged by the grader).

    nbgrader's DeduplicateIds empties the copies' metadata instead, which makes a later step fail with
    KeyError 'grade_id', and the whole submission goes unrecorded.
    """

    def preprocess(self, nb, resources):
        seen, kept = set(), []
        for cell in nb.cells:
            grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id")
            if grade_id is not None and grade_id in seen:
                continue
            seen.add(grade_id)
            kept.append(cell)
        nb.cells = kept
        return nb, resources


class RestoreReleaseMetadata(NbGraderPreprocessor):
    """Every cell's nbgrader metadata as the release has it (the grader flagged the differences).

    A cell whose grade id is in the release gets the release's metadata (points, grade, solution, locked);
    any other cell loses its nbgrader metadata, so that an answer cell marked as graded or a test cell the
    student added is plain code to nbgrader. Without this, such edits make nbgrader fail to record the
    submission while the grader's summary shows a score."""

    release_dir = Unicode(help="The course's release folder").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        path = Path(self.release_dir) / info["assignment"] / f"{info['notebook']}.ipynb"
        released = nbformat.read(path, as_version=4)
        release = {(c.metadata.get("nbgrader") or {}).get("grade_id"): c for c in released.cells
                   if (c.metadata.get("nbgrader") or {}).get("grade_id")}
        for cell in nb.cells:
            grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id")
            if grade_id in release and release[grade_id].cell_type == cell.cell_type:
                cell.metadata["nbgrader"] = copy.deepcopy(release[grade_id].metadata["nbgrader"])
            else:
                cell.metadata.pop("nbgrader", None)
        return nb, resources


class HideHiddenTests(NbGraderPreprocessor):
    """For feedback, whoever graded the notebook: test cells show only their visible part, and an error in
    a test cell only its message (a traceback of stock nbgrader's run quotes the hidden lines)."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader") or {}
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            cell.source = HIDDEN_TESTS.sub("", cell.source).rstrip()
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return nb, resources


class ApplyVerdicts(NbGraderPreprocessor):
    """Write the grader's verdicts into the test cells, and the sandboxed run's output into the others."""

    results_dir = Unicode(help="Folder of the trusted results, one JSON per notebook").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        path = results_path(Path(self.results_dir), info["assignment"], info["student"], info["notebook"])
        result = NotebookResult.load(path) if path.is_file() else None
        unused_runs = list(result.cells) if result else []
        explained = False  # the first cell the grader's rules stopped says why, in plain words, once a page
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader") or {}
            grade_id = meta.get("grade_id")
            if result is not None and grade_id in result.checks:
                cell.outputs = self._verdict_outputs(result.checks[grade_id])
            elif meta.get("grade") and not meta.get("solution"):  # (a code answer graded by hand keeps its run)
                cell.outputs = [new_output("error", ename="NotGraded", evalue="no result for this notebook",
                                           traceback=["NotGraded: the grader has no result for this notebook"])]
            else:
                run = next((r for r in unused_runs if r.get("source", "").strip() == cell.source.strip()), None)
                if run is not None:
                    unused_runs.remove(run)
                    cell.outputs, said = self._run_outputs(run, explain=not explained)
                    explained = explained or said
        return nb, resources

    @staticmethod
    def _verdict_outputs(check: dict) -> list:
        if check["passed"]:
            return [new_output("stream", name="stdout", text=check["message"] + "\n")]
        return [new_output("error", ename="TestFailed", evalue=check["message"],
                           traceback=["TestFailed: " + line for line in check["message"].splitlines()])]

    @staticmethod
    def _run_outputs(run: dict, explain: bool = True) -> tuple[list, bool]:
        """The outputs of a cell as the sandboxed run left them, and whether they explain the grader's rules
        (before the first error those rules caused: in short lines a phone shows whole, where the error's
        own text is one long line)."""
        outputs, explained = [], False
        if run.get("stdout"):
            outputs.append(new_output("stream", name="stdout", text=run["stdout"]))
        if run.get("status") != "ok":
            error = str(run.get("error"))
            if refused_by_grader(error) and explain:
                outputs.append(new_output("stream", name="stdout", text=GRADER_NOTE))
                explained = True
            outputs.append(new_output("error", ename="CellError", evalue=error, traceback=[error]))
        return outputs, explained


GRADER_NOTE = """\
Note from the grader: the error below costs no points by itself.
While it grades, the grader switches off PyTorch's softmax and its
relatives, and refuses a few things such as starting programs.
Only the graded functions earn points, tested by the grader's own calls.
"""


def autograde_config(root: Path, results_dir: Path, assignment: str, student: str) -> Config:
    config = Config()
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.db_url = gradebook_url(root)
    config.CourseDirectory.assignment_id = assignment
    config.CourseDirectory.student_id = student
    config.Autograde.sanitize_preprocessors = [
        RestoreReleaseMetadata, ClearOutput, DropDuplicateGradeIds, OverwriteKernelspec, OverwriteCells,
        ClearHiddenTests, CheckCellMetadata,
    ]
    config.RestoreReleaseMetadata.release_dir = str(root / "release")
    config.Autograde.autograde_preprocessors = [
        ApplyVerdicts, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
        AssignLatePenalties, CheckCellMetadata,
    ]
    config.OverwriteCells.add_missing_cells = True
    config.ClearHiddenTests.enforce_metadata = False
    config.ApplyVerdicts.results_dir = str(results_dir)
    config.BaseConverter.force = True
    # The notebook is validated once, after the last step, not after every step: the same notebook, and the
    # same error if it is not valid (nbconvert's own option), in a fifth less time a record.
    config.Exporter.optimistic_validation = True
    return config


def record_in_gradebook(root: Path, results_dir: Path, assignment: str, student: str) -> None:
    """Run nbgrader's autograde pipeline for one student (raises on nbgrader's errors)."""
    config = autograde_config(root, results_dir, assignment, student)
    converter = Autograde(coursedir=CourseDirectory(config=config), config=config)
    converter.start()
