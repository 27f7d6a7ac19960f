"""Chapter 12's length test: Transformers with each position scheme on section 6.2's extrapolation set.

Trains chapter 10's encoder–decoder Transformer with no positions (chapter 9's control), sinusoidal,
learned, rotary (RoPE) and ALiBi positions, seeds 0-4 each, on chapter 5's corpus with section 6.2's recipe (one thread per process),
and scores each after 500 and 1000 steps: held-out exact match and BLEU per length bucket, and the
extrapolation set's failure analysis (``attention_course.length_experiment``).

Writes book/data/transformer_length.json, which chapter 12 reads. It refuses to run when
attention_course/, bench/ or book/data/ has uncommitted changes: the file names the commit whose code
made its numbers. About 25 minutes of CPU in all, in two processes.

    .venv/bin/python bench/transformer_length.py [--processes 2] [--seeds 0 1 2 3 4] [--allow-dirty]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_course.length_experiment import DirtyTreeError  # noqa: E402
from attention_course.transformer_length import RESULTS_PATH, SCHEMES, run_experiment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    parser.add_argument("--output", type=Path, default=RESULTS_PATH)
    parser.add_argument("--allow-dirty", action="store_true",
                        help="run with uncommitted changes (the results then record them; do not store them)")
    args = parser.parse_args()
    try:
        results = run_experiment(seeds=args.seeds, schemes=args.schemes, processes=args.processes,
                                 allow_dirty=args.allow_dirty)
    except DirtyTreeError as error:
        print(f"transformer_length: refusing to run: {error}\n(--allow-dirty runs anyway, for results that "
              "will not be stored)", file=sys.stderr)
        sys.exit(2)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.output} ({len(results['records'])} records, {results['wall_seconds']:.0f} s, "
          f"load average before {results['machine']['load_average_before'][0]:.1f}, "
          f"after {results['load_average_after'][0]:.1f})")


if __name__ == "__main__":
    main()
