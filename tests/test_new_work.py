"""Each assignment grades understanding, not copying (DESIGN.md § Assignments).

- At least half of every assignment's points are on checks of work the book does not print
  (``Check.new``), and each such check names the solution cells that hold that work.
- No line of those solutions appears in the code the built book shows: a student cannot pass the
  new half by copying a chapter. (The warm-up half may follow the chapters; its overlap is counted
  and reported in the message of the last test, not limited.)
- Each assignment's introduction states its points, its time (at most two hours for a student who
  read the chapters) and what it builds on.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest

from attention_course.grading.checks import ASSIGNMENTS

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
# A line shorter than this (once normalised) says too little to count as copied: `return output, weights`.
SHORTEST_TELLING_LINE = 24


def _assignments() -> list[str]:
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def _solution_notebook(assignment: str):
    [path] = sorted((SOLUTIONS / assignment).glob("*.ipynb"))
    return nbformat.read(path, as_version=4)


def _solution_cells(assignment: str) -> dict[str, str]:
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in _solution_notebook(assignment).cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}


def _normalised(line: str) -> str:
    """A line of code as it would read anywhere: no comment, single spaces."""
    code = re.sub(r"\s+#.*$", "", line.strip()) if not line.strip().startswith("#") else ""
    return " ".join(code.split())


def _solution_lines(source: str) -> list[str]:
    """The telling lines between BEGIN SOLUTION and END SOLUTION (what the student must write)."""
    lines, inside = [], False
    for line in source.splitlines():
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside:
            normalised = _normalised(line)
            if len(normalised) >= SHORTEST_TELLING_LINE:
                lines.append(normalised)
    return lines


def _book_code_lines(built_html: Path) -> set[str]:
    """Every line of every code block of every page of the built book."""
    lines = set()
    for page in built_html.rglob("*.html"):
        text = page.read_text(encoding="utf-8", errors="replace")
        for block in re.findall(r"<pre\b[^>]*>(.*?)</pre>", text, flags=re.S):
            plain = html.unescape(re.sub(r"<[^>]+>", "", block))
            lines.update(_normalised(line) for line in plain.splitlines())
    return lines


def test_every_assignment_with_solutions_has_checks_and_every_check_set_has_solutions():
    assert sorted(ASSIGNMENTS) == _assignments()


@pytest.mark.parametrize("assignment", _assignments())
def test_at_least_half_of_the_points_are_for_work_the_book_does_not_print(assignment):
    checks = ASSIGNMENTS[assignment]
    total = sum(c.points for c in checks)
    new = sum(c.points for c in checks if c.new)
    assert new >= total / 2, (f"{assignment}: only {new:g} of {total:g} points are on new work "
                              f"({[c.grade_id for c in checks if c.new]})")
    cells = _solution_cells(assignment)
    for check in checks:
        if check.new:
            assert check.solution_cells, f"{assignment}/{check.grade_id} is new work but names no solution cell"
            missing = [c for c in check.solution_cells if c not in cells]
            assert not missing, f"{assignment}/{check.grade_id} names solution cells {missing} that the notebook lacks"
            assert any(_solution_lines(cells[c]) for c in check.solution_cells), (
                f"{assignment}/{check.grade_id}: its solution cells hold no line of solution to judge")


@pytest.mark.parametrize("assignment", _assignments())
def test_no_line_of_a_new_solution_appears_in_the_built_book(assignment, built_html):
    book = _book_code_lines(built_html)
    cells = _solution_cells(assignment)
    copied = {}
    for check in ASSIGNMENTS[assignment]:
        if check.new:
            for cell in check.solution_cells:
                found = [line for line in _solution_lines(cells[cell]) if line in book]
                if found:
                    copied[cell] = found
    assert not copied, f"{assignment}: lines of new graded solutions are printed in the book: {copied}"


def test_the_check_finds_a_printed_line(built_html):
    # The comparison itself works: the book prints the course's masked softmax, so its lines are found.
    book = _book_code_lines(built_html)
    printed = (ROOT / "attention_course" / "attention.py").read_text(encoding="utf-8")
    start = printed.index("def masked_softmax")
    body = [_normalised(line) for line in printed[start:].splitlines()[1:40]]
    telling = [line for line in body if len(line) >= SHORTEST_TELLING_LINE and not line.startswith(('"""', "def "))]
    assert telling and sum(line in book for line in telling) >= len(telling) // 2


@pytest.mark.parametrize("assignment", _assignments())
def test_the_introduction_states_points_time_and_what_it_builds_on(assignment):
    intro = _solution_notebook(assignment).cells[0].source
    assert re.search(r"\*\*Total: [\d.]+ points\.?\*\*", intro), intro[:300]
    time = re.search(r"(\d+(?:\.\d+)?)([¼½¾])?\s*(minutes|hours?)", intro)
    assert time, f"{assignment}: the introduction states no time estimate"
    amount = float(time.group(1)) + {"¼": 0.25, "½": 0.5, "¾": 0.75, None: 0}[time.group(2)]
    minutes = amount * (60 if time.group(3).startswith("hour") else 1)
    assert minutes <= 120, f"{assignment}: {time.group(0)} is more than two hours"
    assert re.search(r"[Bb]uilds on", intro), f"{assignment}: the introduction does not say what it builds on"


@pytest.mark.parametrize("assignment", _assignments())
def test_the_books_exercise_page_is_in_the_book_and_states_the_notebooks_points_and_time(assignment):
    page = ROOT / "book" / "exercises" / f"{assignment}.md"
    assert page.is_file(), f"book/exercises/{assignment}.md is missing: the book lists every assignment"
    assert f"book/exercises/{assignment}" in (ROOT / "_toc.yml").read_text(encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    notebook_total = sum(float(c.metadata["nbgrader"]["points"]) for c in _solution_notebook(assignment).cells
                         if c.metadata.get("nbgrader", {}).get("grade") and "points" in c.metadata["nbgrader"])
    stated = re.search(r"\*\*Points:\*\* ([\d.]+)", text)
    assert stated and float(stated.group(1)) == notebook_total, (
        f"book/exercises/{assignment}.md says {stated and stated.group(1)} points, the notebook has {notebook_total:g}")
    assert re.search(r"\*\*Time:\*\*", text), f"book/exercises/{assignment}.md states no time"
    assert f"{{doc}}`{assignment}`" in (ROOT / "book" / "exercises" / "index.md").read_text(encoding="utf-8")
