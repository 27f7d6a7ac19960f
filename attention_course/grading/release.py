"""Release: the course's solution notebooks become nbgrader's source, then the students' release."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from attention_course.grading.errors import CourseError
from attention_course.grading.gradebook import COURSE_ID
from attention_course.grading.layout import Layout, folder_digest, write_json
from attention_course.grading.notebook_translation import catalog_path, write_translation


def generate(layout: Layout, assignment: str, *, force: bool = False) -> None:
    """Copy the solution notebooks in as nbgrader source and run ``generate_assignment``.

    The instructor's files are kept: the course id is added to an existing ``nbgrader_config.py``
    (nothing else in it changes), and a ``source/<assignment>/`` edited since the grader wrote it is
    replaced only with ``force``."""
    layout.require_assignment(assignment)
    layout.root.mkdir(parents=True, exist_ok=True)
    _merge_config(layout.root)
    source = layout.root / "source" / assignment
    wanted = folder_digest(layout.solutions / assignment)
    if source.is_dir() and not force:
        current = folder_digest(source)
        if current not in (wanted, _written_sources(layout).get(assignment)):
            raise CourseError(f"{source} was edited since the grader wrote it: not replaced "
                              f"(`attention-course release --force` replaces it with the course's {assignment})")
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(layout.solutions / assignment, source, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    written = _written_sources(layout)
    written[assignment] = folder_digest(source)
    write_json(_sources_path(layout), written)
    result = layout.api().generate_assignment(assignment, force=True)
    if not result["success"]:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result['log']}{result.get('error', '')}")
    write_translations(layout, assignment)
    layout.seed(assignment)  # drawn at release (kept if there is one already)


def write_translations(layout: Layout, assignment: str) -> None:
    """Beside each released notebook, its Chinese twin (``<notebook>.zh.ipynb``, see
    :mod:`notebook_translation`): the same cells, grade ids and checks, its text from the catalog. A message
    still without a translation stays English, and is said here."""
    for notebook in layout.notebooks(assignment):
        missing = write_translation(layout.release_folder(assignment), notebook, "zh")
        if missing:
            print(f"warning: {assignment}/{notebook}: {len(missing)} message(s) not yet translated into Chinese "
                  f"(left in English; run `make catalogs` and translate {catalog_path('zh').name}): "
                  + "; ".join(repr(m[:40]) for m in missing[:3]), file=sys.stderr)


def _sources_path(layout: Layout) -> Path:  # {assignment: digest of source/<assignment>/ as the grader last wrote it}
    return layout.root / "grader" / "sources.json"


def _written_sources(layout: Layout) -> dict[str, str]:
    path = _sources_path(layout)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _merge_config(root: Path) -> None:
    path = root / "nbgrader_config.py"
    line = f"c.CourseDirectory.course_id = {COURSE_ID!r}"
    if not path.is_file():
        path.write_text(f"c = get_config()  # noqa: F821\n{line}\n", encoding="utf-8")
        return
    text = path.read_text(encoding="utf-8")
    if line not in text:
        path.write_text(text.rstrip("\n") + f"\n\n# added by attention-course: the grader's gradebook course\n{line}\n",
                        encoding="utf-8")
