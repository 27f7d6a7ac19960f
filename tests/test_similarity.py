"""Similarity per graded function: copies are found however they are disguised, honest work is not flagged.

Classes are written to disk as the intake leaves them (``submitted/<student>/<assignment>/<assignment>.ipynb``,
the release's notebook with the answer cells filled in): nothing is graded or run.
"""

from __future__ import annotations

import ast
import base64
import csv
import io

import pytest

from attention_course.grading.similarity import CSV_FIELDS, find_similar, write_similarity_csv
from canonical_bugs import CANONICAL_BUGS
from similarity_corpus import disguised, independent_submissions, notebook_with, write_class

ASSIGNMENT = "soft-hard"
HONEST = independent_submissions(ASSIGNMENT)
ORIGINAL = "warnings-and-asserts"  # each of its answers has independent statements to reorder


def flagged(similarity) -> set[frozenset]:
    return {frozenset((p.student_a, p.student_b)) for p in similarity.pairs if p.flagged}


def honest_class() -> dict[str, dict[str, str]]:
    """Every independent honest soft-hard submission that answers at least three functions."""
    return {f"honest-{name}": answers for name, answers in HONEST.items() if len(answers) >= 3 and name != ORIGINAL}


def buggy_class() -> dict[str, dict[str, str]]:
    """One student a canonical bug, with that answer only."""
    return {f"buggy-{number}": {cell: source}
            for number, (assignment, cell, source, _) in enumerate(CANONICAL_BUGS.values()) if assignment == ASSIGNMENT}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Independent honest students, buggy ones, and two disguised copies of one honest solution."""
    students = {**honest_class(), **buggy_class(),
                "copy-one": disguised(HONEST[ORIGINAL], "all four", seed=1),
                "copy-two": disguised(HONEST[ORIGINAL], "all four", seed=2)}
    layout = write_class(tmp_path_factory.mktemp("class"), ASSIGNMENT, students)
    return students, find_similar(layout, ASSIGNMENT)


def test_the_copies_are_flagged_and_no_independent_pair_is(graded_class):
    students, similarity = graded_class
    assert len([s for s in students if s.startswith("honest-")]) >= 15
    assert flagged(similarity) == {frozenset(("copy-one", "copy-two"))}
    copied = {p.function for p in similarity.pairs if p.flagged}
    assert copied == set(HONEST[ORIGINAL])  # every function the two share is shown as copied
    assert similarity.pairs[0].flagged and similarity.pairs[0].score == 1.0  # ranked first


def test_each_pair_shows_the_code_as_the_students_wrote_it(graded_class):
    students, similarity = graded_class
    pair = next(p for p in similarity.pairs if p.flagged and p.function == "softmax")
    assert pair.code_a == students[pair.student_a]["softmax"] and pair.code_b == students[pair.student_b]["softmax"]
    assert pair.code_a != pair.code_b  # disguised, yet found
    assert pair.kind == "code" and 0 <= pair.score <= 1
    assert "release" in similarity.method and 0 < similarity.threshold <= 1


@pytest.mark.parametrize("disguise", ["renamed", "reformatted", "commented", "reordered"])
def test_a_disguised_copy_is_still_found(tmp_path, disguise):
    copy = disguised(HONEST[ORIGINAL], disguise, seed=3)
    # The disguise really changed the code (the statements really moved, for "reordered"): else this proves nothing.
    reprinted = {g: ast.unparse(ast.parse(copy[g])) != ast.unparse(ast.parse(HONEST[ORIGINAL][g])) for g in copy}
    assert all(copy[g] != HONEST[ORIGINAL][g] for g in copy) and (disguise != "reordered" or all(reprinted.values()))
    layout = write_class(tmp_path, ASSIGNMENT, {**honest_class(), "original": HONEST[ORIGINAL], "copy": copy})
    assert flagged(find_similar(layout, ASSIGNMENT)) == {frozenset(("original", "copy"))}


def test_the_release_and_the_book_are_no_evidence(tmp_path):
    """Students who hand in the release untouched, or the book's own functions (printed in chapter 2 from
    attention_course/attention.py), are not flagged, however many do."""
    from attention_course.grading.normalised_code import pyobject_source
    from attention_course.grading.layout import REPOSITORY

    book = {name: pyobject_source(REPOSITORY / "attention_course" / "attention.py", name) + "\n"
            for name in ("softmax", "soft_attention", "hard_attention")}
    assert all(book.values())
    students = {"untouched-1": {}, "untouched-2": {}, "untouched-3": {}, "from-the-book-1": book, "from-the-book-2": book}
    layout = write_class(tmp_path, ASSIGNMENT, students)
    similarity = find_similar(layout, ASSIGNMENT)
    assert flagged(similarity) == set()
    assert not [p for p in similarity.pairs if "untouched" in p.student_a + p.student_b]


def test_a_copy_from_an_earlier_class_is_found_in_the_archive(tmp_path):
    earlier = tmp_path / "archive" / "2024"
    write_class(earlier, ASSIGNMENT, {"old-student": HONEST[ORIGINAL]})
    layout = write_class(tmp_path / "course", ASSIGNMENT,
                         {**honest_class(), "new-student": disguised(HONEST[ORIGINAL], "all four", seed=4)})
    assert flagged(find_similar(layout, ASSIGNMENT)) == set()
    found = find_similar(layout, ASSIGNMENT, against=tmp_path / "archive")
    assert flagged(found) == {frozenset(("2024:old-student", "new-student"))}


def test_identical_pasted_weights_are_found(tmp_path):
    """A model's weights pasted into the notebook (a torch.save file in base64, or the numbers), by two
    students: found and flagged; a third student's own weights are not."""
    import torch

    def saved(state) -> str:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return base64.b64encode(buffer.getvalue()).decode()

    generator = torch.Generator().manual_seed(0)
    shared = {"W": torch.randn(64, 32, generator=generator)}
    own = {"W": torch.randn(64, 32, generator=generator)}
    paste = "import base64, io\nweights = torch.load(io.BytesIO(base64.b64decode('{}')))\n"
    numbers = shared["W"][:16].flatten().tolist()
    nudged = [x + 1e-6 for x in numbers]
    students = {
        "pasted-1": notebook_with(ASSIGNMENT, {}, [paste.format(saved(shared))]),
        "pasted-2": notebook_with(ASSIGNMENT, {}, [paste.format(saved({k: v.clone() for k, v in shared.items()}))]),
        "own-weights": notebook_with(ASSIGNMENT, {}, [paste.format(saved(own))]),
        "numbers-1": notebook_with(ASSIGNMENT, {}, [f"W = torch.tensor({numbers})\n"]),
        "numbers-2": notebook_with(ASSIGNMENT, {}, [f"W = torch.tensor({nudged})\n"]),
    }
    layout = write_class(tmp_path, ASSIGNMENT, students)
    similarity = find_similar(layout, ASSIGNMENT)
    weights = [p for p in similarity.pairs if p.kind == "weights"]
    assert {frozenset((p.student_a, p.student_b)) for p in weights if p.flagged} == {
        frozenset(("pasted-1", "pasted-2")), frozenset(("numbers-1", "numbers-2"))}
    assert not [p for p in weights if "own-weights" in (p.student_a, p.student_b) and p.flagged]


