"""How long the book takes to build, and how much of that is the build's own overhead.

Measures, on this machine:
  1. a clean build (``_build`` removed: every chapter executes, every page is written);
  2. an unchanged rebuild (everything cached);
  3. each chapter's own execution: the chapter run top to bottom in a fresh kernel with nbclient,
     outside Jupyter Book, kernel start included. Their sum is what any build must spend at least.

Goals (the foundation issue): unchanged rebuild <= 10 s; clean build <= 1.3 x the chapters' own time.
Run with ``make bench`` (or ``.venv/bin/python bench/build_times.py``); writes bench/results/build_times.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbclient
import yaml

ROOT = Path(__file__).resolve().parents[1]
BUILD = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT), "--warningiserror", "--keep-going"]
REBUILD_GOAL_S = 10.0
OVERHEAD_GOAL = 1.3


def toc_pages() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = list(toc.get("chapters", [])) + [c for part in toc.get("parts", []) for c in part["chapters"]]
    entries, stack = [toc["root"]], chapters
    while stack:
        entry = stack.pop(0)
        entries.append(entry["file"])
        stack[:0] = entry.get("sections", [])
    return [ROOT / f"{entry}.md" for entry in entries]


def timed_build() -> float:
    start = time.perf_counter()
    result = subprocess.run(BUILD, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return elapsed


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
    clean = timed_build()
    rebuilds = sorted(timed_build() for _ in range(args.repeat))
    unchanged = rebuilds[len(rebuilds) // 2]

    chapters = {}
    for page in toc_pages():
        seconds = chapter_execution_seconds(page)
        if seconds is not None:
            chapters[page.relative_to(ROOT).as_posix()] = seconds
    own = sum(chapters.values())
    ratio = clean / own if own else float("inf")

    results = {
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
        "clean_build_s": round(clean, 2),
        "unchanged_rebuild_s": round(unchanged, 2),
        "unchanged_rebuilds_s": [round(r, 2) for r in rebuilds],
        "chapters_own_execution_s": {k: round(v, 2) for k, v in chapters.items()},
        "chapters_own_execution_total_s": round(own, 2),
        "clean_over_own": round(ratio, 2),
        "goals": {"unchanged_rebuild_s": REBUILD_GOAL_S, "clean_over_own": OVERHEAD_GOAL},
    }
    out = ROOT / "bench" / "results" / "build_times.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")

    print("chapter                                   own execution")
    for name, seconds in chapters.items():
        print(f"  {name:<40} {seconds:8.2f} s")
    print(f"  {'total':<40} {own:8.2f} s")
    print(f"clean build          {clean:8.2f} s   = {ratio:.2f} x the chapters' own time (goal <= {OVERHEAD_GOAL})")
    print(f"unchanged rebuild    {unchanged:8.2f} s   (median of {args.repeat}; goal <= {REBUILD_GOAL_S:.0f} s)")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
