"""The attention-experiments assignment: graded on evidence, end to end, with its written answers.

One batch, graded with real nbgrader, the real SQLite gradebook and the real sandbox. Only the correct
sample trains its models as the notebook says (about 35 CPU seconds); the others train for a few steps or
not at all, which is all their point needs. Then the written answers are graded as formgrader does, through
nbgrader's Gradebook API, and the export must hold them.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
from pathlib import Path

import nbformat
import pytest
import torch
from nbgrader.api import Gradebook

from attention_course.grading.checks.attention_experiments import PART, TOLERANCE, WIDE
from attention_course.grading.course import Course, CourseError
from attention_course.grading.exercise_data import EXPERIMENTS_CORPUS_FILE, experiments_corpus_text
from attention_course.grading.grade import NotebookResult
from attention_course.grading.nbgrader_bridge import COURSE_ID, results_path
from grading_support import assert_points_and_flags, filled, graded_batch, released_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "attention-experiments"
SOLUTION = ROOT / "solutions" / ASSIGNMENT
WRITTEN = ("answer-longer", "answer-alignment")

MEASURE = (
    "results = {}\n"
    "for name, model in (('attention', attention_model), ('plain', plain_model)):\n"
    "    results[name + '_in_range'] = exact_match(model, test_pairs)\n"
    "    results[name + '_longer'] = exact_match(model, long_pairs)\n"
    "results['attention_alignment'] = attention_agreement(attention_model, test_pairs, test_alignments)\n"
    "print(results)"
)
CORRECT = {
    # Not the solution's style: one padded batch for the agreement, a tensor comparison for the matches.
    "exact_match": (
        "def exact_match(model, pairs):\n"
        "    got = translate(model, [e for e, _ in pairs])\n"
        "    same = torch.tensor([g == c for g, (_, c) in zip(got, pairs)])\n"
        "    return same.float().mean().item()"
    ),
    "attention_agreement": (
        "@torch.no_grad()\n"
        "def attention_agreement(model, pairs, alignments):\n"
        "    source, lengths = source_batch([e for e, _ in pairs])\n"
        "    target_input, _ = target_batch([c for _, c in pairs])\n"
        "    _, weights = model(source, lengths, target_input)  # (B, T, S), teacher forcing\n"
        "    best = weights.argmax(-1)\n"
        "    hits = [int(best[b, i]) in aligned for b, alignment in enumerate(alignments)\n"
        "            for i, aligned in enumerate(alignment)]\n"
        "    return sum(hits) / len(hits)"
    ),
    "train": (
        "torch.manual_seed(0)\n"
        "attention_model = build_model(attention=True)\n"
        "train(attention_model)\n"
        "torch.manual_seed(0)\n"
        "plain_model = build_model(attention=False)\n"
        "train(plain_model, max_steps=300, stop_at=None)"
    ),
    "experiments": MEASURE,
}
UNTRAINED = "torch.manual_seed(0)\nattention_model = build_model(True)\nplain_model = build_model(False)"
PLAIN_ONLY = ("torch.manual_seed(0)\nattention_model = build_model(True)\n"
              "torch.manual_seed(0)\nplain_model = build_model(False)\ntrain(plain_model, max_steps=300, stop_at=None)")
TYPED_EXACT_MATCH = (
    "def exact_match(model, pairs):\n"
    "    attention = type(model.decoder).__name__ == 'AttentionDecoder'\n"
    "    return {(True, 150): 0.99, (True, 60): 0.0, (False, 150): 0.45, (False, 60): 0.0}[attention, len(pairs)]"
)


NOT_MEASURED = "results was not measured from this notebook's own models"


def answers(**changes: str) -> dict[str, str]:
    return {**CORRECT, **changes}


FULL = {"test-trained": 3, "test-exact-match": 3, "test-agreement": 4, "test-evidence": 6}

# student -> (solution cells, expected points per test cell, expected flag fragments)
SAMPLES = {
    "correct-other-style": (answers(), FULL, []),
    # A few steps of training: the measurements and the numbers are right (they are what these models give),
    # the models are not trained.
    "barely-trained": (
        answers(train=UNTRAINED.replace("plain_model = build_model(False)", "train(attention_model, max_steps=10)\n"
                                        "plain_model = build_model(False)\ntrain(plain_model, max_steps=10)")),
        {**FULL, "test-trained": 0}, ["training stopped at its step budget"]),
    # Attack: models not trained, the numbers typed in from what the book says a trained model does, and
    # measurement functions that give those numbers back (per set, whatever the model): what the grader's calls
    # of the student's functions get is more than WIDE from what the models give.
    "typed-numbers": (
        answers(train=UNTRAINED, exact_match=TYPED_EXACT_MATCH,
                attention_agreement="def attention_agreement(model, pairs, alignments):\n    return 0.67",
                experiments=MEASURE),
        {**FULL, "test-trained": 0, "test-evidence": 0, "test-exact-match": 0, "test-agreement": 0}, [NOT_MEASURED]),
    # Attack: the numbers are measured on another model than the notebook's attention_model (a twin trained a
    # little, while attention_model stays untrained).
    "numbers-of-another-model": (
        answers(train=UNTRAINED + "\ntorch.manual_seed(1)\ntwin = build_model(True)\ntrain(twin, max_steps=120, stop_at=None)",
                experiments=MEASURE.replace("(('attention', attention_model)", "(('attention', twin)").replace(
                    "attention_agreement(attention_model", "attention_agreement(twin")),
        {**FULL, "test-trained": 0, "test-evidence": 0}, [NOT_MEASURED]),
    # Attack: the numbers are measured on the trained model, which is then replaced by an untrained one.
    "model-replaced-after-measuring": (
        answers(train=UNTRAINED.replace("attention_model = build_model(True)",
                                        "attention_model = build_model(True)\ntrain(attention_model, max_steps=120, stop_at=None)"),
                experiments=MEASURE + "\nattention_model = build_model(True)"),
        {**FULL, "test-trained": 0, "test-evidence": 0}, [NOT_MEASURED]),
    # A bug of exact_match that its visible tests miss (word order ignored), with the numbers honestly measured
    # with it: on plain_model (trained as the notebook says; attention_model is left untrained, to save the time)
    # it reports plain_in_range about 0.08 above the grader's measurement. The bug costs exact_match's points
    # only (and the untrained model the training's): the numbers are what the student's function gives.
    "exact-match-ignores-word-order": (
        answers(train=PLAIN_ONLY, exact_match=(
            "def exact_match(model, pairs):\n"
            "    got = translate(model, [e for e, _ in pairs])\n"
            "    return sum(sorted(g.split()) == sorted(c.split()) for g, (_, c) in zip(got, pairs)) / len(pairs)")),
        {**FULL, "test-trained": 0, "test-exact-match": 0}, []),
    # Attack: a number guessed 0.06 from what plain_model gives (within WIDE), which exact_match gives back when it
    # is called on the shipped test_pairs (and measures honestly on anything else): the grader calls it on parts of
    # the shipped sentences only, where it measures; the guess is neither its number nor the grader's.
    "guess-for-the-shipped-set": (
        answers(train=PLAIN_ONLY, exact_match=(
            "def exact_match(model, pairs):\n"
            "    got = translate(model, [e for e, _ in pairs])\n"
            "    share = sum(g == c for g, (_, c) in zip(got, pairs)) / len(pairs)\n"
            "    if list(pairs) == list(test_pairs) and type(model.decoder).__name__ == 'PlainDecoder':\n"
            "        return share + 0.06  # the guess\n"
            "    return share")),
        {**FULL, "test-trained": 0, "test-evidence": 0}, [NOT_MEASURED]),
    # Attack: the same guess, given back for any part of the shipped test_pairs: on the grader's parts it does not
    # follow what the model translates (a part's share ranges from about 0 to 1), so it is not a measurement.
    "guess-for-any-part": (
        answers(train=PLAIN_ONLY + "\n_test = set(test_pairs)\n_guess = None", exact_match=(
            "def exact_match(model, pairs):\n"
            "    global _guess\n"
            "    got = translate(model, [e for e, _ in pairs])\n"
            "    share = sum(g == c for g, (_, c) in zip(got, pairs)) / len(pairs)\n"
            "    plain = type(model.decoder).__name__ == 'PlainDecoder'\n"
            "    if plain and len(pairs) == len(test_pairs) and set(pairs) == _test and _guess is None:\n"
            "        _guess = share + 0.06\n"
            "    if plain and _guess is not None and set(pairs) <= _test:\n"
            "        return _guess\n"
            "    return share")),
        {**FULL, "test-trained": 0, "test-evidence": 0}, []),
}


def test_the_shipped_corpus_is_the_one_the_code_writes_and_the_release_ships_it():
    text = experiments_corpus_text()
    assert (SOLUTION / EXPERIMENTS_CORPUS_FILE).read_text(encoding="utf-8") == text
    assert (ROOT / "exercises" / ASSIGNMENT / EXPERIMENTS_CORPUS_FILE).read_text(encoding="utf-8") == text
    corpus = json.loads(text)
    longest = max(len(english.split()) for english, _ in corpus["train"])
    assert longest == corpus["longest_training_sentence"]
    assert all(len(english.split()) > longest for english, _, _ in corpus["long"])
    known = {english for english, _ in corpus["train"] + corpus["validation"]}
    assert not known & {english for english, _, _ in corpus["test"]}


def test_the_rubric_ships_with_the_solution_and_never_reaches_students():
    solution = nbformat.read(SOLUTION / f"{ASSIGNMENT}.ipynb", as_version=4)
    exercise = nbformat.read(ROOT / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    by_id = lambda nb: {(c.metadata.get("nbgrader") or {}).get("grade_id"): c for c in nb.cells}
    for grade_id in WRITTEN:
        meta = by_id(solution)[grade_id].metadata["nbgrader"]
        assert meta["grade"] and meta["solution"] and meta["points"] == 2 and by_id(solution)[grade_id].cell_type == "markdown"
        assert "*Rubric (2 points).*" in by_id(solution)[grade_id].source
        assert by_id(exercise)[grade_id].source.strip() == "YOUR ANSWER HERE"
    released = "\n".join(cell.source for cell in exercise.cells)
    assert "Rubric" not in released and "Model answer" not in released
    assert sorted(p.name for p in (ROOT / "exercises" / ASSIGNMENT).iterdir()) == [
        f"{ASSIGNMENT}.ipynb", f"{ASSIGNMENT}.zh.ipynb", EXPERIMENTS_CORPUS_FILE]
    chinese = nbformat.read(ROOT / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.zh.ipynb", as_version=4)
    assert all(by_id(chinese)[grade_id].source.strip() == "YOUR ANSWER HERE" for grade_id in WRITTEN)
    assert not any(word in cell.source for cell in chinese.cells for word in ("Rubric", "Model answer", "评分标准"))


def test_a_reported_number_passes_if_the_grader_or_the_students_function_measures_it():
    from attention_course.grading.checks.attention_experiments import _number_problem

    # (reported, grader's measurement, what the student's function gives when the grader calls it)
    assert _number_problem("plain_in_range", 0.43, 0.42, 0.43, "") == ""  # the grader's, within TOLERANCE
    assert _number_problem("plain_in_range", 0.43, 0.42, None, "raised KeyError") == ""  # (the function is not needed)
    assert _number_problem("plain_in_range", 0.50, 0.42, 0.50, "") == ""  # a buggy function's honest number
    far = _number_problem("plain_in_range", 0.60, 0.42, 0.60, "")  # ... but not 0.18 away: a typed number
    assert "plain_in_range is 0.6, but your plain_model measures 0.42" in far and "exact_match gives on it (0.6)" in far
    assert f"more than {WIDE:g}" in far
    neither = _number_problem("attention_alignment", 0.70, 0.66, 0.60, "")
    assert "your attention_agreement gives 0.6 on it when the grader calls it: the number is neither" in neither
    failed = _number_problem("attention_longer", 0.10, 0.0, None, "raised KeyError: (True, 60)")
    assert "could not be called on it to compare (raised KeyError: (True, 60))" in failed


def test_a_function_that_does_not_measure_is_not_taken_for_a_buggy_one_part_by_part():
    """Rule 2, part by part: the grader calls the student's function on parts of the shipped pairs and compares each
    with its own measurement of the same part. A bug that only ever counts too many right passes (it is off by the
    same on average as on the whole set); a number given back for every part, 0.06 from the truth, does not."""
    from attention_course.grading.checks.attention_experiments import _number_problem, _own_by_parts, _parts

    g = torch.Generator().manual_seed(7)
    right = [i % 5 < 2 for i in range(150)]  # the grader's measurement: 0.4 of the test pairs right
    numbers = {"plain_model": {"test pairs": right}}
    parts = _parts(g, 150)
    truth = sum(right) / 150
    # A bug that also counts 13 of the wrong translations right (word order ignored): 0.087 too many.
    lenient = set([i for i in range(150) if not right[i]][:13])
    buggy = tuple((sum(right[i] or i in lenient for i in part) / len(part), "") for part in parts)
    own, problem, off = _own_by_parts("plain_in_range", buggy, numbers, parts)
    assert abs(own - (truth + 13 / 150)) < 1e-9 and abs(off - 13 / 150) < 1e-9
    assert _number_problem("plain_in_range", own, truth, own, problem, off) == ""
    guess = tuple((truth + 0.06, "") for _ in parts)
    own, problem, off = _own_by_parts("plain_in_range", guess, numbers, parts)
    assert off > WIDE
    assert "on the parts of" in _number_problem("plain_in_range", own, truth, own, problem, off)


# ---------------------------------------------------------------------------------------------
# End to end.


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    released = released_notebook(tmp_path_factory, ASSIGNMENT)
    notebooks = {}
    for student, (solution, _, _) in SAMPLES.items():
        notebooks[student] = filled(released, solution)
        for cell in notebooks[student].cells:  # every student writes something in the written answers
            if (cell.metadata.get("nbgrader") or {}).get("grade_id") in WRITTEN:
                cell.source = "It stops after two clauses: it never saw longer sentences."
    course, summaries, _ = graded_batch(tmp_path_factory, ASSIGNMENT, notebooks)
    return course, summaries


def _result(course: Course, student: str) -> NotebookResult:
    return NotebookResult.load(results_path(course.results_dir, ASSIGNMENT, student, ASSIGNMENT))


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(SAMPLES))
def test_each_sample_gets_exactly_its_points_and_flags(graded, student):
    course, summaries = graded
    _, expected_points, expected_flags = SAMPLES[student]
    assert_points_and_flags(_result(course, student), summaries[student].flags, expected_points, expected_flags)


@pytest.mark.slow
def test_numbers_that_the_models_do_not_give_are_named_with_the_measured_ones(graded):
    course, _ = graded
    typed = _result(course, "typed-numbers").checks["test-evidence"]["message"]
    assert "attention_in_range is 0.99, but your attention_model measures 0" in typed
    assert f"within {TOLERANCE:g}" in typed
    # Its exact_match gives typed numbers for the shipped sets only (by their size): on the grader's parts of them
    # it cannot give anything, and says so.
    assert "your exact_match could not be called on it to compare (raised KeyError" in typed
    guessed = _result(course, "guess-for-any-part").checks["test-evidence"]["message"]
    assert "plain_in_range" in guessed and f"on the parts of {PART} sentences" in guessed
    other = _result(course, "numbers-of-another-model").checks["test-evidence"]["message"]
    replaced = _result(course, "model-replaced-after-measuring").checks["test-evidence"]["message"]
    for message in (other, replaced):
        assert re.search(r"attention_(in_range|alignment) is [\d.]+, but your attention_model measures", message), message
    trained = _result(course, "typed-numbers").checks["test-trained"]["message"]
    assert "new sentences exactly (decoded greedily by the grader)" in trained


def _printed_results(result: NotebookResult) -> dict:
    """The results dict that the notebook's MEASURE cell printed."""
    printed = [line for cell in result.cells for line in (cell.get("stdout") or "").splitlines()
               if line.startswith("{'attention_in_range'")]
    assert len(printed) == 1, [cell.get("stdout") for cell in result.cells]
    return ast.literal_eval(printed[0])


