"""Chapter 6.2's length experiment: plain vs attention vs bidirectional attention, over seeds and budgets.

Trains, on chapter 5's corpus and on one thread per process:
  - the plain and attention models for 500 steps with seeds 0-4, the bidirectional one with seeds
    0-2 (its steps cost more) (step-matched, as chapters 5 and 6 do);
  - the plain model on to 1100 steps with seeds 0-4 ("more steps"; each record stores the seconds
    its training took, from which the chapter computes the share of the attention model's time);
  - the plain model on to 2000 and 5000 steps with seed 0 ("training longer", chapter 5);
and scores each on the held-out set per length bucket (exact match, BLEU), on the alignment of its
attention with the true alignments, and on the extrapolation set (4-5 clauses, longer than any
training sentence), with the failure analysis of ``attention_course.length_experiment``.

Writes book/data/length_experiment.json (the chapter reads it; run it again after changing the
models or the training, and commit the result). About 20 minutes on two cores, in two processes.

It refuses to run (exit status 2) while anything under attention_course/, bench/ or book/data/ has
uncommitted changes, so that the commit stored with the results is the code that made them;
``--allow-dirty`` runs anyway, for results that will not be stored (give ``--output`` elsewhere).

    .venv/bin/python bench/length_experiment.py [--processes 2] [--seeds 0 1 2 3 4] [--bidirectional-seeds 0 1 2] [--long-seeds 0]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_course.length_experiment import RESULTS_PATH, DirtyTreeError, run_experiment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--bidirectional-seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--long-seeds", type=int, nargs="*", default=[0])
    parser.add_argument("--partial", type=Path, default=ROOT / "bench" / "results" / "length_experiment.partial.jsonl",
                        help="each finished run is appended here as it comes (results_from_partial reads it)")
    parser.add_argument("--output", type=Path, default=RESULTS_PATH)
    parser.add_argument("--allow-dirty", action="store_true",
                        help="run with uncommitted changes (the results then record them; do not store them)")
    args = parser.parse_args()
    args.partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        results = run_experiment(
            seeds=args.seeds, bidirectional_seeds=args.bidirectional_seeds, long_seeds=args.long_seeds,
            processes=args.processes, partial_path=args.partial, allow_dirty=args.allow_dirty,
        )
    except DirtyTreeError as error:
        print(f"length_experiment: refusing to run: {error}\n(--allow-dirty runs anyway, for results that "
              "will not be stored)", file=sys.stderr)
        sys.exit(2)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.output} ({len(results['records'])} records, {results['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
