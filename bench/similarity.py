"""How long similarity takes for a class of 1,000 (the target: 60 s on 2 cores), with the load average.

A synthetic soft-hard class is written to disk as the intake leaves it: for each student and each graded
function, an honest answer of any style (the honest corpus and the re-typed solutions, each answer text
once) in the student's own variation (``similarity_corpus.vary``: some operands swapped, some asserts
added), under a random disguise from ``tests/similarity_corpus.py`` half of the time; one in six
answers is a canonical bug (``tests/canonical_bugs.py``) and one in twenty is left as the release gave it.
``--copies`` pairs of students are planted: the second hands in the first's whole notebook under the
"all four" disguise. The timed part is :func:`similarity.find_similar` (reading every notebook, the
index, the scores, the flags) and writing the CSV; the planted pairs found, and the other pairs flagged,
are printed beside it.

What the flags mean here: the class is built from about twenty texts a function, so each style is shared
by some fifty students, more than ``similarity.COMMON_SHARE`` of the class: its fingerprints are common and
no evidence. A planted copy is flagged only where its original's own variations give ``MIN_MASS`` rare
fingerprints, and the other pairs flagged are students who drew the same texts and the same variations
(copies, in effect, of the generator). The rates that mean something are measured on independent work, in
``bench/similarity_threshold.py``; this bench is for the time.

Run: ``.venv/bin/python bench/similarity.py [--students 1000] [--copies 10]``; prints the wall time with
``os.getloadavg()`` beside it, and writes bench/results/similarity.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from attention_course.grading import normalised_code, similarity  # noqa: E402
from canonical_bugs import CANONICAL_BUGS  # noqa: E402
from similarity_corpus import DISGUISES, disguised, independent_submissions, vary, write_class  # noqa: E402

ASSIGNMENT = "soft-hard"


def synthetic_class(students: int, copies: int, seed: int = 0) -> tuple[dict, list[tuple[str, str]]]:
    rng = random.Random(seed)
    honest = independent_submissions(ASSIGNMENT)
    by_function: dict[str, list[str]] = {}
    for answers in honest.values():
        for grade_id, source in answers.items():
            by_function.setdefault(grade_id, []).append(source)
    bugs: dict[str, list[str]] = {}
    for assignment, cell, source, _ in CANONICAL_BUGS.values():
        if assignment == ASSIGNMENT:
            bugs.setdefault(cell, []).append(source)
    disguises = [d for d in DISGUISES if d != "all four"]
    submissions = {}
    for number in range(students):
        answers = {}
        for grade_id, choices in by_function.items():
            draw = rng.random()
            if draw < 0.05:
                continue  # left as the release gave it
            if draw < 0.22 and grade_id in bugs:
                answers[grade_id] = rng.choice(bugs[grade_id])
                continue
            source = vary(rng.choice(choices), rng)  # a style, in the student's own variation
            if rng.random() < 0.5:
                source = disguised({grade_id: source}, rng.choice(disguises), rng.randrange(10**6))[grade_id]
            answers[grade_id] = source
        submissions[f"student-{number:04d}"] = answers
    planted = []
    names = list(submissions)
    for number in range(copies):
        original, copy = names[2 * number], names[2 * number + 1]
        submissions[copy] = disguised(submissions[original], "all four", seed=number)
        planted.append((original, copy))
    return submissions, planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()
    submissions, planted = synthetic_class(args.students, args.copies)
    with tempfile.TemporaryDirectory() as folder:
        layout = write_class(Path(folder), ASSIGNMENT, submissions)
        normalised_code._book_fingerprints.cache_clear()  # (the book is read in the timed part too)
        load_before = os.getloadavg()
        started, cpu_started = time.perf_counter(), time.process_time()
        found = similarity.find_similar(layout, ASSIGNMENT)
        similarity.write_similarity_csv(found, Path(folder) / "reports" / ASSIGNMENT / "similarity.csv")
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        load_after = os.getloadavg()
    flagged = {frozenset((p.student_a, p.student_b)) for p in found.pairs if p.flagged}
    planted_found = sum(frozenset(pair) in flagged for pair in planted)
    result = {"students": args.students, "planted_copies": len(planted), "planted_found": planted_found,
              "other_pairs_flagged": len(flagged - {frozenset(p) for p in planted}), "pairs_reported": len(found.pairs),
              "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2),
              "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after],
              "cpus": os.cpu_count()}
    print(f"{args.students} students: {seconds:.1f} s wall ({cpu_seconds:.1f} s CPU), load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} CPUs; "
          f"{len(found.pairs)} rows reported; planted copies flagged {planted_found}/{len(planted)}; "
          f"other pairs flagged {result['other_pairs_flagged']}")
    out = ROOT / "bench" / "results" / "similarity.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
