"""Write the book's chapters as Jupyter notebooks (no outputs), without building the book.

    python scripts/write_notebooks.py [--edition en|zh_CN] [--out DIR] [BOOK]

The same notebooks that each chapter page offers for download (``book/_ext/chapter_notebooks.py``):
English by default, ``--edition zh_CN`` in Chinese. ``make lab`` writes them into
``_build/notebooks/<edition>`` and opens JupyterLab there. Prints the paths written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def chapters(book: Path) -> list[str]:
    """The docnames of the table of contents (``_toc.yml``), in its order."""
    toc = yaml.safe_load((book / "_toc.yml").read_text(encoding="utf-8"))
    found = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                found.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("parts") or [])
    walk(toc.get("chapters"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("book", nargs="?", default=ROOT, type=Path, help="the book's root folder (with _toc.yml)")
    parser.add_argument("--edition", default="en", help="en (default) or zh_CN")
    parser.add_argument("--out", type=Path, help="output folder (default: BOOK/_build/notebooks/EDITION)")
    args = parser.parse_args(argv)
    book = args.book.resolve()
    sys.path.insert(0, str(book / "book" / "_ext"))
    from chapter_notebooks import write_notebooks

    out = (args.out or book / "_build" / "notebooks" / args.edition).resolve()
    for path in write_notebooks(book, chapters(book), args.edition, out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
