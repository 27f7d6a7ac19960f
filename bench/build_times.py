"""How long the book takes to build, in both editions, and how much of that is the build's own overhead.

Measures, on this machine, with the load average beside each figure:
  1. a clean build of both editions (``_build`` removed; ``scripts/build_book.py``, what ``make book``
     runs): the English edition executes every chapter and writes its pages, the Chinese edition
     (中文, ``_build/html/zh``) reuses the execution cache and writes its own; each edition's time too;
  2. an unchanged rebuild of both (everything cached);
  3. each chapter's own execution: the chapter run top to bottom in a fresh kernel with nbclient,
     outside Jupyter Book, kernel start included. Their sum is what any build must spend at least.

Goals: unchanged rebuild <= 10 s per edition (the foundation issue); the clean build of both editions
<= 1.5 x the chapters' own time (issue 15: the second edition must not execute the chapters again).
Run with ``make bench`` (or ``.venv/bin/python bench/build_times.py``); writes bench/results/build_times.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbclient
import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD = [sys.executable, str(ROOT / "scripts" / "build_book.py"), str(ROOT)]
REBUILD_GOAL_S = 10.0
OVERHEAD_GOAL = 1.5


def toc_pages() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = list(toc.get("chapters", [])) + [c for part in toc.get("parts", []) for c in part["chapters"]]
    entries, stack = [toc["root"]], chapters
    while stack:
        entry = stack.pop(0)
        entries.append(entry["file"])
        stack[:0] = entry.get("sections", [])
    return [ROOT / f"{entry}.md" for entry in entries]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed_build() -> tuple[float, dict[str, float], float]:
    """(seconds for both editions, {edition: seconds}, the 1-minute load average at the end)."""
    start = time.perf_counter()
    result = subprocess.run(BUILD, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    editions = {label: float(seconds) for label, seconds in re.findall(r"^(\S+) edition built in (\d+) s\.$", result.stdout, re.M)}
    return elapsed, editions, load()


def chapter_execution_seconds(page: Path) -> float | None:
    """Run one chapter in a fresh kernel, as the build would; None for a page without code."""
    if "```{code-cell}" not in page.read_text(encoding="utf-8"):
        return None  # plain markdown: nothing executes
    notebook = jupytext.read(page)
    start = time.perf_counter()
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(page.parent)}}).execute()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="unchanged rebuilds to time (the median is reported)")
    args = parser.parse_args()

    shutil.rmtree(ROOT / "_build", ignore_errors=True)
    clean, clean_editions, clean_load = timed_build()
    rebuilds = sorted(timed_build() for _ in range(args.repeat))
    unchanged, unchanged_editions, unchanged_load = rebuilds[len(rebuilds) // 2]

    chapters = {}
    for page in toc_pages():
        seconds = chapter_execution_seconds(page)
        if seconds is not None:
            chapters[page.relative_to(ROOT).as_posix()] = seconds
    own, own_load = sum(chapters.values()), load()
    ratio = clean / own if own else float("inf")

    results = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "clean_build_s": round(clean, 2),
        "clean_build_per_edition_s": clean_editions,
        "clean_build_load_avg_1min": clean_load,
        "unchanged_rebuild_s": round(unchanged, 2),
        "unchanged_rebuild_per_edition_s": unchanged_editions,
        "unchanged_rebuilds_s": [round(r[0], 2) for r in rebuilds],
        "unchanged_rebuild_load_avg_1min": unchanged_load,
        "chapters_own_execution_s": {k: round(v, 2) for k, v in chapters.items()},
        "chapters_own_execution_total_s": round(own, 2),
        "chapters_own_execution_load_avg_1min": own_load,
        "clean_over_own": round(ratio, 2),
        "goals": {"unchanged_rebuild_s_per_edition": REBUILD_GOAL_S, "clean_over_own": OVERHEAD_GOAL},
    }
    out = ROOT / "bench" / "results" / "build_times.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")

    print("chapter                                   own execution")
    for name, seconds in chapters.items():
        print(f"  {name:<40} {seconds:8.2f} s")
    print(f"  {'total':<40} {own:8.2f} s   (load {own_load})")
    print(f"clean build, both editions {clean:8.2f} s   = {ratio:.2f} x the chapters' own time "
          f"(goal <= {OVERHEAD_GOAL}; load {clean_load})")
    for label, seconds in clean_editions.items():
        print(f"  {label:<24} {seconds:8.0f} s")
    print(f"unchanged rebuild          {unchanged:8.2f} s   (median of {args.repeat}; load {unchanged_load}; "
          f"goal <= {REBUILD_GOAL_S:.0f} s an edition: {unchanged_editions})")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