@pytest.mark.slow
def test_a_measurement_bug_is_charged_once_and_the_numbers_it_measured_keep_the_evidence(graded):
    course, _ = graded
    buggy, correct = _result(course, "exact-match-ignores-word-order"), _result(course, "correct-other-style")
    # Both notebooks train plain_model alike; the buggy exact_match reports its plain_in_range further from what a
    # correct one measures than TOLERANCE (so the grader's measurement alone would refuse it), within WIDE.
    gap = abs(_printed_results(buggy)["plain_in_range"] - _printed_results(correct)["plain_in_range"])
    assert TOLERANCE < gap <= WIDE, gap
    assert buggy.checks["test-evidence"]["passed"] and not buggy.checks["test-exact-match"]["passed"]


@pytest.mark.slow
def test_the_correct_notebook_is_graded_within_its_cpu_budget(graded):
    course, _ = graded
    result = _result(course, "correct-other-style")
    assert 0 < result.cpu_seconds <= 90, result.cpu_seconds  # CPU seconds inside the sandbox, not wall time


@pytest.mark.slow
def test_written_answers_graded_in_formgrader_reach_the_export(graded, tmp_path):
    course, summaries = graded
    with pytest.raises(CourseError, match="await a manual grade"):
        course.export(tmp_path / "refused.csv", "nbgrader", ASSIGNMENT)
    manual = {"correct-other-style": {"answer-longer": 2.0, "answer-alignment": 1.0},
              "typed-numbers": {"answer-longer": 0.0, "answer-alignment": 0.5}}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", COURSE_ID) as gradebook:
        for student, scores in manual.items():  # what formgrader's Manual Grading saves
            for grade_id, score in scores.items():
                grade = gradebook.find_grade(grade_id, ASSIGNMENT, ASSIGNMENT, student)
                grade.manual_score = score
                grade.needs_manual_grade = False
        gradebook.db.commit()
    path, left_out = course.export(tmp_path / "grades.csv", "nbgrader", ASSIGNMENT, leave_out_ungraded=True)
    rows = {row["student_id"]: row for row in csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))}
    assert set(rows) == set(manual)
    for student, scores in manual.items():
        auto = sum(SAMPLES[student][1].values())
        assert float(rows[student]["score"]) == auto + sum(scores.values()), rows[student]
        assert float(rows[student]["max_score"]) == sum(FULL.values()) + 4
    assert len(left_out) == len(SAMPLES) - len(manual)
