"""What the book's math costs a reader and the build, and how far the keyboard has to go (issue 32).

For a built book (default ``_build/html``; ``--html`` another, e.g. main's, to compare before/after), with
the 1-minute load average beside each figure:
  1. chapter 4 (English and 中文) in headless Chromium on a phone (390×844) and a desktop (1366×900):
     its keyboard stops from the top (Tab until focus comes back), how many are formulas, and how many
     Tabs reach the playground widget's first control;
  2. the bytes a first visit to chapter 4 loads (HTML, scripts, styles, fonts: every file of the build,
     sizes on disk) and how many of them are MathJax's runtime;
  3. with ``--typeset --tex-from DIR``: the time to typeset every formula of an edition in one Node run
     (``book/_ext/book_math.typeset_formulas``, what the build does), taking the TeX from a build whose
     pages still hold it (main's, from before the math was drawn at build time).

    .venv/bin/python bench/math_and_keyboard.py [--html DIR] [--typeset --tex-from DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "book" / "_ext")]

from browser_audit import DEVICES, FORMULAS_MEASURED, chromium, serve, tab_through  # noqa: E402

CHAPTER_4 = "book/04-three-stages.html"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def keyboard_and_bytes(html: Path) -> None:
    with serve(html) as base, chromium() as browser:
        for edition in ("", "zh/"):
            for device in ("phone", "desktop"):
                width, height = DEVICES[device]
                context = browser.new_context(viewport={"width": width, "height": height})
                page = context.new_page()
                files: dict[str, int] = {}
                prefix = urlsplit(base).path

                def count(request):
                    path = urlsplit(request.url).path
                    if path.startswith(prefix):
                        file = html / unquote(path[len(prefix):])
                        files[file.relative_to(html).as_posix()] = file.stat().st_size if file.is_file() else 0

                page.on("requestfinished", count)
                page.goto(base + edition + CHAPTER_4, wait_until="load")
                page.wait_for_function("document.querySelector('.course-widget input, .course-widget button') !== null",
                                       timeout=30000)
                page.wait_for_load_state("networkidle")
                page.evaluate("window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
                page.wait_for_timeout(500)
                if page.evaluate("'courseFormulas' in document.documentElement.dataset"):
                    page.wait_for_function(FORMULAS_MEASURED)  # course-reader.js has marked the wide ones
                stops = tab_through(page)
                to_widget = next((i + 1 for i, stop in enumerate(stops) if stop["kind"] == "widget"), None)
                formulas = sum(stop["kind"] == "formula" for stop in stops)
                ringless = sum(not stop["ring"] for stop in stops)
                total = sum(files.values())
                mathjax = sum(size for name, size in files.items() if "mathjax" in name.lower())
                print(f"{edition or 'en/'}{CHAPTER_4} {device:7}: {len(stops)} tab stops, {formulas} formulas, "
                      f"{ringless} without a focus ring, playground at Tab {to_widget}; "
                      f"first visit {total / 1000:.0f} KB ({mathjax / 1000:.0f} KB MathJax), "
                      f"HTML {(html / edition / CHAPTER_4).stat().st_size / 1000:.0f} KB  [load {load()}]")
                context.close()


def typeset_time(tex_from: Path) -> None:
    from book_math import formulas_of, typeset_formulas

    for edition in ("", "zh"):
        folder = tex_from / edition if edition else tex_from
        pages = [p for p in folder.rglob("*.html")
                 if "_static" not in p.parts and (edition or p.relative_to(folder).parts[0] != "zh")]
        formulas = list(dict.fromkeys(f for p in pages for f in formulas_of(p.read_text(encoding="utf-8"))))
        start = time.perf_counter()
        answer = typeset_formulas(formulas)
        elapsed = time.perf_counter() - start
        size = sum(len(h.encode()) for h in answer["html"])
        print(f"typeset {len(formulas)} distinct formulas of the {'中文' if edition else 'English'} edition in one Node run: "
              f"{elapsed:.1f} s, {len(answer['errors'])} errors, {size / 1e6:.1f} MB of SVG+MathML  [load {load()}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--typeset", action="store_true")
    parser.add_argument("--tex-from", type=Path, help="a build whose pages still hold TeX (main's, before issue 32)")
    args = parser.parse_args()
    keyboard_and_bytes(args.html.resolve())
    if args.typeset:
        if not args.tex_from:
            parser.error("--typeset needs --tex-from")
        typeset_time(args.tex_from.resolve())


if __name__ == "__main__":
    main()
