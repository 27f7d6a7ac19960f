"""The similarity threshold, chosen on measurements: false positives on independent honest work, recall on
disguised copies.

For each assignment of the honest corpus (``tests/honest_corpus.py``) a class is written to disk: every
independent honest submission (the corpus and the re-typed solutions of ``tests/similarity_corpus.py``, each
answer text used once), and for each of them one copy under every disguise of ``similarity_corpus.DISGUISES``
(renamed, reformatted, commented, reordered, all four; edited: tensor methods called as torch functions
and returned expressions put in a temporary; all four and edited). The class is compared once
(``similarity.compare``); then, for the module's threshold and minimum mass and for a grid around them:

- **false-positive rate**: flagged pairs of independent honest submissions / all such pairs; also per
  function: honest function pairs scoring at or above the threshold / all pairs that both answered it
  (what a flag on one function alone would cost);
- **recall**: copies flagged with their original / all copies, per disguise.

Run: ``.venv/bin/python bench/similarity_threshold.py``; prints the figures and writes
bench/results/similarity_threshold.json.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from attention_course.grading import similarity  # noqa: E402
from honest_corpus import CORPUS  # noqa: E402
from similarity_corpus import DISGUISES, disguised, independent_submissions, write_class  # noqa: E402

THRESHOLDS = [0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]
MASSES = [0, 10, 20, 30, 40, 60, 80, 100, 150]


def measure_assignment(assignment: str, folder: Path) -> dict:
    honest = {name: answers for name, answers in independent_submissions(assignment).items() if answers}
    submissions = dict(honest)
    for number, (name, answers) in enumerate(honest.items()):
        for disguise in DISGUISES:
            submissions[f"{name}~{disguise}"] = disguised(answers, disguise, seed=number)
    layout = write_class(folder / assignment, assignment, submissions)
    started = time.perf_counter()
    work, rows = similarity.compare(layout, assignment)
    seconds = time.perf_counter() - started
    names = [w.student for w in work]
    is_copy = [("~" in n) for n in names]
    honest_index = [i for i, n in enumerate(names) if not is_copy[i]]
    honest_pairs = len(honest_index) * (len(honest_index) - 1) // 2
    answered = defaultdict(int)  # function -> honest students who answered it
    for i in honest_index:
        for grade_id in work[i].answers:
            if grade_id in honest[names[i]]:
                answered[grade_id] += 1
    function_pairs = sum(n * (n - 1) // 2 for n in answered.values())
    copies = [(names.index(n.split("~")[0]), i, n.split("~")[1]) for i, n in enumerate(names) if is_copy[i]]
    honest_rows = [r for r in rows if not is_copy[r[1]] and not is_copy[r[2]]]
    grid = {}
    for threshold in THRESHOLDS:
        for mass in MASSES:
            flagged = similarity.flagged_pairs(rows, threshold, mass)
            false = sum(1 for i, j in flagged if not is_copy[i] and not is_copy[j])
            found = defaultdict(lambda: [0, 0])
            for original, copy, disguise in copies:
                found[disguise][1] += 1
                found[disguise][0] += (min(original, copy), max(original, copy)) in flagged
            grid[f"{threshold:g}/{mass}"] = {
                "false_positives": false, "honest_pairs": honest_pairs,
                "function_false_positives": sum(1 for r in honest_rows if r[0] >= threshold),
                "function_pairs": function_pairs,
                "recall": {d: found[d][0] / found[d][1] for d in DISGUISES if found[d][1]},
                "copies": {d: found[d][1] for d in DISGUISES}}
    worst = sorted(honest_rows, reverse=True)[:5]
    return {"students": len(names), "honest": len(honest_index), "seconds": round(seconds, 2), "grid": grid,
            "closest_honest": [{"a": names[i], "b": names[j], "function": f, "score": round(s, 3), "mass": m}
                               for s, i, j, f, m in worst]}


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for assignment in CORPUS:
            results[assignment] = measure_assignment(assignment, Path(folder))
    chosen = f"{similarity.THRESHOLD:g}/{similarity.MIN_MASS}"
    total = defaultdict(lambda: defaultdict(float))
    for key in results[next(iter(results))]["grid"]:
        for assignment, result in results.items():
            cell = result["grid"][key]
            total[key]["false_positives"] += cell["false_positives"]
            total[key]["honest_pairs"] += cell["honest_pairs"]
            total[key]["function_false_positives"] += cell["function_false_positives"]
            total[key]["function_pairs"] += cell["function_pairs"]
            for disguise, recall in cell["recall"].items():
                total[key][f"found {disguise}"] += recall * cell["copies"][disguise]
                total[key][f"copies {disguise}"] += cell["copies"][disguise]
    summary = {}
    for key, cell in total.items():
        summary[key] = {"fpr": cell["false_positives"] / cell["honest_pairs"],
                        "false_positives": int(cell["false_positives"]), "honest_pairs": int(cell["honest_pairs"]),
                        "function_fpr": cell["function_false_positives"] / cell["function_pairs"],
                        "recall": {d: cell[f"found {d}"] / cell[f"copies {d}"] for d in DISGUISES if cell[f"copies {d}"]},
                        "copies": {d: int(cell[f"copies {d}"]) for d in DISGUISES}}
    print(f"{'threshold/min mass':>20} {'pair FPR':>14} {'function FPR':>13}  recall: " + ", ".join(DISGUISES))
    for key, cell in summary.items():
        mark = "  <- chosen" if key == chosen else ""
        recall = " ".join(f"{cell['recall'].get(d, 0):.3f}" for d in DISGUISES)
        print(f"{key:>20} {cell['false_positives']:>4}/{cell['honest_pairs']:<5} {cell['function_fpr']:>12.3f}   {recall}{mark}")
    for assignment, result in results.items():
        cell = result["grid"][chosen]
        print(f"{assignment}: {result['students']} students ({result['honest']} honest), compared in {result['seconds']} s; "
              f"honest pairs flagged {cell['false_positives']}/{cell['honest_pairs']}; recall "
              + ", ".join(f"{d} {r:.2f}" for d, r in cell["recall"].items()))
        for row in result["closest_honest"][:3]:
            print(f"   closest honest: {row}")
    out = ROOT / "bench" / "results" / "similarity_threshold.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"chosen": chosen, "summary": summary, "assignments": results}, indent=1,
                              ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
