"""Whose work is alike: similarity per graded function, across a class and against earlier classes.

For each graded answer cell (its grade id names the function or class the student writes) every
student's cell is read from ``submitted/<student>/<assignment>/<notebook>.ipynb`` and turned into a set of
*fingerprints* that a copy keeps however it is disguised. (Answer cells that ask for a recipe rather than a
function, such as ``train``, are not compared: the task text makes them alike in every honest notebook.)

1. **Normalised code** (:mod:`normalised_code`): the cell's syntax tree without comments, docstrings,
   prints or formatting, every name the cell binds itself renamed ``V`` (what it calls outside, such as
   ``torch.exp`` or ``dim=``, is kept), and the statements of each block in a canonical order that respects
   their dependencies, so any reordering of independent statements reads the same. (Set semantics alone
   would forgive reordering only inside each k-gram; the canonical order keeps the k-grams that span
   statements, and no reordering of dependent statements is assumed.)
2. **k-grams** of the normalised token stream (``normalised_code.K`` tokens) are hashed; every hash is
   kept: graded functions are small, so winnowing would lose most of a 3-line softmax. Hashes found in the
   release's notebooks (the given code, the answer cells' stubs) or in the book (its code cells and the
   package code it prints with ``literalinclude``) are removed: they are no evidence of copying.
3. **An index, not every pair.** Students with the same fingerprints are one *variant*; an inverted index
   from hash to variants gives each variant the others it shares hashes with (hashes held by more than
   ``COMMON_SHARE`` of the class, and by more than ``COMMON_MIN`` students, are skipped for this look-up:
   common idioms find no one). Each candidate's score is then the Jaccard index of the two fingerprint
   sets: 1.0 for the same code under any disguise above, 0 for nothing shared.

**Flags.** Small functions collide honestly: ``softmax`` is three lines, and independent students
write the same three. So a pair of students is flagged on the evidence of all the functions they share:
the *copied mass* is the number of shared distinctive fingerprints (held by no more than
``max(COMMON_MIN, COMMON_SHARE · class)`` students) summed over the functions whose score is at least
``THRESHOLD``; the pair is flagged when that mass reaches ``MIN_MASS``, and its rows at or above the
threshold are flagged. One long function copied whole (a decoder class) is enough; one identical softmax
is not.

**Measured** (``bench/similarity_threshold.py``, figures in ``bench/results/similarity_threshold.json``): 56
independent honest submissions of four assignments (``tests/honest_corpus.py`` and the re-typed solutions
of ``tests/similarity_corpus.py``, every answer text used once), 471 pairs of them; for each disguise a
class of those and a disguised copy of each. With k = 5, ``THRESHOLD`` 0.7 and ``MIN_MASS`` 40:

- **false positives**: 1 of 471 honest pairs flagged (0.2 %: soft-hard 0/231, three-stages 1/171,
  seq2seq-attention 0/66, transformer 0/3). On one function alone 2.5 % of honest function pairs score
  0.7 or more (identical three-line softmaxes and dot scores): why one small function never flags a pair;
- **recall** (copies flagged with their original): renamed 0.79, reformatted 0.79, commented 0.79,
  reordered 0.77, all four 0.79; edited (tensor methods called as torch functions, temporaries) 0.79;
  rewritten (operands of ``*`` and ``+`` swapped, an assert added: not undone by the normalisation) 0.54;
  everything at once 0.45. The copies missed under the first disguises are copies of small work: of the
  copies ("all four") of submissions with at least 40 fingerprints of their own, 44 of 45 were flagged;
  of the 11 smaller ones (two or three short functions), none, as designed: they are listed, not flagged.
- the sweep (k 5, 7, 9, 12; threshold 0.5 to 1; mass 0 to 80) is in the JSON. A stricter point, k = 12,
  threshold 1.0, mass 60, flags no honest pair and finds 0.82 to 0.84 of the copies, but none that was
  rewritten at all; k = 5 at 0.7 keeps half of those for one false positive in 471.

**Speed** (``bench/similarity.py``): a synthetic class of 1,000 soft-hard students in 22.5 s wall, 9.9 s
CPU, at a load average of 3.9 on 2 cores, reading every notebook included.

**Libraries weighed** (``bench/similarity_libraries.py``). copydetect 0.5.0 (pygments tokens, winnowing)
reads no syntax tree: its median score on reordered copies was 0.94 and on edited ones 0.68 (ours 1.0 and
1.0), and it compares every file with every other: 16.6 s for 1,000 students on one function, about 80 s
for an assignment's five. datasketch 2.0.0's MinHash and LSH found every pair ours did at 0.7 or more (0 of
440 missed), in 2.6 s against 1.7 s for the exact index on the same 4,734 sets, and needs SciPy (113 MB,
not otherwise in the environment): the sets are small, so exact Jaccard through an inverted index is both
cheaper and exact. Neither is a dependency.

**Trained weights** (``kind="weights"``). The grader keeps no trained model (``NotebookResult`` holds
checks, flags and what cells printed; the models live and die in the sandbox), so what is compared is what
a student pasted into their notebook (:mod:`pasted_weights`): large literals, read as data. Two students'
payloads with the same bytes score 1.0; numeric payloads of the same size score
``1 - |a - b| / (|a| + |b|)`` and are flagged from ``WEIGHTS_THRESHOLD`` up. Weights trained in the notebook
by the given recipe (``torch.manual_seed(0)``, the given ``train``) are the same for every honest student,
so trained weights alone would not be evidence of copying.

**The archive** (``against``): a folder the instructor keeps of earlier classes, searched for
``<student>/<assignment>/*.ipynb`` at any depth: an earlier course root (its ``submitted/`` folder is
found), a ``submitted/`` folder itself, or several of them side by side (``archive/2024/…``,
``archive/2025/…``). An archived student is named ``<prefix>:<student>``, the prefix being the folders
between ``against`` and the student (``submitted`` left out), or ``against``'s own name. Only pairs with at
least one student of this class are reported.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from attention_course.grading.layout import Layout, write_whole
from attention_course.grading.normalised_code import (K, book_fingerprints, cell_source, code_fingerprints,
                                                       release_fingerprints)
from attention_course.grading.pasted_weights import MIN_PAYLOAD_CHARS, payloads, weights_score

THRESHOLD = 0.7  # a function's score from which it counts towards a flag (measured: see above)
MIN_MASS = 40  # shared distinctive fingerprints a flagged pair needs, over its functions at or above THRESHOLD
REPORT_FLOOR = 0.5  # pairs below this score on a function are not reported
COMMON_SHARE = 0.05  # a fingerprint held by more than this share of the class …
COMMON_MIN = 10  # … and by more than this many students is common: no evidence, and not looked up
WEIGHTS_THRESHOLD = 0.99
MAX_NOTEBOOK_BYTES = 50 << 20
CSV_FIELDS = ("student_a", "student_b", "function", "score", "flagged")


@dataclass
class SimilarPair:
    """Two students' work on one graded function (or one pasted payload, ``kind="weights"``)."""

    student_a: str
    student_b: str
    function: str  # the answer cell's grade id (the function or class it asks for), or where the payload is
    score: float  # 0..1: the Jaccard index of the two fingerprint sets (weights: see the module's text)
    flagged: bool
    code_a: str  # the two pieces of code as the students wrote them, for side-by-side display
    code_b: str
    kind: str = "code"  # "code" or "weights"


