"""The course folder: where each workflow finds and leaves its files, and the course seed.

Layout (nbgrader's own): ``source/<assignment>/`` (copied from the repository's ``solutions/``),
``release/``, ``submitted/<student>/<assignment>/``, ``autograded/``, ``feedback/``, and the gradebook
(``gradebook.db`` unless the course config names a server, see :mod:`gradebook`). The grader keeps its
trusted results in ``grader-results/``, which no sandbox ever sees, and its own state in ``grader/``
(the course seeds, what each LMS export said of each student, the sources it wrote).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from attention_course.grading.errors import CourseError
from attention_course.grading.gradebook import COURSE_ID, gradebook_url
from attention_course.grading.nbgrader_bridge import results_path
from attention_course.grading.notebook_translation import TRANSLATED, is_translation, translated_name

REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Layout:
    """One course folder (``root``) and the solutions its assignments are released from."""

    root: Path
    solutions: Path

    @property
    def results_dir(self) -> Path:
        return self.root / "grader-results"

    @property
    def seeds_path(self) -> Path:
        return self.root / "grader" / "seeds.json"

    def results_path(self, assignment: str, student: str, notebook: str) -> Path:
        return results_path(self.results_dir, assignment, student, notebook)

    def submission_folder(self, assignment: str, student: str) -> Path:
        return self.root / "submitted" / student / assignment

    def release_folder(self, assignment: str) -> Path:
        return self.root / "release" / assignment

    def intake_path(self, assignment: str) -> Path:
        return self.root / "grader" / "intake" / f"{assignment}.json"

    # -- nbgrader ------------------------------------------------------------------------------

    def config(self) -> Config:
        config = Config()
        config.CourseDirectory.root = str(self.root)
        config.CourseDirectory.course_id = COURSE_ID
        config.CourseDirectory.db_url = gradebook_url(self.root)
        return config

    def api(self, config: Config | None = None) -> NbGraderAPI:
        config = config if config is not None else self.config()
        return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)

    # -- assignments ---------------------------------------------------------------------------

    def assignments(self) -> list[str]:
        return assignments_in(self.solutions)

    def notebooks(self, assignment: str) -> list[str]:
        """The assignment's notebooks, as the gradebook knows them: not their translations (``soft-hard.zh``)."""
        return sorted(p.stem for p in self.release_folder(assignment).glob("*.ipynb") if not is_translation(p.stem))

    def released(self, assignment: str, notebook: str, language: str = "en"):
        """The released notebook, in ``language`` ("en": nbgrader's own; "zh": its translation)."""
        name = notebook if language == "en" else translated_name(notebook, language)
        return nbformat.read(self.release_folder(assignment) / f"{name}.ipynb", as_version=4)

    def released_languages(self, assignment: str, notebook: str) -> dict[str, object]:
        """{language: released notebook} of every language the notebook was released in."""
        found = {"en": self.released(assignment, notebook)}
        for language in TRANSLATED:
            if (self.release_folder(assignment) / f"{translated_name(notebook, language)}.ipynb").is_file():
                found[language] = self.released(assignment, notebook, language)
        return found

    def exists(self) -> bool:
        """Whether this is a course (made by ``release``), not a mistyped path."""
        return (self.root / "nbgrader_config.py").is_file()

    def require(self, assignment: str | None = None) -> None:
        """Raise :class:`CourseError` for a missing course or an assignment the course does not have."""
        if not self.exists():
            raise CourseError(f"no course at {self.root} (is --course mistyped?); create one with "
                              f"`attention-course release --course {self.root}`")
        if assignment is not None:
            self.require_assignment(assignment)

    def require_assignment(self, assignment: str) -> None:
        if assignment not in self.assignments():
            raise CourseError(f"no assignment {assignment!r}; this course has: {', '.join(self.assignments())}")

    # -- the course seed -----------------------------------------------------------------------

    def seed(self, assignment: str, *, reseed: bool = False) -> int:
        """The assignment's course seed: drawn once (at release or first grade), stored, redrawn only on request."""
        seeds = json.loads(self.seeds_path.read_text(encoding="utf-8")) if self.seeds_path.is_file() else {}
        if reseed or assignment not in seeds:
            seeds[assignment] = secrets.randbits(62)
            write_json(self.seeds_path, seeds)
        return int(seeds[assignment])


def assignments_in(solutions: Path) -> list[str]:
    """The assignments of a solutions folder: its subfolders that hold a notebook."""
    return sorted(p.name for p in solutions.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if solutions.is_dir() else []


def tested_ids(notebook) -> set[str]:
    """The grade ids of a released notebook's test cells (graded, and not an answer)."""
    return {c.metadata["nbgrader"]["grade_id"] for c in notebook.cells
            if (c.metadata.get("nbgrader") or {}).get("grade") and not c.metadata["nbgrader"].get("solution")}


def folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and ".ipynb_checkpoints" not in path.parts:
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def write_whole(path: Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` whole or not at all (through a temporary file beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(text, encoding=encoding)
    temporary.replace(path)


def write_json(path: Path, data) -> None:
    write_whole(path, json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
