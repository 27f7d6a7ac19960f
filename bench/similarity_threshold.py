"""The similarity threshold, chosen on measurements: false positives on independent honest work, recall on
disguised copies.

For each assignment of the honest corpus (``tests/honest_corpus.py``) a class is written to disk: every
independent honest submission (the corpus and the re-typed solutions of ``tests/similarity_corpus.py``, each
answer text used once), and for each of them one copy under every disguise of ``similarity_corpus.DISGUISES``
(renamed, reformatted, commented, reordered, all four; edited: tensor methods called as torch functions
and returned expressions put in a temporary; rewritten: operands of * and + swapped and an assert added to
every function, which the normalisation does not undo; all of them at once). The class is compared once
(``similarity.compare``); then, for the module's threshold and minimum mass and for a grid around them:

- **false-positive rate**: flagged pairs of independent honest submissions / all such pairs; also per
  function: honest function pairs scoring at or above the threshold / all pairs that both answered it
  (what a flag on one function alone would cost);
- **recall**: copies flagged with their original / all copies, per disguise.

Run: ``.venv/bin/python bench/similarity_threshold.py [--ks 5,7,9,12]`` (about 45 s a k-gram size on 2 cores); prints the figures and writes
bench/results/similarity_threshold.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from attention_course.grading import normalised_code, similarity  # noqa: E402
from honest_corpus import CORPUS  # noqa: E402
from similarity_corpus import DISGUISES, disguised, independent_submissions, write_class  # noqa: E402

THRESHOLDS = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
MASSES = [0, 10, 20, 30, 40, 60, 80]
KS = [5, 7, 9, 12]


def measure_assignment(assignment: str, folder: Path) -> dict:
    """For each disguise, a class of the independent honest submissions and one disguised copy of each."""
    honest = {name: answers for name, answers in independent_submissions(assignment).items() if answers}
    honest_pairs = len(honest) * (len(honest) - 1) // 2
    answered = defaultdict(int)  # function -> honest students who answered it
    for answers in honest.values():
        for grade_id in answers:
            answered[grade_id] += 1
    function_pairs = sum(n * (n - 1) // 2 for n in answered.values())
    classes, seconds = {}, 0.0
    for disguise in DISGUISES:
        submissions = dict(honest)
        for number, (name, answers) in enumerate(honest.items()):
            submissions[f"{name}~{disguise}"] = disguised(answers, disguise, seed=number)
        layout = write_class(folder / f"{assignment}-{disguise}-{normalised_code.K}", assignment, submissions)
        started = time.perf_counter()
        classes[disguise] = similarity.compare(layout, assignment)
        seconds += time.perf_counter() - started
    grid = {}
    for threshold in THRESHOLDS:
        for mass in MASSES:
            false_pairs, false_functions, found = set(), set(), {}
            for disguise, (work, rows) in classes.items():
                names = [w.student for w in work]
                flagged = similarity.flagged_pairs(rows, threshold, mass)
                false_pairs |= {frozenset((names[i], names[j])) for i, j in flagged if "~" not in names[i] + names[j]}
                false_functions |= {(frozenset((names[i], names[j])), f) for s, i, j, f, _ in rows
                                    if s >= threshold and "~" not in names[i] + names[j]}
                copies = [(names.index(n.split("~")[0]), i) for i, n in enumerate(names) if "~" in n]
                found[disguise] = sum((min(a, b), max(a, b)) in flagged for a, b in copies) / len(copies)
            grid[f"{threshold:g}/{mass}"] = {"false_positives": len(false_pairs), "honest_pairs": honest_pairs,
                                             "flagged_honest": sorted(" / ".join(sorted(p)) for p in false_pairs),
                                             "function_false_positives": len(false_functions),
                                             "function_pairs": function_pairs, "recall": found, "copies": len(honest)}
    work, rows = classes["renamed"]
    names = [w.student for w in work]
    worst = sorted((r for r in rows if "~" not in names[r[1]] + names[r[2]]), reverse=True)[:5]
    return {"honest": len(honest), "seconds": round(seconds, 2), "grid": grid,
            "closest_honest": [{"a": names[i], "b": names[j], "function": f, "score": round(s, 3), "mass": m}
                               for s, i, j, f, m in worst]}


def summarise(results: dict) -> dict:
    summary = {}
    for key in results[next(iter(results))]["grid"]:
        cells = [result["grid"][key] for result in results.values()]
        copies = sum(c["copies"] for c in cells)
        summary[key] = {
            "false_positives": sum(c["false_positives"] for c in cells),
            "honest_pairs": sum(c["honest_pairs"] for c in cells),
            "fpr": sum(c["false_positives"] for c in cells) / sum(c["honest_pairs"] for c in cells),
            "function_fpr": sum(c["function_false_positives"] for c in cells) / sum(c["function_pairs"] for c in cells),
            "recall": {d: sum(c["recall"][d] * c["copies"] for c in cells) / copies for d in DISGUISES},
            "copies_per_disguise": copies}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default=",".join(map(str, KS)), help="the k-gram sizes to measure, e.g. 5,7,9,12")
    ks = [int(k) for k in parser.parse_args().ks.split(",")]
    chosen_k = normalised_code.K
    by_k = {}
    with tempfile.TemporaryDirectory() as folder:
        for k in ks:
            normalised_code.K = k
            by_k[k] = {assignment: measure_assignment(assignment, Path(folder)) for assignment in CORPUS}
    normalised_code.K = chosen_k
    chosen = f"{similarity.THRESHOLD:g}/{similarity.MIN_MASS}"
    print(f"{'k':>3} {'threshold/min mass':>18} {'pairs flagged':>14} {'function FPR':>13}  recall: " + ", ".join(DISGUISES))
    summaries = {k: summarise(results) for k, results in by_k.items()}
    for k, summary in summaries.items():
        for key, cell in summary.items():
            mark = "  <- chosen" if (key, k) == (chosen, chosen_k) else ""
            recall = " ".join(f"{cell['recall'][d]:.3f}" for d in DISGUISES)
            print(f"{k:>3} {key:>18} {cell['false_positives']:>5}/{cell['honest_pairs']:<8} {cell['function_fpr']:>12.3f}   "
                  f"{recall}{mark}")
    for assignment, result in by_k[chosen_k].items():
        cell = result["grid"][chosen]
        print(f"{assignment}: {result['honest']} independent honest submissions, classes compared in {result['seconds']} s; "
              f"honest pairs flagged {cell['false_positives']}/{cell['honest_pairs']}; recall "
              + ", ".join(f"{d} {r:.2f}" for d, r in cell["recall"].items()))
        for pair in cell["flagged_honest"]:
            print(f"   flagged honest pair: {pair}")
        for row in result["closest_honest"][:3]:
            print(f"   closest honest: {row}")
    out = ROOT / "bench" / "results" / "similarity_threshold.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"chosen": {"k": chosen_k, "threshold": similarity.THRESHOLD, "min_mass": similarity.MIN_MASS},
                               "summary": {str(k): v for k, v in summaries.items()},
                               "assignments": {str(k): v for k, v in by_k.items()}}, indent=1, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