def test_the_csv_has_a_line_per_pair_and_function(graded_class, tmp_path):
    _, similarity = graded_class
    path = write_similarity_csv(similarity, tmp_path / "reports" / ASSIGNMENT / "similarity.csv")
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert tuple(rows[0]) == CSV_FIELDS == ("student_a", "student_b", "function", "score", "flagged")
    assert len(rows) == len(similarity.pairs)
    assert {(r["student_a"], r["student_b"], r["function"]) for r in rows if r["flagged"] == "yes"} == {
        (p.student_a, p.student_b, p.function) for p in similarity.pairs if p.flagged}
    assert all(0 <= float(r["score"]) <= 1 for r in rows)


def test_unreadable_and_missing_notebooks_are_skipped(tmp_path):
    layout = write_class(tmp_path, ASSIGNMENT, {"a": HONEST[ORIGINAL], "b": HONEST[ORIGINAL]})
    (tmp_path / "submitted" / "broken" / ASSIGNMENT).mkdir(parents=True)
    (tmp_path / "submitted" / "broken" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text("{ not json")
    (tmp_path / "submitted" / "empty" / ASSIGNMENT).mkdir(parents=True)
    assert flagged(find_similar(layout, ASSIGNMENT)) == {frozenset(("a", "b"))}


def test_an_answer_written_in_another_cell_is_compared(tmp_path):
    """The answer cell left as the release gave it, the function written in a cell of the student's own."""
    moved = notebook_with(ASSIGNMENT, {}, list(HONEST[ORIGINAL].values()))
    layout = write_class(tmp_path, ASSIGNMENT, {**honest_class(), "original": HONEST[ORIGINAL], "moved": moved})
    assert flagged(find_similar(layout, ASSIGNMENT)) == {frozenset(("original", "moved"))}


def test_code_nested_thousands_deep_does_not_stop_the_comparison(tmp_path):
    """A hostile answer (a sum 30,000 terms long) is read as flat tokens; the copies beside it are still found."""
    deep = {"softmax": "def softmax(scores, dim=-1):\n    return scores" + " + scores" * 30000 + "\n"}
    layout = write_class(tmp_path, ASSIGNMENT, {"deep": deep, "also-deep": deep, "original": HONEST[ORIGINAL],
                                                "copy": disguised(HONEST[ORIGINAL], "all four", seed=5)})
    assert frozenset(("original", "copy")) in flagged(find_similar(layout, ASSIGNMENT))
