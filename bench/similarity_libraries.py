"""The libraries weighed for similarity before writing our own: copydetect 0.5.0 and datasketch 2.0.0.

Neither is a dependency of the course; install them aside to run this::

    .venv/bin/python -m pip install --target /tmp/similarity-libraries --no-deps copydetect==0.5.0 datasketch==2.0.0
    PYTHONPATH=/tmp/similarity-libraries .venv/bin/python bench/similarity_libraries.py

- **copydetect** (winnowed k-grams of pygments tokens, names replaced, boilerplate removable, an HTML
  report): its scores on disguised copies against our normalisation's, on the same pairs; and its time
  for a class (it compares every file with every other).
- **datasketch** (MinHash and LSH): the MinHash of every fingerprint set of the 1,000-student bench class and
  an LSH look-up at Jaccard 0.5, against our exact inverted index on the same sets: time, and the pairs at
  or above our threshold that the LSH misses.

Prints the figures and writes bench/results/similarity_libraries.json.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from attention_course.grading import similarity  # noqa: E402
from attention_course.grading.normalised_code import code_fingerprints  # noqa: E402
from similarity_corpus import DISGUISES, disguised, independent_submissions  # noqa: E402


def disguise_pairs() -> list[tuple[str, str, str, str]]:
    """(assignment, disguise, original, copy) for every independent honest answer of two assignments."""
    pairs = []
    for assignment in ("soft-hard", "three-stages"):
        for number, answers in enumerate(independent_submissions(assignment).values()):
            for disguise in DISGUISES:
                copy = disguised(answers, disguise, seed=number)
                pairs += [(assignment, disguise, answers[g], copy[g]) for g in answers]
    return pairs


def honest_pairs() -> list[tuple[str, str]]:
    pairs = []
    for assignment in ("soft-hard", "three-stages"):
        by_function = defaultdict(list)
        for answers in independent_submissions(assignment).values():
            for grade_id, source in answers.items():
                by_function[grade_id].append(source)
        for sources in by_function.values():
            pairs += list(combinations(sources, 2))
    return pairs


def ours(a: str, b: str) -> float:
    x, y = code_fingerprints(a), code_fingerprints(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def evaluate_copydetect(folder: Path) -> dict:
    from copydetect import CodeFingerprint, compare_files

    def fingerprint(source: str, name: str):
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        return CodeFingerprint(str(path), k=25, win_size=1)  # k in characters of the filtered code; win 1: every k-gram

    def score(a: str, b: str) -> float:
        overlap, (sim_a, sim_b), _ = compare_files(fingerprint(a, "a"), fingerprint(b, "b"))
        return (sim_a + sim_b) / 2

    by_disguise = defaultdict(lambda: ([], []))
    for _, disguise, original, copy in disguise_pairs():
        by_disguise[disguise][0].append(score(original, copy))
        by_disguise[disguise][1].append(ours(original, copy))
    honest = [(score(a, b), ours(a, b)) for a, b in honest_pairs()]
    result = {"disguised copies, median score (copydetect, ours)": {
        d: (round(statistics.median(c), 3), round(statistics.median(o), 3)) for d, (c, o) in by_disguise.items()},
        "disguised copies at or above 0.8 (copydetect, ours)": {
        d: (round(sum(x >= 0.8 for x in c) / len(c), 3), round(sum(x >= 0.8 for x in o) / len(o), 3))
        for d, (c, o) in by_disguise.items()},
        "independent honest function pairs at or above 0.8 (copydetect, ours)": (
            round(sum(c >= 0.8 for c, _ in honest) / len(honest), 3), round(sum(o >= 0.8 for _, o in honest) / len(honest), 3))}
    # Its time for a class: CopyDetector compares every test file with every reference file.
    from copydetect import CopyDetector
    from similarity import synthetic_class

    for students in (100, 1000):
        submissions, _ = synthetic_class(students, 0)
        tests = folder / f"class-{students}"
        for student, answers in submissions.items():
            (tests / student).mkdir(parents=True)
            (tests / student / "softmax.py").write_text(answers.get("softmax", "pass\n"), encoding="utf-8")
        started = time.perf_counter()
        detector = CopyDetector(test_dirs=[str(tests)], extensions=["py"], noise_t=25, guarantee_t=25,
                                display_t=0.8, silent=True, autoopen=False, disable_filtering=False)
        detector.run()
        result[f"CopyDetector.run, {students} students, one function (s)"] = round(time.perf_counter() - started, 2)
    return result


def evaluate_datasketch() -> dict:
    from datasketch import MinHash, MinHashLSH
    from similarity import synthetic_class

    submissions, _ = synthetic_class(1000, 10)
    sets = {(student, grade_id): code_fingerprints(source) for student, answers in submissions.items()
            for grade_id, source in answers.items()}
    sets = {key: value for key, value in sets.items() if value}
    started = time.perf_counter()
    hashes = {}
    for key, found in sets.items():
        minhash = MinHash(num_perm=128)
        minhash.update_batch([h.to_bytes(8, "little", signed=True) for h in found])
        hashes[key] = minhash
    minhash_seconds = time.perf_counter() - started
    started = time.perf_counter()
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    for key, minhash in hashes.items():
        lsh.insert(key, minhash)
    candidates = set()
    for key, minhash in hashes.items():
        for other in lsh.query(minhash):
            if other != key and other[1] == key[1]:
                candidates.add(frozenset((key[0], other[0], key[1])) if key[0] != other[0] else None)
    lsh_seconds = time.perf_counter() - started
    # Exact: pairs at or above our threshold on each function, found by the inverted index of similarity.py.
    started = time.perf_counter()
    exact = set()
    for grade_id in {g for _, g in sets}:
        index = defaultdict(list)
        keys = [k for k in sets if k[1] == grade_id]
        for key in keys:
            for h in sets[key]:
                index[h].append(key[0])
        shared = defaultdict(int)
        for postings in index.values():
            if len(postings) <= 200:
                for a, b in combinations(postings, 2):
                    shared[a, b] += 1
        for (a, b), count in shared.items():
            x, y = sets[a, grade_id], sets[b, grade_id]
            if count / (len(x) + len(y) - count) >= similarity.THRESHOLD:
                exact.add(frozenset((a, b, grade_id)))
    exact_seconds = time.perf_counter() - started
    return {"sets": len(sets), "MinHash of every set, 128 permutations (s)": round(minhash_seconds, 2),
            "LSH insert and query, threshold 0.5 (s)": round(lsh_seconds, 2),
            "pairs at or above our threshold (exact)": len(exact),
            "of those, missed by the LSH": len(exact - candidates),
            "exact inverted index, same sets, no cap on common hashes beyond 200 (s)": round(exact_seconds, 2)}


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        try:
            results["copydetect 0.5.0"] = evaluate_copydetect(Path(folder))
        except ImportError as error:
            results["copydetect 0.5.0"] = f"not installed ({error})"
    try:
        results["datasketch 2.0.0"] = evaluate_datasketch()
    except ImportError as error:
        results["datasketch 2.0.0"] = f"not installed ({error})"
    print(json.dumps(results, indent=1, ensure_ascii=False))
    out = ROOT / "bench" / "results" / "similarity_libraries.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