@dataclass
class Similarity:
    pairs: list[SimilarPair] = field(default_factory=list)  # most similar first
    threshold: float = THRESHOLD
    method: str = ""


# =============================================================================================
# Reading the notebooks (as JSON: nothing in them runs)


def _cells(path: Path) -> list[dict]:
    if not path.is_file() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return []
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return []
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def _nbgrader(cell: dict) -> dict:
    meta = cell.get("metadata")
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def answer_cells(release_cells: list[dict]) -> list[str]:
    """The grade ids of a released notebook's code answer cells (the graded functions, and cells such as
    ``train``), in notebook order."""
    return [_nbgrader(c)["grade_id"] for c in release_cells
            if c.get("cell_type") == "code" and _nbgrader(c).get("solution") and _nbgrader(c).get("grade_id")]


def _defined(source: str) -> set[str]:
    try:
        return {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()


def student_answers(cells: list[dict], grade_ids: list[str]) -> dict[str, str]:
    """Each answer cell's source, by grade id. Where the answer cell lost its grade id, or still holds the
    release's stub while another cell defines the function, that other cell is taken."""
    found, loose = {}, []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        grade_id = _nbgrader(cell).get("grade_id")
        if grade_id in grade_ids and grade_id not in found:
            found[grade_id] = cell_source(cell)
        elif grade_id is None:
            loose.append(cell_source(cell))
    for grade_id in grade_ids:
        if grade_id not in found or "raise NotImplementedError" in found[grade_id]:
            for source in loose:
                if grade_id in _defined(source):
                    found[grade_id] = source
                    break
    return found


# =============================================================================================
# The class and the archive


@dataclass
class _Work:
    student: str
    archived: bool
    answers: dict[str, str]  # grade id -> source
    payloads: list[tuple]  # (where, bytes, numbers)


def _read_work(student: str, notebooks: list[Path], grade_ids: list[str], archived: bool,
               given: frozenset[bytes] = frozenset()) -> _Work:
    """A student's answers by grade id, and the payloads of their cells (those the release gives left out)."""
    answers, found = {}, []
    for path in notebooks:
        cells = _cells(path)
        for grade_id, source in student_answers(cells, grade_ids).items():
            answers.setdefault(grade_id, source)
        for number, cell in enumerate(c for c in cells if c.get("cell_type") == "code"):
            source = cell_source(cell)
            if len(source) >= MIN_PAYLOAD_CHARS // 2:
                where = _nbgrader(cell).get("grade_id") or f"{path.stem} code cell {number + 1}"
                found.extend((where, blob, numbers) for blob, numbers in payloads(source) if blob not in given)
    return _Work(student, archived, answers, found)


def archive_folders(against: Path, assignment: str) -> dict[str, list[Path]]:
    """The archived students of ``assignment`` under ``against``: {prefixed name: their notebooks}."""
    found: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(against.rglob(f"{assignment}/*.ipynb")):
        if ".ipynb_checkpoints" in path.parts or path.parent.name != assignment:
            continue
        student_folder = path.parent.parent
        between = [p for p in student_folder.parent.relative_to(against).parts if p != "submitted"]
        prefix = "/".join(between) or against.name
        found[f"{prefix}:{student_folder.name}"].append(path)
    return dict(found)


def _class_work(layout: Layout, assignment: str, against: Path | None) -> tuple[list[_Work], list[str], set[int]]:
    notebooks = sorted(p.stem for p in layout.release_folder(assignment).glob("*.ipynb"))
    grade_ids, excluded, given = [], set(), set()
    for notebook in notebooks:
        release_cells = _cells(layout.release_folder(assignment) / f"{notebook}.ipynb")
        stubs = {_nbgrader(c).get("grade_id"): cell_source(c) for c in release_cells}
        # Answer cells that ask for a function or class (the release's stub defines it); cells that ask for a
        # recipe to be followed (train, experiments) are alike in every honest notebook.
        grade_ids += [g for g in answer_cells(release_cells) if g not in grade_ids and _defined(stubs.get(g, ""))]
        excluded |= release_fingerprints(release_cells)
        given |= {blob for cell in release_cells if cell.get("cell_type") == "code"
                  for blob, _ in payloads(cell_source(cell))}
    excluded |= book_fingerprints()
    given = frozenset(given)
    work = []
    submitted = layout.root / "submitted"
    for folder in sorted(submitted.iterdir()) if submitted.is_dir() else []:
        if (folder / assignment).is_dir():
            paths = [folder / assignment / f"{nb}.ipynb" for nb in notebooks]
            work.append(_read_work(folder.name, paths, grade_ids, archived=False, given=given))
    if against is not None:
        for student, paths in archive_folders(Path(against), assignment).items():
            work.append(_read_work(student, paths, grade_ids, archived=True, given=given))
    return work, grade_ids, excluded


# =============================================================================================
# Comparing


def _function_rows(work: list[_Work], grade_id: str, excluded: set[int]) -> list[tuple[float, int, int, int]]:
    """Candidate pairs on one function, found through the index: [(score, i, j, distinctive shared mass)], i < j."""
    prints: dict[int, set[int]] = {}
    for index, student in enumerate(work):
        source = student.answers.get(grade_id)
        if source:
            found = code_fingerprints(source) - excluded
            if found:
                prints[index] = found
    frequency: dict[int, int] = defaultdict(int)
    for found in prints.values():
        for h in found:
            frequency[h] += 1
    common = max(COMMON_MIN, COMMON_SHARE * len(work))
    variants: dict[frozenset, list[int]] = defaultdict(list)
    for index, found in prints.items():
        variants[frozenset(found)].append(index)
    keys = list(variants)
    index_of: dict[int, list[int]] = defaultdict(list)
    for number, key in enumerate(keys):
        for h in key:
            if frequency[h] <= common:
                index_of[h].append(number)
    rows = []
    for number, key in enumerate(keys):
        students = variants[key]
        distinctive = sum(1 for h in key if frequency[h] <= common)
        if distinctive:  # (common code shared by many is no evidence, and not worth showing)
            rows.extend((1.0, i, j, distinctive) for i, j in combinations(students, 2))  # the same code, however disguised
        shared: dict[int, int] = defaultdict(int)
        for h in key:
            for other in index_of.get(h, ()):
                if other > number:
                    shared[other] += 1
        for other, _ in shared.items():
            other_key = keys[other]
            score = len(key & other_key) / len(key | other_key)
            if score < REPORT_FLOOR:
                continue
            mass = sum(1 for h in key & other_key if frequency[h] <= common)
            if not mass:
                continue
            for i in students:
                for j in variants[other_key]:
                    rows.append((score, min(i, j), max(i, j), mass))
    return rows


def compare(layout: Layout, assignment: str, against: Path | None = None) -> tuple[list[_Work], list[tuple]]:
    """Every student's work, and the rows worth a look: (score, i, j, grade id, distinctive shared mass)
    for students i < j (by their place in the work) whose score on a function reaches ``REPORT_FLOOR``."""
    work, grade_ids, excluded = _class_work(layout, assignment, against)
    rows = []
    for grade_id in grade_ids:
        for score, i, j, mass in _function_rows(work, grade_id, excluded):
            if mass and not (work[i].archived and work[j].archived):
                rows.append((score, i, j, grade_id, mass))
    return work, rows


def flagged_pairs(rows: list[tuple], threshold: float = THRESHOLD, min_mass: int = MIN_MASS) -> set[tuple[int, int]]:
    """The pairs of students whose functions at or above ``threshold`` share ``min_mass`` distinctive fingerprints."""
    evidence: dict[tuple[int, int], int] = defaultdict(int)
    for score, i, j, _, mass in rows:
        if score >= threshold:
            evidence[i, j] += mass
    return {pair for pair, mass in evidence.items() if mass >= min_mass}


def find_similar(layout: Layout, assignment: str, against: Path | None = None) -> Similarity:
    """The pairs of students whose work on a graded function of ``assignment`` is alike, most similar first.

    ``against``: a folder of earlier classes (see the module's text); its students are compared with this
    class's, not with each other."""
    work, rows = compare(layout, assignment, against)
    flagged = flagged_pairs(rows)
    pairs = [SimilarPair(work[i].student, work[j].student, grade_id, round(score, 4),
                         score >= THRESHOLD and (i, j) in flagged, work[i].answers[grade_id], work[j].answers[grade_id])
             for score, i, j, grade_id, _ in rows]
    pairs += _weights_pairs(work)
    pairs.sort(key=lambda p: (-p.flagged, -p.score, p.function, p.student_a, p.student_b))
    method = (f"Each graded function's answer cell, compared between every two students{' and with the archive' if against else ''}: "
              f"its syntax tree with names, comments, docstrings, prints and formatting removed and independent "
              f"statements in one order, cut into {K}-token pieces; pieces found in the release or the book do not count. "
              f"Score: the share of pieces two students have in common (Jaccard). A pair is flagged where functions "
              f"scoring {THRESHOLD:g} or more share at least {MIN_MASS} pieces that few others have; pasted weights "
              f"(large literals) are flagged from {WEIGHTS_THRESHOLD:g}.")
    return Similarity(pairs=pairs, threshold=THRESHOLD, method=method)


def _weights_pairs(work: list[_Work]) -> list[SimilarPair]:
    items = [(index, where, blob, numbers) for index, student in enumerate(work)
             for where, blob, numbers in student.payloads]
    by_size: dict[int, list] = defaultdict(list)
    for item in items:
        by_size[len(item[3]) if len(item[3]) else -len(item[2])].append(item)
    best: dict[tuple[int, int], tuple[float, str, str]] = {}
    for group in by_size.values():
        for (i, where_i, blob_i, numbers_i), (j, where_j, blob_j, numbers_j) in combinations(group, 2):
            if i == j or (work[i].archived and work[j].archived):
                continue
            score = weights_score((blob_i, numbers_i), (blob_j, numbers_j))
            key = (min(i, j), max(i, j))
            if score >= REPORT_FLOOR and score > best.get(key, (0.0,))[0]:
                best[key] = (score, where_i if i < j else where_j, where_j if i < j else where_i)
    pairs = []
    for (i, j), (score, where_a, where_b) in best.items():
        pairs.append(SimilarPair(work[i].student, work[j].student, where_a if where_a == where_b else f"{where_a} / {where_b}",
                                 round(score, 4), score >= WEIGHTS_THRESHOLD,
                                 work[i].answers.get(where_a, f"(pasted weights in {where_a})"),
                                 work[j].answers.get(where_b, f"(pasted weights in {where_b})"), kind="weights"))
    return pairs


def write_similarity_csv(similarity: Similarity, path: Path) -> Path:
    """``student_a, student_b, function, score, flagged``: one line a pair and function, most similar first (UTF-8)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_FIELDS)
    for pair in similarity.pairs:
        writer.writerow([pair.student_a, pair.student_b, pair.function, f"{pair.score:.4f}", "yes" if pair.flagged else ""])
    write_whole(Path(path), out.getvalue(), encoding="utf-8")
    return Path(path)
